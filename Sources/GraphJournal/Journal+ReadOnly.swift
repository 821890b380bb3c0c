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
    /// verify`): a journal is read with no allocation per record.
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
        let fs = FileSystem(io: io)
        var report = JournalReport()
        let names = try fs.list(directory)
        let manifestPath = directory + "/" + JournalFormat.manifestFileName
        let manifest = try Manifest.parse(try fs.readFile(manifestPath), file: manifestPath)
        report.files = manifest.files
        for name in names.sorted() where fileNumber(name) != nil && !manifest.files.contains(name) {
            report.problems.append(.init(kind: .leftoverFile, file: name, offset: nil, bytes: nil, recordsAfter: 0,
                                         message: "not listed in MANIFEST"))
        }
        var nextSequence: UInt64?
        var failure: (any Error)?
        // Reused from file to file and from record to record.
        let segmentBuffer = ReadBuffer()
        let payloadBuffer = ReadBuffer()
        for (index, name) in manifest.files.enumerated() {
            let isLast = index == manifest.files.count - 1
            let raw: UnsafeRawBufferPointer
            do { raw = try fs.readFile(directory + "/" + name, into: segmentBuffer) } catch {
                report.problems.append(.init(kind: .corruption, file: name, offset: nil, bytes: nil, recordsAfter: 0,
                                             message: "listed in MANIFEST but unreadable: \(error)"))
                nextSequence = nil
                continue
            }
            do {
                let header: SegmentHeader
                switch SegmentHeader.parse(raw, file: name) {
                case .success(let parsed): header = parsed
                case .failure(let error):
                    report.problems.append(.init(kind: .corruption, file: name, offset: error.offset, bytes: Int64(raw.count),
                                                 recordsAfter: 0, message: error.message))
                    nextSequence = nil
                    continue
                }
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
                let scan = RecordCodec.scan(raw, header: header) { record in
                    let entry = JournalReport.Entry(
                        file: name, offset: Int64(record.offset), sequence: record.sequence,
                        kind: JournalRecord.Kind(recordType: record.type), type: record.type,
                        storedLength: record.storedLength, rawLength: record.rawLength, compressed: record.compressed)
                    report.entries.append(entry)
                    let problem = RecordCodec.withPayload(of: record, in: raw, file: name, buffer: payloadBuffer) { payload in
                        do { try body(entry, payload) } catch { failure = error }
                    }
                    if let problem {
                        report.problems.append(.init(kind: .corruption, file: name, offset: Int64(record.offset), bytes: nil,
                                                     recordsAfter: 0, message: problem.message))
                    }
                    return failure == nil
                }
                nextSequence = scan.nextSequence
                if failure == nil, let damage = scan.damage {
                    let torn = damage.couldBeTornTail && isLast && header.kind == .log
                    report.problems.append(.init(kind: torn ? .tornTail : .corruption, file: name, offset: Int64(damage.offset),
                                                 bytes: Int64(raw.count - damage.offset), recordsAfter: damage.recordsAfter,
                                                 message: damage.reason))
                }
            }
            if let failure { throw failure }
        }
        return report
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
                if case .success(let record) = RecordCodec.record(in: raw, at: position, seed: header.seed, end: raw.count) {
                    entries.append(.init(file: name, offset: Int64(record.offset), sequence: record.sequence,
                                         kind: JournalRecord.Kind(recordType: record.type), type: record.type,
                                         storedLength: record.storedLength, rawLength: record.rawLength,
                                         compressed: record.compressed))
                    position = record.end
                } else {
                    position += 1
                }
            }
            return entries
        }
    }
}
