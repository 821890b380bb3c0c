import Foundation
import ObjectGraph
import Testing

@Suite("Change tracking (Docs/Semantics.md, rules 2, 3, 7, 8, 9)")
struct ChangeTrackingTests {
    @Test func insertAssignsPermanentSequentialIDs() throws {
        let context = try makeContext()
        let a = try context.insert(Person.self)
        let b = try context.insert(Person.self)
        #expect(a.objectID == ObjectID(entityName: "Person", serial: 1))
        #expect(b.objectID == ObjectID(entityName: "Person", serial: 2))
        #expect(a.isInserted && !a.isUpdated && !a.isDeleted)
        #expect(context.insertedObjects.count == 2)
        #expect(context.hasChanges)
    }

    @Test func insertAppliesDeclarationDefaults() throws {
        let context = try makeContext()
        let p = try context.insert(Person.self)
        #expect(p.age == 18)
        #expect(p.score == 0)
        #expect(p.city == nil)
        let h = try context.insert(HandWritten.self)
        #expect(h.title == "untitled")
        #expect(h.pages == nil)
    }

    @Test func standaloneObjectKeepsValuesWhenInserted() throws {
        let context = try makeContext()
        let p = Person(id: 7, name: "Ada", email: "ada@example.com")
        p.city = "London"
        #expect(p.objectID == nil)
        #expect(p.age == 18)
        try context.insert(p)
        #expect(p.objectID != nil)
        #expect(p.name == "Ada" && p.email == "ada@example.com" && p.city == "London" && p.age == 18)
        try context.save()
        #expect(try context.objects(of: Person.self).first === p)
    }

    @Test func settingAnEqualValueDoesNotDirtyTheObject() throws {  // Docs/Semantics.md, rule 2
        let context = try makeContext()
        let p = try context.insert(Person.self)
        p.name = "Ada"
        p.email = "a@example.com"
        p.id = 1
        try context.save()
        p.name = "Ada"
        p.age = 18
        p.city = nil
        #expect(!p.isUpdated)
        #expect(!p.hasChanges)
        #expect(!context.hasChanges)
        #expect(context.updatedObjects.isEmpty)
    }

    @Test func settingBackToTheCommittedValueClearsTheChange() throws {
        let context = try makeContext()
        let p = try context.insert(Person.self)
        p.name = "Ada"; p.email = "e"; p.id = 1
        try context.save()
        p.name = "Grace"
        #expect(p.isUpdated)
        p.name = "Ada"
        #expect(!p.isUpdated)
        #expect(!context.hasChanges)
    }

    @Test func primitiveSetIsPersistedWithTheNextSave() throws {  // Docs/Semantics.md, rule 3
        let backend = RecordingBackend()
        let context = try makeContext(backend: backend)
        let p = try context.insert(Person.self)
        p.name = "Ada"; p.email = "e"; p.id = 1
        try context.save()
        try p.setPrimitiveValue("Grace", forKey: "name")
        #expect(p.name == "Grace")
        #expect(p.isUpdated)
        try context.save()
        let update = try #require(backend.saved.last?.entities.first?.updates.first)
        #expect(update.value == .string("Grace"))
        #expect(try p.committedValues(forKeys: ["name"])["name"] == .some(.string("Grace")))
    }

    @Test func insertThenDeleteBeforeSaveVanishesAndIsNotJournaled() throws {  // Docs/Semantics.md, rule 7
        let backend = RecordingBackend()
        let context = try makeContext(backend: backend)
        let p = try context.insert(Person.self)
        p.name = "temp"
        let id = try #require(p.objectID)
        context.delete(p)
        #expect(context.insertedObjects.isEmpty)
        #expect(context.deletedObjects.isEmpty)
        #expect(!context.hasChanges)
        #expect(context.object(with: id) == nil)
        #expect(try context.count(of: Person.self) == 0)
        #expect(p.modelContext == nil)
        #expect(p.name == "temp")  // a detached object keeps its last values
        try context.save()
        #expect(backend.saved.isEmpty)
    }

    @Test func rollbackRestoresTheLastSavedState() throws {  // Docs/Semantics.md, rule 8
        let context = try makeContext()
        let kept = try context.insert(Person.self)
        kept.name = "Ada"; kept.email = "ada@example.com"; kept.id = 1; kept.city = "London"
        let doomed = try context.insert(Person.self)
        doomed.name = "Bob"; doomed.email = "bob@example.com"; doomed.id = 2
        try context.save()

        kept.name = "Ada Lovelace"
        kept.city = nil
        kept.score = 99
        context.delete(doomed)
        let fresh = try context.insert(Person.self)
        fresh.name = "Carol"
        let freshID = try #require(fresh.objectID)
        #expect(doomed.isDeleted)

        context.rollback()

        #expect(kept.name == "Ada" && kept.city == "London" && kept.score == 0)
        #expect(!kept.isUpdated)
        #expect(!doomed.isDeleted)
        #expect(doomed.name == "Bob")
        #expect(context.object(with: freshID) == nil)
        #expect(fresh.modelContext == nil)
        #expect(try context.count(of: Person.self) == 2)
        #expect(!context.hasChanges)
        // Serials are never reused, not even after a rollback.
        let next = try context.insert(Person.self)
        #expect(next.objectID?.serial == freshID.serial + 1)
    }

    @Test func deletedObjectIsDetachedAfterSave() throws {  // Docs/Semantics.md, rule 9
        let context = try makeContext()
        let p = try context.insert(Person.self)
        p.name = "Ada"; p.email = "e"; p.id = 1
        try context.save()
        let id = try #require(p.objectID)
        context.delete(p)
        #expect(p.isDeleted)
        #expect(context.deletedObjects.count == 1)
        try context.save()
        #expect(!p.isDeleted)
        #expect(p.modelContext == nil)
        #expect(p.objectID == nil)
        #expect(context.object(with: id) == nil)
        #expect(p.name == "Ada")
    }

    @Test func changedAndCommittedValues() throws {
        let context = try makeContext()
        let p = try context.insert(Person.self)
        p.name = "Ada"; p.email = "e"; p.id = 1
        #expect(p.changedValues()["name"] == .some(.string("Ada")))
        #expect(try p.committedValues(forKeys: ["name"]).isEmpty)  // inserted: nothing committed
        try context.save()
        p.name = "Grace"
        p.city = "Paris"
        #expect(p.changedValues() == ["name": .string("Grace"), "city": .string("Paris")])
        let committed = try p.committedValues(forKeys: ["name", "city"])
        #expect(committed["name"] == .some(.string("Ada")))
        #expect(committed.keys.contains("city") && committed["city"] == .some(nil))
        #expect(throws: ObjectGraphError.self) { try p.committedValues(forKeys: ["nope"]) }
    }

    @Test func objectLookupPreservesIdentity() throws {
        let context = try makeContext()
        let p = try context.insert(Person.self)
        let id = try #require(p.objectID)
        #expect(context.object(with: id) === p)
        #expect(context.object(with: id, as: Person.self) === p)
        #expect(context.object(with: id, as: Tracked.self) == nil)
        #expect(context.object(with: ObjectID(entityName: "Nope", serial: 1)) == nil)
        #expect(context.object(with: ObjectID(entityName: "Person", serial: 99)) == nil)
    }

    @Test func resetDiscardsChangesAndForgetsInstances() throws {
        let context = try makeContext()
        let p = try context.insert(Person.self)
        p.name = "Ada"; p.email = "e"; p.id = 1
        try context.save()
        let id = try #require(p.objectID)
        p.name = "changed"
        context.reset()
        #expect(!context.hasChanges)
        let again = try #require(context.object(with: id, as: Person.self))
        #expect(again !== p)
        #expect(again.name == "Ada")
        #expect(p.modelContext == nil)
    }

    @Test func awakeFromInsertRunsOnceAtInsert() throws {
        let context = try makeContext()
        let t = try context.insert(Tracked.self)
        #expect(t.awakeCount == 1)
        let s = Tracked()
        try context.insert(s)
        try context.insert(s)  // already in this context: no-op
        #expect(s.awakeCount == 1)
    }

    @Test func saveRefusesMissingRequiredValuesAndListsEveryOne() throws {
        let context = try makeContext()
        _ = try context.insert(Person.self)
        let error = try #require(throws: ValidationError.self) { try context.save() }
        #expect(Set(error.failures.compactMap(\.key)) == ["id", "name", "email"])
        #expect(context.hasChanges)  // nothing changed (Docs/Semantics.md, rule 12)
    }

    @Test func unknownEntityIsAClearError() throws {
        let context = ModelContext(schema: try Schema(Person.self))
        #expect(throws: ObjectGraphError.self) { try context.insert(Tracked.self) }
        do {
            _ = try context.insert(Tracked.self)
        } catch {
            #expect(error.code == .unknownEntity)
            #expect(error.message.contains("Tracked"))
        }
    }

    @Test func objectFromAnotherContextIsRejectedOnInsert() throws {
        let a = try makeContext()
        let b = try makeContext()
        let p = try a.insert(Person.self)
        #expect(throws: ObjectGraphError.self) { try b.insert(p) }
    }
}
