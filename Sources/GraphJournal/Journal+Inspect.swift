/// What ``Journal/inspect(directory:)`` found: every record and every problem, with file and
/// byte offset.
public struct JournalReport: Sendable, Hashable {
    /// One record.
    public struct Entry: Sendable, Hashable {
        /// The segment file's name.
        public var file: String
        /// The record header's offset in it.
        public var offset: Int64
        /// The record's sequence number.
        public var sequence: UInt64
        /// The kind, or nil for a skipped (unknown, skippable) record type.
        public var kind: JournalRecord.Kind?
        /// The raw record type byte.
        public var type: UInt8
        /// Payload bytes on disk.
        public var storedLength: Int
        /// Payload bytes after decompression.
        public var rawLength: Int
        /// Whether the payload is an LZ4 block.
        public var compressed: Bool
    }

    /// One problem.
    public struct Problem: Sendable, Hashable {
        /// The kind of problem.
        public enum Kind: Sendable, Hashable {
            /// An incomplete last record: a normal end, truncated at the next open for writing.
            case tornTail
            /// Damage with valid data after it, or a bad header, MANIFEST or missing file.
            case corruption
            /// A file not listed in MANIFEST (a leftover the next writer removes).
            case leftoverFile
        }
        /// The kind of problem.
        public var kind: Kind
        /// The file's name.
        public var file: String
        /// Where in the file, when it applies.
        public var offset: Int64?
        /// Bytes affected (to the end of the file for damage), when known.
        public var bytes: Int64?
        /// Valid records found after the damage.
        public var recordsAfter: Int
        /// What is wrong.
        public var message: String
    }

    /// The overall verdict.
    public enum Verdict: Sendable, Hashable {
        /// Nothing wrong.
        case clean
        /// Only a torn tail (and perhaps leftover files): opens normally.
        case tornTailOnly
        /// Corruption: a writer's `open` refuses unless point-in-time recovery is chosen.
        case corrupt
    }

    /// The live files in MANIFEST order.
    public var files: [String] = []
    /// Every valid record, in order.
    public var entries: [Entry] = []
    /// Every problem found.
    public var problems: [Problem] = []
    /// The format version of the segments.
    public var formatVersion = Int(JournalFormat.formatVersion)

    /// ``Verdict/corrupt`` if any problem is corruption, else ``Verdict/tornTailOnly`` if there
    /// is a torn tail, else ``Verdict/clean``.
    public var verdict: Verdict {
        if problems.contains(where: { $0.kind == .corruption }) { return .corrupt }
        if problems.contains(where: { $0.kind == .tornTail }) { return .tornTailOnly }
        return .clean
    }
}

extension Journal {
    /// Reads a journal directory without modifying it and without taking the lock, and lists
    /// every record and every problem: torn tail, corruption (with the byte offset and how many
    /// valid records follow), leftover files. Compressed payloads are decompressed to check
    /// them. Safe to run while a writer has the journal open (it may then see a torn tail
    /// that is only an append in progress).
    ///
    /// ```swift
    /// let report = try Journal.inspect(directory: "/var/lib/app/store")
    /// if report.verdict == .corrupt { print(report.problems) }
    /// ```
    ///
    /// - Parameter directory: the journal's directory.
    /// - Parameter io: the I/O layer.
    /// - Returns: the report.
    /// - Throws: ``JournalError`` only when the directory or MANIFEST cannot be read at all
    ///   (a damaged MANIFEST is thrown: nothing else says which files are live).
    public static func inspect(directory: String, io: JournalIO = .system) throws(JournalError) -> JournalReport {
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
        for (index, name) in manifest.files.enumerated() {
            let isLast = index == manifest.files.count - 1
            let filePath = directory + "/" + name
            let bytes: [UInt8]
            do { bytes = try fs.readFile(filePath) } catch {
                report.problems.append(.init(kind: .corruption, file: name, offset: nil, bytes: nil, recordsAfter: 0,
                                             message: "listed in MANIFEST but unreadable: \(error)"))
                nextSequence = nil
                continue
            }
            bytes.withUnsafeBytes { raw in
                let header: SegmentHeader
                switch SegmentHeader.parse(raw, file: name) {
                case .success(let parsed): header = parsed
                case .failure(let error):
                    report.problems.append(.init(kind: .corruption, file: name, offset: error.offset, bytes: Int64(raw.count),
                                                 recordsAfter: 0, message: error.message))
                    nextSequence = nil
                    return
                }
                if let expected = nextSequence, header.firstSequence != expected {
                    report.problems.append(.init(kind: .corruption, file: name, offset: Int64(JournalFormat.SegmentHeaderField.firstSequence),
                                                 bytes: nil, recordsAfter: 0,
                                                 message: "starts at sequence \(header.firstSequence), expected \(expected)"))
                }
                let scan = RecordCodec.scan(raw, header: header) { record in
                    if record.compressed, case .failure(let error) = RecordCodec.payload(of: record, in: raw, file: name) {
                        report.problems.append(.init(kind: .corruption, file: name, offset: Int64(record.offset), bytes: nil,
                                                     recordsAfter: 0, message: error.message))
                    }
                    report.entries.append(.init(file: name, offset: Int64(record.offset), sequence: record.sequence,
                                                kind: JournalRecord.Kind(recordType: record.type), type: record.type,
                                                storedLength: record.storedLength, rawLength: record.rawLength,
                                                compressed: record.compressed))
                    return true
                }
                nextSequence = scan.nextSequence
                if let damage = scan.damage {
                    let torn = damage.couldBeTornTail && isLast && header.kind == .log
                    report.problems.append(.init(kind: torn ? .tornTail : .corruption, file: name, offset: Int64(damage.offset),
                                                 bytes: Int64(raw.count - damage.offset), recordsAfter: damage.recordsAfter,
                                                 message: damage.reason))
                }
            }
        }
        return report
    }
}
