import Foundation
import PropertyBased
import Testing

@testable import ObjectGraph

/// A shelf and its books, for a row loop that is handed a relationship.
@Entity final class RowShelf {
    var label: String = ""
    @Relationship(inverse: "shelf") var books: [RowBook]
}

@Entity final class RowBook {
    var title: String = ""
    @Relationship(inverse: "books") var shelf: RowShelf?
}

@Suite("Reading rows without instances")
struct RowReadTests {
    let values = ValueFetchTests()

    /// A row loop reads, column by column, what the fetched objects hold: the same objects in
    /// the same order and window as the fetch, with no instance made.
    @Test func aRowLoopReadsWhatTheFetchedObjectsHoldAndMakesNoInstance() throws {
        let dir = temporaryStoreDirectory()
        try values.populated(dir).close()
        let store = try ObjectStore.open(at: dir, schema: storeSchema)
        defer { try? store.close() }
        var descriptor = FetchDescriptor<Person>(
            predicate: #Predicate { $0.score > 10 }, sortBy: [SortDescriptor(\.score, order: .reverse)])
        descriptor.fetchOffset = 3
        descriptor.fetchLimit = 50
        var rows: [PersonRow] = []
        var counts: Set<Int> = []
        try store.context.forEachRow(descriptor, columns: [\.id, \.name, \.city, \.score]) { row in
            counts.insert(row.count)
            rows.append(PersonRow(id: try row[0], name: try row[1], city: try row[2], score: try row[3]))
        }
        #expect(try values.instanceCount(store.context) == 0)
        #expect(rows.count == 50)
        #expect(counts == [4])
        #expect(rows == (try store.context.fetch(descriptor, as: PersonRow.self)))
        #expect(rows.contains { $0.city == nil })

        // Each row's object ID names the object it was read from.
        var ids: [(ObjectID, Int64)] = []
        try store.context.forEachRow(descriptor, columns: [\.id]) { row in ids.append((row.objectID, try row[0])) }
        #expect(ids.count == 50)
        for (objectID, id) in ids {
            #expect((store.context.object(with: objectID) as? Person)?.id == id)
        }

        // The same columns by name.
        var named: [PersonRow] = []
        try store.context.forEachRow(descriptor, columns: ["id", "name", "city", "score"]) { row in
            named.append(PersonRow(id: try row[0], name: try row[1], city: try row[2], score: try row[3]))
        }
        #expect(named == rows)
    }

    /// Pending changes are read as they stand; an object deleted by the body is skipped; a
    /// throwing body stops the loop.
    @Test func pendingChangesDeletionsAndAThrowingBody() throws {
        let store = try values.populated(temporaryStoreDirectory(), 10)
        defer { try? store.close() }
        let context = store.context
        let first = try #require(try context.fetch(FetchDescriptor<Person>(predicate: #Predicate { $0.id == 1 })).first)
        first.name = "Renamed"
        try context.insert(Person.self) { p in
            p.id = 11; p.name = "New"; p.email = "n@example.com"
        }
        let last = try #require(try context.fetch(FetchDescriptor<Person>(predicate: #Predicate { $0.id == 10 })).first)
        var seen: [(Int64, String)] = []
        try context.forEachRow(FetchDescriptor<Person>(sortBy: [SortDescriptor(\.id)]), columns: [\.id, \.name]) {
            row in
            let id: Int64 = try row[0]
            seen.append((id, try row[1]))
            if id == 2 { context.delete(last) }
        }
        #expect(seen.map(\.0) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 11])
        #expect(seen.first?.1 == "Renamed")
        #expect(seen.last?.1 == "New")

        struct Stop: Error {}
        var calls = 0
        #expect(throws: Stop.self) {
            try context.forEachRow(FetchDescriptor<Person>(), columns: [\.id]) { _ in
                calls += 1
                if calls == 3 { throw Stop() }
            }
        }
        #expect(calls == 3)
    }

    /// Every stored type reads as itself; integers read as any width the value fits, `Float`
    /// as `Double`; an enum as its raw value.
    @Test func everyTypeReadsAsItselfAndIntegersConvert() throws {
        let context = try makeContext()
        let when = Date(timeIntervalSince1970: 1_700_000_000.25)
        let id = UUID()
        let home = try #require(URL(string: "https://example.com/a?b=c"))
        try context.insert(Everything.self) { e in
            e.flag = true
            e.i8 = -8; e.i16 = -16; e.i32 = -32; e.i64 = -64; e.int = 1 << 40
            e.u8 = 8; e.u16 = 16; e.u32 = 32; e.u64 = .max; e.uint = 7
            e.double = 2.5; e.float = 1.5
            e.text = "héllo"; e.blob = Data([0, 1, 2]); e.date = when; e.uuid = id; e.url = home
            e.priority = .important; e.maybeInt = nil; e.maybeText = "maybe"
        }
        let columns: [PartialKeyPath<Everything>] = [
            \.flag, \.i8, \.i16, \.i32, \.i64, \.int, \.u8, \.u16, \.u32, \.u64, \.uint, \.double, \.float, \.text,
            \.blob, \.date, \.uuid, \.url, \.priority, \.maybeInt, \.maybeText,
        ]
        var rows = 0
        var reads: [(line: Int, same: Bool)] = []
        var failures: [ObjectGraphError?] = []
        try context.forEachRow(FetchDescriptor<Everything>(), columns: columns) { row in
            rows += 1
            reads.append((#line, try read(row, 0, as: Bool.self) == true))
            reads.append((#line, try read(row, 1, as: Int8.self) == -8))
            reads.append((#line, try read(row, 2, as: Int16.self) == -16))
            reads.append((#line, try read(row, 3, as: Int32.self) == -32))
            reads.append((#line, try read(row, 4, as: Int64.self) == -64))
            reads.append((#line, try read(row, 5, as: Int.self) == 1 << 40))
            reads.append((#line, try read(row, 6, as: UInt8.self) == 8))
            reads.append((#line, try read(row, 7, as: UInt16.self) == 16))
            reads.append((#line, try read(row, 8, as: UInt32.self) == 32))
            reads.append((#line, try read(row, 9, as: UInt64.self) == .max))
            reads.append((#line, try read(row, 10, as: UInt.self) == 7))
            reads.append((#line, try read(row, 11, as: Double.self) == 2.5))
            reads.append((#line, try read(row, 12, as: Float.self) == 1.5))
            reads.append((#line, try read(row, 13, as: String.self) == "héllo"))
            reads.append((#line, try read(row, 14, as: Data.self) == Data([0, 1, 2])))
            reads.append((#line, try read(row, 15, as: Date.self) == when))
            reads.append((#line, try read(row, 16, as: UUID.self) == id))
            reads.append((#line, try read(row, 17, as: URL.self) == home))
            reads.append((#line, try read(row, 18, as: String.self) == "important"))
            reads.append((#line, try read(row, 19, as: Int?.self) == nil))
            reads.append((#line, try read(row, 20, as: String?.self) == "maybe"))
            // Conversions: what fits converts, what does not is refused.
            reads.append((#line, try read(row, 1, as: Int.self) == -8))
            reads.append((#line, try read(row, 6, as: Int64.self) == 8))
            reads.append((#line, try read(row, 5, as: Int64.self) == 1 << 40))
            reads.append((#line, try read(row, 12, as: Double.self) == 1.5))
            failures.append(failure(row, 5, as: Int32.self))
            failures.append(failure(row, 9, as: Int64.self))
            failures.append(failure(row, 1, as: UInt8.self))
        }
        #expect(rows == 1)
        #expect(reads.count == 25)
        for read in reads where !read.same { Issue.record("the read on line \(read.line) differs") }
        #expect(failures.count == 3)
        #expect(failures.allSatisfy { $0?.code == .typeMismatch })
    }

    /// A read of another type, of a missing value into a non-optional, or past the last
    /// column is an error that names the attribute; a column that names no stored attribute,
    /// or a relationship, fails the loop before its first row.
    @Test func wrongReadsAndWrongColumnsAreErrorsThatNameThem() throws {
        let store = try values.populated(temporaryStoreDirectory(), 5)
        defer { try? store.close() }
        let context = store.context
        let fifth = FetchDescriptor<Person>(predicate: #Predicate { $0.id == 5 })
        var mismatch: ObjectGraphError?, missing: ObjectGraphError?, past: ObjectGraphError?
        var before: ObjectGraphError?, absent: String?? = .some("unread")
        try context.forEachRow(fifth, columns: [\.name, \.city]) { row in
            mismatch = failure(row, 0, as: Int.self)
            missing = failure(row, 1, as: String.self)
            absent = try read(row, 1, as: String?.self)
            past = failure(row, 2, as: String.self)
            before = failure(row, -1, as: String.self)
        }
        #expect(mismatch?.code == .typeMismatch)
        #expect(mismatch?.message.contains("Person.name (column 0)") == true)
        #expect(missing?.code == .typeMismatch)
        #expect(missing?.message.contains("has no value") == true)
        #expect(absent == .some(nil))
        #expect(past?.code == .unknownKey)
        #expect(before?.code == .unknownKey)

        var calls = 0
        let unknown = #expect(throws: ObjectGraphError.self) {
            try context.forEachRow(FetchDescriptor<Person>(), columns: ["id", "nickname"]) { _ in calls += 1 }
        }
        #expect(unknown?.code == .unknownKey)
        #expect(unknown?.key == "nickname")

        let shelves = try makeRowShelves()
        let relationship = #expect(throws: ObjectGraphError.self) {
            try shelves.forEachRow(FetchDescriptor<RowBook>(), columns: [\.title, \.shelf]) { _ in calls += 1 }
        }
        #expect(relationship?.code == .unknownKey)
        #expect(relationship?.message.contains("column 1") == true)
        #expect(throws: ObjectGraphError.self) {
            try shelves.forEachRow(FetchDescriptor<RowShelf>(), columns: ["label", "books"]) { _ in calls += 1 }
        }
        #expect(calls == 0)
    }

    /// Column `column` of `row` as `V`.
    func read<V: PrimitiveAttribute>(_ row: borrowing ObjectRow, _ column: Int, as type: V.Type) throws -> V {
        try row[column]
    }

    /// Column `column` of `row` as `V?`.
    func read<V: PrimitiveAttribute>(_ row: borrowing ObjectRow, _ column: Int, as type: V?.Type) throws -> V? {
        try row[column]
    }

    /// The error reading column `column` of `row` as `V` throws, if any.
    func failure<V: PrimitiveAttribute>(_ row: borrowing ObjectRow, _ column: Int, as type: V.Type) -> ObjectGraphError?
    {
        do {
            let _: V = try row[column]
            return nil
        } catch {
            return error
        }
    }

    func makeRowShelves() throws -> ModelContext {
        let context = ModelContext(schema: try Schema(RowShelf.self, RowBook.self))
        let shelf = try context.insert(RowShelf.self) { $0.label = "A" }
        try context.insert(RowBook.self) { b in
            b.title = "One"
            b.shelf = shelf
        }
        try context.save()
        return context
    }

    /// A snapshot's row loop reads what its objects hold, as the context's does.
    @Test func aSnapshotRowLoopMatchesItsFetch() async throws {
        let dir = temporaryStoreDirectory()
        try values.populated(dir).close()
        let store = try AsyncStore(at: dir, schema: storeSchema)
        let snapshot = store.snapshot
        let descriptor = FetchDescriptor<Person>(
            predicate: #Predicate { $0.city == "City 3" }, sortBy: [SortDescriptor(\.id)])
        var rows: [PersonRow] = []
        try snapshot.forEachRow(descriptor, columns: [\.id, \.name, \.city, \.score]) { row in
            rows.append(PersonRow(id: try row[0], name: try row[1], city: try row[2], score: try row[3]))
        }
        var named: [PersonRow] = []
        try snapshot.forEachRow(descriptor, columns: ["id", "name", "city", "score"]) { row in
            named.append(PersonRow(id: try row[0], name: try row[1], city: try row[2], score: try row[3]))
        }
        #expect(!rows.isEmpty)
        #expect(rows == (try snapshot.fetch(descriptor, as: PersonRow.self)))
        #expect(named == rows)
        var ids: [(ObjectID, Int64)] = []
        try snapshot.forEachRow(descriptor, columns: [\.id]) { row in ids.append((row.objectID, try row[0])) }
        for (objectID, id) in ids {
            #expect((snapshot.object(with: objectID) as? Person)?.id == id)
        }
        #expect(throws: ObjectGraphError.self) {
            try snapshot.forEachRow(descriptor, columns: ["nickname"]) { _ in }
        }
        try await store.close()
    }
}

@Suite("Property: row loops against the objects' own reads")
struct RowReadPropertyTests {
    /// After random inserts, updates (nil values included), deletes, saves and rollbacks, a row
    /// loop over every person reads what each person's properties read, in the fetch's order,
    /// and a sorted, filtered, windowed loop what the same fetch returns.
    @Test func aRowLoopReadsWhatTheObjectsReadAfterRandomChanges() async {
        await propertyCheck(count: propertyRuns, input: Gen.int(in: 0...1_000_000).array(of: 1...80)) { codes in
            do { try run(codes) } catch { Issue.record("unexpected error: \(error)") }
        }
    }

    struct Read: Equatable {
        var id: Int64
        var name: String
        var age: Int
        var city: String?
        var score: Double
    }

    private func run(_ codes: [Int]) throws {
        let context = ModelContext(schema: try Schema(Person.self))
        var nextID: Int64 = 1
        for code in codes {
            let arg = code / 10
            let people = try context.fetch(FetchDescriptor<Person>(sortBy: [SortDescriptor(\.id)]))
            switch code % 10 {
            case 0, 1, 2:
                try context.insert(Person.self) { p in
                    p.id = nextID
                    p.name = String(repeating: "n", count: arg % 40)
                    p.email = "p\(nextID)@example.com"
                    p.age = arg % 90
                    p.city = arg % 3 == 0 ? nil : "City \(arg % 11)"
                    p.score = Double(arg) / 8
                }
                nextID += 1
            case 3, 4:
                if !people.isEmpty {
                    let p = people[arg % people.count]
                    p.city = arg % 2 == 0 ? nil : "Moved \(arg)"
                    p.name = "Renamed \(arg % 5)"
                }
            case 5:
                if !people.isEmpty { context.delete(people[arg % people.count]) }
            case 6, 7:
                try context.save()
            default:
                context.rollback()
            }
        }
        let all = FetchDescriptor<Person>(sortBy: [SortDescriptor(\.id)])
        var rows: [Read] = []
        try context.forEachRow(all, columns: [\.id, \.name, \.age, \.city, \.score]) { row in
            rows.append(Read(id: try row[0], name: try row[1], age: try row[2], city: try row[3], score: try row[4]))
        }
        let objects = try context.fetch(all).map {
            Read(id: $0.id, name: $0.name, age: $0.age, city: $0.city, score: $0.score)
        }
        #expect(rows == objects)

        var window = FetchDescriptor<Person>(
            predicate: #Predicate { $0.age > 20 }, sortBy: [SortDescriptor(\.name), SortDescriptor(\.id)])
        window.fetchOffset = 1
        window.fetchLimit = 7
        var windowed: [Int64] = []
        try context.forEachRow(window, columns: ["id"]) { row in windowed.append(try row[0]) }
        #expect(windowed == (try context.fetch(window).map(\.id)))
    }
}
