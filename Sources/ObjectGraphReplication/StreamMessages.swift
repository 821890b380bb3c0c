import Foundation
import GraphJournal
import NATSJetStream

/// The headers of the stream's messages (`Docs/Replication.md`, "Messages").
enum Header {
    /// The last record's sequence in the writer's journal (log messages).
    static let sequence = "OG-Seq"
    /// The first record's sequence (log messages): a message carries the records
    /// `OG-First...OG-Seq` that shipped one after the other.
    static let first = "OG-First"
    /// How many records the message's batch holds.
    static let count = "OG-Count"
    /// The sequence of the log record shipped before the first (0 for the writer's first): a
    /// follower that applied another one last has missed records.
    static let previous = "OG-Prev"
    /// This message's part of the batch, from 0.
    static let part = "OG-Part"
    /// How many parts the batch has.
    static let parts = "OG-Parts"
    /// The last record's checksum as in its wire form (hex): a restarted writer compares it
    /// with its own record of that sequence.
    static let crc = "OG-CRC"
    /// A base's last record's sequence in the writer's journal (base messages): the base holds
    /// the state after every record up to it.
    static let covers = "OG-Covers"
    /// The writer's epoch (log and base messages of a writer holding the lease): the lease
    /// revision it took the stream with. It never decreases along the stream; absent, 0.
    static let epoch = "OG-Epoch"
}

/// Records as one blob: each its wire form preceded by its length (u32 little-endian). A log
/// message's batch and a base are both shipped so, cut into parts.
enum RecordBlob {
    static func encode(_ records: some Collection<ShippedRecord>) -> [UInt8] {
        var blob: [UInt8] = []
        blob.reserveCapacity(records.reduce(0) { $0 + 4 + $1.byteCount })
        for r in records {
            let n = UInt32(r.wire.count)
            for i in 0..<4 { blob.append(UInt8(truncatingIfNeeded: n >> (8 * UInt32(i)))) }
            blob.append(contentsOf: r.wire)
        }
        return blob
    }

    /// The records of a blob, each checked (``ShippedRecord/init(wire:)``).
    static func decode(_ blob: [UInt8], what: @autoclosure () -> String) throws(ReplicationError) -> [ShippedRecord] {
        var offset = 0
        var records: [ShippedRecord] = []
        while offset < blob.count {
            guard blob.count - offset >= 4 else { throw ReplicationError(.badMessage, "\(what()): truncated length") }
            let n = (0..<4).reduce(0) { $0 | Int(blob[offset + $1]) << (8 * $1) }
            offset += 4
            guard n <= blob.count - offset else {
                throw ReplicationError(.badMessage, "\(what()): a record runs past the end")
            }
            do {
                records.append(try ShippedRecord(wire: Array(blob[offset..<offset + n])))
            } catch {
                throw ReplicationError(.badMessage, "\(what()): \(error)")
            }
            offset += n
        }
        return records
    }
}

/// A batch being published: consecutive log records, their blob cut into parts.
struct OutgoingBatch {
    let records: [ShippedRecord]
    let previous: UInt64
    let parts: [ArraySlice<UInt8>]
    /// The writer's epoch, when it holds a lease.
    let epoch: UInt64?

    init(_ records: [ShippedRecord], previous: UInt64, maxPart: Int, epoch: UInt64? = nil) {
        self.records = records
        self.previous = previous
        self.parts = split(RecordBlob.encode(records), maxPart: maxPart)
        self.epoch = epoch
    }

    var first: UInt64 { records.first?.sequence ?? 0 }
    var last: UInt64 { records.last?.sequence ?? 0 }

    func headers(part: Int) -> [String: String] {
        var h = [
            Header.first: String(first), Header.sequence: String(last), Header.count: String(records.count),
            Header.previous: String(previous), Header.part: String(part), Header.parts: String(parts.count),
            Header.crc: String(crc, radix: 16),
        ]
        if let epoch { h[Header.epoch] = String(epoch) }
        return h
    }

    /// The last record's checksum.
    var crc: UInt32 { wireCRC(records.last?.wire ?? []) }

    /// `FIRST-LAST.PART.CRC`: the same records published again (a retry after a lost
    /// acknowledgement) carry the same ID and are stored once; other records of the same
    /// sequences (another writer's, or a copy of this one that went on writing) differ in the
    /// checksum, so the server's duplicate window cannot take them for this batch.
    func messageID(part: Int) -> String { "\(first)-\(last).\(part).\(String(crc, radix: 16))" }
}

/// Cuts `bytes` into slices of at most `maxPart` bytes (one empty slice for no bytes).
func split(_ bytes: [UInt8], maxPart: Int) -> [ArraySlice<UInt8>] {
    guard !bytes.isEmpty else { return [bytes[...]] }
    return stride(from: 0, to: bytes.count, by: max(1, maxPart)).map {
        bytes[$0..<min($0 + max(1, maxPart), bytes.count)]
    }
}

/// The checksum field of a wire record.
func wireCRC(_ wire: [UInt8]) -> UInt32 {
    guard wire.count >= 4 else { return 0 }
    return UInt32(wire[0]) | UInt32(wire[1]) << 8 | UInt32(wire[2]) << 16 | UInt32(wire[3]) << 24
}

/// A log message's header fields, checked.
struct LogMessageInfo: Sendable, Hashable {
    var first: UInt64
    var sequence: UInt64
    var count: Int
    var previous: UInt64
    var part: Int
    var parts: Int
    var crc: UInt32?
    var epoch: UInt64

    init(_ message: StoredMessage) throws(ReplicationError) {
        let h = message.headers
        guard let first = h[Header.first].flatMap(UInt64.init), let s = h[Header.sequence].flatMap(UInt64.init),
            let count = h[Header.count].flatMap(Int.init), let p = h[Header.previous].flatMap(UInt64.init),
            let part = h[Header.part].flatMap(Int.init), let parts = h[Header.parts].flatMap(Int.init),
            parts >= 1, part >= 0, part < parts, count >= 1, first <= s, p < first
        else {
            throw ReplicationError(
                .badMessage,
                "stream message \(message.sequence) on \(message.subject) lacks the OG- headers a shipper writes")
        }
        self.first = first
        sequence = s
        self.count = count
        previous = p
        self.part = part
        self.parts = parts
        crc = h[Header.crc].flatMap { UInt32($0, radix: 16) }
        epoch = h[Header.epoch].flatMap(UInt64.init) ?? 0
    }

    var isLastPart: Bool { part == parts - 1 }
}

/// A batch put back together: its records, in order, and where its parts are in the stream.
struct IncomingBatch {
    var records: [ShippedRecord]
    var previous: UInt64
    var firstStreamSequence: UInt64
    var lastStreamSequence: UInt64
    var time: Date

    /// The position to record with the record at `index`: the batch's last message for its
    /// last record; for the others the message before the batch, so that a replica that stops
    /// in the middle reads the batch again (and skips what it applied).
    func position(of index: Int) -> Position {
        Position(
            recordSequence: records[index].sequence,
            streamSequence: index == records.count - 1 ? lastStreamSequence : firstStreamSequence - 1)
    }
}

/// Puts the parts of batches back together, in stream order.
struct RecordAssembler {
    private var info: LogMessageInfo?
    private var expected = 0
    private var firstStreamSequence: UInt64 = 0
    private var bytes: [UInt8] = []

    /// Adds a message; returns the batch once its last part arrived. A part 0 starts over (a
    /// writer that published a batch again from its start).
    mutating func add(_ message: StoredMessage, _ info: LogMessageInfo) throws(ReplicationError) -> IncomingBatch? {
        if info.part == 0 {
            self.info = info
            expected = 0
            firstStreamSequence = message.sequence
            bytes.removeAll(keepingCapacity: true)
        }
        guard let current = self.info, info.first == current.first, info.sequence == current.sequence,
            info.part == expected
        else {
            throw ReplicationError(
                .badMessage,
                "stream message \(message.sequence) is part \(info.part) of records \(info.first)...\(info.sequence), expected part \(expected) of \(self.info.map { "\($0.first)...\($0.sequence)" } ?? "a new batch")"
            )
        }
        bytes.append(contentsOf: message.payload)
        expected += 1
        guard info.isLastPart else { return nil }
        self.info = nil
        expected = 0
        let records = try RecordBlob.decode(
            bytes, what: "records \(info.first)...\(info.sequence) ending at stream message \(message.sequence)")
        guard records.count == info.count, records.first?.sequence == info.first,
            records.last?.sequence == info.sequence,
            zip(records, records.dropFirst()).allSatisfy({ $0.sequence < $1.sequence })
        else {
            throw ReplicationError(
                .badMessage,
                "stream message \(message.sequence): its batch does not hold records \(info.first)...\(info.sequence) (\(info.count) of them)"
            )
        }
        return IncomingBatch(
            records: records, previous: info.previous, firstStreamSequence: firstStreamSequence,
            lastStreamSequence: message.sequence,
            time: message.time)
    }
}

/// A replica's position: the writer's record it applied last and the stream message that
/// carried (the last part of) it. Stored as the replica journal's origin: "OGR1", the two
/// sequences (`u64` little-endian each), then the stream's name in UTF-8 when it is known
/// (``ReplicaOrigin`` decodes it for tools).
struct Position: Sendable, Hashable {
    var recordSequence: UInt64
    var streamSequence: UInt64

    /// The origin payload without the stream's name.
    var encoded: [UInt8] { encoded(stream: nil) }

    /// The origin payload, naming `stream` (which makes it at most 20 + 255 bytes: a longer name
    /// is left out).
    func encoded(stream: String?) -> [UInt8] {
        var bytes: [UInt8] = Array("OGR1".utf8)
        for v in [recordSequence, streamSequence] {
            for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) }
        }
        if let stream, stream.utf8.count <= 255 { bytes += Array(stream.utf8) }
        return bytes
    }

    init(recordSequence: UInt64, streamSequence: UInt64) {
        self.recordSequence = recordSequence
        self.streamSequence = streamSequence
    }

    init?(_ bytes: [UInt8]?) {
        guard let bytes, bytes.count >= 20, bytes.prefix(4).elementsEqual("OGR1".utf8) else { return nil }
        func u64(_ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) } }
        recordSequence = u64(4)
        streamSequence = u64(12)
    }

    /// The stream's name an origin payload carries after the sequences; nil when it has none.
    static func stream(in bytes: [UInt8]) -> String? {
        guard bytes.count > 20 else { return nil }
        return String(validating: bytes[20...], as: UTF8.self)
    }
}

/// Where a record of a replica (a follower's directory, or a restored store) came from, as its
/// journal's origin records hold it: the writer's record and the stream message that carried
/// it. Tools read it from an origin record's payload (type 0x80) or from ``ObjectStore/origin``.
public struct ReplicaOrigin: Sendable, Hashable {
    /// The record's sequence in the writer's journal (the replica numbers its records its own
    /// way).
    public var writerSequence: UInt64
    /// The stream message that carried (the last part of) the record; for a record other than
    /// the last of its batch, the message before the batch (a replica stopped inside a batch
    /// reads it again from there).
    public var streamSequence: UInt64
    /// The stream's name; nil in an origin written without it.
    public var stream: String?

    /// Decodes an origin payload; nil when it is not one a follower or a restore writes.
    public init?(payload: [UInt8]) {
        guard let position = Position(payload) else { return nil }
        writerSequence = position.recordSequence
        streamSequence = position.streamSequence
        stream = Position.stream(in: payload)
    }
}

/// A base found in the stream: its stream messages and what it covers.
struct BaseLocation: Sendable {
    var firstStreamSequence: UInt64
    var lastStreamSequence: UInt64
    var covers: UInt64
    var time: Date
    /// The stream's name.
    var stream: String

    /// The origin of a journal made from this base: the record it covers, its last message.
    var origin: [UInt8] {
        Position(recordSequence: covers, streamSequence: lastStreamSequence).encoded(stream: stream)
    }
}

extension JetStreamClient {
    /// The newest base in the stream, or nil.
    func newestBase(_ target: ReplicationTarget) throws(ReplicationError) -> BaseLocation? {
        let last: StoredMessage?
        do { last = try lastMessage(stream: target.stream, subject: target.baseSubject) } catch {
            if error.code == .notFound { return nil }
            throw ReplicationError(.server, "reading the newest base of stream \(target.stream): \(error)")
        }
        guard let last else { return nil }
        return try baseLocation(endingWith: last, target)
    }

    func baseLocation(
        endingWith last: StoredMessage, _ target: ReplicationTarget
    ) throws(ReplicationError) -> BaseLocation {
        guard let covers = last.headers[Header.covers].flatMap(UInt64.init),
            let part = last.headers[Header.part].flatMap(Int.init),
            let parts = last.headers[Header.parts].flatMap(Int.init),
            part == parts - 1, UInt64(parts) <= last.sequence
        else {
            throw ReplicationError(
                .badMessage, "stream message \(last.sequence) on \(target.baseSubject) is not the last part of a base")
        }
        return BaseLocation(
            firstStreamSequence: last.sequence - UInt64(parts - 1), lastStreamSequence: last.sequence, covers: covers,
            time: last.time, stream: target.stream)
    }

    /// The bases in the stream, oldest first (reads their messages).
    func allBases(_ target: ReplicationTarget) throws(ReplicationError) -> [BaseLocation] {
        var bases: [BaseLocation] = []
        // The newest base's last part ends the walk: no wait for a message that never comes.
        guard let newest = try newestBase(target) else { return [] }
        do {
            let reader = try self.reader(stream: target.stream, subject: target.baseSubject, from: 1)
            defer { reader.close() }
            while bases.last?.lastStreamSequence ?? 0 < newest.lastStreamSequence {
                let batch = try reader.next(max: 64, timeout: .seconds(2))
                if batch.isEmpty { break }
                for m in batch
                where m.headers[Header.part].flatMap(Int.init).map({ $0 + 1 })
                    == m.headers[Header.parts].flatMap(Int.init)
                {
                    bases.append(try baseLocation(endingWith: m, target))
                }
            }
        } catch let error as ReplicationError {
            throw error
        } catch {
            throw ReplicationError(.server, "listing the bases of stream \(target.stream): \(error)")
        }
        return bases
    }

    /// The payload of the schema record the base at `location` starts with, read from its first
    /// message (the whole base when the record runs past it), opened with `keys` when sealed.
    ///
    /// - Throws: ``ReplicationError``; ``StoreError`` (code `journal`) when `keys` lack the
    ///   record's key or do not match it.
    func baseSchema(_ location: BaseLocation, _ target: ReplicationTarget, keys: ReplicaKeys) throws -> [UInt8] {
        let what = "the base ending at stream message \(location.lastStreamSequence)"
        var record: ShippedRecord?
        do {
            if let first = try message(stream: target.stream, sequence: location.firstStreamSequence),
                first.subject == target.baseSubject, first.payload.count >= 4
            {
                let blob = first.payload
                let n = (0..<4).reduce(0) { $0 | Int(blob[$1]) << (8 * $1) }
                if n <= blob.count - 4 { record = try RecordBlob.decode(Array(blob[0..<4 + n]), what: what).first }
            }
        } catch let error as ReplicationError {
            throw error
        } catch {
            throw ReplicationError(.server, "reading \(what): \(error)")
        }
        if record == nil { record = try readBase(location, target).first }
        guard let schema = record, schema.kind == .schema else {
            throw ReplicationError(.badMessage, "\(what) does not start with a schema record")
        }
        do { return try schema.payload(keyring: keys.keyring) } catch {
            if let failure = ReplicaKeys.keyFailure(error) { throw failure }
            throw ReplicationError(.badMessage, "\(what): its schema record: \(error)")
        }
    }

    /// Reads the base at `location`: its schema record, then its base records, checked.
    func readBase(_ location: BaseLocation, _ target: ReplicationTarget) throws(ReplicationError) -> [ShippedRecord] {
        var blob: [UInt8] = []
        do {
            let reader = try self.reader(
                stream: target.stream, subject: target.baseSubject, from: location.firstStreamSequence)
            defer { reader.close() }
            var next = location.firstStreamSequence
            while next <= location.lastStreamSequence {
                let batch = try reader.next(max: 16, timeout: .seconds(2))
                guard let first = batch.first, first.sequence == next else {
                    throw ReplicationError(
                        .unavailable,
                        "the base ending at stream message \(location.lastStreamSequence) lost its part \(next) (trimmed?)"
                    )
                }
                for m in batch where m.sequence <= location.lastStreamSequence {
                    guard m.sequence == next else {
                        throw ReplicationError(
                            .unavailable,
                            "the base ending at stream message \(location.lastStreamSequence) lost its part \(next) (trimmed?)"
                        )
                    }
                    blob.append(contentsOf: m.payload)
                    next += 1
                }
            }
        } catch let error as ReplicationError {
            throw error
        } catch {
            throw ReplicationError(
                .server, "reading the base ending at stream message \(location.lastStreamSequence): \(error)")
        }
        let records = try RecordBlob.decode(
            blob, what: "the base ending at stream message \(location.lastStreamSequence)")
        guard let schema = records.first, schema.kind == .schema, records.dropFirst().allSatisfy({ $0.kind == .base })
        else {
            throw ReplicationError(
                .badMessage,
                "the base ending at stream message \(location.lastStreamSequence) is not a schema record followed by base records"
            )
        }
        return records
    }
}

extension ReplicationError {
    /// The error for a failed JetStream call: `tooFewReplicas` for a stream that cannot keep
    /// the replicas asked for, `server` otherwise.
    init(_ error: JetStreamError, while doing: String) {
        self.init(error.code == .tooFewReplicas ? .tooFewReplicas : .server, "\(doing): \(error)")
    }
}
