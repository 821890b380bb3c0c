import Foundation
import Testing

@testable import ObjectGraph

/// Records its lifecycle calls; `willSave` normalizes the title and bumps a revision.
@Entity final class Document {
    var title: String = ""
    var revision: Int = 0
    var normalizedTitle: String = ""
    var stamp: Int = 0
    @Transient var log: [String] = []
    @Transient var churn = false

    func willSave() {
        log.append("willSave")
        normalizedTitle = title.lowercased()  // a normal set: runs willSave again on this object
        if !isDeleted { try? setPrimitiveValue(stamp + 1, forKey: "stamp") }  // primitive: does not
        if churn { revision += 1 }  // never settles
    }
    func didSave() { log.append(isDeleted ? "didSave(deleted)" : "didSave") }
    func prepareForDeletion() { log.append("prepareForDeletion") }
    func validateForInsert() throws {
        if title.isEmpty { throw ObjectValidationError(key: "title", reason: "must not be empty") }
    }
    func validateForDelete() throws {
        if title == "keep" { throw ObjectValidationError(reason: "this document cannot be deleted") }
    }
}

/// Implements `didSave` only: saves skip its objects in the `willSave` and `validateFor…`
/// loops. Its `validateForInsert`, in an extension, is not seen by `@Entity`, so not called.
@Entity final class SaveCounter {
    var value: Int = 0
    @Transient var log: [String] = []

    func didSave() { log.append(isDeleted ? "didSave(deleted)" : "didSave") }
}

/// A hook in an extension runs like one in the class body: nothing to declare.
extension SaveCounter {
    func validateForInsert() throws {
        if value < 0 { throw ObjectValidationError(key: "value", reason: "must not be negative") }
    }
}

/// Implements its hook in an extension, so it lists its hooks itself.
@Entity final class ExtensionHooked {
    var value: Int = 0
    static var implementedHooks: EntityHooks { [.validateForInsert] }
}

extension ExtensionHooked {
    func validateForInsert() throws {
        if value < 0 { throw ObjectValidationError(key: "value", reason: "must not be negative") }
    }
}

/// Its `validateForInsert` inserts an audit entry: a change made during validation, which the
/// save must list and persist with the rest.
@Entity final class AuditedOrder {
    var total: Int = 0

    func validateForInsert() throws {
        guard let context = modelContext else { return }
        let entry = try context.insert(AuditEntry.self)
        entry.note = "order of \(total)"
    }
}

@Entity final class AuditEntry {
    var note: String = ""
}

/// Written without the macro and without `implementedHooks`: gets every hook, as before.
final class HandHooked: Entity {
    var _backing = ObjectBacking(entity: HandHooked.entityDescription)
    static let entityDescription = EntityDescription(
        name: "HandHooked", type: HandHooked.self, attributes: [.attribute("value", Int.self, default: 0)])
    init(_backing: ObjectBacking) { self._backing = _backing }

    var value: Int {
        get { _backing.get(0, as: Int.self) }
        set { _backing.set(0, newValue) }
    }
    var log: [String] = []

    func awakeFromInsert() { log.append("awakeFromInsert") }
    func awakeFromFetch() { log.append("awakeFromFetch") }
    func willSave() { log.append("willSave") }
    func didSave() { log.append("didSave") }
    func prepareForDeletion() { log.append("prepareForDeletion") }
    func validateForInsert() throws { log.append("validateForInsert") }
    func validateForUpdate() throws { log.append("validateForUpdate") }
    func validateForDelete() throws { log.append("validateForDelete") }
}

@Suite("Lifecycle hooks and validation (Docs/Semantics.md, rules 4, 5, 6, 12)")
struct LifecycleTests {
    func context(_ backend: RecordingBackend? = nil) throws -> ModelContext {
        ModelContext(schema: try Schema(Document.self, Person.self), backend: backend)
    }

    @Test func willSaveRunsToAFixedPointAndPrimitiveSetsDoNotRetrigger() throws {  // Docs/Semantics.md, rules 3, 4
        let backend = RecordingBackend()
        let c = try context(backend)
        let d = try c.insert(Document.self)
        d.title = "Hello"
        try c.save()
        // Pass 1 sets normalizedTitle (a change), pass 2 sets it to the same value (no change).
        #expect(d.log.filter { $0 == "willSave" }.count == 2)
        #expect(d.normalizedTitle == "hello")
        #expect(d.stamp == 2)  // the primitive set ran on both passes and was saved
        let saved = try #require(backend.saved.last?.entities.first)
        #expect(saved.insertedValues.contains(.string("hello")))
    }

    @Test func willSavePastTheCapThrowsNamingTheObjectsAndSavesNothing() throws {  // Docs/Semantics.md, rule 4
        let backend = RecordingBackend()
        let c = try context(backend)
        c.willSavePassLimit = 5
        let d = try c.insert(Document.self)
        d.title = "loop"
        d.churn = true
        let error = try #require(throws: ObjectGraphError.self) { try c.save() }
        #expect(error.code == .willSaveDidNotSettle)
        #expect(error.message.contains("Document/1"))
        #expect(backend.saved.isEmpty)
        // willSave's changes were undone (Docs/Semantics.md, rule 12)
        #expect(d.revision == 0 && d.normalizedTitle == "")
        #expect(d.isInserted)
    }

    @Test func validationReportsEveryFailureInOneError() throws {  // Docs/Semantics.md, rule 5
        let c = try context()
        let a = try c.insert(Document.self)  // empty title: validateForInsert fails
        let b = try c.insert(Document.self)
        b.title = "fine"
        _ = try c.insert(Person.self)  // three required attributes without values
        let error = try #require(throws: ValidationError.self) { try c.save() }
        #expect(error.failures.count == 4)
        #expect(
            error.failures.contains {
                $0.objectID == a.objectID && $0.key == "title" && $0.reason == "must not be empty"
            })
        #expect(Set(error.failures.filter { $0.entity == "Person" }.compactMap(\.key)) == ["id", "name", "email"])
        #expect(c.hasChanges && a.isInserted)
    }

    @Test func validateForDeleteCanRefuseADeletion() throws {
        let c = try context()
        let d = try c.insert(Document.self)
        d.title = "keep"
        try c.save()
        c.delete(d)
        let error = try #require(throws: ValidationError.self) { try c.save() }
        #expect(error.failures.first?.reason == "this document cannot be deleted")
        #expect(d.isDeleted)
    }

    @Test func prepareForDeletionRunsAtDeleteTimeAndDidSaveSeesIsDeleted() throws {  // Docs/Semantics.md, rule 6
        let c = try context()
        let d = try c.insert(Document.self)
        d.title = "gone"
        try c.save()
        d.log = []
        c.delete(d)
        #expect(d.log == ["prepareForDeletion"])
        try c.save()
        #expect(d.log == ["prepareForDeletion", "willSave", "didSave(deleted)"])
        #expect(!d.isDeleted && d.modelContext == nil)  // detached after didSave (Docs/Semantics.md, rule 9)
    }

    @Test func didSaveRunsOnInsertedAndUpdatedObjectsAndItsChangesArePendingForTheNextSave() throws {
        let c = try context()
        let d = try c.insert(Document.self)
        d.title = "a"
        try c.save()
        #expect(d.log.last == "didSave")
        d.title = "b"
        try c.save()
        #expect(d.log.last == "didSave")
        #expect(!c.hasChanges)
    }

    @Test func aContextLearnsWhichHooksAreTheEmptyDefaultsAndStopsCallingThem() throws {
        let c = ModelContext(schema: try Schema(SaveCounter.self, HandHooked.self))
        let a = try c.insert(SaveCounter.self)
        a.value = -1
        let refused = try #require(throws: ValidationError.self) { try c.save() }  // the extension's hook ran
        #expect(refused.failures.map(\.reason) == ["must not be negative"])
        a.value = 1
        try c.save()
        #expect(a.log == ["didSave"])
        // The defaults that ran told the table; the hooks the class implements stay.
        let hooks = try c.table(for: SaveCounter.self).hooks
        #expect(!hooks.contains(.awakeFromInsert) && !hooks.contains(.willSave))
        #expect(hooks.contains(.didSave) && hooks.contains(.validateForInsert))
        c.willSavePassLimit = 0  // SaveCounter's willSave is known to be empty: no pass is needed
        a.value = 2
        try c.save()
        c.delete(a)
        try c.save()
        #expect(a.log == ["didSave", "didSave", "didSave(deleted)"])
        // An entity that implements willSave still gets its passes.
        let h = try c.insert(HandHooked.self)
        let error = try #require(throws: ObjectGraphError.self) { try c.save() }
        #expect(error.code == .willSaveDidNotSettle)
        #expect(error.message.contains("HandHooked/1") && !error.message.contains("SaveCounter"))
        #expect(h.isInserted && HandHooked.implementedHooks == .all)
    }

    @Test func whatAValidationHookChangesIsSavedWithTheRest() throws {
        let backend = RecordingBackend()
        let c = ModelContext(schema: try Schema(AuditedOrder.self, AuditEntry.self), backend: backend)
        let order = try c.insert(AuditedOrder.self)
        order.total = 12
        try c.save()
        let entries = try c.fetch(FetchDescriptor<AuditEntry>())
        #expect(entries.map(\.note) == ["order of 12"])
        #expect(!c.hasChanges)  // the entry was listed after validation and saved, not left pending
        let saved = try #require(backend.saved.last)
        #expect(Set(saved.entities.map(\.entityName)) == ["AuditedOrder", "AuditEntry"])
    }

    @Test func aSaveListsThePendingRowsOnceWhenNoValidationHookOfTheClassRan() throws {
        // AuditEntry has no validateFor… hooks. Only validateForInsert can be learned from
        // inserts; the other two stay possible, and must not make the save list the rows again.
        let c = ModelContext(schema: try Schema(AuditEntry.self))
        _ = try c.insert(AuditEntry.self)
        #expect(try c.validate(c.tables.map(\.pendingRows)) == false)
        let hooks = try c.table(for: AuditEntry.self).hooks
        #expect(!hooks.contains(.validateForInsert) && hooks.contains(.validateForUpdate))
        let a = ModelContext(schema: try Schema(AuditedOrder.self, AuditEntry.self))
        _ = try a.insert(AuditedOrder.self)
        #expect(try a.validate(a.tables.map(\.pendingRows)) == true)
    }

    @Test func aHookOutsideTheClassBodyRunsWhenTheClassListsIt() throws {
        let c = ModelContext(schema: try Schema(ExtensionHooked.self))
        let e = try c.insert(ExtensionHooked.self)
        e.value = -1
        let error = try #require(throws: ValidationError.self) { try c.save() }
        #expect(error.failures.map(\.reason) == ["must not be negative"])
        e.value = 1
        try c.save()
    }

    @Test func handWrittenEntitiesWithoutImplementedHooksGetEveryHook() throws {
        let c = ModelContext(schema: try Schema(HandHooked.self))
        let h = try c.insert(HandHooked.self)
        let kept = try c.insert(HandHooked.self)
        #expect(h.log == ["awakeFromInsert"])
        try c.save()
        #expect(h.log == ["awakeFromInsert", "willSave", "validateForInsert", "didSave"])
        h.log = []
        h.value = 2
        try c.save()
        #expect(h.log == ["willSave", "validateForUpdate", "didSave"])
        h.log = []
        c.delete(h)
        #expect(h.log == ["prepareForDeletion"])
        try c.save()
        #expect(h.log == ["prepareForDeletion", "willSave", "validateForDelete", "didSave"])
        let id = try #require(kept.objectID)
        c.reset()
        let fetched = try #require(c.object(with: id, as: HandHooked.self))
        #expect(fetched !== kept && fetched.log == ["awakeFromFetch"])
    }
}

@Suite("Primitive sets and observers (Docs/Semantics.md, rule 3)")
struct PrimitiveObservationTests {
    @Test func primitiveSetIsSavedButNotReportedToObservers() throws {
        let backend = RecordingBackend()
        let c = ModelContext(schema: try Schema(Person.self), backend: backend)
        let p = try c.insert(Person.self)
        p.id = 1; p.name = "Ada"; p.email = "e"
        try c.save()
        var seen: [ContextChanges] = []
        let token = c.observe { seen.append($0) }
        try p.setPrimitiveValue("Grace", forKey: "name")
        try c.save()
        #expect(backend.saved.count == 2)  // persisted…
        #expect(seen.allSatisfy { $0.updated.isEmpty })  // …but no observer hears of it
        p.city = "Paris"
        try p.setPrimitiveValue(3.5, forKey: "score")
        try c.save()
        #expect(seen.last?.updated.first?.changedKeys == ["city"])
        // A normal set after a primitive one of the same attribute is reported.
        try p.setPrimitiveValue(Int64(40), forKey: "age")
        p.age = 41
        try c.save()
        #expect(seen.last?.updated.first?.changedKeys == ["age"])
        token.cancel()
    }
}

/// Declared per-attribute validators: a range, a partial range and a closure.
@Entity final class Reading {
    @Attribute(.range(0...150)) var age: Int = 0
    @Attribute(.validate("must contain @") { (email: String) in email.contains("@") }) var email: String =
        "a@example.com"
    @Attribute(.range(0.0...)) var score: Double?
}

@Suite("Declared validators (Docs/Semantics.md, rule 5)")
struct ValidatorTests {
    @Test func rule5EveryValidatorFailureIsListedInOneErrorAndNothingIsSaved() throws {
        let backend = RecordingBackend()
        let c = ModelContext(schema: try Schema(Reading.self, Document.self), backend: backend)
        let r = try c.insert(Reading.self)
        r.age = 200
        r.email = "nobody"
        r.score = -1
        let ok = try c.insert(Reading.self)
        ok.score = nil  // nil is not checked: optionality is its own rule
        try c.insert(Document.self)  // empty title: validateForInsert fails too
        let error = try #require(throws: ValidationError.self) { try c.save() }
        let reasons = error.failures.map { "\($0.key ?? "-"): \($0.reason)" }.sorted()
        #expect(
            reasons == [
                "age: 200 is not in 0...150", "email: must contain @", "score: -1.0 is less than 0.0",
                "title: must not be empty",
            ])
        #expect(backend.saved.isEmpty && c.hasChanges)
        r.age = 150; r.email = "r@example.com"; r.score = 0
        for d in try c.objects(of: Document.self) { d.title = "t" }
        try c.save()
        // Updates are checked too.
        r.age = -1
        #expect(throws: ValidationError.self) { try c.save() }
        c.rollback()
        #expect(r.age == 150)
    }
}
