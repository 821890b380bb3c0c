import Foundation
import Testing

@testable import ObjectGraph

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
