import Foundation
import Testing

@testable import ObjectGraph

/// A record keyed by a unique `code`, with a hook that counts inserts by hand.
@Entity final class BatchItem {
    @Attribute(.unique) var code: Int64 = 0
    var title: String = ""
    var tags: [String] = []
    @Transient var insertCount = 0
    func awakeFromInsert() { insertCount += 1 }
}

struct BatchItemRecord: Codable, Sendable {
    var code: Int64
    var title: String
    var tags: [String]
}

/// A record without the identifying attribute.
struct UntitledRecord: Codable, Sendable {
    var title: String
}

@Suite("Batch upsert: values into tables, no instances")
struct BatchUpsertTests {
    let schema: Schema = {
        do { return try Schema(BatchItem.self) } catch { preconditionFailure("\(error)") }
    }()

    func records(_ codes: Range<Int64>, title: String) -> [BatchItemRecord] {
        codes.map { BatchItemRecord(code: $0, title: "\(title) \($0)", tags: ["t\($0 % 3)", "all"]) }
    }

    func instanceCount(_ context: ModelContext) throws -> Int {
        let table = try context.table(for: BatchItem.self)
        return (0..<table.rowCount).filter { table.instances[$0] != nil }.count
    }

    @Test func insertsAndUpdatesByTheUniqueKeyCreatingNoInstanceAndRunningNoHook() throws {
        let dir = temporaryStoreDirectory()
        let store = try ObjectStore.open(at: dir, schema: schema)
        let first = try store.context.batchUpsert(records(0..<500, title: "first"), into: BatchItem.self)
        #expect(first == BatchUpsertResult(inserted: 500, updated: 0))
        #expect(try instanceCount(store.context) == 0)
        try store.context.save()
        // The save learns which hooks the class implements from one instance at most.
        let learned = try instanceCount(store.context)
        #expect(learned <= 1)
        let before = store.stats.records
        // Half updated, half new; a value repeated in the call updates the object it inserted.
        let second = try store.context.batchUpsert(
            records(250..<750, title: "second") + records(700..<701, title: "again"), into: BatchItem.self,
            returningIDs: true)
        #expect(second.inserted == 250)
        #expect(second.updated == 251)
        #expect(second.objectIDs.count == 501)
        #expect(second.objectIDs[450] == second.objectIDs[500])
        #expect(try instanceCount(store.context) == learned)
        try store.context.save()
        #expect(store.stats.records == before + 1)
        try store.close()

        let reopened = try ObjectStore.open(at: dir, schema: schema)
        defer { try? reopened.close() }
        let items = try reopened.context.fetch(FetchDescriptor<BatchItem>(sortBy: [SortDescriptor(\.code)]))
        #expect(items.count == 750)
        #expect(items[10].title == "first 10")
        #expect(items[300].title == "second 300")
        #expect(items[700].title == "again 700")
        #expect(items[700].tags == ["t1", "all"])
        #expect(items.allSatisfy { $0.insertCount == 0 })
        #expect(reopened.context.object(with: second.objectIDs[0]) === items[250])
    }

    @Test func aFailingValueUndoesTheWholeCall() throws {
        let context = ModelContext(schema: schema)
        try context.batchUpsert(records(0..<10, title: "kept"), into: BatchItem.self)
        try context.save()
        let error = #expect(throws: MappingError.self) {
            try context.batchUpsert(records(10..<20, title: "x"), into: BatchItem.self)
            try context.batchUpsert([UntitledRecord(title: "no code")], into: BatchItem.self)
        }
        #expect(error?.code == .invalidIdentification)
        // The first call of the block stands (it succeeded); the failing one changed nothing.
        #expect(try context.count(of: BatchItem.self) == 20)
        context.rollback()
        #expect(try context.count(of: BatchItem.self) == 10)
        // Without identification, every value inserts.
        let inserted = try context.batchUpsert(records(0..<3, title: "copy"), into: BatchItem.self, identifiedBy: nil)
        #expect(inserted == BatchUpsertResult(inserted: 3, updated: 0))
        #expect(throws: (any Error).self) { try context.save() }  // the unique codes collide
    }

    /// A value that fails to encode, after one that fails to be written: the values are
    /// encoded one ahead of the one written, but the first failure in their order is thrown,
    /// and nothing of the call stays.
    @Test func theFirstFailingValueInTheirOrderIsTheOneReported() throws {
        struct Item: Encodable {
            var code: Int64?
            var fails = false
            func encode(to encoder: any Encoder) throws {
                if fails {
                    throw EncodingError.invalidValue(code as Any, .init(codingPath: [], debugDescription: "no"))
                }
                var container = encoder.container(keyedBy: CodingKeys.self)
                if let code { try container.encode(code, forKey: .code) }
                try container.encode("item", forKey: .title)
            }
            enum CodingKeys: String, CodingKey { case code, title }
        }
        let context = ModelContext(schema: schema)
        let values = [Item(code: 1), Item(code: nil), Item(code: 3, fails: true), Item(code: 4)]
        let error = #expect(throws: MappingError.self) { try context.batchUpsert(values, into: BatchItem.self) }
        #expect(error?.code == .invalidIdentification, "\(String(describing: error))")
        #expect(error?.sourceIndex == 1)
        #expect(try context.count(of: BatchItem.self) == 0)
        // The encoding failure alone is reported at its own value.
        let encoding = #expect(throws: (any Error).self) {
            try context.batchUpsert([Item(code: 1), Item(code: 2, fails: true)], into: BatchItem.self)
        }
        #expect((encoding as? MappingError)?.sourceIndex ?? 1 == 1, "\(String(describing: encoding))")
        #expect(try context.count(of: BatchItem.self) == 0)
    }

    @Test func aMappedListOfStringsIsCheckedElementByElement() throws {
        let context = ModelContext(schema: schema)
        var mapping = EntityMapping(BatchItem.self)
        try mapping.map("code", "title", "tags")
        let good = Data(#"[{"code":1,"title":"a","tags":["x","y\u00e9"]},{"code":2,"title":"b","tags":[]}]"#.utf8)
        try context.map(good, with: mapping)
        let items = try context.fetch(FetchDescriptor<BatchItem>(sortBy: [SortDescriptor(\.code)]))
        #expect(items.map(\.tags) == [["x", "yé"], []])
        for bad in [#"[{"code":3,"title":"c","tags":["x",1]}]"#, #"[{"code":4,"title":"d","tags":{"a":"b"}}]"#] {
            let error = #expect(throws: MappingError.self) { try context.map(Data(bad.utf8), with: mapping) }
            #expect(error?.code == .untransformableValue, "\(bad)")
            #expect(error?.attribute == "tags", "\(bad)")
        }
        #expect(try context.count(of: BatchItem.self) == 2)
    }
}
