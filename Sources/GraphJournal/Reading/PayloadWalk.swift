/// One read-only walk of a journal's live records, behind ``Journal/walkPayloads(directory:io:window:streamingChunks:keyring:_:)``.
///
/// It follows the chain of live files (``SegmentChain``: MANIFEST order, with the unlisted logs
/// `open` would adopt inserted where they belong) and, in each file, lends every clean record's payload to
/// `body` while it lists the records and the problems it finds in ``report``. The buffers,
/// the two record batches and the ``JournalPayload`` are reused from file to file and from
/// record to record, so the walk allocates nothing per record.
///
/// Sealed records (encryption at rest) are checked in journal order by ``SealOrder``, as `open`
/// checks them, without requiring their keys: a record out of its writer's order is
/// corruption at that record. With a keyring each sealed record is opened and lent like any
/// other; a key the keyring lacks, or a wrong one, stops the walk with that error. Without one
/// a sealed record is framed and checksummed, listed with the key it names, and counted in
/// ``JournalReport/sealedRecordsNotOpened``, but not lent.
///
/// Not `Sendable`: one walk runs on one thread (its batches use helper threads of their own).
struct PayloadWalk {
    /// The state of the file being walked and where its bytes come from.
    private struct CurrentFile {
        /// The file's name.
        var name = ""
        /// The file's path.
        var path = ""
        /// Where it is in the chain: whether damage there may be a torn tail.
        var link = SegmentChain.Link(name: "", index: 0, isLast: false)
    }

    /// Where the walk resumes in a file whose records before it were streamed already.
    typealias Resume = (header: SegmentHeader, offset: Int, sequence: UInt64)

    private let fs: FileSystem
    private let directory: String
    /// The bytes streamed at a time, or nil to read each file whole first.
    private let window: Int?
    /// Whether a chunked payload is lent chunk by chunk as it is decompressed.
    private let streamingChunks: Bool
    /// The keys that open sealed records, or nil to frame them only.
    private let keyring: JournalKeyring?
    /// The order sealed records must keep, over the whole walk (not reset per file).
    private var sealOrder = SealOrder()
    /// Called once per valid record with where it lies and its payload.
    private let body: (JournalReport.Entry, JournalPayload) throws -> Void

    /// What the walk found so far: entries and problems (``finishedReport()`` adds the rest).
    private(set) var report = JournalReport()
    /// The live files in order, as far as they are known, with the files MANIFEST does not
    /// list, judged as `open` judges them.
    private var chain: SegmentChain
    /// The sequence number the next file must start at, while the walk knows it.
    private var nextSequence: UInt64?
    /// What `body` threw: the walk stops and rethrows it.
    private var failure: (any Error)?
    /// The file being walked.
    private var file = CurrentFile()

    /// The window a segment is streamed through.
    private let windowBuffer = ReadBuffer()
    /// A whole segment, when it is read whole.
    private let fileBuffer = ReadBuffer()
    /// A payload decompressed on its own.
    private let payloadBuffer = ReadBuffer()
    /// The slots a streamed chunked payload is decompressed into.
    private let chunkSlots = ReadBuffer()
    /// The batch being lent; `next` is decompressed meanwhile.
    private var current = RecordBatch()
    /// The batch after `current`, decompressed by a helper while `current` is lent.
    private var next = RecordBatch()
    /// The payload lent to `body`, reset from record to record.
    private let payload = JournalPayload()
    /// The compression history of the file being walked: in a version 2 segment every record
    /// is decompressed through it, in order, none in a batch.
    private var history: RecordHistory?
    /// The highest format version of the segment headers read so far.
    private var highestVersion: UInt16?

    /// Reads the directory and MANIFEST and judges the unlisted files; walks nothing yet.
    ///
    /// - Throws: ``JournalError`` when the directory or MANIFEST cannot be read.
    init(
        directory: String, io: JournalIO, window: Int?, streamingChunks: Bool, keyring: JournalKeyring? = nil,
        body: @escaping (JournalReport.Entry, JournalPayload) throws -> Void
    ) throws(JournalError) {
        let fs = FileSystem(io: io)
        let names = try fs.list(directory)
        let manifestPath = directory + "/" + JournalFormat.manifestFileName
        let manifest = try Manifest.parse(try fs.readFile(manifestPath), file: manifestPath)
        self.fs = fs
        self.directory = directory
        self.window = window
        self.streamingChunks = streamingChunks
        self.keyring = keyring
        self.body = body
        chain = SegmentChain(
            listed: manifest.files,
            unlisted: try SegmentSet(fs: fs, directory: directory, names: names, manifest: manifest))
    }

    /// Walks every live file in order, then returns the report.
    ///
    /// - Throws: what `body` throws, or ``JournalError`` for a file that is not a regular one.
    mutating func run() throws -> JournalReport {
        while let link = chain.current {
            if chain.fillGap(
                expecting: nextSequence, firstSequence: Journal.firstSequence(of: directory + "/" + link.name, fs: fs))
            {
                continue
            }
            let endsTorn = try walkFile(link)
            chain.advance(endsTorn: endsTorn, nextSequence: nextSequence)
        }
        return finishedReport()
    }

    // MARK: The chain of files

    /// The report with the files walked, the adopted logs, and the unlisted files that are
    /// strays or leftovers.
    private func finishedReport() -> JournalReport {
        var report = report
        report.files = chain.names
        if let highestVersion { report.formatVersion = Int(highestVersion) }
        for name in chain.adopted {
            report.problems.append(
                .init(
                    kind: .unlistedSegment, file: name, offset: nil, bytes: nil, recordsAfter: 0,
                    message:
                        "not listed in MANIFEST but continues the sequence (a crash before MANIFEST was rewritten, or an older MANIFEST): open adds it to MANIFEST with its records"
                ))
        }
        let firstLive = report.entries.first?.sequence ?? nextSequence ?? 0
        let (superseded, strays) = chain.unlisted.remaining(adopted: Set(chain.adopted), firstLiveSequence: firstLive)
        for stray in strays {
            report.problems.append(
                .init(
                    kind: .corruption, file: stray.name, offset: 0, bytes: Int64(stray.size),
                    recordsAfter: stray.records,
                    message: SegmentSet.strayReason(stray)))
        }
        for name in (chain.unlisted.leftovers + superseded).sorted() {
            report.problems.append(
                .init(
                    kind: .leftoverFile, file: name, offset: nil, bytes: nil, recordsAfter: 0,
                    message:
                        "not listed in MANIFEST and holds no record the live files lack: the next writer removes it"))
        }
        return report
    }

    // MARK: One file

    /// Walks one live file: lends its records and lists them and its problems. A file that
    /// cannot be read is listed as unreadable, with none of its records.
    ///
    /// - Returns: whether the file ends in a torn tail.
    /// - Throws: what `body` threw, or ``JournalError`` when the file is not a regular file.
    private mutating func walkFile(_ link: SegmentChain.Link) throws -> Bool {
        file = CurrentFile(name: link.name, path: directory + "/" + link.name, link: link)
        let entriesBefore = report.entries.count
        let problemsBefore = report.problems.count
        do throws(JournalError) {
            let fd = try fs.open(file.path, .readOnly)
            defer { fs.closeQuietly(fd) }
            let size = Int(try fs.fileSize(fd, file.path))
            if let window {
                try stream(fd, size: size, window: window)
            } else {
                scanWhole(try fs.readFile(fd, file.path, size: size, into: fileBuffer), resume: nil)
            }
        } catch {
            // Not a regular file: refused as `open` refuses it, not described as damage.
            if error.code == .notRegularFile { throw error }
            reportUnreadable(error, entriesBefore: entriesBefore, problemsBefore: problemsBefore)
        }
        if let failure { throw failure }
        return report.problems[problemsBefore...].contains { $0.kind == .tornTail }
    }

    /// Takes back what the walk listed of the current file since `entriesBefore` and
    /// `problemsBefore`, and lists the file as unreadable, as if the whole file had failed to
    /// read.
    private mutating func reportUnreadable(_ error: JournalError, entriesBefore: Int, problemsBefore: Int) {
        report.entries.removeSubrange(entriesBefore...)
        report.problems.removeSubrange(problemsBefore...)
        let name = file.name
        let missing = if case .io(let errno, _) = error.code, errno == 2 { true } else { false }
        report.problems.append(
            .init(
                kind: .corruption, file: name, offset: nil, bytes: nil, recordsAfter: 0,
                message: missing
                    ? "MANIFEST lists \(name), which does not exist (a segment is missing)"
                    : "listed in MANIFEST but unreadable: \(error)"))
        nextSequence = nil
    }

    /// Reports a header that does not match the file's name or its predecessor, and notes its
    /// format version.
    private mutating func check(_ header: SegmentHeader) {
        highestVersion = max(highestVersion ?? 0, header.version)
        let name = file.name
        let expectedKind: JournalFormat.SegmentKind = name.hasSuffix("." + JournalFormat.logExtension) ? .log : .base
        if header.kind != expectedKind || header.number != fileNumber(name) {
            report.problems.append(
                .init(
                    kind: .corruption, file: name, offset: 0, bytes: nil, recordsAfter: 0,
                    message:
                        "segment header says \(header.kind) number \(header.number), which does not match the file name"
                ))
        }
        if let expected = nextSequence, header.firstSequence != expected {
            report.problems.append(
                .init(
                    kind: .corruption, file: name, offset: Int64(JournalFormat.SegmentHeaderField.firstSequence),
                    bytes: nil, recordsAfter: 0,
                    message: "starts at sequence \(header.firstSequence), expected \(expected)"))
        }
    }

    /// Walks the whole file's bytes: from its header, or from `resume` when the records
    /// before it were streamed (and the header checked) already.
    private mutating func scanWhole(_ raw: UnsafeRawBufferPointer, resume: Resume?) {
        let header: SegmentHeader
        if let resume {
            header = resume.header
        } else {
            switch SegmentHeader.parse(raw, file: file.name) {
            case .success(let parsed): header = parsed
            case .failure(let error):
                report.problems.append(
                    .init(
                        kind: .corruption, file: file.name, offset: error.offset, bytes: Int64(raw.count),
                        recordsAfter: 0, message: error.message))
                nextSequence = nil
                return
            }
            check(header)
            history = RecordHistory(header: header)
        }
        let scan = RecordCodec.scan(
            raw, header: header, from: resume?.offset ?? JournalFormat.segmentHeaderSize,
            sequence: resume?.sequence ?? header.firstSequence
        ) { deliver($0, in: raw, at: 0) }
        nextSequence = scan.nextSequence
        if failure == nil, let damage = scan.damage {
            let torn = file.link.isTornTail(damage, kind: header.kind)
            report.problems.append(
                .init(
                    kind: torn ? .tornTail : .corruption, file: file.name, offset: Int64(damage.offset),
                    bytes: Int64(raw.count - damage.offset), recordsAfter: damage.recordsAfter,
                    message: damage.reason))
        }
    }

    // MARK: Streaming a file

    /// Streams the file's clean records through the window; hands the rest to
    /// ``scanWhole(_:resume:)`` at the first thing that is not a clean record.
    private mutating func stream(_ fd: Int32, size: Int, window: Int) throws(JournalError) {
        var bytes = SegmentWindow(fs: fs, fd: fd, path: file.path, size: size, buffer: windowBuffer, window: window)
        guard let header = try streamedHeader(&bytes) else {
            scanWhole(try fs.readFile(fd, file.path, size: size, into: fileBuffer), resume: nil)
            return
        }
        check(header)
        history = RecordHistory(header: header)
        let inOrder = header.usesHistory
        var offset = JournalFormat.segmentHeaderSize
        var sequence = header.firstSequence
        while offset < size {
            guard let record = try Self.cleanRecord(in: &bytes, at: offset, sequence: sequence, seed: header.seed)
            else {
                // Not a clean record: the whole-file walk describes it, byte for byte.
                let raw = try fs.readFile(fd, file.path, size: size, into: fileBuffer)
                scanWhole(raw, resume: (header, offset, sequence))
                return
            }
            current.removeAll()
            guard !inOrder, current.admits(record) else {
                sequence += 1
                if !deliver(record, in: bytes.bytes, at: bytes.start) { break }
                offset = record.end
                continue
            }
            if !lendBatches(from: record, in: bytes, seed: header.seed, offset: &offset, sequence: &sequence) { break }
        }
        nextSequence = sequence
    }

    /// The segment header at the start of the window; nil when the file is shorter than a
    /// header or the header does not parse.
    private func streamedHeader(_ bytes: inout SegmentWindow) throws(JournalError) -> SegmentHeader? {
        let headerSize = JournalFormat.segmentHeaderSize
        guard try bytes.ensure(0, count: headerSize),
            case .success(let header) = SegmentHeader.parse(
                UnsafeRawBufferPointer(rebasing: bytes.bytes[..<headerSize]), file: file.name)
        else { return nil }
        return header
    }

    /// The clean record at file offset `offset`, numbered `sequence`, made to lie wholly in
    /// the window; nil when the bytes there are not one (damage, a wrong sequence, the file's
    /// end).
    private static func cleanRecord(
        in bytes: inout SegmentWindow, at offset: Int, sequence: UInt64, seed: UInt32
    ) throws(JournalError) -> ScannedRecord? {
        guard try bytes.ensure(offset, count: JournalFormat.recordHeaderSize) else { return nil }
        let storedLength = bytes.bytes.littleEndian(
            at: offset - bytes.start + JournalFormat.RecordHeaderField.storedLength, as: UInt32.self)
        guard try bytes.ensure(offset, count: JournalFormat.recordHeaderSize + Int(storedLength)),
            case .success(var found) = RecordCodec.record(
                in: bytes.bytes, at: offset - bytes.start, seed: seed, end: bytes.count),
            found.sequence == sequence
        else { return nil }
        found.offset = offset
        return found
    }

    /// Adds to `batch` the clean records from file offset `start` on, numbered from
    /// `sequence` on, that lie wholly in the window and that it admits.
    private static func gather(
        _ batch: RecordBatch, from start: Int, sequence: UInt64, in bytes: SegmentWindow, seed: UInt32
    ) {
        var end = start
        while end + JournalFormat.recordHeaderSize <= bytes.start + bytes.count {
            let storedLength = Int(
                bytes.bytes.littleEndian(
                    at: end - bytes.start + JournalFormat.RecordHeaderField.storedLength, as: UInt32.self))
            guard end + JournalFormat.recordHeaderSize + storedLength <= bytes.start + bytes.count,
                case .success(var found) = RecordCodec.record(
                    in: bytes.bytes, at: end - bytes.start, seed: seed, end: bytes.count),
                found.sequence == sequence + UInt64(batch.records.count)
            else { return }
            found.offset = end
            guard batch.admits(found) else { return }
            batch.append(found)
            end = found.end
        }
    }

    /// Lends `first` and the clean records after it that lie wholly in the window, in
    /// batches decompressed on every core: the first batch decompressed at once, each next
    /// one by a helper while the one before is lent. The first record that does not join (not
    /// clean, not wholly in the window, chunked) ends the batches: the caller looks at it
    /// again, where the window slides and damage goes to the whole-file walk.
    ///
    /// - Parameter offset: advanced past each record lent.
    /// - Parameter sequence: advanced by one for each record lent.
    /// - Returns: false once `body` threw.
    private mutating func lendBatches(
        from first: ScannedRecord, in bytes: SegmentWindow, seed: UInt32, offset: inout Int, sequence: inout UInt64
    ) -> Bool {
        current.append(first)
        Self.gather(current, from: first.end, sequence: first.sequence + 1, in: bytes, seed: seed)
        current.decode(bytes.bytes, at: bytes.start)
        while let last = current.records.last {
            next.removeAll()
            Self.gather(next, from: last.end, sequence: last.sequence + 1, in: bytes, seed: seed)
            next.startDecoding(bytes.bytes, at: bytes.start)
            guard lendCurrentBatch(in: bytes, offset: &offset, sequence: &sequence) else {
                next.waitForDecoding()
                return false
            }
            if next.isEmpty { break }
            swap(&current, &next)
        }
        next.waitForDecoding()
        return true
    }

    /// Lends the records of `current`, decompressed already, in order.
    ///
    /// - Returns: false once `body` threw.
    private mutating func lendCurrentBatch(in bytes: SegmentWindow, offset: inout Int, sequence: inout UInt64) -> Bool {
        for (i, record) in current.records.enumerated() {
            sequence += 1
            let decoded = current.payload(i, in: bytes.bytes, at: bytes.start)
            guard deliver(record, in: bytes.bytes, at: bytes.start, decoded: decoded) else { return false }
            offset = record.end
        }
        return true
    }

    // MARK: Lending a record

    /// Lists a valid record and lends its payload to `body`, or lists why it does not
    /// decompress.
    ///
    /// - Parameter bytes: the file from offset `base` on.
    /// - Parameter decoded: the payload, or why it does not decompress, when a
    ///   ``RecordBatch`` decompressed it already.
    /// - Returns: false once `body` threw.
    private mutating func deliver(
        _ record: ScannedRecord, in bytes: UnsafeRawBufferPointer, at base: Int,
        decoded: Result<UnsafeRawBufferPointer, LZ4Error>? = nil
    ) -> Bool {
        var entry = JournalReport.Entry(record, file: file.name)
        if record.sealed { entry.keyID = Self.keyID(of: record, in: bytes, at: base) }
        report.entries.append(entry)
        switch sealOrder.admit(record, in: bytes, at: base, keyring: keyring, requireKeys: false, file: file.name) {
        case .accept: break
        case .damage(let reason):
            report.problems.append(
                .init(
                    kind: .corruption, file: file.name, offset: Int64(record.offset), bytes: nil, recordsAfter: 0,
                    message: reason))
            return true
        case .fatal(let error):
            failure = error
            return false
        }
        if record.sealed {
            if let problem = deliverSealed(record, entry, in: bytes, at: base) {
                report.problems.append(
                    .init(
                        kind: .corruption, file: file.name, offset: Int64(record.offset), bytes: nil,
                        recordsAfter: 0, message: problem))
            }
            return failure == nil
        }
        var problem: String?
        let joinsHistory = history.map { $0.enabled && record.rawLength <= JournalFormat.historyRecordLimit } ?? false
        if record.chunked && streamingChunks && !joinsHistory {
            problem = lendChunks(of: record, entry, in: bytes, at: base)
        } else if let history, history.enabled {
            problem =
                history.withPayload(of: record, in: bytes, at: base, file: file.name, buffer: payloadBuffer) { bytes in
                    lend(bytes, entry)
                }?.message
        } else if let decoded {
            switch decoded {
            case .success(let bytes): lend(bytes, entry)
            case .failure(let error):
                problem = RecordCodec.decompressionProblem(of: record, "\(error)", file: file.name).message
            }
        } else {
            problem =
                RecordCodec.withPayload(of: record, in: bytes, at: base, file: file.name, buffer: payloadBuffer) {
                    bytes in
                    lend(bytes, entry)
                }?.message
        }
        if let problem {
            report.problems.append(
                .init(
                    kind: .corruption, file: file.name, offset: Int64(record.offset), bytes: nil,
                    recordsAfter: 0, message: problem))
        }
        return failure == nil
    }

    /// Opens a sealed record with the keyring and lends the record inside it as any other is
    /// lent; without a keyring only counts it.
    ///
    /// - Parameter bytes: the file from offset `base` on.
    /// - Returns: why the seal does not open or the inner payload does not decompress, or nil;
    ///   a key the keyring lacks (or a wrong one) is kept as the walk's failure instead.
    private mutating func deliverSealed(
        _ record: ScannedRecord, _ entry: JournalReport.Entry, in bytes: UnsafeRawBufferPointer, at base: Int
    ) -> String? {
        guard let keyring else {
            report.sealedRecordsNotOpened += 1
            return nil
        }
        let name = file.name
        let opened = RecordCodec.withUnsealed(record, in: bytes, at: base, keyring: keyring, file: name) {
            inner, innerBytes, innerBase -> Result<String?, JournalError> in
            if inner.chunked && streamingChunks {
                return .success(lendChunks(of: inner, entry, in: innerBytes, at: innerBase))
            }
            let problem = RecordCodec.withPayload(
                of: inner, in: innerBytes, at: innerBase, file: name, buffer: payloadBuffer
            ) { payload in
                lend(payload, entry)
            }
            return .success(problem?.message)
        }
        switch opened {
        case .success(let problem): return problem
        case .failure(let error):
            switch error.code {
            case .keyUnavailable, .wrongKey:
                failure = error
                return nil
            default: return error.message
            }
        }
    }

    /// The key identifier a sealed record's clear header names, or nil when it does not parse.
    private static func keyID(of record: ScannedRecord, in bytes: UnsafeRawBufferPointer, at base: Int) -> String? {
        let range = record.payloadRange
        let stored = UnsafeRawBufferPointer(rebasing: bytes[(range.lowerBound - base)..<(range.upperBound - base)])
        return try? SealHeader.parse(stored).get().keyID
    }

    /// Lends a payload in one piece to `body`, keeping what it throws.
    private mutating func lend(_ bytes: UnsafeRawBufferPointer, _ entry: JournalReport.Entry) {
        payload.reset(bytes)
        do { try body(entry, payload) } catch { failure = error }
    }
    /// Lends a chunked payload to `body` chunk by chunk as its chunks are decompressed,
    /// keeping what `body` throws.
    ///
    /// - Parameter bytes: the file from offset `base` on.
    /// - Returns: why the chunk table or a chunk does not decompress, or nil.
    private mutating func lendChunks(
        of record: ScannedRecord, _ entry: JournalReport.Entry, in bytes: UnsafeRawBufferPointer, at base: Int
    ) -> String? {
        let lent = payload.lendChunks(of: record, in: bytes, at: base, file: file.name, slots: chunkSlots) { payload in
            try body(entry, payload)
        }
        if let thrown = lent.thrown { failure = thrown }
        return lent.problem?.message
    }
}

extension JournalReport.Entry {
    /// The entry of a valid record of the file `file`.
    init(_ record: ScannedRecord, file: String) {
        self.init(
            file: file, offset: Int64(record.offset), sequence: record.sequence,
            kind: JournalRecord.Kind(recordType: record.type), type: record.type,
            storedLength: record.storedLength, rawLength: record.rawLength,
            compressed: record.compressed || record.chunked || record.history
                || (record.sealed && record.sealedFlags != 0), sealed: record.sealed)
    }
}
