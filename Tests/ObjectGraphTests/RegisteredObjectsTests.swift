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
