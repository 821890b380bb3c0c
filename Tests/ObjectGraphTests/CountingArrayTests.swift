import Foundation
import PropertyBased
import Testing

@testable import ObjectGraph

/// A table's serial maps store nothing while row `r` has serial `r + 1`, and read exactly as
/// arrays do once something breaks the pattern.
@Suite("Counting serial maps")
struct CountingArrayTests {
    @Test func elementsThatContinueThePatternAreNotStored() {
        var a = CountingArray<UInt64>(offset: 1)
        a.append(1)
        a.append(contentsOf: [2, 3, 4])
        let appended = a.appendCounting(2)
        #expect(appended)
        a[2] = 3  // the value it already has
        #expect(a.isCounting && a.stored.isEmpty)
        #expect(Array(a) == [1, 2, 3, 4, 5, 6] && a.count == 6)

        a[2] = 9  // breaks it: written out once, an ordinary array from then on
        #expect(!a.isCounting && a.stored == [1, 2, 9, 4, 5, 6])
        let appendedAfter = a.appendCounting(1)
        #expect(!appendedAfter)
        a.append(7)
        #expect(Array(a) == [1, 2, 9, 4, 5, 6, 7])

        var b = CountingArray<Int32>(offset: 0)
        b.append(contentsOf: [0, 1, 5])  // the third is not its position
        #expect(!b.isCounting && Array(b) == [0, 1, 5])
        #expect(CountingArray<Int32>([0, 1, 2], offset: 0).isCounting)
        #expect(!CountingArray<Int32>([0, -1, 2], offset: 0).isCounting)
    }

    /// Random appends, writes and runs against a plain array.
    @Test func readsAsAnArrayUnderRandomOperations() async {
        await propertyCheck(count: propertyRuns, input: Gen.int(in: 0...1_000_000_000).array(of: 1...60)) { steps in
            var model: [Int32] = []
            var a = CountingArray<Int32>(offset: 0)
            for code in steps {
                let pattern = Int32(model.count)
                switch code % 6 {
                case 0:  // the next element of the pattern
                    a.append(pattern); model.append(pattern)
                case 1:  // a run of it
                    let n = code / 6 % 5
                    let run = (0..<n).map { pattern + Int32($0) }
                    a.append(contentsOf: run); model.append(contentsOf: run)
                case 2:
                    let n = code / 6 % 5
                    if a.appendCounting(n) { model.append(contentsOf: (0..<n).map { pattern + Int32($0) }) }
                case 3:  // any value
                    let v = Int32(code / 6 % 7) - 1
                    a.append(v); model.append(v)
                case 4 where !model.isEmpty:  // a write of the value a position already has
                    let i = code / 6 % model.count
                    a[i] = model[i]
                case 5 where !model.isEmpty:  // a write of -1 (a serial retired)
                    let i = code / 6 % model.count
                    a[i] = -1; model[i] = -1
                default:
                    break
                }
                #expect(Array(a) == model && a.count == model.count)
                if a.isCounting { #expect(model.enumerated().allSatisfy { Int32($0.offset) == $0.element }) }
            }
        }
    }

    @Test func storesInsertedInOrderKeepCountingMapsUntilARowIsFreed() throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let schema = try Schema(Person.self)
        let options = StoreOptions(durability: .none)
        do {
            let store = try ObjectStore.open(at: dir, schema: schema, options: options)
            for save in 0..<3 {
                for i in 0..<100 {
                    try store.context.insert(Person(id: Int64(save * 100 + i), name: "n\(save * 100 + i)", email: "e"))
                }
                try store.context.save()
            }
            let table = try store.context.table(for: Person.self)
            #expect(table.identity.serialOfRow.isCounting && table.identity.rowOfSerial.isCounting)
            try store.close()
        }
        // Reopened: three blocks of inserts, each continuing the serials, replay as counting.
        let store = try ObjectStore.open(at: dir, schema: schema, options: options)
        defer { try? store.close() }
        let table = try store.context.table(for: Person.self)
        #expect(table.identity.serialOfRow.isCounting && table.identity.rowOfSerial.isCounting)
        #expect(table.identity.serialOfRow.count == 300 && table.identity.rowOfSerial.count == 300)

        // Deleting objects frees their rows: both maps are written out, and every lookup by
        // ID and by key still finds its object.
        let ids = try store.context.objects(of: Person.self).map { ($0.id, try #require($0.objectID)) }
        for p in try store.context.fetch(Person.self, where: { $0.id % 7 == 3 }) { store.context.delete(p) }
        try store.context.save()
        #expect(!table.identity.serialOfRow.isCounting && !table.identity.rowOfSerial.isCounting)
        for (key, id) in ids {
            let object = store.context.object(with: id, as: Person.self)
            #expect(key % 7 == 3 ? object == nil : object?.id == key)
        }
        let extra = Person(id: 1_000, name: "new", email: "e")
        try store.context.insert(extra)
        try store.context.save()
        #expect(try store.context.object(with: #require(extra.objectID), as: Person.self) === extra)
    }

    @Test func aCompactionThatLeavesRowsInSerialOrderCountsAgain() throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let schema = try Schema(Person.self)
        let store = try ObjectStore.open(at: dir, schema: schema, options: StoreOptions(durability: .none))
        defer { try? store.close() }
        for i in 0..<100 { try store.context.insert(Person(id: Int64(i), name: "n\(i)", email: "e")) }
        try store.context.save()
        for p in try store.context.fetch(Person.self, where: { $0.id >= 40 }) { store.context.delete(p) }
        try store.context.save()
        let table = try store.context.table(for: Person.self)
        #expect(!table.identity.serialOfRow.isCounting)
        try store.compact()  // most rows free: the table is renumbered
        // Rows 0..<40 keep serials 1...40: the maps store nothing again.
        #expect(table.identity.serialOfRow.isCounting && table.identity.rowOfSerial.isCounting && table.rowCount == 40)
        // The next object gets serial 101 in row 40: written out, and found.
        let extra = Person(id: 500, name: "new", email: "e")
        try store.context.insert(extra)
        try store.context.save()
        #expect(!table.identity.serialOfRow.isCounting && table.serial(ofRow: 40) == 101)
        #expect(try store.context.object(with: #require(extra.objectID), as: Person.self) === extra)
        #expect(try store.context.fetch(Person.self) { $0.id < 40 }.count == 40)
    }
}
