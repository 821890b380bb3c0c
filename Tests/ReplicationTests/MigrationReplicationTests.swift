import Foundation
import ObjectGraph
import ObjectGraphReplication
import ObjectGraphTestSupport
import Testing

// Two versions of a catalogue's model, as a writer and its followers hold them across an
// upgrade: version 2 turns the size into a string with its unit and adds a tier computed from
// it, so going from 1 to 2 takes a custom stage.

enum CatalogueV1: VersionedSchema {
    static let versionIdentifier = "1"
    static var models: [any Entity.Type] { [Item.self] }

    @Entity final class Item {
        @Attribute(.unique) var name: String = ""
        var size: Int = 0
    }
}

enum CatalogueV2: VersionedSchema {
    static let versionIdentifier = "2"
    static var models: [any Entity.Type] { [Item.self] }

    @Entity final class Item {
        @Attribute(.unique) var name: String = ""
        var size: String = ""
        var tier: String = ""
    }
}

enum CataloguePlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [CatalogueV1.self, CatalogueV2.self] }
    static var stages: [MigrationStage] {
        [
            .custom(fromVersion: CatalogueV1.self, toVersion: CatalogueV2.self) { migration in
                for old in try migration.old.fetch(FetchDescriptor<CatalogueV1.Item>()) {
                    guard let new = try migration.counterpart(of: old, as: CatalogueV2.Item.self) else { continue }
                    new.size = "\(old.size) kB"
                    new.tier = old.size >= 20 ? "large" : "small"
                }
            }
        ]
    }
}

/// Version 3 adds an attribute with a default: a lightweight stage from version 2.
enum CatalogueV3: VersionedSchema {
    static let versionIdentifier = "3"
    static var models: [any Entity.Type] { [Item.self] }

    @Entity final class Item {
        @Attribute(.unique) var name: String = ""
        var size: String = ""
        var tier: String = ""
        var stock: Int = 7
    }
}

enum CataloguePlanToThree: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [CatalogueV1.self, CatalogueV2.self, CatalogueV3.self] }
    static var stages: [MigrationStage] {
        CataloguePlan.stages + [.lightweight(fromVersion: CatalogueV2.self, toVersion: CatalogueV3.self)]
    }
}

/// Version 1's items as name → size.
private func itemsV1(_ objects: [CatalogueV1.Item]) -> [String: Int] {
    Dictionary(uniqueKeysWithValues: objects.map { ($0.name, $0.size) })
}

/// Version 2's items as name → size/tier.
private func itemsV2(_ objects: [CatalogueV2.Item]) -> [String: String] {
    Dictionary(uniqueKeysWithValues: objects.map { ($0.name, "\($0.size)/\($0.tier)") })
}

/// Version 3's items as name → size/tier/stock.
private func itemsV3(_ objects: [CatalogueV3.Item]) -> [String: String] {
    Dictionary(uniqueKeysWithValues: objects.map { ($0.name, "\($0.size)/\($0.tier)/\($0.stock)") })
}

/// Saves `count` items of version 1 in one transaction.
private func saveV1(_ context: ModelContext, round: Int, count: Int = 3) throws {
    for i in 0..<count {
        let item = try context.insert(CatalogueV1.Item.self)
        item.name = "item-\(round)-\(i)"
        item.size = round * 10 + i
    }
    try context.save()
}

@Suite(
    .serialized,
    .disabled(if: NATSServer.executable == nil, "nats-server is not installed; Tools/install-deps.sh installs Debian's")
)
struct MigrationReplicationTests {
    @Test func aMigrationShipsAsABaseThatNewCodeInstallsAndOldCodeRefuses() async throws {
        let v1 = try Schema(versioned: CatalogueV1.self)
        let v2 = try Schema(versioned: CatalogueV2.self)
        let server = try NATSServer.start()
        let target = ReplicationTarget(servers: [server.url], stream: freshStream())
        let directory = replicationDirectory()
        let oldReplica = replicationDirectory()
        let upgradedReplica = replicationDirectory()

        // Version 1: the writer saves, both replicas follow with the old code.
        var writer = try ReplicatedStore.open(at: directory, schema: v1, target: target)
        for round in 0..<4 {
            for i in 0..<3 {
                let item = try writer.context.insert(CatalogueV1.Item.self)
                item.name = "item-\(round)-\(i)"
                item.size = round * 10 + i
            }
            try writer.context.save()
        }
        let lastV1 = writer.store.stats.lastSequence
        try writer.shipper.waitShipped(through: lastV1, timeout: eventBound)
        let old = try await ObjectStore.follow(at: oldReplica, schema: v1, source: target)
        #expect(await old.waitUntilApplied(lastV1, timeout: eventBound))
        let before = try await ObjectStore.follow(at: upgradedReplica, schema: v1, source: target)
        #expect(await before.waitUntilApplied(lastV1, timeout: eventBound))
        try await before.stop()
        let oldState = itemsV1(try old.store.snapshot.objects(of: CatalogueV1.Item.self))
        #expect(oldState.count == 12)
        try writer.close()

        // The writer comes back with version 2 and the plan: it migrates and saves on.
        var options = StoreOptions()
        options.migrationPlan = CataloguePlan.self
        writer = try ReplicatedStore.open(at: directory, schema: v2, options: options, target: target)
        #expect(writer.store.migratedFrom == "1")
        let item = try #require(try writer.context.object(CatalogueV2.Item.self, where: \.name, equals: "item-3-2"))
        #expect(item.size == "32 kB" && item.tier == "large")
        item.size = "33 kB"
        let added = try writer.context.insert(CatalogueV2.Item.self)
        added.name = "item-4-0"
        added.size = "1 kB"
        added.tier = "small"
        try writer.context.save()
        writer.context.delete(
            try #require(try writer.context.object(CatalogueV2.Item.self, where: \.name, equals: "item-0-0")))
        try writer.context.save()
        let last = writer.store.stats.lastSequence
        try writer.shipper.waitShipped(through: last, timeout: eventBound)
        let expected = itemsV2(try writer.context.fetch(FetchDescriptor<CatalogueV2.Item>()))

        // The old code stops at version 2, naming both versions, its replica as it was.
        #expect(!(await old.waitUntilApplied(last, timeout: eventBound)))
        let refusal = try #require(old.status.storeError)
        #expect(refusal.code == .migration)
        #expect(refusal.storedVersion == "2" && refusal.modelVersion == "1")
        #expect(old.status.appliedSequence == lastV1)
        #expect(itemsV1(try old.store.snapshot.objects(of: CatalogueV1.Item.self)) == oldState)
        let oldRecords = old.store.shippingSource.lastSequence
        try await old.stop()
        // Started again, it refuses again and changes nothing: no loop that rewrites the replica.
        let again = try await ObjectStore.follow(at: oldReplica, schema: v1, source: target)
        #expect(!(await again.waitUntilApplied(last, timeout: eventBound)))
        #expect(again.status.storeError?.storedVersion == "2")
        try await again.stop()
        var readOnly = StoreOptions()
        readOnly.readOnly = true
        let reopened = try ObjectStore.open(at: oldReplica, schema: v1, options: readOnly)
        #expect(itemsV1(try reopened.context.fetch(FetchDescriptor<CatalogueV1.Item>())) == oldState)
        #expect(reopened.stats.lastSequence == oldRecords)
        try reopened.close()

        // The new code (its options name the plan, which a replica ignores) replaces its
        // version-1 replica by the writer's migrated base, then applies what followed.
        var followerOptions = Follower.defaultOptions
        followerOptions.migrationPlan = CataloguePlan.self
        let upgraded = try await ObjectStore.follow(
            at: upgradedReplica, schema: v2, source: target, options: followerOptions)
        #expect(await upgraded.waitUntilApplied(last, timeout: eventBound))
        #expect(upgraded.status.failed == nil)
        #expect(itemsV2(try upgraded.store.snapshot.objects(of: CatalogueV2.Item.self)) == expected)
        #expect(expected["item-3-2"] == "33 kB/large" && expected["item-0-0"] == nil && expected.count == 12)
        try await upgraded.stop()
        // A new replica of the new code starts from the same base.
        let fresh = try await ObjectStore.follow(at: replicationDirectory(), schema: v2, source: target)
        #expect(await fresh.waitUntilApplied(last, timeout: eventBound))
        #expect(itemsV2(try fresh.store.snapshot.objects(of: CatalogueV2.Item.self)) == expected)
        try await fresh.stop()
        try writer.close()
    }

    @Test func savesTheStreamNeverAcknowledgedReachNewFollowersThroughTheBaseAndLightweightStagesShipOne()
        async throws
    {
        let v2 = try Schema(versioned: CatalogueV2.self)
        let v3 = try Schema(versioned: CatalogueV3.self)
        let server = try NATSServer.start()
        let target = ReplicationTarget(servers: [server.url], stream: freshStream(), timeout: .seconds(10))
        let directory = replicationDirectory()
        var writer = try ReplicatedStore.open(
            at: directory, schema: try Schema(versioned: CatalogueV1.self), target: target)
        for round in 0..<2 { try saveV1(writer.context, round: round) }
        try writer.shipper.waitShipped(through: writer.store.stats.lastSequence, timeout: eventBound)
        // The servers go away; version 1 saves on locally, then the writer stops.
        server.kill()
        for round in 2..<4 { try saveV1(writer.context, round: round) }
        #expect(writer.shipper.status.shippedSequence < writer.store.stats.lastSequence)
        writer.shipper.stop()
        try writer.store.close()
        try server.restart()

        // A follower of version 2 started before the writer migrated refuses, its replica kept.
        let early = replicationDirectory()
        let waiting = try await ObjectStore.follow(at: early, schema: v2, source: target)
        #expect(!(await waiting.waitUntilApplied(1, timeout: eventBound)))
        #expect(waiting.status.storeError?.storedVersion == "1" && waiting.status.storeError?.modelVersion == "2")
        try await waiting.stop()

        // Migrated to version 2 (custom stage): the unshipped saves are in the base.
        var options = StoreOptions()
        options.migrationPlan = CataloguePlan.self
        writer = try ReplicatedStore.open(at: directory, schema: v2, options: options, target: target)
        #expect(writer.store.migratedFrom == "1" && writer.store.migrationWroteBase)
        try writer.shipper.waitShipped(through: writer.store.stats.lastSequence, timeout: eventBound)
        let follower = try await ObjectStore.follow(at: replicationDirectory(), schema: v2, source: target)
        #expect(await follower.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound))
        let migrated = itemsV2(try writer.context.fetch(FetchDescriptor<CatalogueV2.Item>()))
        #expect(migrated.count == 12 && migrated["item-3-2"] == "32 kB/large")
        #expect(itemsV2(try follower.store.snapshot.objects(of: CatalogueV2.Item.self)) == migrated)
        // The early follower, started again once the writer migrated, takes the base.
        let resumed = try await ObjectStore.follow(at: early, schema: v2, source: target)
        #expect(await resumed.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound))
        #expect(itemsV2(try resumed.store.snapshot.objects(of: CatalogueV2.Item.self)) == migrated)
        try await resumed.stop()
        try writer.close()

        // Version 3 (lightweight, nothing rewritten by the store itself): shipped as a base too.
        options.migrationPlan = CataloguePlanToThree.self
        writer = try ReplicatedStore.open(at: directory, schema: v3, options: options, target: target)
        #expect(writer.store.migratedFrom == "2" && !writer.store.migrationWroteBase)
        let item = try #require(try writer.context.object(CatalogueV3.Item.self, where: \.name, equals: "item-0-1"))
        item.stock = 1
        try writer.context.save()
        try writer.shipper.waitShipped(through: writer.store.stats.lastSequence, timeout: eventBound)
        let expected = itemsV3(try writer.context.fetch(FetchDescriptor<CatalogueV3.Item>()))
        #expect(expected["item-0-1"] == "1 kB/small/1" && expected["item-0-2"] == "2 kB/small/7")
        // The version-2 follower stops at it; a version-3 one ends with the writer's state.
        #expect(!(await follower.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound)))
        #expect(follower.status.storeError?.storedVersion == "3" && follower.status.storeError?.modelVersion == "2")
        try await follower.stop()
        let upgraded = try await ObjectStore.follow(at: replicationDirectory(), schema: v3, source: target)
        #expect(await upgraded.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound))
        #expect(itemsV3(try upgraded.store.snapshot.objects(of: CatalogueV3.Item.self)) == expected)
        try await upgraded.stop()
        try writer.close()
    }
}
