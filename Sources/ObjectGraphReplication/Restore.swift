public import Foundation
public import GraphJournal
import NATSJetStream
import ObjectGraph

/// Point-in-time recovery from a stream: the newest base at or before the target, then the
/// log records after it up to the target.
public enum Restore {
    /// How far to restore.
    public enum Target: Sendable, Hashable {
        /// Up to and including the writer's record of this sequence.
        case sequence(UInt64)
        /// Up to the last record the servers stored at or before this time.
        case time(Date)
        /// Everything the stream holds.
        case latest
    }

    /// What a restore did.
    public struct Report: Sendable, Hashable {
        /// The writer's sequence the base covered (0: none, replayed from the start).
        public var baseCovers: UInt64
        /// Log records applied after the base.
        public var recordsApplied: Int
        /// The writer's record applied last.
        public var lastSequence: UInt64
        /// Seconds the restore took.
        public var seconds: Double
    }

    /// Rebuilds a store in `directory` (which must not exist) from `source` as it was at
    /// `target`. Needs no model code: the store's schema comes from the stream. The base and
    /// the records are written to the new journal as they came, each checked by its checksum
    /// on the way, without decompressing or replaying them: the store's first open replays
    /// them (`graph-journal verify` checks them without opening).
    ///
    /// ```swift
    /// let report = try Restore.run(from: target, to: URL(fileURLWithPath: "/var/lib/pkgd/restored"),
    ///                              at: .sequence(41_200))
    /// ```
    ///
    /// The stream of an encrypted writer carries its records sealed; they are written sealed,
    /// as they came, and the restored store is encrypted with `encryption`, which must hold the
    /// writer's keys (open the store with the same encryption):
    ///
    /// ```swift
    /// try Restore.run(from: target, to: directory, encryption: JournalEncryption(key: key))
    /// ```
    ///
    /// - Parameter encryption: the writer's keys, for a stream of sealed records; nil for a
    ///   writer without encryption.
    /// - Throws: ``ReplicationError``: `unavailable` when no base is at or before the target
    ///   and the stream no longer starts at the writer's first record; `server`, `badMessage`;
    ///   ``StoreError`` from the local store: code `journal` with the journal's
    ///   `keyUnavailable` or `wrongKey` (naming the key) when a record is sealed with a key
    ///   `encryption` lacks or does not match, `notEncrypted` when `encryption` is given and
    ///   the writer did not seal its records. A failed restore removes what it wrote.
    @discardableResult
    public static func run(
        from source: ReplicationTarget, to directory: URL, at target: Target = .latest,
        encryption: JournalEncryption? = nil
    ) throws -> Report {
        let start = ContinuousClock.now
        guard !FileManager.default.fileExists(atPath: directory.path) else {
            throw ReplicationError(.store, "\(directory.path) exists; a restore writes a new store")
        }
        let client: JetStreamClient
        do {
            client = try JetStreamClient(servers: source.servers, name: "objectgraph-restore", timeout: source.timeout)
        } catch {
            throw ReplicationError(error, while: "connecting to \(source.servers.joined(separator: ","))")
        }
        defer { client.close() }
        do {
            let report = try ReplicaKeys.writing {
                try restore(client, source, directory, target, ReplicaKeys(encryption))
            }
            let elapsed = (ContinuousClock.now - start).components
            return Report(
                baseCovers: report.baseCovers, recordsApplied: report.recordsApplied, lastSequence: report.lastSequence,
                seconds: Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18)
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    private static func restore(
        _ client: JetStreamClient, _ source: ReplicationTarget, _ directory: URL, _ target: Target, _ keys: ReplicaKeys
    ) throws -> Report {
        // The newest base at or before the target.
        let bases = try client.allBases(source)
        let base = bases.last { b in
            switch target {
            case .sequence(let s): b.covers <= s
            case .time(let t): b.time <= t
            case .latest: true
            }
        }
        var readFrom: UInt64 = 1
        var applied: UInt64 = 0
        var schema: [UInt8]?
        // The records are written as they came, with no replay: each was checked (its
        // checksum) on the way, and the store's first open replays them.
        var journalOptions = keys.journalOptions(JournalOptions(durability: .none))
        journalOptions.segmentSize = 256 << 20
        let journal = try Journal.open(directory: directory.path, options: journalOptions)
        defer { try? journal.close() }
        if let base {
            let records = try client.readBase(base, source)
            try keys.checkSealed(base: records, what: "the base ending at stream message \(base.lastStreamSequence)")
            try journal.compact(
                shipped: records,
                origin: base.origin)
            schema = journal.schema
            readFrom = base.lastStreamSequence + 1
            applied = base.covers
        }
        var assembler = RecordAssembler()
        var count = 0
        let reader: JetStreamReader
        do { reader = try client.reader(stream: source.stream, subject: source.logSubject, from: readFrom) } catch {
            throw ReplicationError(error, while: "reading \(source.logSubject) from stream message \(readFrom)")
        }
        defer { reader.close() }
        let last: UInt64
        do {
            last = try client.lastMessage(stream: source.stream, subject: source.logSubject)?.sequence ?? 0
        } catch {
            throw ReplicationError(error, while: "reading stream \(source.stream)")
        }
        var position = readFrom - 1
        var first = true
        reading: while position < last {
            let messages: [StoredMessage]
            do { messages = try reader.next(max: 512, timeout: .seconds(2)) } catch {
                throw ReplicationError(error, while: "reading \(source.logSubject)")
            }
            if messages.isEmpty { break }
            for message in messages {
                position = message.sequence
                if case .time(let t) = target, message.time > t { break reading }
                let info = try LogMessageInfo(message)
                guard let batch = try assembler.add(message, info) else { continue }
                for (i, record) in batch.records.enumerated() {
                    if case .sequence(let s) = target, record.sequence > s { break reading }
                    if record.sequence <= applied { continue }
                    let previous = i == 0 ? batch.previous : batch.records[i - 1].sequence
                    if first && base == nil && previous != 0 {
                        throw ReplicationError(
                            .unavailable,
                            "stream \(source.stream) holds no base at or before the target, and its log starts at record \(record.sequence), not the first: the records before were trimmed"
                        )
                    }
                    first = false
                    switch record.kind {
                    case .schema:
                        schema = try keys.payload(of: record)
                    case .transaction:
                        guard let schema else {
                            throw ReplicationError(
                                .badMessage, "record \(record.sequence) comes before any schema record")
                        }
                        try journal.append(
                            shipped: record, schema: schema,
                            origin: batch.position(of: i).encoded(stream: source.stream))
                        count += 1
                    case .base:
                        throw ReplicationError(
                            .badMessage, "a base record on the log subject at stream message \(message.sequence)")
                    }
                    applied = record.sequence
                }
            }
        }
        guard base != nil || count > 0 || schema != nil else {
            throw ReplicationError(.unavailable, "stream \(source.stream) holds nothing at or before the target")
        }
        if base == nil, count == 0, let schema {
            // Only a schema so far: a store with no object.
            try journal.compact(base: [], schema: schema, origin: nil, proceed: { true })
        }
        try journal.close()
        return Report(baseCovers: base?.covers ?? 0, recordsApplied: count, lastSequence: applied, seconds: 0)
    }
}
