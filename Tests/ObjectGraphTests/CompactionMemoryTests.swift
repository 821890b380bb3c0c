import Foundation
import ObjectGraphTestSupport
import PropertyBased
import Testing

@testable import ObjectGraph

// Compaction gives back the memory of deleted objects: the tables renumber their rows, and
// every structure naming rows follows. Random operation sequences with compactions at random
// points, checked against a reference model, against a copy of the store reopened after each
// compaction, and through instances held across the compactions.

/// An owner: a unique key, a secondary index, a one-to-many (slot-stored to-one inverse), a
/// many-to-many and an ordered one-to-many (both stored as links).
@Entity final class CmOwner {
    #Index<CmOwner>([\.rank])
    @Attribute(.unique) var key: Int64 = 0
    var name: String = ""
    var rank: Int = 0
    @Relationship(inverse: "owner") var items: [CmItem]
    @Relationship(inverse: "owners") var tags: [CmTag]
    @Relationship(inverse: "owner", ordered: true) var steps: [CmStep]
}

@Entity final class CmItem {
    var key: Int64 = 0
    var label: String?
    @Relationship(inverse: "items") var owner: CmOwner?
}

@Entity final class CmTag {
    @Attribute(.unique) var word: String = ""
    var key: Int64 = 0
    @Relationship(inverse: "tags") var owners: [CmOwner]
}

@Entity final class CmStep {
    var key: Int64 = 0
    @Relationship(inverse: "steps") var owner: CmOwner?
}

private let compactionSchema: Schema = {
    do { return try Schema(CmOwner.self, CmItem.self, CmTag.self, CmStep.self) } catch {
        preconditionFailure("\(error)")
    }
}()

/// The reference: every object by its test key.
private struct CmModel: Equatable {
    struct Owner: Equatable {
        var name: String
        var rank: Int
        var tags: Set<Int64> = []
        var steps: [Int64] = []
    }

    var owners: [Int64: Owner] = [:]
    /// Item key → (label, owner key).
    var items: [Int64: (label: String?, owner: Int64?)] = [:]
    var tags: Set<Int64> = []
    /// Step key → owner key.
    var steps: [Int64: Int64?] = [:]

    static func == (a: CmModel, b: CmModel) -> Bool {
        a.owners == b.owners && a.tags == b.tags && a.steps == b.steps
            && a.items.count == b.items.count
            && a.items.allSatisfy { k, v in b.items[k].map { $0.label == v.label && $0.owner == v.owner } ?? false }
    }

    func itemsOf(_ owner: Int64) -> Set<Int64> { Set(items.filter { $0.value.owner == owner }.keys) }

    mutating func deleteOwner(_ k: Int64) {
        owners[k] = nil
        for (i, v) in items where v.owner == k { items[i] = (v.label, nil) }
        for (s, o) in steps where o == k { steps[s] = .some(nil) }
    }

    mutating func deleteTag(_ k: Int64) {
        tags.remove(k)
        for o in owners.keys { owners[o]?.tags.remove(k) }
    }

    mutating func deleteStep(_ k: Int64) {
        if let o = steps[k] ?? nil { owners[o]?.steps.removeAll { $0 == k } }
        steps[k] = nil
    }

    /// Sets step `s`'s owner (the end of the new owner's list), as the to-one side does.
    mutating func setStepOwner(_ s: Int64, _ owner: Int64?) {
        let old = steps[s] ?? nil
        if old == owner { return }  // linked already: the list keeps its order
        if let old { owners[old]?.steps.removeAll { $0 == s } }
        steps[s] = .some(owner)
        if let owner { owners[owner]?.steps.append(s) }
    }
}

/// The instances the test holds, across saves, rollbacks and compactions, by test key.
private struct CmHeld {
    var owners: [Int64: CmOwner] = [:]
    var items: [Int64: CmItem] = [:]
    var tags: [Int64: CmTag] = [:]
    var steps: [Int64: CmStep] = [:]

    /// Keeps only the objects `model` has.
    mutating func keep(_ model: CmModel) {
        owners = owners.filter { model.owners[$0.key] != nil }
        items = items.filter { model.items[$0.key] != nil }
        tags = tags.filter { model.tags.contains($0.key) }
        steps = steps.filter { model.steps[$0.key] != nil }
    }
}

/// One run of the property test: an `ObjectStore` in a temporary directory, the model of its
/// pending state and of its committed state, and the instances held.
private final class CmRun {
    let directory: URL
    var store: ObjectStore
    var context: ModelContext { store.context }
    var model = CmModel()
    var committed = CmModel()
    var held = CmHeld()
    var nextKey: Int64 = 1
    var compactions = 0
    let seed: UInt64

    init(seed: UInt64) throws {
        self.seed = seed
        directory = temporaryStoreDirectory("CompactionMemoryProperty")
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        store = try ObjectStore.open(at: directory, schema: compactionSchema, options: options)
    }

    deinit {
        try? store.close()
        try? FileManager.default.removeItem(at: directory)
    }

    func fail(_ message: String) {
        Issue.record("seed \(seed), after \(compactions) compactions: \(message)")
    }

    func run(steps: Int) throws {
        var rng = SeededGenerator(seed: seed)
        func pick<T>(_ d: [Int64: T]) -> (Int64, T)? {
            guard !d.isEmpty else { return nil }
            let keys = d.keys.sorted()
            let k = keys[Int(rng.next() % UInt64(keys.count))]
            return d[k].map { (k, $0) }
        }
        for _ in 0..<steps {
            let op = rng.next() % 20
            switch op {
            case 0, 1, 2:
                // Several owners at once: churn needs volume.
                for _ in 0..<(1 + rng.next() % 6) {
                    let k = nextKey
                    nextKey += 1
                    let rank = Int(rng.next() % 4)
                    let o = try context.insert(CmOwner.self)
                    o.key = k
                    o.name = "owner \(k)"
                    o.rank = rank
                    held.owners[k] = o
                    model.owners[k] = CmModel.Owner(name: "owner \(k)", rank: rank)
                }
            case 3:
                let k = nextKey
                nextKey += 1
                let i = try context.insert(CmItem.self)
                i.key = k
                let label: String? = rng.next() % 3 == 0 ? nil : "item \(k)"
                i.label = label
                var owner: Int64?
                if rng.next() % 2 == 0, let (ok, o) = pick(held.owners.filter { model.owners[$0.key] != nil }) {
                    i.owner = o
                    owner = ok
                }
                held.items[k] = i
                model.items[k] = (label, owner)
            case 4:
                let k = nextKey
                nextKey += 1
                let t = try context.insert(CmTag.self)
                t.word = "w\(k)"
                t.key = k
                held.tags[k] = t
                model.tags.insert(k)
            case 5:
                let k = nextKey
                nextKey += 1
                let s = try context.insert(CmStep.self)
                s.key = k
                held.steps[k] = s
                model.steps[k] = .some(nil)
                if let (ok, o) = pick(held.owners.filter { model.owners[$0.key] != nil }) {
                    s.owner = o
                    model.setStepOwner(k, ok)
                }
            case 6:
                guard let (k, o) = pick(held.owners.filter { model.owners[$0.key] != nil }) else { continue }
                let rank = Int(rng.next() % 4)
                o.rank = rank
                o.name = "renamed \(k) \(rng.next() % 100)"
                model.owners[k]?.rank = rank
                model.owners[k]?.name = o.name
            case 7:
                guard let (k, i) = pick(held.items.filter { model.items[$0.key] != nil }) else { continue }
                let owner = rng.next() % 3 == 0 ? nil : pick(held.owners.filter { model.owners[$0.key] != nil })
                i.owner = owner?.1
                i.label = "relabelled \(k)"
                model.items[k] = ("relabelled \(k)", owner?.0)
            case 8:
                guard let (k, o) = pick(held.owners.filter { model.owners[$0.key] != nil }),
                    let (tk, t) = pick(held.tags.filter { model.tags.contains($0.key) })
                else { continue }
                if model.owners[k]?.tags.contains(tk) == true {
                    o.tags = o.tags.filter { $0 !== t }
                    model.owners[k]?.tags.remove(tk)
                } else {
                    o.tags.append(t)
                    model.owners[k]?.tags.insert(tk)
                }
            case 9:
                // Reorder an owner's steps.
                guard let (k, o) = pick(held.owners.filter { (model.owners[$0.key]?.steps.count ?? 0) > 1 }) else {
                    continue
                }
                var steps = o.steps
                steps.reverse()
                if rng.next() % 2 == 0 { steps.append(steps.removeFirst()) }
                o.steps = steps
                model.owners[k]?.steps = steps.map(\.key)
            case 10:
                guard let (k, s) = pick(held.steps.filter { model.steps[$0.key] != nil }) else { continue }
                let owner = rng.next() % 3 == 0 ? nil : pick(held.owners.filter { model.owners[$0.key] != nil })
                s.owner = owner?.1
                model.setStepOwner(k, owner?.0)
            case 11, 12, 13:
                // Deletes, several at once.
                for _ in 0..<(1 + rng.next() % 8) {
                    switch rng.next() % 6 {
                    case 0, 1, 2:
                        guard let (k, o) = pick(held.owners.filter { model.owners[$0.key] != nil }) else { continue }
                        context.delete(o)
                        model.deleteOwner(k)
                    case 3:
                        guard let (k, i) = pick(held.items.filter { model.items[$0.key] != nil }) else { continue }
                        context.delete(i)
                        model.items[k] = nil
                    case 4:
                        guard let (k, t) = pick(held.tags.filter { model.tags.contains($0.key) }) else { continue }
                        context.delete(t)
                        model.deleteTag(k)
                    default:
                        guard let (k, s) = pick(held.steps.filter { model.steps[$0.key] != nil }) else { continue }
                        context.delete(s)
                        model.deleteStep(k)
                    }
                }
            case 14, 15, 16:
                try context.save()
                committed = model
                held.keep(model)
            case 17:
                context.rollback()
                model = committed
                held.keep(model)
            default:
                // Compaction, with pending changes one time in three.
                if rng.next() % 3 != 0 {
                    try context.save()
                    committed = model
                    held.keep(model)
                }
                try compactAndCheck()
            }
        }
        try context.save()
        committed = model
        held.keep(model)
        try compactAndCheck()
    }

    func compactAndCheck() throws {
        let pending = context.hasChanges
        // The test lets go of a third of its instances: the compaction releases them (nothing
        // else holds them), and the lookups below materialize fresh ones.
        let letGo = { (k: Int64) in (k + Int64(self.compactions)) % 3 == 0 }
        held.owners = held.owners.filter { !letGo($0.key) }
        held.items = held.items.filter { !letGo($0.key) }
        held.tags = held.tags.filter { !letGo($0.key) }
        held.steps = held.steps.filter { !letGo($0.key) }
        try store.compact()
        compactions += 1
        #expect(context.hasChanges == pending, "seed \(seed): compaction changed whether changes are pending")
        checkHeld()
        check(context, against: model, "after compaction \(compactions)")
        // Hold the instances the lookups made, for the operations that follow.
        for o in try context.objects(of: CmOwner.self) where held.owners[o.key] == nil { held.owners[o.key] = o }
        for i in try context.objects(of: CmItem.self) where held.items[i.key] == nil { held.items[i.key] = i }
        for t in try context.objects(of: CmTag.self) where held.tags[t.key] == nil { held.tags[t.key] = t }
        for x in try context.objects(of: CmStep.self) where held.steps[x.key] == nil { held.steps[x.key] = x }
        // A copy of the directory, opened: the committed state.
        let copy = temporaryStoreDirectory("CompactionMemoryCopy")
        try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: copy) }
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) where !name.hasSuffix("lock") {
            try FileManager.default.copyItem(
                at: directory.appendingPathComponent(name), to: copy.appendingPathComponent(name))
        }
        let reopened = try ObjectStore.open(
            at: copy, schema: compactionSchema, options: StoreOptions(durability: .none))
        check(reopened.context, against: committed, "reopened copy after compaction \(compactions)")
        try reopened.close()
    }

    /// Reads the whole graph from `c` by the test keys, through fetches by the unique keys, the
    /// secondary index and scans, and compares it with `m`.
    func check(_ c: ModelContext, against m: CmModel, _ when: String) {
        do {
            var actual = CmModel()
            for o in try c.objects(of: CmOwner.self) {
                actual.owners[o.key] = CmModel.Owner(
                    name: o.name, rank: o.rank, tags: Set(o.tags.map(\.key)), steps: o.steps.map(\.key))
                if Set(o.items.map(\.key)) != m.itemsOf(o.key) { fail("\(when): owner \(o.key)'s items differ") }
            }
            for i in try c.objects(of: CmItem.self) { actual.items[i.key] = (i.label, i.owner?.key) }
            for t in try c.objects(of: CmTag.self) {
                actual.tags.insert(t.key)
                let owners = Set(t.owners.map(\.key))
                let expected = Set(m.owners.filter { $0.value.tags.contains(t.key) }.keys)
                if owners != expected { fail("\(when): tag \(t.key)'s owners differ") }
            }
            for s in try c.objects(of: CmStep.self) { actual.steps[s.key] = .some(s.owner?.key) }
            if actual != m { fail("\(when): the graph differs from the model") }
            // Lookups in the unique indexes, and fetches by the unique keys.
            for k in m.owners.keys {
                let found = try c.object(CmOwner.self, where: \.key, equals: k)
                if found?.key != k {
                    fail("\(when): the unique lookup of owner \(k) found \(found.map { "\($0.key)" } ?? "nothing")")
                }
                let fetched = try c.fetch(FetchDescriptor<CmOwner>(predicate: #Predicate { $0.key == k }))
                if fetched.map(\.key) != [k] { fail("\(when): the fetch of owner \(k) found \(fetched.map(\.key))") }
            }
            for k in m.tags {
                let word = "w\(k)"
                let found = try c.object(CmTag.self, where: \.word, equals: word)
                if found?.key != k {
                    fail("\(when): the unique lookup of tag \(word) found \(found.map { "\($0.key)" } ?? "nothing")")
                }
            }
            // The secondary index.
            for rank in 0..<4 {
                let found = Set(
                    try c.fetch(FetchDescriptor<CmOwner>(predicate: #Predicate { $0.rank == rank })).map(\.key))
                let expected = Set(m.owners.filter { $0.value.rank == rank }.keys)
                if found != expected { fail("\(when): the index lookup of rank \(rank) differs") }
            }
        } catch {
            fail("\(when): \(error)")
        }
    }

    /// The held instances read the model's values, are what lookups by their IDs return, and
    /// take writes (a write and its undo, so the model stays as it is).
    func checkHeld() {
        for (k, o) in held.owners {
            guard let expected = model.owners[k] else { continue }
            if o.name != expected.name || o.rank != expected.rank || o.steps.map(\.key) != expected.steps {
                fail("held owner \(k) reads other values after compaction")
            }
            if let id = o.objectID, context.object(with: id) !== o { fail("owner \(k)'s ID finds another instance") }
            let name = o.name
            o.name = name + "!"
            if o.name != name + "!" { fail("held owner \(k) did not take a write") }
            o.name = name
        }
        for (k, i) in held.items {
            guard let expected = model.items[k] else { continue }
            if i.label != expected.label || i.owner?.key != expected.owner {
                fail("held item \(k) reads other values after compaction")
            }
            if let id = i.objectID, context.object(with: id) !== i { fail("item \(k)'s ID finds another instance") }
        }
        for (k, s) in held.steps {
            guard let expected = model.steps[k] else { continue }
            if s.owner?.key != expected { fail("held step \(k) reads another owner after compaction") }
        }
    }
}

/// The longest operation sequence of a run of the compaction property test.
private let compactionPropertySteps =
    ProcessInfo.processInfo.environment["OBJECTGRAPH_COMPACTION_PROPERTY_STEPS"].flatMap(Int.init) ?? 120

@Suite("Property: compaction renumbers the rows and nothing else changes")
struct CompactionPropertyTests {
    @Test func randomChurnWithCompactionsMatchesTheModelTheReopenedCopyAndTheHeldInstances() async {
        await propertyCheck(count: max(1, propertyRuns / 5), input: Gen.int(in: 0...1_000_000_000)) { code in
            do {
                let run = try CmRun(seed: UInt64(code))
                print("compaction property: seed \(code)")
                try run.run(steps: compactionPropertySteps)
            } catch {
                Issue.record("seed \(code): unexpected error: \(error)")
            }
        }
    }
}

@Suite("Compaction: memory of deleted objects")
struct CompactionMemoryTests {
    /// A store that inserted `n` owners, with `n` items, a tag per ten owners and a step per
    /// owner, and deleted nine in ten of each unless `survivorsOnly` (then it only ever had the
    /// tenth that survive); then saved and compacted.
    private func build(_ n: Int, survivorsOnly: Bool, _ name: String) throws -> ObjectStore {
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        let store = try ObjectStore.open(at: temporaryStoreDirectory(name), schema: compactionSchema, options: options)
        let c = store.context
        var doomed: [any Entity] = []
        var tags: [CmTag] = []
        for i in 0..<n / 10 where !survivorsOnly || i % 10 == 0 {
            let t = try c.insert(CmTag.self)
            t.word = "w\(i)"
            tags.append(t)
            if i % 10 != 0 { doomed.append(t) }
        }
        for i in 0..<n where !survivorsOnly || i % 10 == 0 {
            let o = try c.insert(CmOwner.self)
            o.key = Int64(i)
            o.name = "owner \(i)"
            o.rank = i % 4
            let item = try c.insert(CmItem.self)
            item.label = "item \(i)"
            item.owner = o
            let step = try c.insert(CmStep.self)
            step.owner = o
            // Owner i's tag survives when the owner does: the tenth tag of its hundred.
            o.tags = [tags[survivorsOnly ? i / 100 : i / 100 * 10]]
            if i % 10 != 0 { doomed += [o, item, step] }
        }
        try c.save()
        for o in doomed { c.delete(o) }
        try c.save()
        try store.compact()
        return store
    }

    @Test func compactionShrinksTheTablesToTheSizeOfAStoreThatOnlyHeldTheSurvivors() throws {
        let churned = try build(2_000, survivorsOnly: false, #function)
        let survivors = try build(2_000, survivorsOnly: true, #function)
        defer {
            try? churned.close()
            try? survivors.close()
        }
        for (a, b) in zip(churned.context.tables, survivors.context.tables) {
            #expect(a.rowCount == b.rowCount, "\(a.entity.name): rows")
            #expect(a.identity.freeRows.isEmpty, "\(a.entity.name): free rows")
            #expect(a.values.count == b.values.count, "\(a.entity.name): cells")
            #expect(a.flags.capacity <= b.flags.capacity, "\(a.entity.name): row capacity")
            #expect(a.values.capacity <= max(b.values.capacity, a.values.count + 16), "\(a.entity.name): cell capacity")
            #expect(a.arena.count <= b.arena.count + 64, "\(a.entity.name): arena")
            for (x, y) in zip(a.indexes.uniqueIndexes, b.indexes.uniqueIndexes) {
                #expect(x.buckets.count <= y.buckets.count, "\(a.entity.name): unique index buckets")
            }
            // The serial map stays dense up to the highest live serial: 4 bytes per serial.
            #expect(
                a.identity.rowOfSerial.count <= Int(a.identity.serialOfRow.max() ?? 0), "\(a.entity.name): serial map")
        }
        for (a, b) in zip(churned.context.links, survivors.context.links) {
            #expect(a.count == b.count)
            for side in 0..<2 {
                #expect(a.flat[side].count == a.count, "link \(a.index) side \(side): flat members")
                #expect(a.owned[side].isEmpty, "link \(a.index) side \(side): own lists")
            }
        }
    }

    @Test func compactionReleasesTheInstancesNothingElseHoldsAndKeepsTheHeldOnes() throws {
        let store = try build(500, survivorsOnly: false, #function)
        defer { try? store.close() }
        let c = store.context
        let owners = try c.objects(of: CmOwner.self).sorted { $0.key < $1.key }
        let kept = owners[0]
        let keptID = try #require(kept.objectID)
        let releasedID = try #require(owners[1].objectID)
        weak let released = owners[1]
        _ = consume owners
        #expect(released != nil)  // the context holds it
        try store.compact()
        #expect(released == nil)  // nothing held it: the compaction let it go
        #expect(c.object(with: keptID) === kept)
        let fresh = try #require(c.object(with: releasedID, as: CmOwner.self))
        #expect(fresh.key == 10 && fresh.name == "owner 10")
        #expect(c.object(with: releasedID) === fresh)  // kept again once materialized
    }

    @Test func compactionKeepsPendingChangesAndTheirRollback() throws {
        let store = try build(500, survivorsOnly: false, #function)
        defer { try? store.close() }
        let c = store.context
        let owners = try c.objects(of: CmOwner.self).sorted { $0.key < $1.key }
        let renamed = owners[0], deleted = owners[1]
        renamed.name = "pending"
        c.delete(deleted)
        let inserted = try c.insert(CmOwner.self)
        inserted.key = 99_999
        try store.compact()
        #expect(c.hasChanges)
        #expect(renamed.name == "pending")
        #expect(deleted.isDeleted)
        #expect(try c.fetchCount(FetchDescriptor<CmOwner>(predicate: #Predicate { $0.key == 99_999 })) == 1)
        c.rollback()
        #expect(renamed.name == "owner 0")
        #expect(!deleted.isDeleted)
        #expect(try c.fetchCount(FetchDescriptor<CmOwner>()) == 50)
        #expect(try c.fetchCount(FetchDescriptor<CmOwner>(predicate: #Predicate { $0.key == 99_999 })) == 0)
    }

    @Test func anAsyncStoreSnapshotStaysCorrectAcrossACompactionThatRenumbers() async throws {
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        let store = try AsyncStore(at: temporaryStoreDirectory(#function), schema: compactionSchema, options: options)
        try await store.perform { c in
            for i in 0..<300 {
                let o = try c.insert(CmOwner.self)
                o.key = Int64(i)
                o.name = "owner \(i)"
                let t = try c.insert(CmTag.self)
                t.word = "w\(i)"
                o.tags = [t]
            }
        }
        try await store.perform { c in
            for o in try c.objects(of: CmOwner.self) where o.key % 10 != 0 { c.delete(o) }
        }
        let before = store.snapshot
        try await store.compact()
        #expect(store.snapshot.version == before.version)
        try await store.perform { c in
            for o in try c.fetch(FetchDescriptor<CmOwner>(predicate: #Predicate { $0.key < 100 })) { o.name += "+" }
            let t = try c.insert(CmTag.self)
            t.word = "new"
            try c.fetch(FetchDescriptor<CmOwner>(predicate: #Predicate { $0.key == 0 })).first?.tags.append(t)
        }
        let after = store.snapshot
        let owners = try after.objects(of: CmOwner.self).sorted { $0.key < $1.key }
        #expect(owners.count == 30)
        #expect(owners.map(\.name) == (0..<30).map { $0 < 10 ? "owner \($0 * 10)+" : "owner \($0 * 10)" })
        #expect(Set(owners[0].tags.map(\.word)) == ["w0", "new"])
        #expect(owners[1].tags.map(\.word) == ["w10"])
        try await store.close()
    }
}
