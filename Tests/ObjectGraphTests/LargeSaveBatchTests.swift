import Foundation
import ObjectGraph
import Testing

/// A save writes each column of its inserted objects in batches of 32,768 rows (its null bits
/// first, for the whole column), so that it never gathers a whole column at once: a save, and
/// a compaction, of more objects than a batch must store every value and every nil at its row,
/// across the batches' edges too.
@Suite("Large saves are written column by column in batches")
struct LargeSaveBatchTests {
    static let batch = 32_768

    /// Object `i`'s city: nil in runs around each batch edge, on every 7th object, and for the
    /// whole last batch.
    static func city(_ i: Int, count: Int) -> String? {
        let edge = i % batch
        if edge < 3 || edge > batch - 4 || i % 7 == 0 || i >= count - (count % batch) { return nil }
        return "City \(i % 1000)"
    }

    static func fill(_ context: ModelContext, count: Int) throws {
        for i in 0..<count {
            let p = try context.insert(Person.self)
            p.id = Int64(i)
            p.name = "Person \(i)"
            p.email = "p\(i)@example.com"
            p.age = 20 + i % 60
            p.city = city(i, count: count)
            p.score = Double(i) * 0.5
        }
    }

    static func expectEveryValue(
        _ context: ModelContext, count: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let people = try context.objects(of: Person.self).sorted { $0.id < $1.id }
        #expect(people.count == count, sourceLocation: sourceLocation)
        var wrong: [Int64] = []
        for (i, p) in people.enumerated() {
            let ok =
                p.id == Int64(i) && p.name == "Person \(i)" && p.email == "p\(i)@example.com" && p.age == 20 + i % 60
                && p.city == city(i, count: count) && p.score == Double(i) * 0.5
            if !ok { wrong.append(p.id) }
        }
        #expect(wrong.isEmpty, "objects with wrong values: \(wrong.prefix(10))", sourceLocation: sourceLocation)
    }

    @Test func aSaveOfMoreObjectsThanABatchReopensWithEveryValueAndNilAtItsRow() throws {
        let dir = temporaryStoreDirectory()
        let count = 3 * Self.batch + 1_000  // three whole batches and a partial one
        do {
            let store = try ObjectStore.open(at: dir, schema: storeSchema)
            try Self.fill(store.context, count: count)
            try store.context.save()
            try store.close()
        }
        do {
            let store = try ObjectStore.open(at: dir, schema: storeSchema)
            try Self.expectEveryValue(store.context, count: count)
            // A compaction writes the same columns as a base record.
            try store.compact()
            try store.close()
        }
        let store = try ObjectStore.open(at: dir, schema: storeSchema)
        try Self.expectEveryValue(store.context, count: count)
        try store.close()
    }

    @Test func aColumnWithNoValueOrNoNilInABatchStillReopens() throws {
        let dir = temporaryStoreDirectory()
        let count = Self.batch + 5
        do {
            let store = try ObjectStore.open(at: dir, schema: storeSchema)
            for i in 0..<count {
                let p = try store.context.insert(Person.self)
                p.id = Int64(i)
                p.name = "n"
                p.email = "e"
                p.city = i < Self.batch ? nil : "last"  // a batch of nil only, then values only
            }
            try store.context.save()
            try store.close()
        }
        let store = try ObjectStore.open(at: dir, schema: storeSchema)
        let people = try store.context.objects(of: Person.self).sorted { $0.id < $1.id }
        #expect(people.count == count)
        #expect(people.prefix(Self.batch).allSatisfy { $0.city == nil })
        #expect(people.dropFirst(Self.batch).allSatisfy { $0.city == "last" })
        try store.close()
    }
}
