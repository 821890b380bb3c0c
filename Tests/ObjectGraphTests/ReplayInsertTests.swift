import Foundation
import GraphJournal
import Testing

@testable import ObjectGraph

/// Replay reads a block's consecutive serials as a run, without listing them, and still
/// refuses a block that inserts an object the store already has.
@Suite("Replay of inserted serials")
struct ReplayInsertTests {
    /// The transaction payloads of a store that `saves` wrote.
    private func payloads(_ name: String, _ saves: (ModelContext) throws -> Void) throws -> (StoredSchema, [[UInt8]]) {
        let dir = temporaryStoreDirectory(name)
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try ObjectStore.open(
            at: dir, schema: try Schema(Person.self), options: StoreOptions(durability: .none))
        try saves(store.context)
        try store.close()
        var schema: StoredSchema?
        var payloads: [[UInt8]] = []
        _ = try Journal.readRecords(directory: dir.path) { record in
            switch record.entry.kind {
            case .schema: schema = try StoredSchema.decode(record.payload)
            case .transaction: payloads.append(record.payload)
            default: break
            }
        }
        return (try #require(schema), payloads)
    }

    private func insert(_ ids: Range<Int64>, into context: ModelContext) throws {
        for i in ids { try context.insert(Person(id: i, name: "n\(i)", email: "e\(i)")) }
        try context.save()
    }

    @Test func aRunOfSerialsTheStoreHasIsRefusedNamingTheFirst() throws {
        // Store a: objects 1...3. Store b: objects 1...5, then 6...7. Spliced: a's save, then
        // b's second save (a run of new serials), then b's first (a run over 1...3).
        let (schema, a) = try payloads("run-a") { try insert(0..<3, into: $0) }
        let (_, b) = try payloads("run-b") { c in
            try insert(0..<5, into: c)
            try insert(5..<7, into: c)
        }
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let journal = try Journal.open(directory: dir)
        try journal.append(a[0], schema: schema.encoded())
        try journal.append(b[1])
        try journal.append(b[0])
        try journal.close()
        let error = try #require(throws: StoreError.self) {
            try ObjectStore.open(at: dir, schema: try Schema(Person.self), options: StoreOptions(durability: .none))
        }
        #expect(error.message.contains("inserts Person/1, which already exists"), "\(error)")

        // Without the last record the serials are new: the first run, then one past a gap.
        let clean = temporaryStoreDirectory("clean")
        defer { try? FileManager.default.removeItem(at: clean) }
        let j = try Journal.open(directory: clean)
        try j.append(a[0], schema: schema.encoded())
        try j.append(b[1])
        try j.close()
        let store = try ObjectStore.open(
            at: clean, schema: try Schema(Person.self), options: StoreOptions(durability: .none))
        defer { try? store.close() }
        let people = try store.context.fetch(Person.self) { _ in true }
        #expect(Set(people.map(\.id)) == [0, 1, 2, 5, 6])
        #expect(Set(people.compactMap { $0.objectID?.serial }) == [1, 2, 3, 6, 7])
    }
}
