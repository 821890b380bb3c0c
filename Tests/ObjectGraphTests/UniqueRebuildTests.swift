import Foundation
import ObjectGraph
import PropertyBased
import Testing

// Two versions of one entity, "Tag": the first has no unique constraint, so its stored objects
// may share keys; the second declares a unique code and a unique (group, bucket) pair.

/// The version without unique constraints.
final class TagPlain: Entity {
    var _backing = ObjectBacking(entity: TagPlain.entityDescription)
    static let entityDescription = EntityDescription(
        name: "Tag", type: TagPlain.self,
        attributes: [
            .attribute("code", String.self), .attribute("group", String.self, optional: true),
            .attribute("bucket", Int64.self), .attribute("order", Int64.self),
        ])
    init(_backing: ObjectBacking) { self._backing = _backing }
    var code: String {
        get { _backing.get(0, as: String.self) }
        set { _backing.set(0, newValue) }
    }
    var group: String? {
        get { _backing.getOptional(1, as: String.self) }
        set { _backing.setOptional(1, newValue) }
    }
    var bucket: Int64 {
        get { _backing.get(2, as: Int64.self) }
        set { _backing.set(2, newValue) }
    }
    /// The order of insertion: the oldest object has the smallest.
    var order: Int64 {
        get { _backing.get(3, as: Int64.self) }
        set { _backing.set(3, newValue) }
    }
}

/// The version with a unique code and a unique (group, bucket).
final class TagUnique: Entity {
    var _backing = ObjectBacking(entity: TagUnique.entityDescription)
    static let entityDescription = EntityDescription(
        name: "Tag", type: TagUnique.self,
        attributes: [
            .attribute("code", String.self), .attribute("group", String.self, optional: true),
            .attribute("bucket", Int64.self), .attribute("order", Int64.self),
        ],
        uniqueConstraints: [UniqueConstraint(["code"]), UniqueConstraint(["group", "bucket"])])
    init(_backing: ObjectBacking) { self._backing = _backing }
    var order: Int64 {
        get { _backing.get(3, as: Int64.self) }
        set { _backing.set(3, newValue) }
    }
}

/// The unique indexes a store builds when it opens, from objects a model without the
/// constraints stored: each key belongs to its oldest object (Docs/Semantics.md, rule 13),
/// whatever rows replay put the objects in, and the rest are duplicates that a save touching
/// them reports.
@Suite("Unique indexes built at open")
struct UniqueRebuildTests {
    static let codes = [
        "a", "b", "c", "a code longer than sixteen bytes", "a code longer than sixteen bytez", "", "caf\u{E9}",
    ]
    static let groups: [String?] = [nil, "x", "y", "a group longer than sixteen bytes"]

    /// A deterministic source of choices from one code.
    struct Dice {
        var state: UInt64
        init(_ code: Int) { state = UInt64(code) &* 0x9E37_79B9_7F4A_7C15 &+ 1 }
        mutating func next(_ n: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(n))
        }
    }

    @Test func eachKeyBelongsToItsOldestObjectAfterRandomSavesAndDeletes() async {
        await propertyCheck(count: max(20, propertyRuns / 3), input: Gen.int(in: 0...1_000_000_000).array(of: 1...30)) {
            steps in
            do {
                try run(steps)
            } catch {
                Issue.record("unexpected error: \(error)")
            }
        }
    }

    private func run(_ steps: [Int]) throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let options = StoreOptions(durability: .none)
        // The model: each live object's code, group, bucket and order.
        var live: [(code: String, group: String?, bucket: Int64, order: Int64)] = []
        var order: Int64 = 0
        do {
            let store = try ObjectStore.open(at: dir, schema: try Schema(TagPlain.self), options: options)
            var objects: [TagPlain] = []
            for step in steps {
                var d = Dice(step)
                // Inserts, then deletes in the same save: later inserts reuse the freed rows, so
                // rows and serials no longer run in the same order.
                for _ in 0..<(1 + d.next(6)) {
                    let t = try store.context.insert(TagPlain.self)
                    t.code = Self.codes[d.next(Self.codes.count)]
                    t.group = Self.groups[d.next(Self.groups.count)]
                    t.bucket = Int64(d.next(3))
                    t.order = order
                    order += 1
                    objects.append(t)
                }
                for _ in 0..<d.next(3) where !objects.isEmpty {
                    store.context.delete(objects.remove(at: d.next(objects.count)))
                }
                try store.context.save()
            }
            live = objects.map { ($0.code, $0.group, $0.bucket, $0.order) }
            try store.close()
        }
        let store = try ObjectStore.open(at: dir, schema: try Schema(TagUnique.self), options: options)
        defer { try? store.close() }
        for code in Self.codes {
            let oldest = live.filter { $0.code == code }.map(\.order).min()
            let found = try store.context.object(TagUnique.self, uniqueKey: ["code": code])
            #expect(found?.order == oldest, "code \(code)")
        }
        for group in Self.groups.compactMap({ $0 }) {
            for bucket in Int64(0)..<3 {
                let oldest = live.filter { $0.group == group && $0.bucket == bucket }.map(\.order).min()
                let found = try store.context.object(TagUnique.self, uniqueKey: ["group": group, "bucket": bucket])
                #expect(found?.order == oldest, "group \(group), bucket \(bucket)")
            }
        }
        // A duplicate that a save touches is reported, and the save writes nothing.
        let byCode = Dictionary(grouping: live, by: \.code)
        guard let shared = byCode.values.first(where: { $0.count > 1 }),
            let newer = shared.map(\.order).sorted().last
        else { return }
        let objects = try store.context.fetch(TagUnique.self) { $0.order == newer }
        let duplicate = try #require(objects.first)
        duplicate.order = -1
        #expect(throws: (any Error).self) { try store.context.save() }
        store.context.rollback()
    }
}
