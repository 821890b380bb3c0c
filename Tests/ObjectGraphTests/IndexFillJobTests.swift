import Foundation
import Testing

@testable import ObjectGraph

// Two versions of one entity, "Counter": the first has no unique constraint, so its stored
// objects may share keys; the second declares `key` unique.

final class CounterPlain: Entity {
    var _backing = ObjectBacking(entity: CounterPlain.entityDescription)
    static let entityDescription = EntityDescription(
        name: "Counter", type: CounterPlain.self,
        attributes: [
            .attribute("key", Int64.self, optional: true), .attribute("order", Int64.self),
            .attribute("label", String.self),
        ])
    init(_backing: ObjectBacking) { self._backing = _backing }
    var key: Int64? {
        get { _backing.getOptional(0, as: Int64.self) }
        set { _backing.setOptional(0, newValue) }
    }
    var order: Int64 {
        get { _backing.get(1, as: Int64.self) }
        set { _backing.set(1, newValue) }
    }
    var label: String {
        get { _backing.get(2, as: String.self) }
        set { _backing.set(2, newValue) }
    }
}

final class CounterUnique: Entity {
    var _backing = ObjectBacking(entity: CounterUnique.entityDescription)
    static let entityDescription = EntityDescription(
        name: "Counter", type: CounterUnique.self,
        attributes: [
            .attribute("key", Int64.self, optional: true), .attribute("order", Int64.self),
            .attribute("label", String.self),
        ],
        uniqueConstraints: [UniqueConstraint(["key"])])
    init(_backing: ObjectBacking) { self._backing = _backing }
    var order: Int64 {
        get { _backing.get(1, as: Int64.self) }
        set { _backing.set(1, newValue) }
    }
}

/// A unique index filled on another core while replay decodes the rest of a large block
/// (``IndexFillJob``) is the index the fill after replay builds: same owners, same duplicates,
/// and a replay that changes the table after the block falls back to that fill.
@Suite("Unique index fills during replay")
struct IndexFillJobTests {
    /// Per key, the `order` of the object that owns it, and the number of duplicates, of the
    /// store at `dir` opened with the unique model, fills during replay allowed from `minimum`
    /// rows; and whether a fill was installed.
    private func index(at dir: URL, minimum: Int) throws -> (owners: [Int64: Int64], duplicates: Int, installed: Bool) {
        let store = try IndexFillJob.$minimumRows.withValue(minimum) {
            try ObjectStore.open(
                at: dir, schema: try Schema(CounterUnique.self), options: StoreOptions(durability: .none))
        }
        defer { try? store.close() }
        let table = try store.context.table(for: CounterUnique.self)
        var owners: [Int64: Int64] = [:]
        for key in Int64(-3)...40 {
            if let owner = try store.context.object(CounterUnique.self, uniqueKey: ["key": key]) {
                owners[key] = owner.order
            }
        }
        let installed = table.indexes.uniqueIndexes.contains { $0.filledDuringReplay }
        return (owners, table.indexes.uniqueIndexes.reduce(0) { $0 + $1.duplicates.count }, installed)
    }

    /// A store written by the plain model: `saves` runs on its context.
    private func store(_ name: String, _ saves: (ModelContext) throws -> Void) throws -> URL {
        let dir = temporaryStoreDirectory(name)
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        let store = try ObjectStore.open(at: dir, schema: try Schema(CounterPlain.self), options: options)
        try saves(store.context)
        try store.close()
        return dir
    }

    private func insert(
        _ count: Int, into context: ModelContext, seed: UInt64, nilKeys: Bool = false, from first: Int64 = 0
    ) throws {
        var state = seed
        for i in 0..<Int64(count) {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let c = try context.insert(CounterPlain.self)
            c.key = nilKeys && state >> 60 == 0 ? nil : Int64((state >> 33) % 40)  // keys repeat
            c.order = first + i
            c.label = "counter \(first + i)"
        }
        try context.save()
    }

    /// The store at `dir` opens with its index filled after replay, even where fills during
    /// replay are allowed from one row, and the same as where they are not; then is removed.
    private func expectFilledAfterReplay(_ dir: URL, sourceLocation: SourceLocation = #_sourceLocation) throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        let during = try index(at: dir, minimum: 1)
        let after = try index(at: dir, minimum: .max)
        #expect(!during.installed, sourceLocation: sourceLocation)
        #expect(during.owners == after.owners && during.duplicates == after.duplicates, sourceLocation: sourceLocation)
    }

    @Test(arguments: [1, 7, 300, 3_000])
    func aFillDuringReplayHasTheOwnersAndDuplicatesOfTheFillAfterIt(count: Int) throws {
        let dir = try store("one-block-\(count)") { try insert(count, into: $0, seed: UInt64(count)) }
        defer { try? FileManager.default.removeItem(at: dir) }
        let during = try index(at: dir, minimum: 1)
        let after = try index(at: dir, minimum: .max)
        #expect(during.installed && !after.installed)
        #expect(during.owners == after.owners && during.duplicates == after.duplicates)
        #expect(after.duplicates == count - after.owners.count)
    }

    @Test func replayThatChangesTheTableAfterTheBlockFallsBackToTheFillAfterIt() throws {
        let dir = try store("changed") { c in
            try insert(2_000, into: c, seed: 1)
            // Another block for the entity: updates and deletes, then more inserts.
            let some = try c.fetch(CounterPlain.self) { $0.order % 7 == 0 }
            for (i, x) in some.enumerated() { if i % 2 == 0 { x.key = 39 - (x.key ?? 0) } else { c.delete(x) } }
            try c.save()
            try insert(100, into: c, seed: 2, from: 2_000)
        }
        try expectFilledAfterReplay(dir)
    }

    @Test func replayThatOnlyChangesKeysAfterTheBlockFallsBackToTheFillAfterIt() throws {
        // The rows stay those of the block; only their keys change, which the fill started
        // during the block did not see.
        let dir = try store("rekeyed") { c in
            try insert(2_000, into: c, seed: 4)
            for x in try c.fetch(CounterPlain.self, where: { $0.order % 5 == 0 }) { x.key = 100 + x.order / 5 }
            try c.save()
        }
        try expectFilledAfterReplay(dir)
    }

    @Test func aKeyColumnWithNilValuesIsFilledAfterReplay() throws {
        let dir = try store("nil-keys") { try insert(2_000, into: $0, seed: 3, nilKeys: true) }
        try expectFilledAfterReplay(dir)
    }
}
