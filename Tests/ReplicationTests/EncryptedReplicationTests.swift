import Foundation
import GraphJournal
import NATSJetStream
import ObjectGraph
import ObjectGraphReplication
import ObjectGraphTestSupport
import Testing

/// Store options that seal the journal with `key` (or, with `keys`, with the first of them).
func encryptedOptions(_ base: StoreOptions = StoreOptions(), key: JournalKey) -> StoreOptions {
    var options = base
    options.journal.encryption = JournalEncryption(key: key)
    return options
}

/// Saves packages whose names are `markers`, in one transaction.
func saveMarkers(_ context: ModelContext, _ markers: [String]) throws {
    for (i, marker) in markers.enumerated() {
        let p = try context.insert(Pkg.self)
        p.name = marker
        p.version = "v-\(marker)"
        p.size = i
    }
    try context.save()
}

/// Strings that occur nowhere unless saved: what a store's records must not show in the clear.
func plaintextMarkers(_ count: Int) -> [String] {
    (0..<count).map { "confidential-\($0)-\(UUID().uuidString)" }
}

/// The markers found in the clear in any message of `target`'s stream, payload or header.
func markersInStream(_ target: ReplicationTarget, _ markers: [String]) throws -> Set<String> {
    let client = try JetStreamClient(servers: target.servers)
    defer { client.close() }
    let last = try client.streamState(target.stream).lastSequence
    var found: Set<String> = []
    for sequence in 1...max(last, 1) {
        guard let message = try client.message(stream: target.stream, sequence: sequence) else { continue }
        let headers = message.headers.map { "\($0.key)=\($0.value)" }.joined(separator: "\n")
        for marker in markers where contains(message.payload, Array(marker.utf8)) || headers.contains(marker) {
            found.insert(marker)
        }
    }
    return found
}

/// Whether `needle` occurs in `haystack`.
private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return false }
    var i = 0
    while i + needle.count <= haystack.count {
        if haystack[i] == needle[0], haystack[i..<i + needle.count].elementsEqual(needle) { return true }
        i += 1
    }
    return false
}

/// The journal error a replica or a restore met, when it is a key failure of its local store.
func keyFailure(_ error: (any Error)?) -> JournalError.Code? {
    guard let error = error as? StoreError, error.code == .journal else { return nil }
    return error.journalError?.code
}

@Suite(
    .serialized,
    .disabled(if: NATSServer.executable == nil, "nats-server is not installed; Tools/install-deps.sh installs Debian's")
)
struct EncryptedReplicationTests {
    @Test func anEncryptedWriterShipsSealedRecordsThatAFollowerWithTheKeyApplies() async throws {
        let server = try NATSServer.start()
        let key = try JournalKey.generate(id: "repl-2026-11")
        let target = ReplicationTarget(servers: [server.url], stream: freshStream())
        let markers = plaintextMarkers(6)
        let writer = try ReplicatedStore.open(
            at: replicationDirectory(), schema: pkgSchema, options: encryptedOptions(key: key), target: target)
        for round in 0..<5 { try syncRound(writer.context, round: round) }
        try saveMarkers(writer.context, Array(markers[0..<3]))
        // A base in the stream: a new follower installs it, then applies the log after it.
        try writer.compact()
        for round in 5..<10 { try syncRound(writer.context, round: round) }
        try saveMarkers(writer.context, Array(markers[3...]))

        let replica = replicationDirectory()
        let follower = try await ObjectStore.follow(
            at: replica, schema: pkgSchema, source: target, options: encryptedOptions(Follower.defaultOptions, key: key)
        )
        #expect(await follower.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound))
        #expect(follower.status.failed == nil)
        #expect(try state(follower.store.snapshot) == state(writer.context))
        // It keeps up with saves while it follows.
        for round in 10..<15 { try syncRound(writer.context, round: round) }
        #expect(await follower.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound))
        #expect(try state(follower.store.snapshot) == state(writer.context))
        try await follower.stop()
        // A follower without model code (the schema from the stream) opens it with the key too.
        let dynamic = try await Follower.start(
            at: replicationDirectory(), source: target, options: encryptedOptions(Follower.defaultOptions, key: key))
        #expect(await dynamic.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound))
        #expect(dynamic.status.failed == nil, "\(dynamic.status)")
        try await dynamic.stop()

        // The servers never saw a marker, in any message's payload or headers.
        #expect(try markersInStream(target, markers).isEmpty)

        // The replica keeps the records sealed: it does not open without the key.
        let refused = #expect(throws: StoreError.self) { try ObjectStore.open(at: replica, schema: pkgSchema) }
        #expect(keyFailure(refused) == .keyUnavailable(keyID: key.id))
        let reopened = try ObjectStore.open(at: replica, schema: pkgSchema, options: encryptedOptions(key: key))
        #expect(try reopened.context.object(Pkg.self, where: \.name, equals: markers[5]) != nil)
        try reopened.close()
        try writer.close()

        // The check would see them: a writer without encryption ships the markers in the clear.
        let plainTarget = ReplicationTarget(servers: [server.url], stream: freshStream())
        let plain = try ReplicatedStore.open(at: replicationDirectory(), schema: pkgSchema, target: plainTarget)
        try saveMarkers(plain.context, markers)
        try plain.compact()
        // Shipping runs behind the saves: wait for it before reading the stream.
        try plain.shipper.waitShipped(through: plain.store.stats.lastSequence, timeout: eventBound)
        #expect(try !markersInStream(plainTarget, markers).isEmpty)
        try plain.close()
    }

    @Test func aFollowerWithoutTheKeyOrWithAnotherAppliesNothingAndNamesTheKey() async throws {
        let server = try NATSServer.start()
        let key = try JournalKey.generate(id: "repl-key-a")
        let impostor = try JournalKey.generate(id: key.id)
        let target = ReplicationTarget(servers: [server.url], stream: freshStream())
        let writer = try ReplicatedStore.open(
            at: replicationDirectory(), schema: pkgSchema, options: encryptedOptions(key: key), target: target)
        for round in 0..<5 { try syncRound(writer.context, round: round) }

        // The stream holds no base yet: the followers start with an empty replica and stop at
        // the writer's first record, its schema.
        let cases: [(StoreOptions, JournalError.Code)] = [
            (Follower.defaultOptions, .keyUnavailable(keyID: key.id)),
            (encryptedOptions(Follower.defaultOptions, key: impostor), .wrongKey(keyID: key.id)),
        ]
        for (options, expected) in cases {
            let replica = replicationDirectory()
            let follower = try await ObjectStore.follow(
                at: replica, schema: pkgSchema, source: target, options: options)
            try await eventually("the follower to stop on a sealed record") { follower.status.failed != nil }
            let status = follower.status
            #expect(keyFailure(status.storeError) == expected, "\(status)")
            #expect(status.failed?.contains(key.id) == true, "\(status)")
            #expect(status.recordsApplied == 0 && status.appliedSequence == 0)
            #expect(try follower.store.snapshot.fetchCount(FetchDescriptor<Pkg>()) == 0)
            try await follower.stop()
            // Nothing of the writer's was stored: the replica opens as it was, empty.
            let reopened = try ObjectStore.open(at: replica, schema: pkgSchema, options: options)
            #expect(reopened.origin == nil)
            #expect(try reopened.context.fetchCount(FetchDescriptor<Pkg>()) == 0)
            try reopened.close()
        }

        // With a base in the stream, a new follower refuses it at start and installs nothing.
        try writer.compact()
        for (options, expected) in cases {
            let replica = replicationDirectory()
            let error = await #expect(throws: StoreError.self) {
                _ = try await ObjectStore.follow(at: replica, schema: pkgSchema, source: target, options: options)
            }
            #expect(keyFailure(error) == expected, "\(String(describing: error))")
            #expect(error?.message.contains(key.id) == true)
            #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("MANIFEST").path))
            // Without model code: the base's schema does not open either.
            let dynamicError = await #expect(throws: StoreError.self) {
                _ = try await Follower.start(at: replica, source: target, options: options)
            }
            #expect(keyFailure(dynamicError) == expected, "\(String(describing: dynamicError))")
            #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("MANIFEST").path))
        }
        try writer.close()
    }

    @Test func anEncryptedReplicaOfAWriterThatDoesNotSealRefusesItsRecords() async throws {
        let server = try NATSServer.start()
        let key = try JournalKey.generate(id: "replica-only")
        let target = ReplicationTarget(servers: [server.url], stream: freshStream())
        let writer = try ReplicatedStore.open(at: replicationDirectory(), schema: pkgSchema, target: target)
        for round in 0..<3 { try syncRound(writer.context, round: round) }
        let options = encryptedOptions(Follower.defaultOptions, key: key)

        // On the log: the first transaction is refused before it is written.
        let follower = try await ObjectStore.follow(
            at: replicationDirectory(), schema: pkgSchema, source: target, options: options)
        try await eventually("the follower to stop on a record its writer did not seal") {
            follower.status.failed != nil
        }
        #expect(keyFailure(follower.status.storeError) == .notEncrypted, "\(follower.status)")
        #expect(follower.status.recordsApplied == 0)
        #expect(try follower.store.snapshot.fetchCount(FetchDescriptor<Pkg>()) == 0)
        try await follower.stop()

        // A base: refused before it is installed; a restore likewise, leaving nothing.
        try writer.compact()
        let replica = replicationDirectory()
        let refused = await #expect(throws: StoreError.self) {
            _ = try await ObjectStore.follow(at: replica, schema: pkgSchema, source: target, options: options)
        }
        #expect(keyFailure(refused) == .notEncrypted, "\(String(describing: refused))")
        #expect(refused?.message.contains("of the base ending at stream message") == true)
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("MANIFEST").path))
        let restored = replicationDirectory()
        let restoreError = #expect(throws: StoreError.self) {
            try Restore.run(from: target, to: restored, encryption: JournalEncryption(key: key))
        }
        #expect(keyFailure(restoreError) == .notEncrypted, "\(String(describing: restoreError))")
        #expect(!FileManager.default.fileExists(atPath: restored.path))
        try writer.close()
    }

    @Test func aRestoreOfAnEncryptedStreamNeedsTheKey() async throws {
        let server = try NATSServer.start()
        let key = try JournalKey.generate(id: "restore-key")
        let target = ReplicationTarget(servers: [server.url], stream: freshStream())
        let writer = try ReplicatedStore.open(
            at: replicationDirectory(), schema: pkgSchema, options: encryptedOptions(key: key), target: target)
        for round in 0..<5 { try syncRound(writer.context, round: round) }
        try writer.compact()
        for round in 5..<8 { try syncRound(writer.context, round: round) }
        let midway = writer.store.stats.lastSequence
        let atMidway = try state(writer.context)
        for round in 8..<12 { try syncRound(writer.context, round: round) }
        try writer.shipper.waitShipped(through: writer.store.stats.lastSequence, timeout: eventBound)
        let latest = try state(writer.context)
        try writer.close()

        let encryption = JournalEncryption(key: key)
        for (point, expected) in [(Restore.Target.latest, latest), (.sequence(midway), atMidway)] {
            let restored = replicationDirectory()
            let report = try Restore.run(from: target, to: restored, at: point, encryption: encryption)
            #expect(report.baseCovers > 0 && report.recordsApplied > 0)
            let store = try ObjectStore.open(at: restored, schema: pkgSchema, options: encryptedOptions(key: key))
            #expect(try state(store.context) == expected)
            try store.close()
            // What it wrote is sealed as the writer sealed it.
            let refused = #expect(throws: StoreError.self) { try ObjectStore.open(at: restored, schema: pkgSchema) }
            #expect(keyFailure(refused) == .keyUnavailable(keyID: key.id))
        }

        // Without the key, or with another under its name: a clear refusal, nothing left behind.
        let failures: [(JournalEncryption?, JournalError.Code)] = [
            (nil, .keyUnavailable(keyID: key.id)),
            (JournalEncryption(key: try JournalKey.generate(id: key.id)), .wrongKey(keyID: key.id)),
        ]
        for (encryption, expected) in failures {
            let restored = replicationDirectory()
            let error = #expect(throws: StoreError.self) {
                try Restore.run(from: target, to: restored, at: .latest, encryption: encryption)
            }
            #expect(keyFailure(error) == expected, "\(String(describing: error))")
            #expect(error?.message.contains(key.id) == true)
            #expect(!FileManager.default.fileExists(atPath: restored.path))
        }
    }

    @Test func aPromotedStandbyOfAnEncryptedStoreGoesOnSealingAndAFollowerCrossesTheTakeover() async throws {
        let server = try NATSServer.start()
        let key = try JournalKey.generate(id: "failover-key")
        // A lease long enough that a loaded machine does not let it lapse by itself.
        let target = leasedTarget([server.url], ttl: .seconds(3))
        let markers = plaintextMarkers(4)
        let old = try ReplicatedStore.open(
            at: replicationDirectory(), schema: pkgSchema, options: encryptedOptions(key: key),
            target: asHolder(target, "old"))
        for round in 0..<5 { try syncRound(old.context, round: round) }
        try saveMarkers(old.context, Array(markers[0..<2]))
        let replicaOptions = encryptedOptions(Follower.defaultOptions, key: key)
        let follower = try await ObjectStore.follow(
            at: replicationDirectory(), schema: pkgSchema, source: target, options: replicaOptions)
        // The standby's writer options name no encryption: it keeps its replica's.
        let standby = try await ObjectStore.standby(
            at: replicationDirectory(), schema: pkgSchema, source: asHolder(target, "standby"), options: replicaOptions)
        #expect(await follower.waitUntilApplied(old.store.stats.lastSequence, timeout: eventBound))
        let before = try state(old.context)

        old.shipper.suspendLeaseRenewals(true)
        let writer = try await standby.promoted()
        #expect(try state(writer.context) == before)
        for round in 5..<10 { try syncRound(writer.context, round: round) }
        try saveMarkers(writer.context, Array(markers[2...]))

        #expect(await follower.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound))
        #expect(follower.status.failed == nil, "\(follower.status)")
        #expect(try state(follower.store.snapshot) == state(writer.context))
        #expect(try markersInStream(target, markers).isEmpty)

        // A restore across the takeover, with the key.
        let restored = replicationDirectory()
        try Restore.run(from: target, to: restored, at: .latest, encryption: JournalEncryption(key: key))
        let store = try ObjectStore.open(at: restored, schema: pkgSchema, options: encryptedOptions(key: key))
        #expect(try state(store.context) == state(writer.context))
        try store.close()

        try await follower.stop()
        try writer.close()
        old.shipper.suspendLeaseRenewals(false)
        _ = try? old.close()
    }
}
