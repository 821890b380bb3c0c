/// One record read by ``Journal/readRecords(directory:io:_:)``: where it lies and its payload.
public struct JournalReadRecord: Sendable, Hashable {
    /// Where the record lies and how it is stored.
    public var entry: JournalReport.Entry
    /// The payload, decompressed.
    public var payload: [UInt8]

    /// Creates a record.
    ///
    /// - Parameter entry: where the record lies and how it is stored.
    /// - Parameter payload: the decompressed payload.
    public init(entry: JournalReport.Entry, payload: [UInt8]) {
        self.entry = entry
        self.payload = payload
    }
}

extension Journal {
    /// Reads every valid live record of a journal, with its payload, without the lock and
    /// without writing anything; returns the same report as ``inspect(directory:io:)``.
    ///
    /// The walk follows MANIFEST order and stops in each file at its first invalid record, like
    /// `open`; the problems found (torn tail, corruption, leftover files) are in the returned
    /// report. Unlike ``open(directory:options:)`` it never truncates, removes or moves a file,
    /// so tools can read a damaged journal, or one another process is writing (a record being
    /// appended may then show as a torn tail).
    ///
    /// ```swift
    /// let report = try Journal.readRecords(directory: "/var/lib/app/store") { record in
    ///     print(record.entry.sequence, record.entry.kind as Any, record.payload.count)
    /// }
    /// if report.verdict != .clean { print(report.problems) }
    /// ```
    ///
    /// - Parameter directory: the journal's directory.
    /// - Parameter io: the I/O layer.
    /// - Parameter body: called once per valid record in sequence order (skippable record types
    ///   included, with a nil kind); an error it throws stops the walk and is rethrown.
    /// - Returns: the report: files, entries and problems.
    /// - Throws: what `body` throws, or ``JournalError`` when the directory or MANIFEST cannot
    ///   be read (a damaged MANIFEST is thrown: nothing else says which files are live).
    public static func readRecords(
        directory: String, io: JournalIO = .system, _ body: (JournalReadRecord) throws -> Void
    ) throws -> JournalReport {
        try readPayloads(directory: directory, io: io) { entry, payload in
            try body(JournalReadRecord(entry: entry, payload: Array(payload)))
        }
    }

    /// Reads every valid live record of a journal as ``readRecords(directory:io:_:)`` does, but
    /// lends each payload instead of copying it into an array: `body` sees the stored bytes of
    /// a raw record, or one reused buffer decompressed into for a compressed one.
    ///
    /// For tools that look at each payload once and keep nothing of it (`graph-journal
    /// verify`): a journal is read with no allocation per record, and each segment is streamed
    /// through one reused window of a few MiB rather than read whole into fresh memory (a
    /// record larger than the window grows it). If a read fails midway through a segment, the
    /// segment is reported unreadable as a whole, but `body` has already seen its records
    /// before the failure.
    ///
    /// ```swift
    /// var bytes = 0
    /// let report = try Journal.readPayloads(directory: "/var/lib/app/store") { entry, payload in
    ///     bytes += payload.count
    /// }
    /// ```
    ///
    /// - Parameter directory: the journal's directory.
    /// - Parameter io: the I/O layer.
    /// - Parameter body: called once per valid record in sequence order with where it lies and
    ///   its decompressed payload, valid only during the call; an error it throws stops the walk
    ///   and is rethrown.
    /// - Returns: the report: files, entries and problems.
    /// - Throws: what `body` throws, or ``JournalError`` when the directory or MANIFEST cannot
    ///   be read.
    public static func readPayloads(
        directory: String, io: JournalIO = .system, _ body: (JournalReport.Entry, UnsafeRawBufferPointer) throws -> Void
    ) throws -> JournalReport {
        try readPayloads(directory: directory, io: io, window: readWindow, body)
    }

    /// Reads every valid live record of a journal as ``readPayloads(directory:io:_:)`` does, but
    /// lends each payload piece by piece (``JournalPayload``): a chunked payload, tens of MB for
    /// one save of a million objects, comes one decompressed 1 MiB chunk at a time while the
    /// next chunks are decompressed on another core, and is never held whole.
    ///
    /// For tools that read each payload once, front to back (`graph-journal verify`). The
    /// difference for `body`: a chunk found not to decompress ends a chunked payload's pieces
    /// early, after `body` may have read the chunks before it. The record is then reported as
    /// corrupt, with the same problem ``readPayloads(directory:io:_:)`` reports without lending
    /// it, and `body` must discard what it read of it: ``JournalPayload/finish()`` returns
    /// false. A payload that cannot be decompressed before it is lent (a single LZ4 block, a
    /// chunk table) is still reported without being lent.
    ///
    /// ```swift
    /// var bytes = 0
    /// let report = try Journal.streamPayloads(directory: "/var/lib/app/store") { entry, payload in
    ///     var read = 0
    ///     while let piece = payload.next() { read += piece.count }
    ///     if payload.finish() { bytes += read }
    /// }
    /// ```
    ///
    /// - Parameter directory: the journal's directory.
    /// - Parameter io: the I/O layer.
    /// - Parameter body: called once per valid record in sequence order with where it lies and
    ///   its payload, valid only during the call (the journal reads what `body` leaves unread,
    ///   to check it decompresses); an error it throws stops the walk and is rethrown.
    /// - Returns: the report: files, entries and problems.
    /// - Throws: what `body` throws, or ``JournalError`` when the directory or MANIFEST cannot
    ///   be read.
    public static func streamPayloads(
        directory: String, io: JournalIO = .system, _ body: (JournalReport.Entry, JournalPayload) throws -> Void
    ) throws -> JournalReport {
        try walkPayloads(directory: directory, io: io, window: readWindow, streamingChunks: true, body)
    }

    /// The bytes of a segment ``readPayloads(directory:io:_:)`` holds at a time: small enough
    /// to stay in the last-level cache, large enough that a read costs little more than its
    /// copy (64 KiB to 4 MiB measured the same on a 1M-object journal).
    static let readWindow = 4 << 20

    /// ``readPayloads(directory:io:_:)`` with the window size chosen.
    ///
    /// Each segment is streamed through a reused window of `window` bytes (grown only for a
    /// larger record) while its records are clean. At the first byte that is not a clean
    /// record (damage, a wrong sequence, a short file) the rest of the file is read whole and
    /// walked by ``RecordCodec/scan(_:header:end:from:sequence:_:)`` from there, so damage is
    /// described exactly as when the whole file is read. A header that does not parse sends
    /// the whole file that way too.
    ///
    /// A read that fails midway reports the file unreadable, as a failed whole-file read does,
    /// and takes back the file's entries and problems; `body` has then already seen the
    /// records before the failure.
    ///
    /// - Parameter window: the bytes held at a time; nil reads each segment whole first (the
    ///   reference the tests compare the streaming walk with).
    static func readPayloads(
        directory: String, io: JournalIO, window: Int?, _ body: (JournalReport.Entry, UnsafeRawBufferPointer) throws -> Void
    ) throws -> JournalReport {
        // Each payload is one piece here: chunked ones are decompressed whole before `body`.
        try walkPayloads(directory: directory, io: io, window: window, streamingChunks: false) { entry, payload in
            try body(entry, payload.next() ?? UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }

    /// The walk behind ``readPayloads(directory:io:window:_:)`` and
    /// ``streamPayloads(directory:io:_:)``.
    ///
    /// - Parameter streamingChunks: whether a chunked payload is lent chunk by chunk as it is
    ///   decompressed (``ChunkStream``), or decompressed whole first and lent in one piece.
    static func walkPayloads(
        directory: String, io: JournalIO, window: Int?, streamingChunks: Bool,
        _ body: (JournalReport.Entry, JournalPayload) throws -> Void
    ) throws -> JournalReport {
        let fs = FileSystem(io: io)
        var report = JournalReport()
        let names = try fs.list(directory)
        let manifestPath = directory + "/" + JournalFormat.manifestFileName
        let manifest = try Manifest.parse(try fs.readFile(manifestPath), file: manifestPath)
        // Unlisted segments are judged as `open` judges them (``SegmentSet``).
        let unlisted = try SegmentSet(fs: fs, directory: directory, names: names, manifest: manifest)
        var chain = manifest.files
        var adopted: [String] = []
        var nextSequence: UInt64?
        var failure: (any Error)?
        // Reused from file to file and from record to record.
        let windowBuffer = ReadBuffer()
        let fileBuffer = ReadBuffer()
        let payloadBuffer = ReadBuffer()
        let chunkSlots = ReadBuffer()
        // Two batches of records: one lent while the next is decompressed.
        var current = RecordBatch(), next = RecordBatch()
        let payload = JournalPayload()
        var index = 0
        while index < chain.count {
            let name = chain[index]
            let path = directory + "/" + name
            // A gap before this file (or a missing file) that an unlisted log fills: walk that
            // log first, as `open` adds it to MANIFEST.
            if index > 0, !unlisted.logs.isEmpty, let expected = nextSequence, Self.firstSequence(of: path, fs: fs) != expected,
               let fill = unlisted.continuation(at: expected, after: fileNumber(chain[index - 1]), before: fileNumber(name)) {
                chain.insert(fill.name, at: index)
                adopted.append(fill.name)
                continue
            }
            let isLast = index == chain.count - 1 && !unlisted.hasLog(after: fileNumber(name) ?? 0)

            /// Lists a valid record and lends its payload to `body`; false once `body` threw.
            /// `bytes` hold the file from offset `base` on.
            /// `decoded` is the payload (or why it does not decompress) when a ``RecordBatch``
            /// decompressed it already.
            func deliver(_ record: ScannedRecord, in bytes: UnsafeRawBufferPointer, at base: Int,
                         decoded: Result<UnsafeRawBufferPointer, LZ4Error>? = nil) -> Bool {
                let entry = JournalReport.Entry(
                    file: name, offset: Int64(record.offset), sequence: record.sequence,
                    kind: JournalRecord.Kind(recordType: record.type), type: record.type,
                    storedLength: record.storedLength, rawLength: record.rawLength, compressed: record.compressed || record.chunked)
                report.entries.append(entry)
                var problem: String?
                if record.chunked && streamingChunks {
                    let range = record.payloadRange
                    let stored = UnsafeRawBufferPointer(rebasing: bytes[(range.lowerBound - base)..<(range.upperBound - base)])
                    switch ChunkedPayload.chunkStarts(stored, rawLength: record.rawLength) {
                    case .failure(let chunkProblem):
                        problem = RecordCodec.decompressionProblem(of: record, chunkProblem.message, file: name).message
                    case .success(let starts):
                        let slots = chunkSlots.reserve(ChunkStream.slotCount * JournalFormat.chunkSize)
                        payload.reset(chunks: ChunkStream(stored: stored, starts: starts, rawLength: record.rawLength, slots: slots),
                                      rawLength: record.rawLength)
                        do { try body(entry, payload) } catch { failure = error }
                        if !payload.finish() {
                            problem = RecordCodec.decompressionProblem(of: record, payload.failure ?? "", file: name).message
                        }
                        payload.reset(pieces: [])
                    }
                } else if let decoded {
                    switch decoded {
                    case .success(let bytes):
                        payload.reset(bytes)
                        do { try body(entry, payload) } catch { failure = error }
                    case .failure(let error):
                        problem = RecordCodec.decompressionProblem(of: record, "\(error)", file: name).message
                    }
                } else {
                    problem = RecordCodec.withPayload(of: record, in: bytes, at: base, file: name, buffer: payloadBuffer) { bytes in
                        payload.reset(bytes)
                        do { try body(entry, payload) } catch { failure = error }
                    }?.message
                }
                if let problem {
                    report.problems.append(.init(kind: .corruption, file: name, offset: Int64(record.offset), bytes: nil,
                                                 recordsAfter: 0, message: problem))
                }
                return failure == nil
            }

            /// Reports a header that does not match the file's name or its predecessor.
            func check(_ header: SegmentHeader) {
                let expectedKind: JournalFormat.SegmentKind = name.hasSuffix("." + JournalFormat.logExtension) ? .log : .base
                if header.kind != expectedKind || header.number != fileNumber(name) {
                    report.problems.append(.init(kind: .corruption, file: name, offset: 0, bytes: nil, recordsAfter: 0,
                                                 message: "segment header says \(header.kind) number \(header.number), which does not match the file name"))
                }
                if let expected = nextSequence, header.firstSequence != expected {
                    report.problems.append(.init(kind: .corruption, file: name, offset: Int64(JournalFormat.SegmentHeaderField.firstSequence),
                                                 bytes: nil, recordsAfter: 0,
                                                 message: "starts at sequence \(header.firstSequence), expected \(expected)"))
                }
            }

            /// Walks the whole file's bytes: from its header, or from `resume` when the records
            /// before it were streamed (and the header checked) already.
            func scanWhole(_ raw: UnsafeRawBufferPointer, resume: (header: SegmentHeader, offset: Int, sequence: UInt64)?) {
                let header: SegmentHeader
                if let resume {
                    header = resume.header
                } else {
                    switch SegmentHeader.parse(raw, file: name) {
                    case .success(let parsed): header = parsed
                    case .failure(let error):
                        report.problems.append(.init(kind: .corruption, file: name, offset: error.offset, bytes: Int64(raw.count),
                                                     recordsAfter: 0, message: error.message))
                        nextSequence = nil
                        return
                    }
                    check(header)
                }
                let scan = RecordCodec.scan(
                    raw, header: header, from: resume?.offset ?? JournalFormat.segmentHeaderSize,
                    sequence: resume?.sequence ?? header.firstSequence
                ) { deliver($0, in: raw, at: 0) }
                nextSequence = scan.nextSequence
                if failure == nil, let damage = scan.damage {
                    let torn = damage.couldBeTornTail && isLast && header.kind == .log
                    report.problems.append(.init(kind: torn ? .tornTail : .corruption, file: name, offset: Int64(damage.offset),
                                                 bytes: Int64(raw.count - damage.offset), recordsAfter: damage.recordsAfter,
                                                 message: damage.reason))
                }
            }

            /// Streams the file's clean records through the window; hands the rest to
            /// `scanWhole` at the first thing that is not a clean record.
            func stream(_ fd: Int32, size: Int, window: Int) throws(JournalError) {
                var bytes = SegmentWindow(fs: fs, fd: fd, path: path, size: size, buffer: windowBuffer, window: window)
                let headerSize = JournalFormat.segmentHeaderSize
                guard try bytes.ensure(0, count: headerSize),
                      case .success(let header) = SegmentHeader.parse(UnsafeRawBufferPointer(rebasing: bytes.bytes[..<headerSize]), file: name)
                else {
                    scanWhole(try fs.readFile(fd, path, size: size, into: fileBuffer), resume: nil)
                    return
                }
                check(header)
                let seed = header.seed

                /// Adds to `batch` the clean records from file offset `start` on, numbered from
                /// `sequence`, that lie wholly in the window and that it admits.
                func gather(_ batch: RecordBatch, from start: Int, sequence: UInt64) {
                    var end = start
                    while end + JournalFormat.recordHeaderSize <= bytes.start + bytes.count {
                        let storedLength = Int(bytes.bytes.littleEndian(
                            at: end - bytes.start + JournalFormat.RecordHeaderField.storedLength, as: UInt32.self))
                        guard end + JournalFormat.recordHeaderSize + storedLength <= bytes.start + bytes.count,
                              case .success(var found) = RecordCodec.record(in: bytes.bytes, at: end - bytes.start, seed: seed, end: bytes.count),
                              found.sequence == sequence + UInt64(batch.records.count) else { return }
                        found.offset = end
                        guard batch.admits(found) else { return }
                        batch.append(found)
                        end = found.end
                    }
                }

                var offset = headerSize
                var sequence = header.firstSequence
                while offset < size {
                    var record: ScannedRecord?
                    if try bytes.ensure(offset, count: JournalFormat.recordHeaderSize) {
                        let storedLength = bytes.bytes.littleEndian(
                            at: offset - bytes.start + JournalFormat.RecordHeaderField.storedLength, as: UInt32.self)
                        if try bytes.ensure(offset, count: JournalFormat.recordHeaderSize + Int(storedLength)),
                           case .success(var found) = RecordCodec.record(in: bytes.bytes, at: offset - bytes.start, seed: seed, end: bytes.count),
                           found.sequence == sequence {
                            found.offset = offset
                            record = found
                        }
                    }
                    guard let record else {
                        // Not a clean record: the whole-file walk describes it, byte for byte.
                        let raw = try fs.readFile(fd, path, size: size, into: fileBuffer)
                        scanWhole(raw, resume: (header, offset, sequence))
                        return
                    }
                    current.removeAll()
                    guard current.admits(record) else {
                        sequence += 1
                        if !deliver(record, in: bytes.bytes, at: bytes.start) { break }
                        offset = record.end
                        continue
                    }
                    // The clean records after it that lie wholly in the window join it, to be
                    // decompressed together on every core.
                    current.append(record)
                    gather(current, from: record.end, sequence: sequence + 1)
                    current.decode(bytes.bytes, at: bytes.start)
                    // Then, while a batch is lent, the records after it are gathered and
                    // decompressed by a helper. The first record that does not join (not clean,
                    // not wholly in the window, chunked) ends the batches: it is looked at again
                    // above, where the window slides and damage goes to the whole-file walk.
                    var stopped = false
                    while !stopped {
                        guard let last = current.records.last else { break }
                        next.removeAll()
                        gather(next, from: last.end, sequence: last.sequence + 1)
                        next.startDecoding(bytes.bytes, at: bytes.start)
                        for (i, record) in current.records.enumerated() {
                            sequence += 1
                            if !deliver(record, in: bytes.bytes, at: bytes.start, decoded: current.payload(i, in: bytes.bytes, at: bytes.start)) {
                                stopped = true
                                break
                            }
                            offset = record.end
                        }
                        if next.isEmpty { break }
                        swap(&current, &next)
                    }
                    next.waitForDecoding()
                    if stopped { break }
                }
                nextSequence = sequence
            }

            let entriesBefore = report.entries.count
            let problemsBefore = report.problems.count
            do throws(JournalError) {
                let fd = try fs.open(path, .readOnly)
                defer { fs.closeQuietly(fd) }
                let size = Int(try fs.fileSize(fd, path))
                if let window {
                    try stream(fd, size: size, window: window)
                } else {
                    scanWhole(try fs.readFile(fd, path, size: size, into: fileBuffer), resume: nil)
                }
            } catch {
                // Not a regular file: refused as `open` refuses it, not described as damage.
                if error.code == .notRegularFile { throw error }
                // As if the whole file had failed to read: nothing of it is listed.
                report.entries.removeSubrange(entriesBefore...)
                report.problems.removeSubrange(problemsBefore...)
                let missing = if case .io(let errno, _) = error.code, errno == 2 { true } else { false }
                report.problems.append(.init(kind: .corruption, file: name, offset: nil, bytes: nil, recordsAfter: 0,
                                             message: missing ? "MANIFEST lists \(name), which does not exist (a segment is missing)"
                                                : "listed in MANIFEST but unreadable: \(error)"))
                nextSequence = nil
            }
            if let failure { throw failure }
            if index == chain.count - 1, let expected = nextSequence,
               !report.problems[problemsBefore...].contains(where: { $0.kind == .tornTail }),
               let next = unlisted.continuation(at: expected, after: fileNumber(name), before: nil) {
                chain.append(next.name)
                adopted.append(next.name)
            }
            index += 1
        }
        report.files = chain
        for name in adopted {
            report.problems.append(.init(kind: .unlistedSegment, file: name, offset: nil, bytes: nil, recordsAfter: 0,
                                         message: "not listed in MANIFEST but continues the sequence (a crash before MANIFEST was rewritten, or an older MANIFEST): open adds it to MANIFEST with its records"))
        }
        let firstLive = report.entries.first?.sequence ?? nextSequence ?? 0
        let (superseded, strays) = unlisted.remaining(adopted: Set(adopted), firstLiveSequence: firstLive)
        for stray in strays {
            report.problems.append(.init(kind: .corruption, file: stray.name, offset: 0, bytes: Int64(stray.size), recordsAfter: stray.records,
                                         message: SegmentSet.strayReason(stray)))
        }
        for name in (unlisted.leftovers + superseded).sorted() {
            report.problems.append(.init(kind: .leftoverFile, file: name, offset: nil, bytes: nil, recordsAfter: 0,
                                         message: "not listed in MANIFEST and holds no record the live files lack: the next writer removes it"))
        }
        return report
    }

    /// The first sequence in the header of the segment at `path`, or nil when it cannot be
    /// read or does not parse.
    static func firstSequence(of path: String, fs: FileSystem) -> UInt64? {
        guard let fd = try? fs.open(path, .readOnly) else { return nil }
        defer { fs.closeQuietly(fd) }
        guard let bytes = try? fs.read(fd, path, count: JournalFormat.segmentHeaderSize, at: 0) else { return nil }
        return bytes.withUnsafeBytes { raw in
            if case .success(let header) = SegmentHeader.parse(raw, file: path) { return header.firstSequence }
            return nil
        }
    }

    /// Lists the records that pass their checksum in a segment file from byte `offset` on,
    /// searching byte by byte past damage as the reader's resynchronisation does. Reads only.
    ///
    /// Tools use it to say what bytes they are about to cut hold: a torn tail holds none; the
    /// bytes after corruption may hold transactions that point-in-time recovery would drop.
    /// Sequence numbers are not checked (records after damage need not continue the prefix).
    ///
    /// ```swift
    /// let cut = try Journal.salvageableRecords(inSegment: dir + "/0000000001.log", from: 4120)
    /// print(cut.filter { $0.kind == .transaction }.count, "transactions")
    /// ```
    ///
    /// - Parameter path: the segment file's path.
    /// - Parameter offset: where to start; an offset inside the segment header starts after it.
    /// - Parameter io: the I/O layer.
    /// - Returns: the records found, in file order; empty when the header is unreadable.
    /// - Throws: ``JournalError`` when the file cannot be read.
    public static func salvageableRecords(inSegment path: String, from offset: Int64, io: JournalIO = .system) throws(JournalError) -> [JournalReport.Entry] {
        let fs = FileSystem(io: io)
        let bytes = try fs.readFile(path)
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return bytes.withUnsafeBytes { raw in
            guard case .success(let header) = SegmentHeader.parse(raw, file: path) else { return [] }
            var entries: [JournalReport.Entry] = []
            var position = max(Int(clamping: offset), JournalFormat.segmentHeaderSize)
            while position + JournalFormat.recordHeaderSize <= raw.count {
                if RecordCodec.isPlausibleHeader(in: raw, at: position, end: raw.count),
                   case .success(let record) = RecordCodec.record(in: raw, at: position, seed: header.seed, end: raw.count) {
                    entries.append(.init(file: name, offset: Int64(record.offset), sequence: record.sequence,
                                         kind: JournalRecord.Kind(recordType: record.type), type: record.type,
                                         storedLength: record.storedLength, rawLength: record.rawLength,
                                         compressed: record.compressed || record.chunked))
                    position = record.end
                } else {
                    position += 1
                }
            }
            return entries
        }
    }
}
