import Foundation
import Testing

@testable import ObjectGraph

/// Final, without state of its own and without hooks, as it declares: a fresh instance of one of
/// its objects is as good as any, pending changes or not.
@Entity final class PlainRecord {
    @Attribute(.unique) var key: Int = 0
    var label: String = ""
    static var implementedHooks: EntityHooks { [] }
}

extension PlainRecord: ImportableUniqueObject {
    typealias ImportSource = Int
    static var uniqueIDKeyPath: ReferenceWritableKeyPath<PlainRecord, Int> { \.key }
    static func uniqueID(from source: Int, in context: ModelContext) throws -> Int? { source }
    func update(from source: Int, in context: ModelContext) throws { label = "imported \(source)" }
}

/// With an optional attribute: its null bits live in null words that an import in batches grows
/// onto zero pages.
@Entity final class OptionalRecord {
    @Attribute(.unique) var key: Int = 0
    var note: String?
}

extension OptionalRecord: ImportableUniqueObject {
    typealias ImportSource = Int
    static var uniqueIDKeyPath: ReferenceWritableKeyPath<OptionalRecord, Int> { \.key }
    static func uniqueID(from source: Int, in context: ModelContext) throws -> Int? { source }
    func update(from source: Int, in context: ModelContext) throws { note = source % 3 == 0 ? nil : "note \(source)" }
}

/// The same without a declaration: its hooks are learned at the first save.
@Entity final class UndeclaredRecord {
    var label: String = ""
}

@Suite("A context keeps only the instances it must")
struct RegisteredObjectsTests {
    let schema: Schema = {
        do { return try Schema(Fetched.self) } catch { preconditionFailure("\(error)") }
    }()

    /// A context with `n` saved objects labelled 0..<n, and their IDs.
    func saved(_ n: Int) throws -> (ModelContext, [ObjectID]) {
        let context = ModelContext(schema: schema)
        var ids: [ObjectID] = []
        for i in 0..<n {
            let object = try context.insert(Fetched.self)
            object.label = "\(i)"
            try ids.append(#require(object.objectID))
        }
        try context.save()
        // The inserted instances were held by the context while pending; start from none.
        context.reset()
        return (context, ids)
    }

    func instanceCount(_ context: ModelContext) throws -> Int {
        let table = try context.table(for: Fetched.self)
        return (0..<table.rowCount).filter { table.instances[$0] != nil }.count
    }

    @Test func cleanInstancesNothingHoldsAreLetGoAndRecreatedWithAwakeFromFetch() throws {
        let n = 20_000
        let (context, ids) = try saved(n)
        let held = try #require(context.object(with: ids[7]) as? Fetched)
        held.fetchCount = 100  // a transient value the application keeps on the instance it holds
        let pending = try #require(context.object(with: ids[8]) as? Fetched)
        pending.label = "changed"
        var labels = 0
        for id in ids {
            guard let object = context.object(with: id) as? Fetched else { continue }
            labels += object.label.isEmpty ? 0 : 1
        }
        #expect(labels == n)
        // Bounded: at most what two sweeps let accumulate, not one instance per object read.
        #expect(try instanceCount(context) <= 2 * EntityTable.minimumSweep + 2)
        // The held instance is the same one, transient value and all; the changed one too.
        #expect(context.object(with: ids[7]) === held)
        #expect(held.fetchCount == 100)
        #expect(context.object(with: ids[8]) === pending)
        #expect(pending.label == "changed")
        // An object let go is a fresh instance, awoken once more.
        let first = try #require(context.object(with: ids[0]) as? Fetched)
        #expect(first.fetchCount == 1)
        #expect(first.label == "0")
    }

    /// A fetch's instances are all held by its result while it is built, so no sweep runs
    /// meanwhile; once the application lets the result go, they are let go like any others,
    /// at the sweep that as many instances again start.
    @Test func aFetchedResultIsNotSweptWhileItIsBuiltAndIsLetGoAfterwards() throws {
        let n = 10_000
        let (context, ids) = try saved(3 * n)
        let table = try context.table(for: Fetched.self)
        var descriptor = FetchDescriptor<Fetched>()
        descriptor.fetchLimit = n
        var result: [Fetched]? = try context.fetch(descriptor)
        #expect(result?.count == n)
        #expect(try instanceCount(context) == n, "every instance of the result is there, none swept")
        #expect(table.sweepThreshold >= 2 * n, "the next sweep waits for as many instances again")
        result = nil
        // The application let the result go: the objects read one by one next make as many
        // instances again, which start the sweep that lets the fetched ones go too.
        for id in ids[n...] { _ = (context.object(with: id) as? Fetched)?.label }
        #expect(try instanceCount(context) <= 2 * EntityTable.minimumSweep + 2)
        // `objects(of:)` builds its result the same way: every instance there at its end.
        let all = try context.objects(of: Fetched.self)
        #expect(all.count == 3 * n)
        #expect(try instanceCount(context) == 3 * n)
        withExtendedLifetime(all) {}
    }

    func instanceCount<T: Entity>(_ context: ModelContext, _ type: T.Type) throws -> Int {
        let table = try context.table(for: type)
        return (0..<table.rowCount).filter { table.instances[$0] != nil }.count
    }

    @Test func theMacroTellsWhichClassesHoldStateOfTheirOwn() {
        #expect(!PlainRecord.hasTransientState)
        #expect(!UndeclaredRecord.hasTransientState)
        #expect(Fetched.hasTransientState, "@Transient properties are state of the instance's own")
    }

    /// An entity whose instances hold nothing of their own and that has no save hook: the
    /// instances of its inserted and updated objects are let go like clean ones when nothing
    /// else holds them; their changes are in the table, and the save writes them all.
    @Test func pendingInstancesOfAnEntityWithoutStateOrSaveHooksAreLetGo() throws {
        let n = 20_000
        let directory = temporaryStoreDirectory()
        let store = try ObjectStore.open(at: directory, schema: Schema(PlainRecord.self))
        let context = store.context
        var held: PlainRecord?
        for i in 0..<n {
            let object = try context.insert(PlainRecord.self)
            object.key = i
            object.label = "inserted \(i)"
            if i == 7 { held = object }
        }
        #expect(try instanceCount(context, PlainRecord.self) <= 2 * EntityTable.minimumSweep + 2)
        let seven = try #require(try context.object(PlainRecord.self, where: \.key, equals: 7))
        #expect(seven === held, "an instance the application holds is kept")
        let five = try #require(try context.object(PlainRecord.self, where: \.key, equals: 5))
        #expect(five.label == "inserted 5" && five.isInserted)
        try context.save()
        #expect(try context.count(of: PlainRecord.self) == n)
        // Updated objects too; a deleted one keeps its instance until the save.
        context.delete(try #require(try context.object(PlainRecord.self, where: \.key, equals: 9)))
        for i in 0..<n where i != 9 {
            try #require(try context.object(PlainRecord.self, where: \.key, equals: i)).label = "updated \(i)"
        }
        #expect(try instanceCount(context, PlainRecord.self) <= 2 * EntityTable.minimumSweep + 2)
        #expect(context.updatedObjects.count == n - 1)
        let table = try context.table(for: PlainRecord.self)
        let deletedRow = try #require((0..<table.rowCount).first { table.isDeleted(row: $0) })
        #expect(table.instances[deletedRow] != nil, "a deleted object's instance is kept until the save")
        try context.save()
        try store.close()
        let reopened = try ObjectStore.open(at: directory, schema: Schema(PlainRecord.self))
        let all = try reopened.context.objects(of: PlainRecord.self)
        #expect(all.count == n - 1)
        #expect(all.allSatisfy { $0.label == "updated \($0.key)" })
        #expect(!all.contains { $0.key == 9 })
        #expect(held?.label == "updated 7")
        try reopened.close()
    }

    /// An import in batches whose results the caller lets go: each batch's instances are let
    /// go at the start of a later batch, so at most a few batches' instances are alive however
    /// many objects the transaction inserts.
    @Test func anImportInBatchesKeepsAFewBatchesOfInstances() throws {
        let batch = 5_000
        let context = ModelContext(schema: try Schema(PlainRecord.self))
        var most = 0
        for lower in stride(from: 0, to: 20 * batch, by: batch) {
            let imported = try context.importUniqueObjects(PlainRecord.self, sourceArray: Array(lower..<lower + batch))
            #expect(imported.count == batch)
            most = max(most, try instanceCount(context, PlainRecord.self))
        }
        #expect(most <= 3 * batch + EntityTable.minimumSweep, "most instances alive at once: \(most)")
        try context.save()
        #expect(try context.count(of: PlainRecord.self) == 20 * batch)
        #expect(try context.object(PlainRecord.self, where: \.key, equals: 12_345)?.label == "imported 12345")
    }

    /// Null words grown ahead of the rows, onto zero pages, in an import in batches: every nil
    /// and every value is where it was set, in the context, after a rollback of a later batch,
    /// and after reopening.
    @Test func nullBitsSurviveNullWordsGrownAheadOfTheRows() throws {
        let batch = 10_000
        let directory = temporaryStoreDirectory()
        let store = try ObjectStore.open(at: directory, schema: Schema(OptionalRecord.self))
        let context = store.context
        for lower in stride(from: 0, to: 5 * batch, by: batch) {
            _ = try context.importUniqueObjects(OptionalRecord.self, sourceArray: Array(lower..<lower + batch))
        }
        try context.save()
        // A batch that is rolled back leaves rows past the last one with its values; the next
        // rows written there get their own.
        _ = try context.importUniqueObjects(OptionalRecord.self, sourceArray: Array(5 * batch..<6 * batch))
        context.rollback()
        _ = try context.importUniqueObjects(OptionalRecord.self, sourceArray: (5 * batch..<6 * batch).map { $0 + 1 })
        func check(_ context: ModelContext) throws {
            let all = try context.objects(of: OptionalRecord.self)
            #expect(all.count == 6 * batch)
            #expect(all.allSatisfy { $0.note == ($0.key % 3 == 0 ? nil : "note \($0.key)") })
        }
        try check(context)
        try context.save()
        try store.close()
        let reopened = try ObjectStore.open(at: directory, schema: Schema(OptionalRecord.self))
        try check(reopened.context)
        try reopened.close()
    }

    /// While a save hook may run, or an instance holds state of its own, a pending object's
    /// instance is the one the hook or that state needs: the context keeps it.
    @Test func pendingInstancesAreKeptWhileASaveHookMayRunOrTheyHoldState() throws {
        let n = 10_000
        let stateful = ModelContext(schema: schema)
        for i in 0..<n { try stateful.insert(Fetched.self).label = "\(i)" }
        #expect(try instanceCount(stateful, Fetched.self) == n, "@Transient state: every pending instance kept")
        #expect(stateful.insertedObjects.allSatisfy { ($0 as? Fetched)?.insertCount == 1 })

        let undeclared = ModelContext(schema: try Schema(UndeclaredRecord.self))
        for i in 0..<n { try undeclared.insert(UndeclaredRecord.self).label = "\(i)" }
        #expect(try instanceCount(undeclared, UndeclaredRecord.self) == n, "willSave may still run: kept")
        // The save learns that the class implements no save hook; from then on its pending
        // instances are let go like the others.
        try undeclared.save()
        for i in 0..<n { try undeclared.insert(UndeclaredRecord.self).label = "more \(i)" }
        #expect(try instanceCount(undeclared, UndeclaredRecord.self) <= 2 * EntityTable.minimumSweep + 2)
        try undeclared.save()
        #expect(try undeclared.count(of: UndeclaredRecord.self) == 2 * n)
    }

    @Test func retainingRegisteredObjectsKeepsEveryInstance() throws {
        let n = 10_000
        let (context, ids) = try saved(n)
        context.retainsRegisteredObjects = true
        for id in ids { _ = context.object(with: id) }
        #expect(try instanceCount(context) == n)
        let first = try #require(context.object(with: ids[0]) as? Fetched)
        #expect(first.fetchCount == 1)  // the same instance: awoken once
    }
}
