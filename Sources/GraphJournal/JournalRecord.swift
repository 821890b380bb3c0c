/// One record read back from the journal.
///
/// ```swift
/// try journal.forEachRecord { record in
///     if record.kind == .schema { model = try decodeSchema(record.payload) }
///     else { try replay(record.payload) }
/// }
/// ```
public struct JournalRecord: Sendable, Hashable {
    /// What a record holds.
    public enum Kind: Sendable, Hashable {
        /// One transaction appended by ``Journal/append(_:schema:)``.
        case transaction
        /// One snapshot payload of a base written by ``Journal/compact(base:schema:)``.
        case base
        /// A schema payload: applies to the records after it.
        case schema
    }

    /// The record's position: every record (schema and base ones too) takes the next number.
    public let sequence: UInt64
    /// What the record holds.
    public let kind: Kind
    /// The payload, decompressed.
    public let payload: [UInt8]

    /// Creates a record.
    public init(sequence: UInt64, kind: Kind, payload: [UInt8]) {
        self.sequence = sequence
        self.kind = kind
        self.payload = payload
    }
}

/// Counters describing a journal, from ``Journal/stats``.
public struct JournalStats: Sendable, Hashable {
    /// Live segment files (base and logs).
    public var segments: Int
    /// Live records of every kind.
    public var records: Int
    /// Bytes of all live segment files.
    public var bytesOnDisk: Int64
    /// Payload bytes before compression.
    public var rawPayloadBytes: Int64
    /// Payload bytes as stored (after compression where it helped).
    public var storedPayloadBytes: Int64
    /// The sequence number of the last record, 0 for an empty journal.
    public var lastSequence: UInt64
    /// The on-disk format version: the highest of the live segments' (1 for a store written
    /// before version 2 whose active log has not rolled since).
    public var formatVersion: Int
    /// Schema records among the live records.
    public var schemaVersionsSeen: Int
}

/// What ``Journal/open(directory:options:)`` found and did.
public struct JournalOpenReport: Sendable, Hashable {
    /// An incomplete last record: ignored, and truncated before the next append.
    public struct TornTail: Sendable, Hashable {
        /// The segment's path.
        public var file: String
        /// Where the valid records end.
        public var offset: Int64
        /// How many bytes follow and will be truncated.
        public var bytes: Int64
        /// Why the bytes there are not a record.
        public var reason: String
    }
    /// Bytes removed by ``JournalOptions/Recovery/pointInTime``, saved aside.
    public struct Dropped: Sendable, Hashable {
        /// The segment's path.
        public var file: String
        /// Where the dropped bytes started in it.
        public var offset: Int64
        /// How many bytes were dropped.
        public var bytes: Int64
        /// Where they were saved (`<segment>.dropped-<timestamp>`).
        public var savedAs: String
        /// Why: the damage found.
        public var reason: String
    }

    /// The torn tail, if there was one.
    public var tornTail: TornTail?
    /// What point-in-time recovery dropped.
    public var dropped: [Dropped] = []
    /// Records that looked valid in the dropped bytes (they are kept in the saved files).
    public var recordsDropped: Int = 0
    /// Leftover files of an interrupted compaction or roll that were removed: none of them
    /// held a record that the live files lack.
    public var removedFiles: [String] = []
    /// Segments MANIFEST listed that did not exist, which point-in-time recovery removed from
    /// MANIFEST (with every segment after them, saved aside).
    public var missingFiles: [String] = []
    /// Segments MANIFEST did not list but that continued the sequence (a crash, or a restored
    /// older MANIFEST): added to MANIFEST with their records.
    public var adoptedFiles: [String] = []
    /// True when nothing needed attention.
    public var isClean: Bool { tornTail == nil && dropped.isEmpty && adoptedFiles.isEmpty && missingFiles.isEmpty }
}
