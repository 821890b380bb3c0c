import Foundation
import Testing

@testable import ObjectGraph

/// Instance slots and before-image numbers are stored only up to the last row that has one:
/// an open writes neither, and what materializing, changing, rolling back and compacting do
/// with them reads the same as with a slot for every row.
@Suite("Row slots")
struct RowSlotsTests {
    @Test func rowsPastTheStoredOnesReadAsAbsentAndOnlyWritesStoreRows() {
        var slots = RowSlots<Int32>(absent: -1)
        #expect(slots[0] == -1 && slots[1_000] == -1 && slots.stored.isEmpty)
        slots.clear(5)  // gives a row `absent` without storing rows
        #expect(slots.stored.isEmpty)
        slots[3] = 7
        #expect(slots.stored == [-1, -1, -1, 7])
        #expect(slots[3] == 7 && slots[4] == -1)
        slots.clear(3)
        #expect(slots.stored == [-1, -1, -1, -1] && slots[3] == -1)
    }

    @Test func uniquenessIsCheckedOnTheStoredReference() {
        final class Box {}
        var slots = RowSlots<AnyObject?>(absent: nil)
        slots[2] = Box()
        #expect(isKnownUniquelyReferenced(&slots[2]))
        let held = slots[2]
        #expect(!isKnownUniquelyReferenced(&slots[2]))
        withExtendedLifetime(held) {}
        #expect(slots.stored.count == 3)
    }

    @Test func anOpenStoresNoSlotsAndLaterUseReadsAsWithASlotPerRow() throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let schema = try Schema(Person.self)
        let options = StoreOptions(durability: .none)
        do {
            let store = try ObjectStore.open(at: dir, schema: schema, options: options)
            for i in 0..<300 { try store.context.insert(Person(id: Int64(i), name: "n\(i)", email: "e\(i)")) }
            try store.context.save()
            try store.close()
        }
        let store = try ObjectStore.open(at: dir, schema: schema, options: options)
        defer { try? store.close() }
        let table = try store.context.table(for: Person.self)
        #expect(table.instances.stored.isEmpty && table.changes.beforeIndex.stored.isEmpty)

        // One object materialized and changed: rows up to its own are stored, no further.
        // A translated predicate reads the cells; only the object it returns is materialized.
        let p = try #require(
            try store.context.fetch(FetchDescriptor<Person>(predicate: #Predicate { $0.id == 150 })).first)
        let id = try #require(p.objectID)
        let row = try #require(table.row(ofSerial: id.serial))
        #expect(table.instances.stored.count == row + 1)
        p.name = "changed"
        #expect(table.changes.beforeIndex.stored.count == row + 1 && table.changes.beforeIndex[row] >= 0)
        // Read by address: the changed row has its before-image, a row past the stored ones none.
        #expect(table.read { $0.beforeImage(ofRow: row) } != nil)
        #expect(table.read { $0.beforeImage(ofRow: table.rowCount - 1) } == nil)
        store.context.rollback()
        #expect(p.name == "n150" && table.changes.beforeIndex[row] == -1)

        // A later row changed and saved, then every object read: each reads its own values.
        let last = try #require(
            try store.context.fetch(FetchDescriptor<Person>(predicate: #Predicate { $0.id == 299 })).first)
        last.score = 2.5
        try store.context.save()
        #expect(
            try store.context.fetch(Person.self) { _ in true }.allSatisfy {
                $0.name == "n\($0.id)" && $0.score == ($0.id == 299 ? 2.5 : 0)
            })
        #expect(try store.context.objects(of: Person.self).count == 300)
        #expect(try store.context.fetch(Person.self) { $0.id == 150 }.first === p)
    }
}
