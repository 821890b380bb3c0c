import Foundation
import GraphJournal
import NATSJetStream

/// The headers of the stream's messages (`Docs/Replication.md`, "Messages").
enum Header {
    /// The record's sequence in the writer's journal (log messages).
    static let sequence = "OG-Seq"
    /// The sequence of the log record shipped before this one (0 for the first): a follower
    /// that applied another one last has missed records.
    static let previous = "OG-Prev"
    /// `schema` or `transaction`.
    static let kind = "OG-Kind"
    /// This message's part of the record, from 0.
    static let part = "OG-Part"
    /// How many parts the record has.
    static let parts = "OG-Parts"
    /// The record's checksum as in its wire form (hex): a restarted writer compares it with its
    /// own record of that sequence.
    static let crc = "OG-CRC"
    /// A base's last record's sequence in the writer's journal (base messages): the base holds
    /// the state after every record up to it.
    static let covers = "OG-Covers"
}

/// One record being published: its wire form cut into parts.
struct OutgoingRecord {
    let record: ShippedRecord
    let previous: UInt64
    let parts: [ArraySlice<UInt8>]

    init(_ record: ShippedRecord, previous: UInt64, maxPart: Int) {
        self.record = record
        self.previous = previous
        self.parts = split(record.wire, maxPart: maxPart)
    }

    func headers(part: Int) -> [String: String] {
        [
            Header.sequence: String(record.sequence), Header.previous: String(previous),
            Header.kind: record.kind == .schema ? "schema" : "transaction",
            Header.part: String(part), Header.parts: String(parts.count),
            Header.crc: String(wireCRC(record.wire), radix: 16),
        ]
    }

    func messageID(part: Int) -> String { "\(record.sequence).\(part)" }
}

/// Cuts `bytes` into slices of at most `maxPart` bytes (one empty slice for no bytes).
func split(_ bytes: [UInt8], maxPart: Int) -> [ArraySlice<UInt8>] {
    guard !bytes.isEmpty else { return [bytes[...]] }
    return stride(from: 0, to: bytes.count, by: max(1, maxPart)).map { bytes[$0..<min($0 + max(1, maxPart), bytes.count)] }
}

/// The checksum field of a wire record.
func wireCRC(_ wire: [UInt8]) -> UInt32 {
    guard wire.count >= 4 else { return 0 }
    return UInt32(wire[0]) | UInt32(wire[1]) << 8 | UInt32(wire[2]) << 16 | UInt32(wire[3]) << 24
}

/// A log message's header fields, checked.
struct LogMessageInfo: Sendable {
    var sequence: UInt64
    var previous: UInt64
    var part: Int
    var parts: Int
    var crc: UInt32?

    init(_ message: StoredMessage) throws(ReplicationError) {
        guard let s = message.headers[Header.sequence].flatMap(UInt64.init),
              let p = message.headers[Header.previous].flatMap(UInt64.init),
              let part = message.headers[Header.part].flatMap(Int.init),
              let parts = message.headers[Header.parts].flatMap(Int.init), parts >= 1, part >= 0, part < parts
        else {
            throw ReplicationError(.badMessage, "stream message \(message.sequence) on \(message.subject) lacks the OG- headers a shipper writes")
        }
        sequence = s
        previous = p
        self.part = part
        self.parts = parts
        crc = message.headers[Header.crc].flatMap { UInt32($0, radix: 16) }
    }

    var isLastPart: Bool { part == parts - 1 }
}

/// Puts the parts of records back together, in stream order.
struct RecordAssembler {
    private var sequence: UInt64 = 0
    private var expected = 0
    private var bytes: [UInt8] = []
    /// The stream sequence of the record's last part, once complete.
    private(set) var lastStreamSequence: UInt64 = 0

    /// Adds a message; returns the record once its last part arrived. A part 0 starts over
    /// (a writer that republished a record from its start).
    mutating func add(_ message: StoredMessage, _ info: LogMessageInfo) throws(ReplicationError) -> (ShippedRecord, LogMessageInfo)? {
        if info.part == 0 {
            sequence = info.sequence
            expected = 0
            bytes.removeAll(keepingCapacity: true)
        }
        guard info.sequence == sequence, info.part == expected else {
            throw ReplicationError(
                .badMessage,
                "stream message \(message.sequence) is part \(info.part) of record \(info.sequence), expected part \(expected) of record \(sequence)")
        }
        bytes.append(contentsOf: message.payload)
        expected += 1
        guard info.isLastPart else { return nil }
        expected = 0
        lastStreamSequence = message.sequence
        do {
            let record = try ShippedRecord(wire: bytes)
            guard record.sequence == info.sequence else {
                throw ReplicationError(.badMessage, "stream message \(message.sequence) carries record \(record.sequence) under OG-Seq \(info.sequence)")
            }
            return (record, info)
        } catch let error as JournalError {
            throw ReplicationError(.badMessage, "record \(info.sequence) ending at stream message \(message.sequence): \(error)")
        } catch let error as ReplicationError {
            throw error
        } catch {
            throw ReplicationError(.badMessage, "\(error)")
        }
    }
}

/// A replica's position: the writer's record it applied last and the stream message that
/// carried (the last part of) it. Stored as the replica journal's origin.
struct Position: Sendable, Hashable {
    var recordSequence: UInt64
    var streamSequence: UInt64

    var encoded: [UInt8] {
        var bytes: [UInt8] = Array("OGR1".utf8)
        for v in [recordSequence, streamSequence] { for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) } }
        return bytes
    }

    init(recordSequence: UInt64, streamSequence: UInt64) {
        self.recordSequence = recordSequence
        self.streamSequence = streamSequence
    }

    init?(_ bytes: [UInt8]?) {
        guard let bytes, bytes.count == 20, bytes.prefix(4).elementsEqual("OGR1".utf8) else { return nil }
        func u64(_ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) } }
        recordSequence = u64(4)
        streamSequence = u64(12)
    }
}

/// A base as shipped: its records (schema first, then base records) in wire form, each
/// preceded by its length (u32 little-endian), cut into parts.
enum BaseBlob {
    static func encode(_ records: [ShippedRecord]) -> [UInt8] {
        var blob: [UInt8] = []
        blob.reserveCapacity(records.reduce(0) { $0 + 4 + $1.wire.count })
        for r in records {
            let n = UInt32(r.wire.count)
            for i in 0..<4 { blob.append(UInt8(truncatingIfNeeded: n >> (8 * UInt32(i)))) }
            blob.append(contentsOf: r.wire)
        }
        return blob
    }

    /// The schema payload and the base payloads of a blob, checked and decompressed.
    static func decode(_ blob: [UInt8], at streamSequence: UInt64) throws(ReplicationError) -> (schema: [UInt8], base: [[UInt8]]) {
        var offset = 0
        var schema: [UInt8]?
        var base: [[UInt8]] = []
        while offset < blob.count {
            guard blob.count - offset >= 4 else { throw ReplicationError(.badMessage, "base at stream message \(streamSequence): truncated length") }
            let n = (0..<4).reduce(0) { $0 | Int(blob[offset + $1]) << (8 * $1) }
            offset += 4
            guard n <= blob.count - offset else { throw ReplicationError(.badMessage, "base at stream message \(streamSequence): a record runs past the end") }
            do {
                let record = try ShippedRecord(wire: Array(blob[offset..<offset + n]))
                switch record.kind {
                case .schema where schema == nil && base.isEmpty: schema = try record.payload()
                case .base where schema != nil: base.append(try record.payload())
                default: throw ReplicationError(.badMessage, "base at stream message \(streamSequence): unexpected \(record.kind) record \(record.sequence)")
                }
            } catch let error as ReplicationError {
                throw error
            } catch {
                throw ReplicationError(.badMessage, "base at stream message \(streamSequence): \(error)")
            }
            offset += n
        }
        guard let schema else { throw ReplicationError(.badMessage, "base at stream message \(streamSequence) holds no schema record") }
        return (schema, base)
    }
}

/// A base found in the stream: its stream messages and what it covers.
struct BaseLocation: Sendable {
    var firstStreamSequence: UInt64
    var lastStreamSequence: UInt64
    var covers: UInt64
    var time: Date
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

    func baseLocation(endingWith last: StoredMessage, _ target: ReplicationTarget) throws(ReplicationError) -> BaseLocation {
        guard let covers = last.headers[Header.covers].flatMap(UInt64.init),
              let part = last.headers[Header.part].flatMap(Int.init), let parts = last.headers[Header.parts].flatMap(Int.init),
              part == parts - 1, UInt64(parts) <= last.sequence
        else {
            throw ReplicationError(.badMessage, "stream message \(last.sequence) on \(target.baseSubject) is not the last part of a base")
        }
        return BaseLocation(firstStreamSequence: last.sequence - UInt64(parts - 1), lastStreamSequence: last.sequence, covers: covers, time: last.time)
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
                for m in batch where m.headers[Header.part].flatMap(Int.init).map({ $0 + 1 }) == m.headers[Header.parts].flatMap(Int.init) {
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

    /// Reads the base at `location` and decodes it.
    func readBase(_ location: BaseLocation, _ target: ReplicationTarget) throws(ReplicationError) -> (schema: [UInt8], base: [[UInt8]]) {
        var blob: [UInt8] = []
        for seq in location.firstStreamSequence...location.lastStreamSequence {
            let m: StoredMessage?
            do { m = try message(stream: target.stream, sequence: seq) } catch {
                throw ReplicationError(.server, "reading base part at stream message \(seq): \(error)")
            }
            guard let m, m.subject == target.baseSubject else {
                throw ReplicationError(.unavailable, "the base ending at stream message \(location.lastStreamSequence) lost its part \(seq) (trimmed?)")
            }
            blob.append(contentsOf: m.payload)
        }
        return try BaseBlob.decode(blob, at: location.lastStreamSequence)
    }
}

extension ReplicationError {
    init(_ error: JetStreamError, while doing: String) {
        self.init(.server, "\(doing): \(error)")
    }
}
