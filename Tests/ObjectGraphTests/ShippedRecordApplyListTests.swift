import Foundation
import GraphJournal
import Synchronization
import Testing

@testable import ObjectGraph

/// A replica whose model declares native lists, applying the records of a writer that still
/// stores them as JSON (`ListedJSON`, the release before native lists): upgrading the followers
/// before the writer (`Docs/Replication.md`, "Upgrading a writer and its followers").
@Suite struct ShippedRecordApplyListTests {
    /// A writer of `schema` whose durable records `collected` receives.
    static func writer(
        _ schema: Schema, _ collected: ShippedRecordApplyTests.Collected, _ name: String
    ) throws
        -> ObjectStore
    {
        // Records are handed out once durable: a policy that syncs each save.
        var options = StoreOptions()
        options.journal.onDurable = { records in collected.records.withLock { $0.append(contentsOf: records) } }
        return try ObjectStore.open(at: temporaryStoreDirectory(name + "-writer"), schema: schema, options: options)
    }

    static func replicaOptions() -> StoreOptions {
        var options = StoreOptions(durability: .none)
        options.readOnly = true
        options.autoCompactionRatio = nil
        return options
    }

    /// Applies `records` to `replica`, keeping the schema in force.
    static func apply(_ records: [ShippedRecord], to replica: ObjectStore, schema: inout [UInt8]?) throws {
        for r in records {
            switch r.kind {
            case .schema: schema = try r.payload()
            case .transaction:
                try replica.applyShipped(r, schema: try #require(schema), origin: Array("at \(r.sequence)".utf8))
            case .base: Issue.record("a base on the log")
            }
        }
    }

    /// Each object's lists, by name.
    static func lists(_ context: ModelContext) throws -> [String: String] {
        Dictionary(
            uniqueKeysWithValues: try context.objects(of: Listed.self).map {
                ($0.name, "\($0.tags)|\($0.scores)|\(String(describing: $0.aliases))|\(String(describing: $0.ranks))")
            })
    }

    @Test func aReplicaOfNativeListsAppliesRecordsOfAWriterThatStoresThemAsJSON() throws {
        let collected = ShippedRecordApplyTests.Collected()
        let source = try Self.writer(try Schema(ListedJSON.Listed.self), collected, #function)
        let replicaDirectory = temporaryStoreDirectory("replica")
        var replica = try ObjectStore.open(
            at: replicaDirectory, schema: try Schema(Listed.self), options: Self.replicaOptions())
        var schema: [UInt8]?
        // Inserts: every list set (empty, Unicode and escapes, Int extremes), and all defaults.
        try source.context.insert(ListedJSON.Listed.self) {
            $0.name = "a"
            $0.tags = JSONStrings(ListAttributeTests.unicode)
            $0.scores = JSONInts([1, -2, Int.min, Int.max])
            $0.aliases = JSONStrings([])
        }
        let b = try source.context.insert(ListedJSON.Listed.self) { $0.name = "b" }
        try source.context.save()
        try Self.apply(collected.take(), to: replica, schema: &schema)
        let expectedAfterInsert = [
            "a": "\(ListAttributeTests.unicode)|\([1, -2, Int.min, Int.max])|Optional([])|nil",
            "b": "[]|[]|nil|nil",
        ]
        #expect(try Self.lists(replica.context) == expectedAfterInsert)
        let a = try #require(try replica.context.object(Listed.self, where: \.name, equals: "a"))
        #expect(try a.attributeValue(forKey: "tags") == .stringList(ListAttributeTests.unicode))
        // Updates: a list set, one set to nil.
        b.ranks = JSONInts([7, -7])
        b.tags = JSONStrings(["x"])
        try source.context.object(ListedJSON.Listed.self, where: \.name, equals: "a")?.aliases = nil
        try source.context.save()
        try Self.apply(collected.take(), to: replica, schema: &schema)
        let expected = [
            "a": "\(ListAttributeTests.unicode)|\([1, -2, Int.min, Int.max])|nil|nil",
            "b": "[\"x\"]|[]|nil|Optional([7, -7])",
        ]
        #expect(try Self.lists(replica.context) == expected)
        let last = source.stats.lastSequence
        #expect(replica.origin == Array("at \(last)".utf8))

        // Reopened, the replica's journal (the writer's JSON records) converts at open alike;
        // compacted, it holds the native form.
        try replica.close()
        replica = try ObjectStore.open(
            at: replicaDirectory, schema: try Schema(Listed.self), options: Self.replicaOptions())
        #expect(try Self.lists(replica.context) == expected)
        try replica.compact()
        try replica.close()
        replica = try ObjectStore.open(
            at: replicaDirectory, schema: try Schema(Listed.self), options: Self.replicaOptions())
        #expect(try Self.lists(replica.context) == expected)
        #expect(replica.origin == Array("at \(last)".utf8))

        // Records after the compaction still convert.
        try source.context.insert(ListedJSON.Listed.self) {
            $0.name = "c"
            $0.scores = JSONInts([3])
        }
        try source.context.save()
        try Self.apply(collected.take(), to: replica, schema: &schema)
        #expect(try Self.lists(replica.context)["c"] == "[]|[3]|nil|nil")
        try replica.close()
        replica = try ObjectStore.open(
            at: replicaDirectory, schema: try Schema(Listed.self), options: Self.replicaOptions())
        #expect(try Self.lists(replica.context)["c"] == "[]|[3]|nil|nil")
        try replica.close()
        try source.close()
    }

    @Test func aStoredJSONValueThatIsNotTheListIsRefusedBeforeAnythingIsWritten() throws {
        let collected = ShippedRecordApplyTests.Collected()
        let source = try Self.writer(try Schema(ListedObject.Listed.self), collected, #function)
        try source.context.insert(ListedObject.Listed.self) { $0.name = "a" }
        try source.context.save()
        let replicaDirectory = temporaryStoreDirectory("replica")
        let replica = try ObjectStore.open(
            at: replicaDirectory, schema: try Schema(Listed.self), options: Self.replicaOptions())
        var schema: [UInt8]?
        let error = try #require(throws: StoreError.self) {
            try Self.apply(collected.take(), to: replica, schema: &schema)
        }
        #expect(error.code == .incompatibleSchema)
        #expect(error.sequence != nil)
        for part in ["Listed.tags of object 1", #"{"a":0}"#, "stringList", "nothing was written", "writer"] {
            #expect(error.message.contains(part), "\(part): \(error.message)")
        }
        // Nothing was appended or applied; the replica is still open and as it was.
        #expect(replica.stats.lastSequence == 0)
        #expect(replica.origin == nil)
        #expect(try replica.context.objects(of: Listed.self).isEmpty)
        try replica.close()
        let reopened = try ObjectStore.open(
            at: replicaDirectory, schema: try Schema(Listed.self), options: Self.replicaOptions())
        #expect(try reopened.context.objects(of: Listed.self).isEmpty)
        try reopened.close()
        try source.close()
    }

    @Test func theConversionIsTheOneOpenUses() throws {
        // The change set of a JSON record, converted, against the replay of the same record.
        let stored = StoredSchema(try Schema(ListedJSON.Listed.self))
        let current = try Schema(Listed.self)
        let json = Array(#"["a","é"]"#.utf8)
        var changes = ChangeSet(entities: [
            EntityChanges(
                entityName: "Listed", attributeNames: ["name", "tags", "scores", "aliases", "ranks"],
                insertedSerials: [1],
                insertedValues: [.string("x"), .data(Data(json)), .data(Data("[1]".utf8)), nil, nil],
                updates: [.init(serial: 1, attribute: 4, value: .data(Data("[-1]".utf8)))])
        ])
        changes = try changes.convertingJSONLists(stored: stored, to: current)
        #expect(
            changes.entities[0].insertedValues == [.string("x"), .stringList(["a", "é"]), .intList([1]), nil, nil])
        #expect(changes.entities[0].updates[0].value == .intList([-1]))
        let cell = try json.withUnsafeBytes { try ListCoding.cell(convertingJSON: $0, to: .stringList) }
        #expect(cell == ListCoding.encode(strings: ["a", "é"]))
        // A model without lists converts nothing.
        let same = try changes.convertingJSONLists(stored: stored, to: try Schema(ListedJSON.Listed.self))
        #expect(same == changes)
    }
}
