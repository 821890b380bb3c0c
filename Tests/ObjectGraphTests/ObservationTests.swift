import Foundation
import ObjectGraph
import Testing

@Suite("Observation")
struct ObservationTests {
    /// Collects what a callback observer receives.
    final class Received {
        var changes: [ContextChanges] = []
    }

    func person(_ context: ModelContext, _ id: Int64, age: Int = 30) throws -> Person {
        try context.insert(Person.self) { p in
            p.id = id
            p.name = "Person \(id)"
            p.email = "p\(id)@example.com"
            p.age = age
        }
    }

    @Test func observerReceivesInsertedUpdatedAndDeletedIDsWithChangedKeys() throws {
        let context = try makeContext()
        let received = Received()
        let token = context.observe { received.changes.append($0) }
        let a = try person(context, 1)
        let b = try person(context, 2)
        try context.save()
        let aID = try #require(a.objectID), bID = try #require(b.objectID)
        #expect(received.changes == [ContextChanges(inserted: [aID, bID])])

        a.age = 31
        a.city = "Oslo"
        b.name = "Renamed"
        b.name = "Person 2"  // set back: no change
        let c = try person(context, 3)
        context.delete(c)  // inserted and deleted before the save: never appears
        try context.save()
        #expect(received.changes.count == 2)
        #expect(received.changes[1] == ContextChanges(updated: [.init(objectID: aID, changedKeys: ["age", "city"])]))
        #expect(received.changes[1].changedKeys(of: aID) == ["age", "city"])

        context.delete(b)
        try context.save()
        #expect(received.changes.last == ContextChanges(deleted: [bID]))
        withExtendedLifetime(token) {}
    }

    @Test func observersSeeNothingFromAFailedSave() async throws {
        let backend = RecordingBackend()
        let context = try makeContext(backend: backend)
        let received = Received()
        let token = context.observe { received.changes.append($0) }
        var streamed = context.changes.makeAsyncIterator()
        let p = try person(context, 1)

        backend.failNext = true
        #expect(throws: RecordingBackend.InjectedFailure.self) { try context.save() }
        #expect(received.changes.isEmpty)

        let q = try person(context, 2)
        try context.save()  // the retry saves both people together
        #expect(received.changes == [ContextChanges(inserted: [p.objectID!, q.objectID!])])
        // The failed save was never streamed: the first element is the successful one.
        let first = try #require(await streamed.next())
        #expect(first == received.changes[0])
        withExtendedLifetime(token) {}
    }

    @Test func observersSeeNothingFromASaveRefusedByValidation() throws {
        let context = try makeContext()
        let received = Received()
        let token = context.observe { received.changes.append($0) }
        let monitor = try context.monitor(try person(context, 1))
        var updates = 0
        monitor.didUpdate = { _, _ in updates += 1 }
        try context.save()
        received.changes.removeAll()
        let p = try #require(monitor.object)
        p.age = 44
        try p.setValue(nil, forKey: "city")
        let e = try context.insert(Everything.self)
        e.text = "ok"
        let unnamed = Person(id: 9, name: "n", email: "e")
        try context.insert(unnamed)
        unnamed._backing.setOptional(1, String?.none)  // required name unset: validation fails
        #expect(throws: ValidationError.self) { try context.save() }
        #expect(received.changes.isEmpty)
        #expect(updates == 0)
        #expect(p.age == 44)  // pending changes kept
        withExtendedLifetime(token) {}
    }

    @Test func observersRunAfterTheCommit() throws {
        let context = try makeContext()
        let p = try person(context, 1)
        var sawPending: Bool?
        var sawInserted: Bool?
        let token = context.observe { _ in
            sawPending = context.hasChanges
            sawInserted = p.isInserted
        }
        try context.save()
        #expect(sawPending == false)
        #expect(sawInserted == false)
        withExtendedLifetime(token) {}
    }

    @Test func asyncStreamDeliversEachSaveInOrder() async throws {
        let context = try makeContext()
        let stream = context.changes
        var ids: [ObjectID] = []
        for i in 1...5 {
            ids.append(try person(context, Int64(i)).objectID!)
            try context.save()
        }
        try context.save()  // nothing changed: nothing delivered
        var iterator = stream.makeAsyncIterator()
        for i in 0..<5 {
            let c = try #require(await iterator.next())
            #expect(c.inserted == [ids[i]])
        }
        let other = context.changes  // each read is its own stream, from now on
        let p = try #require(context.object(with: ids[0], as: Person.self))
        p.age = 1
        try context.save()
        var o = other.makeAsyncIterator()
        #expect(await o.next()?.updatedIDs == [ids[0]])
        #expect(await iterator.next()?.updatedIDs == [ids[0]])
    }

    @Test func streamFinishesWhenTheContextGoesAway() async throws {
        var context: ModelContext? = try makeContext()
        let stream = context!.changes
        _ = try person(context!, 1)
        try context!.save()
        context = nil
        var all: [ContextChanges] = []
        for await c in stream { all.append(c) }
        #expect(all.count == 1)
    }

    @Test func monitorReportsChangedKeysAndDeletion() throws {
        let context = try makeContext()
        let p = try person(context, 1)
        let other = try person(context, 2)
        let monitor = try context.monitor(p)
        var updates: [(Person, Set<String>)] = []
        var deletions: [ObjectID] = []
        monitor.didUpdate = { updates.append(($0, $1)) }
        monitor.didDelete = { deletions.append($0) }
        try context.save()
        #expect(updates.isEmpty)  // insertion is not an update

        p.score = 2.5
        other.age = 5  // another object: not reported
        try context.save()
        #expect(updates.count == 1)
        #expect(updates.first?.0 === p)
        #expect(updates.first?.1 == ["score"])

        other.age = 6
        try context.save()
        #expect(updates.count == 1)

        context.delete(p)
        try context.save()
        #expect(deletions == [monitor.objectID])
        #expect(monitor.isDeleted)
        #expect(monitor.object == nil)
        #expect(updates.count == 1)
    }

    @Test func monitorFollowsTheObjectAcrossReset() throws {
        let context = try makeContext()
        let id = try person(context, 1).objectID!
        try context.save()
        let monitor = try context.monitor(try #require(context.object(with: id, as: Person.self)))
        var seen: [Int] = []
        monitor.didUpdate = { p, _ in seen.append(p.age) }
        context.reset()  // instances detached; the monitor follows the ID
        try #require(context.object(with: id, as: Person.self)).age = 77
        try context.save()
        #expect(seen == [77])
    }

    @Test func cancelledOrReleasedRegistrationsStopDelivery() throws {
        let context = try makeContext()
        var calls = 0
        let token = context.observe { _ in calls += 1 }
        var dropped: ObservationToken? = context.observe { _ in calls += 100 }
        _ = try person(context, 1)
        try context.save()
        #expect(calls == 101)
        dropped = nil
        token.cancel()
        token.cancel()
        _ = try person(context, 2)
        try context.save()
        #expect(calls == 101)
        #expect(dropped == nil)

        let p = try person(context, 3)
        var monitor: ObjectMonitor<Person>? = try context.monitor(p)
        var monitored = 0
        monitor?.didUpdate = { _, _ in monitored += 1 }
        try context.save()
        monitor = nil
        p.age = 3
        try context.save()
        #expect(monitored == 0)
    }

    @Test func aSaveInsideAnObserverIsDeliveredAfterTheCurrentOneToEveryObserver() throws {
        let context = try makeContext()
        var first: [Int] = []
        var second: [Int] = []
        var didNest = false
        let t1 = context.observe { c in
            first.append(c.inserted.count)
            if !didNest {
                didNest = true
                _ = try? person(context, 99)
                _ = try? person(context, 98)
                try? context.save()
            }
        }
        let t2 = context.observe { c in second.append(c.inserted.count) }
        _ = try person(context, 1)
        try context.save()
        #expect(first == [1, 2])
        #expect(second == [1, 2])
        withExtendedLifetime((t1, t2)) {}
    }

    @Test func monitoringRequiresAnObjectOfThisContext() throws {
        let context = try makeContext()
        let elsewhere = try makeContext()
        #expect(throws: ObjectGraphError.self) { try context.monitor(Person(id: 1, name: "a", email: "b")) }
        let foreign = try person(elsewhere, 1)
        #expect(throws: ObjectGraphError.self) { try context.monitor(foreign) }
    }

    @Test func unobservedSavesCostNoCapture() throws {
        // No observer: saves behave as before and nothing is retained for delivery.
        let context = try makeContext()
        _ = try person(context, 1)
        try context.save()
        let received = Received()
        let token = context.observe { received.changes.append($0) }
        token.cancel()
        _ = try person(context, 2)
        try context.save()
        #expect(received.changes.isEmpty)
    }
}
