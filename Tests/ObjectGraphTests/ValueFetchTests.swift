import Foundation
import Testing

@testable import ObjectGraph

/// A person as a reader sends it on: plain values, no object.
struct PersonRow: Decodable, Equatable, Sendable {
    var id: Int64
    var name: String
    var city: String?
    var score: Double
}

/// A row with a list attribute and a key the entity lacks.
struct TaggedRow: Decodable {
    var label: String
    var missing: Int
}

@Suite("Fetching values without instances")
struct ValueFetchTests {
    func populated(_ dir: URL, _ n: Int = 300) throws -> ObjectStore {
        let store = try ObjectStore.open(at: dir, schema: storeSchema, options: StoreOptions(durability: .none))
        for i in 1...n {
            try store.context.insert(Person.self) { p in
                p.id = Int64(i)
                p.name = "Person \(i)"
                p.email = "p\(i)@example.com"
                p.city = i % 5 == 0 ? nil : "City \(i % 7)"
                p.score = Double(i) / 4
            }
        }
        try store.context.save()
        return store
    }

    func instanceCount(_ context: ModelContext) throws -> Int {
        let table = try context.table(for: Person.self)
        return (0..<table.rowCount).filter { table.instances[$0] != nil }.count
    }

    @Test func aContextFetchAsValuesReadsWhatTheObjectsHoldAndCreatesNoInstance() throws {
        let dir = temporaryStoreDirectory()
        try populated(dir).close()
        let store = try ObjectStore.open(at: dir, schema: storeSchema)
        defer { try? store.close() }
        let descriptor = FetchDescriptor<Person>(
            predicate: #Predicate { $0.score > 10 }, sortBy: [SortDescriptor(\.score, order: .reverse)])
        var window = descriptor
        window.fetchOffset = 5
        window.fetchLimit = 20
        let rows = try store.context.fetch(window, as: PersonRow.self)
        #expect(try instanceCount(store.context) == 0)
        #expect(rows.count == 20)
        #expect(rows.first?.id == 295)
        // The same values, in the same order, as decoding each fetched object.
        let objects = try store.context.fetch(window).map { try $0.decode(as: PersonRow.self) }
        #expect(rows == objects)
        #expect(try instanceCount(store.context) == 20)
    }

    @Test func pendingChangesAreReadAsTheyStand() throws {
        let store = try populated(temporaryStoreDirectory(), 10)
        defer { try? store.close() }
        let context = store.context
        let first = try #require(try context.fetch(FetchDescriptor<Person>(predicate: #Predicate { $0.id == 1 })).first)
        first.name = "Renamed"
        try context.insert(Person.self) { p in
            p.id = 11; p.name = "New"; p.email = "n@example.com"
        }
        let second = try #require(
            try context.fetch(FetchDescriptor<Person>(predicate: #Predicate { $0.id == 2 })).first)
        context.delete(second)
        let rows = try context.fetch(FetchDescriptor<Person>(sortBy: [SortDescriptor(\.id)]), as: PersonRow.self)
        #expect(rows.map(\.id) == [1, 3, 4, 5, 6, 7, 8, 9, 10, 11])
        #expect(rows.first?.name == "Renamed")
        #expect(rows.last?.name == "New")
    }

    @Test func aKeyTheEntityLacksFailsTheFetchNamingIt() throws {
        let store = try populated(temporaryStoreDirectory(), 3)
        defer { try? store.close() }
        struct Wrong: Decodable { var id: Int64; var nickname: String }
        let error = #expect(throws: DecodingError.self) {
            try store.context.fetch(FetchDescriptor<Person>(), as: Wrong.self)
        }
        guard case .keyNotFound(let key, let context)? = error else {
            Issue.record("expected keyNotFound, got \(String(describing: error))")
            return
        }
        #expect(key.stringValue == "nickname")
        #expect(context.debugDescription.contains("Person has no attribute 'nickname'"))
    }

    @Test func aSnapshotFetchAsValuesMatchesItsObjects() async throws {
        let dir = temporaryStoreDirectory()
        try populated(dir).close()
        let store = try AsyncStore(at: dir, schema: storeSchema)
        let snapshot = store.snapshot
        let descriptor = FetchDescriptor<Person>(
            predicate: #Predicate { $0.city == "City 3" }, sortBy: [SortDescriptor(\.id)])
        let rows = try snapshot.fetch(descriptor, as: PersonRow.self)
        let objects = try snapshot.fetch(descriptor).map { try $0.decode(as: PersonRow.self) }
        #expect(!rows.isEmpty)
        #expect(rows == objects)
        #expect(rows.allSatisfy { $0.city == "City 3" })
        try await store.close()
    }

    /// A cursor over values calls its body with what `fetch(_:as:)` returns, in its order and
    /// window, creating no instance; it skips an object deleted meanwhile, and stops at the
    /// first error its body throws.
    @Test func forEachValueReadsWhatFetchAsValuesReturnsOneAtATime() throws {
        let dir = temporaryStoreDirectory()
        try populated(dir).close()
        let store = try ObjectStore.open(at: dir, schema: storeSchema)
        defer { try? store.close() }
        var descriptor = FetchDescriptor<Person>(
            predicate: #Predicate { $0.score > 10 }, sortBy: [SortDescriptor(\.score, order: .reverse)])
        descriptor.fetchOffset = 3
        descriptor.fetchLimit = 50
        var seen: [PersonRow] = []
        try store.context.forEach(descriptor, as: PersonRow.self) { seen.append($0) }
        #expect(try instanceCount(store.context) == 0)
        #expect(seen.count == 50)
        #expect(seen == (try store.context.fetch(descriptor, as: PersonRow.self)))

        struct Stop: Error {}
        var calls = 0
        #expect(throws: Stop.self) {
            try store.context.forEach(descriptor, as: PersonRow.self) { _ in
                calls += 1
                if calls == 7 { throw Stop() }
            }
        }
        #expect(calls == 7)

        let all = FetchDescriptor<Person>(sortBy: [SortDescriptor(\.id)])
        let last = try #require(
            try store.context.fetch(FetchDescriptor<Person>(predicate: #Predicate { $0.id == 300 })).first)
        var ids: [Int64] = []
        try store.context.forEach(all, as: PersonRow.self) { row in
            ids.append(row.id)
            if row.id == 1 { store.context.delete(last) }
        }
        #expect(ids == Array(1...299))
    }

    @Test func aSnapshotForEachValueMatchesItsFetch() async throws {
        let dir = temporaryStoreDirectory()
        try populated(dir).close()
        let store = try AsyncStore(at: dir, schema: storeSchema)
        let snapshot = store.snapshot
        let descriptor = FetchDescriptor<Person>(
            predicate: #Predicate { $0.city == "City 3" }, sortBy: [SortDescriptor(\.id)])
        var rows: [PersonRow] = []
        try snapshot.forEach(descriptor, as: PersonRow.self) { rows.append($0) }
        #expect(!rows.isEmpty)
        #expect(rows == (try snapshot.fetch(descriptor, as: PersonRow.self)))
        try await store.close()
    }

    /// Reads its keys in an order that depends on the value, and one key only sometimes.
    struct Wandering: Decodable, Equatable {
        var id: Int64
        var name: String
        var city: String?

        enum CodingKeys: String, CodingKey { case id, name, city }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            if try c.decode(Int64.self, forKey: .id) % 2 == 0 {
                name = try c.decode(String.self, forKey: .name)
                id = try c.decode(Int64.self, forKey: .id)
                city = nil
            } else {
                city = try c.decodeIfPresent(String.self, forKey: .city)
                id = try c.decode(Int64.self, forKey: .id)
                name = try c.decode(String.self, forKey: .name)
            }
        }

        init(_ person: Person) {
            id = person.id
            name = person.name
            city = person.id % 2 == 0 ? nil : person.city
        }
    }

    @Test func keysAskedInAnyOrderReadTheirOwnAttributes() throws {
        let store = try populated(temporaryStoreDirectory(), 50)
        defer { try? store.close() }
        let descriptor = FetchDescriptor<Person>(sortBy: [SortDescriptor(\.id)])
        let values = try store.context.fetch(descriptor, as: Wandering.self)
        #expect(values == (try store.context.fetch(descriptor).map(Wandering.init)))
        #expect(values.count == 50)
    }
}
