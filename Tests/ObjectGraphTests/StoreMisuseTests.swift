import Foundation
import GraphJournal
import ObjectGraph
import Testing

/// What the store does when it is used in ways it must refuse: a save after `close()`, a raw
/// value that is not a case of its enum, a journal written by a model with more enum cases.
@Suite("Store misuse: refused with an error, never lost or crashed")
struct StoreMisuseTests {
    @Test func saveAfterCloseThrowsClosedAndKeepsThePendingChanges() throws {
        let dir = temporaryStoreDirectory()
        let store = try ObjectStore.open(at: dir, schema: storeSchema, options: StoreOptions(durability: .none))
        let context = store.context
        let kept = try context.insert(Person.self)
        kept.id = 1
        kept.name = "Kept"
        kept.email = "kept@example.com"
        try context.save()
        try store.close()
        let recordsAtClose = try Journal.inspect(directory: dir.path).entries.count

        let late = try context.insert(Person.self)
        late.id = 2
        late.name = "Late"
        late.email = "late@example.com"
        #expect { try context.save() } throws: { error in
            (error as? StoreError)?.code == .closed
        }
        #expect(context.hasChanges, "the changes stay pending")
        #expect(context.insertedObjects.count == 1)
        #expect(try Journal.inspect(directory: dir.path).entries.count == recordsAtClose, "nothing was written")

        // A save with nothing pending is not a write, and not an error.
        context.rollback()
        try context.save()

        // The saved state is intact: one person.
        let reopened = try ObjectStore.open(at: dir, schema: storeSchema, options: StoreOptions(durability: .none))
        defer { try? reopened.close() }
        #expect(try reopened.context.fetch(FetchDescriptor<Person>()).map(\.id) == [1])
    }

    @Test func saveAfterTheStoreWasReleasedThrowsClosed() throws {
        let dir = temporaryStoreDirectory()
        var store: ObjectStore? = try ObjectStore.open(
            at: dir, schema: storeSchema, options: StoreOptions(durability: .none))
        let context = try #require(store?.context)
        store = nil
        let person = try context.insert(Person.self)
        person.id = 3
        person.name = "Unsaved"
        person.email = "unsaved@example.com"
        #expect { try context.save() } throws: { ($0 as? StoreError)?.code == .closed }
    }

    @Test func setValueRefusesARawValueThatIsNotACase() throws {
        let context = ModelContext(schema: storeSchema)
        let object = try context.insert(Everything.self)
        #expect { try object.setValue(99, forKey: "level") } throws: { error in
            guard let error = error as? ObjectGraphError else { return false }
            return error.code == .typeMismatch && error.message.contains("99 is not the raw value of a case of Level")
        }
        #expect { try object.setValue("urgent", forKey: "priority") } throws: {
            ($0 as? ObjectGraphError)?.code == .typeMismatch
        }
        #expect { try object.setPrimitiveValue(7, forKey: "level") } throws: {
            ($0 as? ObjectGraphError)?.code == .typeMismatch
        }
        // Cases are accepted, and the typed read sees them.
        try object.setValue(2, forKey: "level")
        try object.setValue("extra", forKey: "priority")
        #expect(object.level == .high)
        #expect(object.priority == .extra)
    }

    @Test func aJournalHoldingARawValueThatIsNotACaseIsRefusedAtOpenNotACrash() throws {
        // A model with more cases wrote the value; the dynamic store stands in for it (it
        // knows the attribute's raw type only, as an older binary of the app would).
        let dir = temporaryStoreDirectory()
        let first = try ObjectStore.open(at: dir, schema: storeSchema, options: StoreOptions(durability: .none))
        let object = try first.context.insert(Everything.self)
        object.level = .high
        try first.context.save()
        let serial = try #require(object.objectID).serial
        try first.close()

        let dynamic = try ObjectStore.openDynamic(at: dir, options: StoreOptions(durability: .none))
        let stored = try #require(try dynamic.context.objects(ofEntityNamed: "Everything").first)
        try stored.setValue(3, forKey: "level")
        try stored.setValue("unheard-of", forKey: "priority")
        try dynamic.context.save()
        try dynamic.close()

        #expect {
            try ObjectStore.open(at: dir, schema: storeSchema, options: StoreOptions(durability: .none))
        } throws: { error in
            guard let error = error as? StoreError, error.code == .incompatibleSchema else { return false }
            return error.message.contains("Everything.") && error.message.contains("of object \(serial)")
                && (error.message.contains("3 is not the raw value of a case of Level")
                    || error.message.contains("unheard-of is not the raw value of a case of Priority"))
        }
    }
}
