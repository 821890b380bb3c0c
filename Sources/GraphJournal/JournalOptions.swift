/// How a ``Journal`` writes, syncs and recovers.
///
/// ```swift
/// var options = JournalOptions()
/// options.durability = .batched(milliseconds: 1000)   // like Redis `appendfsync everysec`
/// options.log = { print("journal:", $0) }
/// let journal = try Journal.open(directory: "/var/lib/app/store", options: options)
/// ```
public struct JournalOptions: Sendable {
    /// When appended records reach stable storage. See `Docs/JournalFormat.md`, "Durability".
    public enum Durability: Sendable, Hashable {
        /// `append` returns after an `fdatasync` covering the record. Appends that wait at the
        /// same time from several threads share one `fdatasync` (group commit).
        /// A process crash or a power loss loses nothing that `append` acknowledged.
        case always
        /// `append` returns after the write; an `fdatasync` runs when `milliseconds` have
        /// passed since the last one, at the next append, `sync()` or `close()`, and from a
        /// background timer. A process crash loses nothing; a power loss can lose the
        /// appends of the last interval.
        case batched(milliseconds: Int)
        /// `fdatasync` only at `sync()` and `close()`. A process crash loses nothing (the
        /// kernel has the data); a power loss can lose anything not yet written back.
        case none
    }

    /// What `open` does with a damaged journal.
    public enum Recovery: Sendable, Hashable {
        /// A torn last record is a normal end (truncated before the next append); any other
        /// damage refuses to open with ``JournalError/Code/corrupt``.
        case tolerateTornTail
        /// Keep the valid prefix before the first damage. The dropped bytes (the rest of
        /// that segment and all later segments) are moved aside to
        /// `<segment>.dropped-<timestamp>` files, never deleted; ``Journal/openReport`` says
        /// how many records were dropped.
        case pointInTime
    }

    /// A record that passes its checksum but that the layer above cannot read (its payload
    /// does not decode): `open` treats it as damage at that record.
    ///
    /// The journal checks checksums, not what payloads mean. When the object store's replay
    /// finds a payload it cannot decode, it reopens the journal naming that record here, so
    /// that the verdict is the journal's own: a default open refuses with the record's file
    /// and offset, point-in-time recovery keeps the records before it and saves it and
    /// everything after it aside. `graph-journal repair --keep-prefix` does the same for a
    /// record `verify` found undecodable.
    public struct UnreadableRecord: Sendable, Hashable {
        /// The record's sequence number.
        public var sequence: UInt64
        /// Why it cannot be read, for the report and the error.
        public var reason: String

        /// Names a record as unreadable.
        ///
        /// - Parameter sequence: the record's sequence number.
        /// - Parameter reason: why it cannot be read.
        public init(sequence: UInt64, reason: String) {
            self.sequence = sequence
            self.reason = reason
        }
    }

    /// When records reach stable storage. Default `.always`.
    public var durability: Durability
    /// A record to treat as damage although it passes its checksum; nil by default.
    public var unreadableRecord: UnreadableRecord?
    /// What `open` does with damage. Default `.tolerateTornTail`.
    public var recovery: Recovery
    /// The active log segment rolls to a new file once an append would take it past this
    /// many bytes. Default 64 MiB.
    public var segmentSize: Int
    /// The I/O layer: ``JournalIO/system``, or a wrapper of it (the package's tests pass a
    /// fault-injecting one).
    public var io: JournalIO
    /// Receives one line for every notable event: torn tail truncated, segment rolled,
    /// compaction, files removed or saved aside.
    public var log: (@Sendable (String) -> Void)?
    /// Receives every schema and transaction record, in sequence order and each once, as soon
    /// as an `fdatasync` covers it (for a journal that ships its records to replicas; see
    /// ``ShippedRecord``). Under `.always` that is before `append` returns; under `.batched` and
    /// `.none`, at the sync that covers it. Records cut off by a failed sync are never
    /// delivered. Called on the thread that synced, with no lock of the journal held but the
    /// one that keeps deliveries in order: hand the records on and return. Nil by default.
    public var onDurable: (@Sendable ([ShippedRecord]) -> Void)?

    /// The format version of the log segments this journal creates: version 2 (records may copy
    /// from the records before them in their segment) by default; version 1 writes what a
    /// writer that predates version 2 wrote, for the tests of old stores and of the readers'
    /// version 1 paths.
    var logVersion: UInt16 = JournalFormat.formatVersion

    /// Encryption at rest: with it, every record written is sealed (``JournalEncryption``) and
    /// sealed records are read with its keys; without it (the default), records are written in
    /// the clear and a journal that holds sealed records does not open
    /// (``JournalError/Code/keyUnavailable(keyID:)``).
    public var encryption: JournalEncryption?

    /// The version of the log segments written: ``JournalFormat/sealedVersion`` with
    /// encryption, else ``logVersion``.
    var writtenLogVersion: UInt16 { encryption == nil ? logVersion : JournalFormat.sealedVersion }
    /// The version of the base segments written: ``JournalFormat/sealedVersion`` with
    /// encryption, else ``JournalFormat/historyFreeVersion``.
    var writtenBaseVersion: UInt16 {
        encryption == nil ? JournalFormat.historyFreeVersion : JournalFormat.sealedVersion
    }

    /// Creates options.
    ///
    /// - Parameter durability: when records reach stable storage.
    /// - Parameter recovery: what `open` does with damage.
    /// - Parameter segmentSize: the size past which the log rolls to a new segment.
    /// - Parameter io: the I/O layer.
    /// - Parameter log: a sink for notable events.
    /// - Parameter encryption: encryption at rest, or nil.
    public init(
        durability: Durability = .always,
        recovery: Recovery = .tolerateTornTail,
        segmentSize: Int = 64 << 20,
        io: JournalIO = .system,
        log: (@Sendable (String) -> Void)? = nil,
        encryption: JournalEncryption? = nil
    ) {
        self.durability = durability
        self.recovery = recovery
        self.segmentSize = segmentSize
        self.io = io
        self.log = log
        self.encryption = encryption
    }
}
