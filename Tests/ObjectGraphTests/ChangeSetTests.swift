import Foundation
import ObjectGraph
import Testing

@Suite("Change sets: the persistence interface")
struct ChangeSetTests {
    @Test func saveHandsOneChangeSetToTheBackend() throws {
        let backend = RecordingBackend()
        let context = try makeContext(backend: backend)
        let a = try context.insert(Person.self)
        a.id = 1; a.name = "Ada"; a.email = "ada@example.com"
        try context.save()
        #expect(backend.saved.count == 1)
        let c = try #require(backend.saved.first?.entities.first)
        #expect(c.entityName == "Person")
        #expect(c.insertedSerials == [1])
        #expect(c.insertedValues == [.int(1), .string("Ada"), .string("ada@example.com"), .int(18), nil, .double(0)])

        a.city = "London"
        try context.save()
        let u = try #require(backend.saved.last?.entities.first)
        #expect(u.updates == [.init(serial: 1, attribute: 4, value: .string("London"))])

        context.delete(a)
        try context.save()
        #expect(backend.saved.last?.entities.first?.deletedSerials == [1])
    }

    @Test func saveWithNothingChangedWritesNothing() throws {
        let backend = RecordingBackend()
        let context = try makeContext(backend: backend)
        try context.save()
        #expect(backend.saved.isEmpty)
    }

    @Test func failedPersistLeavesPendingChangesForARetry() throws {  // Docs/Semantics.md, rule 12
        let backend = RecordingBackend()
        let context = try makeContext(backend: backend)
        let a = try context.insert(Person.self)
        a.id = 1; a.name = "Ada"; a.email = "e"
        backend.failNext = true
        #expect(throws: RecordingBackend.InjectedFailure.self) { try context.save() }
        #expect(a.isInserted)
        #expect(context.hasChanges)
        try context.save()
        #expect(!a.isInserted)
        #expect(backend.saved.count == 1)
    }

    @Test func replayingTheChangeSetsRebuildsTheSameGraph() throws {
        let backend = RecordingBackend()
        let context = try makeContext(backend: backend)
        for i in 0..<50 {
            let p = try context.insert(Person.self)
            p.id = Int64(i); p.name = "Person \(i)"; p.email = "p\(i)@example.com";
            p.city = i % 3 == 0 ? nil : "City \(i % 7)"
        }
        try context.save()
        for p in try context.objects(of: Person.self) where p.id % 5 == 0 { p.score = Double(p.id) * 0.5 }
        for p in try context.objects(of: Person.self) where p.id % 7 == 0 { context.delete(p) }
        try context.save()

        let replayed = try makeContext()
        for c in backend.saved { try replayed.apply(c) }
        #expect(!replayed.hasChanges)
        let original = try context.objects(of: Person.self).map(snapshot)
        let copy = try replayed.objects(of: Person.self).map(snapshot)
        #expect(original == copy)
        // New inserts continue after the highest replayed serial.
        let next = try replayed.insert(Person.self)
        #expect(next.objectID?.serial == 51)
    }

    @Test func applyRejectsAnUnknownEntityAndChangesNothing() throws {
        let context = try makeContext()
        let bad = ChangeSet(entities: [EntityChanges(entityName: "Ghost", attributeNames: [], insertedSerials: [1])])
        let error = try #require(throws: ObjectGraphError.self) { try context.apply(bad) }
        #expect(error.code == .inconsistentChangeSet)
        #expect(try context.count(of: Person.self) == 0)
    }

    @Test func applyRejectsAWrongValueTypeAndChangesNothing() throws {
        let context = try makeContext()
        let good = EntityChanges(
            entityName: "Person", attributeNames: ["id", "name", "email"], insertedSerials: [1],
            insertedValues: [.int(1), .string("a"), .string("e")])
        var bad = good
        bad.insertedSerials = [2]
        bad.insertedValues = [.string("not a number"), .string("b"), .string("e")]
        let error = try #require(throws: ObjectGraphError.self) { try context.apply(ChangeSet(entities: [good, bad])) }
        #expect(error.key == "id")
        #expect(try context.count(of: Person.self) == 0)
        #expect(!context.hasChanges)
    }

    private func snapshot(_ p: Person) -> String {
        "\(p.objectID?.description ?? "?") \(p.id) \(p.name) \(p.email) \(p.age) \(p.city ?? "-") \(p.score)"
    }
}
