import Synchronization

/// One journal record in the form it travels to another machine: the record's bytes exactly as
/// its segment holds them (header, then the payload as stored, compressed or not), except that
/// the checksum is seeded with salt 0 instead of the segment's salt, so that a receiver can
/// check it without knowing which file it came from.
///
/// A store that ships its journal (``JournalOptions/onDurable``) hands these out once they are
/// durable; a follower checks one with ``init(wire:)`` and appends it to its own journal with
/// ``Journal/append(shipped:schema:origin:)``, which writes the stored payload as it is, with
/// no second compression.
///
/// ```swift
/// let record = try ShippedRecord(wire: message.payload)   // checksum, header fields
/// if record.kind == .transaction { try apply(try record.payload()) }
/// ```
public struct ShippedRecord: Sendable, Hashable {
    /// The record's sequence number in the journal that wrote it.
    public let sequence: UInt64
    /// What the record holds.
    public let kind: JournalRecord.Kind
    /// The wire form's length in bytes.
    public let byteCount: Int
    /// The wire form, or the pieces it is made of until someone asks for it.
    private let storage: WireStorage

    /// The wire form: the 24-byte record header and the stored payload.
    ///
    /// A record handed out by ``JournalOptions/onDurable`` is put together (and its checksum
    /// re-seeded) on the first access, on the thread that asks, not in the save that wrote it.
    public var wire: [UInt8] { storage.wire }

    /// The checksum seed of the wire form: CRC32C of a salt of 0 (8 zero bytes).
    static let wireSeed = CRC32C.seed(salt: 0)

    /// Checks the wire form of a record: its length, checksum, header fields (type, flags,
    /// lengths) as a segment's reader checks them.
    ///
    /// - Throws: ``JournalError`` with code `corrupt`, saying what is wrong.
    public init(wire: [UInt8]) throws(JournalError) {
        let checked = wire.withUnsafeBytes { RecordCodec.record(in: $0, at: 0, seed: Self.wireSeed, end: wire.count) }
        let record: ScannedRecord
        switch checked {
        case .success(let r): record = r
        case .failure(let problem):
            throw JournalError(.corrupt, "shipped record of \(wire.count) bytes: \(problem.reason)")
        }
        guard record.end == wire.count else {
            throw JournalError(
                .corrupt,
                "shipped record of \(wire.count) bytes holds \(record.end - wire.count) bytes after its payload")
        }
        guard let kind = JournalRecord.Kind(recordType: record.type) else {
            throw JournalError(
                .corrupt, "shipped record \(record.sequence) has type \(record.type), which is not shipped")
        }
        guard !record.history else {
            throw JournalError(
                .corrupt,
                "shipped record \(record.sequence) copies from its segment's history (flag 0x4); shipped records are self-contained"
            )
        }
        self.sequence = record.sequence
        self.kind = kind
        self.byteCount = wire.count
        self.storage = WireStorage(wire: wire)
    }

    /// Makes the self-contained wire form of a record whose raw payload is `payload`: compressed
    /// on its own, as a version 1 segment's writer would store it.
    init(payload: [UInt8], sequence: UInt64, type: JournalFormat.RecordType, kind: JournalRecord.Kind) {
        var wire: [UInt8] = []
        RecordCodec.append(to: &wire, seed: Self.wireSeed, sequence: sequence, type: type, payload: payload)
        self.sequence = sequence
        self.kind = kind
        self.byteCount = wire.count
        self.storage = WireStorage(wire: wire)
    }

    /// Makes the wire form of a record found in a segment (`bytes[range]`, checksummed with any
    /// seed): the same bytes, checksum re-seeded.
    init(segmentRecord bytes: UnsafeRawBufferPointer, sequence: UInt64, kind: JournalRecord.Kind) {
        var wire = [UInt8](bytes)
        RecordCodec.reseal(&wire, at: 0, seed: Self.wireSeed)
        self.sequence = sequence
        self.kind = kind
        self.byteCount = wire.count
        self.storage = WireStorage(wire: wire)
    }

    /// The wire form of a record written as `pieces` (its header and payload, checksummed with
    /// any seed), put together and resealed on first access.
    init(pieces: [ArraySlice<UInt8>], sequence: UInt64, kind: JournalRecord.Kind) {
        self.sequence = sequence
        self.kind = kind
        self.byteCount = pieces.reduce(0) { $0 + $1.count }
        self.storage = WireStorage(pieces: pieces, count: byteCount)
    }

    /// Records are equal when their sequences, kinds and wire forms are.
    public static func == (a: ShippedRecord, b: ShippedRecord) -> Bool {
        a.sequence == b.sequence && a.kind == b.kind && a.wire == b.wire
    }

    /// Hashes the sequence, kind and wire form.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(sequence)
        hasher.combine(kind)
        hasher.combine(wire)
    }

    /// The payload's length after decompression.
    public var rawLength: Int {
        Int(wire.withUnsafeBytes { $0.littleEndian(at: JournalFormat.RecordHeaderField.rawLength, as: UInt32.self) })
    }

    /// The payload as stored (possibly compressed).
    public var storedLength: Int { byteCount - JournalFormat.recordHeaderSize }

    /// The payload, decompressed.
    ///
    /// - Throws: ``JournalError`` with code `corrupt` when it does not decompress (its checksum
    ///   matched, so the writer wrote it so), or `keyUnavailable` when it is sealed.
    public func payload() throws(JournalError) -> [UInt8] {
        try payload(keyring: nil)
    }

    /// The payload, opened with `keyring` when it is sealed, and decompressed.
    ///
    /// - Parameter keyring: the keys of sealed records (a journal's ``Journal/keyring``, or one
    ///   made from the writer's ``JournalEncryption``); nil for a journal without encryption.
    /// - Throws: ``JournalError`` with code `corrupt` when it does not decompress or its seal
    ///   does not open, `keyUnavailable` or `wrongKey` when the keyring lacks its key.
    public func payload(keyring: JournalKeyring?) throws(JournalError) -> [UInt8] {
        let scanned = wire.withUnsafeBytes { RecordCodec.record(in: $0, at: 0, seed: Self.wireSeed, end: wire.count) }
        guard case .success(let record) = scanned else {
            throw JournalError(.corrupt, "shipped record \(sequence) no longer checks")
        }
        return try RecordCodec.payload(of: record, in: wire, file: "shipped record \(sequence)", keyring: keyring).get()
    }

    /// Whether the payload is sealed (encrypted at rest by its writer).
    public var isSealed: Bool {
        wire.withUnsafeBytes { $0[JournalFormat.RecordHeaderField.flags] & JournalFormat.flagSealed != 0 }
    }

    /// The clear header of the payload's seal; nil when it is not sealed.
    ///
    /// - Throws: ``JournalError`` with code `corrupt` when the seal's header is malformed.
    func sealHeader() throws(JournalError) -> SealHeader? {
        guard isSealed else { return nil }
        let parsed = wire.withUnsafeBytes {
            SealHeader.parse(UnsafeRawBufferPointer(rebasing: $0[JournalFormat.recordHeaderSize...]))
        }
        switch parsed {
        case .success(let header): return header
        case .failure(let failure):
            throw JournalError(.corrupt, "shipped record \(sequence)'s seal: \(failure)", sequence: sequence)
        }
    }
}

/// A record's wire form, made from its pieces once, on the first access, under a lock.
final class WireStorage: Sendable {
    private enum State {
        case wire([UInt8])
        case pieces([ArraySlice<UInt8>], count: Int)
    }

    private let state: Mutex<State>

    init(wire: [UInt8]) { state = Mutex(.wire(wire)) }
    init(pieces: [ArraySlice<UInt8>], count: Int) { state = Mutex(.pieces(pieces, count: count)) }

    var wire: [UInt8] {
        state.withLock { s in
            switch s {
            case .wire(let wire):
                return wire
            case .pieces(let pieces, let count):
                var wire: [UInt8] = []
                wire.reserveCapacity(count)
                for p in pieces { wire.append(contentsOf: p) }
                RecordCodec.reseal(&wire, at: 0, seed: ShippedRecord.wireSeed)
                s = .wire(wire)
                return wire
            }
        }
    }
}

extension RecordCodec {
    /// Recomputes the checksum of the record that starts at `start` and runs to the end of
    /// `bytes`, with `seed`.
    static func reseal(_ bytes: inout [UInt8], at start: Int, seed: UInt32) {
        let crc = bytes.withUnsafeBytes { CRC32C.extend(seed, UnsafeRawBufferPointer(rebasing: $0[(start + 4)...])) }
        bytes.storeLittleEndian(crc, at: start + JournalFormat.RecordHeaderField.crc)
    }
}

extension Journal {
    /// Calls `body` with every live schema, transaction and base record whose sequence is above
    /// `sequence`, in order, in their wire form (for a shipper catching up from the files: after
    /// a restart, or after its servers were away).
    ///
    /// ```swift
    /// try journal.forEachShippedRecord(after: lastShipped) { try publish($0) }
    /// ```
    ///
    /// - Parameter sequence: records at or below it are skipped (0: all).
    /// - Parameter body: called once per record; an error it throws stops the walk.
    /// - Throws: what `body` throws, or ``JournalError`` if a file cannot be read or no longer
    ///   matches what `open` checked.
    public func forEachShippedRecord(after sequence: UInt64, _ body: (ShippedRecord) throws -> Void) throws {
        try walkLiveRecords { record, bytes, _, _, payload in
            guard record.sequence > sequence, let kind = JournalRecord.Kind(recordType: record.type) else { return }
            if record.history, let type = JournalFormat.RecordType(rawValue: record.type) {
                // It copies from the records before it in its segment: it travels self-contained.
                try body(ShippedRecord(payload: try payload().get(), sequence: record.sequence, type: type, kind: kind))
                return
            }
            try body(
                ShippedRecord(
                    segmentRecord: UnsafeRawBufferPointer(rebasing: bytes[record.offset..<record.end]),
                    sequence: record.sequence, kind: kind))
        }
    }
}
