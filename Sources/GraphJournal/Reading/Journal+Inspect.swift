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
        /// Whether the payload is compressed: one LZ4 block (on its own or against the segment's
        /// history), or LZ4 chunks (a large payload).
        public var compressed: Bool
        /// Whether the record is sealed (encryption at rest): its payload was lent opened only
        /// when the walk had the key (``JournalReport/sealedRecordsNotOpened`` counts the others).
        public var sealed = false
        /// The identifier of the key a sealed record names in its clear seal header; nil for a
        /// record that is not sealed, or whose seal header does not parse.
        public var keyID: String?

        /// The offset just past the record in its file (header and stored payload): where the
        /// next record starts. `graph-journal` measures how far a walk got with it.
        package var endOffset: Int64 { offset + Int64(JournalFormat.recordHeaderSize + storedLength) }
    }

    /// One problem.
    public struct Problem: Sendable, Hashable {
        /// The kind of problem.
        public enum Kind: Sendable, Hashable {
            /// An incomplete last record: a normal end, truncated at the next open for writing.
            case tornTail
            /// Damage with valid data after it, or a bad header, MANIFEST or missing file.
            case corruption
            /// A file not listed in MANIFEST that holds no record the live files lack (a
            /// leftover the next writer removes).
            case leftoverFile
            /// A log not listed in MANIFEST whose records continue the sequence: the next
            /// writer adds it to MANIFEST, keeping its records. Its records are listed among
            /// ``JournalReport/entries``.
            case unlistedSegment
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

    /// The live files in order: MANIFEST's, with the unlisted logs that continue the sequence
    /// where they belong.
    public var files: [String] = []
    /// Every valid record, in order.
    public var entries: [Entry] = []
    /// Every problem found.
    public var problems: [Problem] = []
    /// The format version of the segments: the highest of the live segments' headers (1 for a
    /// store written before version 2, or whose logs have not rolled since), or the version
    /// this code writes when no header could be read.
    public var formatVersion = Int(JournalFormat.formatVersion)
    /// The sealed records that were framed and checksummed but not opened, because the walk had
    /// no key: their payloads were not lent and their contents are not checked. 0 when the walk
    /// had a keyring (it opens every sealed record) or the journal holds none.
    public var sealedRecordsNotOpened = 0
    /// The identifiers of the keys the live sealed records name, sorted: a journal is encrypted
    /// when this is not empty. Read from the clear seal headers, with or without the keys.
    public var keyIDs: [String] {
        Array(Set(entries.lazy.compactMap(\.keyID))).sorted()
    }

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
    /// - Parameter keyring: the keys of sealed records: with it every sealed record is opened
    ///   and checked; without it sealed records are framed and checksummed only
    ///   (``JournalReport/sealedRecordsNotOpened``).
    /// - Returns: the report.
    /// - Throws: ``JournalError`` only when the directory or MANIFEST cannot be read at all
    ///   (a damaged MANIFEST is thrown: nothing else says which files are live), or, with a
    ///   keyring, `keyUnavailable` or `wrongKey` for a sealed record whose key it lacks.
    public static func inspect(
        directory: String, io: JournalIO = .system, keyring: JournalKeyring? = nil
    ) throws(JournalError) -> JournalReport {
        // The same walk as readRecords (which decompresses every payload anyway to check it),
        // with nothing done per record: payloads are lent, never copied.
        do {
            return try readPayloads(directory: directory, io: io, keyring: keyring) { _, _ in }
        } catch let error as JournalError {
            throw error
        } catch {
            throw JournalError(.corrupt, "\(error)")  // unreachable: the body throws nothing
        }
    }
}
