public import Foundation
import GraphJournal
import NATSJetStream
public import ObjectGraph

extension Follower {
    /// Opens (creating if needed) the replica in `directory` and starts following `source`
    /// without the application's model code: every object is a ``DynamicObject``, as with
    /// ``ObjectStore/openDynamic(at:options:)``. For tools (`graph-journal follow`).
    ///
    /// The schema is the one the replica will hold once opened: an existing replica's own (the
    /// source's schema record in force when it stopped); for a new replica, the schema of the
    /// stream's newest base, which it starts from, or, when the stream holds no base, the first
    /// schema record of the log.
    ///
    /// ```swift
    /// let follower = try await Follower.start(at: replicaDirectory, source: target)
    /// ```
    ///
    /// The schema stays the one it started with: a transaction the writer ships under a later
    /// schema record that names an entity or an attribute this one lacks does not apply, and
    /// the follower stops (``Status/failed``).
    ///
    /// - Throws: ``ReplicationError``: `server`; `unavailable` when the stream does not exist,
    ///   or holds neither a base nor a schema record yet (the writer shipped nothing);
    ///   `JournalError` when the replica's journal is locked by another process or damaged; as
    ///   ``start(at:schema:source:options:)`` otherwise (``StoreError`` code `journal` with
    ///   the journal's `keyUnavailable` or `wrongKey` when the schema is sealed with a key
    ///   `options`' `journal.encryption` lacks or does not match).
    public static func start(
        at directory: URL, source: ReplicationTarget, options: StoreOptions = Follower.defaultOptions
    ) async throws -> Follower {
        let schema = try dynamicSchema(for: directory, source: source, keys: ReplicaKeys(options.journal.encryption))
        return try await start(at: directory, schema: schema, source: source, options: options)
    }

    /// The schema a replica in `directory` opens with, the directory made ready first (a new
    /// replica, or one the stream was trimmed past, gets the stream's newest base); sealed
    /// records open with `keys`, the replica's.
    static func dynamicSchema(for directory: URL, source: ReplicationTarget, keys: ReplicaKeys) throws -> Schema {
        let servers = source.servers.joined(separator: ",")
        let client: JetStreamClient
        do {
            client = try JetStreamClient(servers: source.servers, name: "objectgraph-follower", timeout: source.timeout)
        } catch {
            throw ReplicationError(error, while: "connecting to \(servers) for stream \(source.stream)")
        }
        defer { client.close() }
        // A follower of the application creates a missing stream and waits for its writer; one
        // without model code has no schema until the writer shipped one.
        do {
            _ = try client.streamState(source.stream)
        } catch  where error.code == .notFound {
            throw ReplicationError(.unavailable, "no stream \(source.stream) on \(servers): nothing to follow")
        } catch {
            throw ReplicationError(error, while: "reading stream \(source.stream)")
        }
        try installNewestBaseIfNew(directory, client: client, target: source, keys: keys)
        let bytes: [UInt8]
        if let local = try localSchema(directory, keys: keys) {
            bytes = local
        } else if let first = try firstLogSchema(client, source, keys: keys) {
            bytes = first
        } else {
            throw ReplicationError(
                .unavailable,
                "stream \(source.stream) holds no base and no schema record on \(source.logSubject) yet (its writer shipped nothing): there is no schema to open the replica with"
            )
        }
        do {
            return try Schema(dynamic: try StoredSchema.decode(bytes))
        } catch {
            throw ReplicationError(.badMessage, "the schema of stream \(source.stream) does not decode: \(error)")
        }
    }

    /// The schema recorded in the replica's journal, or nil when there is no journal yet, or
    /// one without a schema record.
    private static func localSchema(_ directory: URL, keys: ReplicaKeys) throws -> [UInt8]? {
        guard hasJournal(directory) else { return nil }
        let journal = try ReplicaKeys.writing {
            try Journal.open(directory: directory.path, options: keys.journalOptions())
        }
        let schema = journal.schema
        try? journal.close()
        return schema
    }

    /// The payload of the first schema record on the log subject, or nil when the log holds
    /// none. Throws `unavailable` when the log does not start at the writer's first record:
    /// a replica built from it would lack what was trimmed.
    private static func firstLogSchema(
        _ client: JetStreamClient, _ source: ReplicationTarget, keys: ReplicaKeys
    ) throws -> [UInt8]? {
        let reader: JetStreamReader
        do { reader = try client.reader(stream: source.stream, subject: source.logSubject, from: 1) } catch {
            throw ReplicationError(error, while: "reading \(source.logSubject)")
        }
        defer { reader.close() }
        var assembler = RecordAssembler()
        var first = true
        while true {
            let batch: [StoredMessage]
            do { batch = try reader.next(max: 256, timeout: .milliseconds(300)) } catch {
                throw ReplicationError(error, while: "reading \(source.logSubject)")
            }
            if batch.isEmpty { return nil }
            for message in batch {
                let info = try LogMessageInfo(message)
                if first && info.previous != 0 {
                    throw ReplicationError(
                        .unavailable,
                        "stream \(source.stream) holds no base, and its log starts at record \(info.first), not the writer's first: the records before were trimmed; a new replica needs a base (compact the writer)"
                    )
                }
                first = false
                guard let batch = try assembler.add(message, info),
                    let record = batch.records.first(where: { $0.kind == .schema })
                else { continue }
                do { return try record.payload(keyring: keys.keyring) } catch {
                    if let failure = ReplicaKeys.keyFailure(error) { throw failure }
                    throw ReplicationError(
                        .badMessage,
                        "the schema record \(record.sequence) at stream message \(message.sequence): \(error)")
                }
            }
        }
    }
}
