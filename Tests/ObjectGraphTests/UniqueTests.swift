import Foundation
import ObjectGraph
import Testing

/// A record with a unique id and a unique (merging) email, and a compound unique key.
@Entity final class Member {
    #Unique<Member>([\.team, \.number])
    @Attribute(.unique) var id: Int64 = 0
    @Attribute(.unique(onCollision: .merge)) var email: String?
    var name: String = ""
    var team: String?
    var number: Int?
}

func memberContext(backend: (any PersistenceBackend)? = nil) throws -> ModelContext {
    ModelContext(schema: try Schema(Member.self), backend: backend)
}

@Suite("Unique constraints and upsert (Docs/Semantics.md, rule 13)")
struct UniqueTests {
    @Test func macroDeclaresAttributeAndCompoundConstraints() {
        let constraints = Member.entityDescription.uniqueConstraints
        #expect(
            constraints == [
                UniqueConstraint(["id"]), UniqueConstraint(["email"], onCollision: .merge),
                UniqueConstraint(["team", "number"]),
            ])
        #expect(Member.entityDescription.slot(for: \Member.email) == 1)
    }

    @Test func lookupFindsAPendingInsertInTheSameTransaction() throws {
        let context = try memberContext()
        let m = try context.insert(Member.self)
        m.id = 42
        #expect(try context.object(Member.self, where: \.id, equals: 42) === m)
        #expect(try context.object(Member.self, where: \.id, equals: 43) == nil)
        m.id = 43
        #expect(try context.object(Member.self, where: \.id, equals: 42) == nil)
        #expect(try context.object(Member.self, where: \.id, equals: 43) === m)
    }

    @Test func upsertUpdatesTheExistingObjectOrInsertsOne() throws {
        let context = try memberContext()
        let a = try context.upsert(Member.self, where: \.id, equals: 1) { $0.name = "first" }
        let b = try context.upsert(Member.self, where: \.id, equals: 1) { $0.name = "second" }
        #expect(a === b)
        #expect(a.name == "second")
        #expect(try context.count(of: Member.self) == 1)
    }

    @Test func duplicateByInsertIsReportedAtSaveNamingBothObjectsAndWritesNothing() throws {
        let backend = RecordingBackend()
        let context = try memberContext(backend: backend)
        let a = try context.insert(Member.self)
        a.id = 7
        let b = try context.insert(Member.self)
        b.id = 7
        let error = try #require(throws: ValidationError.self) { try context.save() }
        let failure = try #require(error.failures.first)
        #expect(
            failure.reason.contains("Member(id)") && failure.reason.contains("Member/1")
                && failure.reason.contains("Member/2"))
        #expect(backend.saved.isEmpty)
        #expect(a.isInserted && b.isInserted)
        b.id = 8
        try context.save()
        #expect(backend.saved.count == 1)
    }

    @Test func duplicateBySetOnACommittedObjectIsReported() throws {
        let context = try memberContext()
        let a = try context.insert(Member.self)
        a.id = 1
        let b = try context.insert(Member.self)
        b.id = 2
        try context.save()
        b.id = 1
        #expect(throws: ValidationError.self) { try context.save() }
        b.id = 3
        try context.save()
        #expect(try context.object(Member.self, where: \.id, equals: 3) === b)
        #expect(try context.object(Member.self, where: \.id, equals: 1) === a)
    }

    @Test func deletingTheHolderFreesTheKeyInTheSameTransaction() throws {
        let context = try memberContext()
        let a = try context.insert(Member.self)
        a.id = 1
        try context.save()
        context.delete(a)
        let b = try context.insert(Member.self)
        b.id = 1
        try context.save()
        #expect(try context.object(Member.self, where: \.id, equals: 1) === b)
    }

    @Test func compoundKeyCollidesOnlyWhenEveryPartMatches() throws {
        let context = try memberContext()
        let a = try context.insert(Member.self)
        a.id = 1; a.team = "red"; a.number = 9
        let b = try context.insert(Member.self)
        b.id = 2; b.team = "blue"; b.number = 9
        let c = try context.insert(Member.self)
        c.id = 3; c.team = "red"  // nil number: not constrained
        try context.save()
        #expect(try context.object(Member.self, uniqueKey: ["team": "red", "number": 9]) === a)
        c.number = 9
        #expect(throws: ValidationError.self) { try context.save() }
    }

    @Test func mergePolicyFoldsACollidingInsertIntoTheExistingObject() throws {
        let context = try memberContext()
        let a = try context.insert(Member.self)
        a.id = 1; a.email = "ada@example.com"; a.name = "Ada"
        try context.save()
        let b = try context.insert(Member.self)
        b.id = 1  // would collide on id (fail policy) — but the merge on email removes b first
        b.email = "ada@example.com"
        b.name = "Ada Lovelace"
        try context.save()
        #expect(try context.count(of: Member.self) == 1)
        #expect(a.name == "Ada Lovelace")
        #expect(b.modelContext == nil)
    }

    @Test func aMergeNeverChangesAnotherUniqueKeyOfTheExistingObject() throws {
        let context = try memberContext()
        let a = try context.insert(Member.self)
        a.id = 1; a.email = "ada@example.com"; a.name = "Ada"
        try context.save()
        // Same e-mail (merge), another id (fail): merging would rewrite Member/1's id to 2.
        let b = try context.insert(Member.self)
        b.id = 2; b.email = "ada@example.com"; b.name = "Impostor"
        #expect {
            try context.save()
        } throws: { error in
            guard let error = error as? ValidationError else { return false }
            return error.failures.contains {
                $0.reason.contains("not merged, because the merge would change Member/1's id")
            }
        }
        #expect(a.id == 1 && a.name == "Ada", "the existing object is unchanged")
        #expect(b.modelContext != nil && context.hasChanges, "the insert stays pending, for the caller to fix")
        // Giving the existing object a key it did not have is not a change of identity.
        b.id = 1; b.team = "red"; b.number = 7
        try context.save()
        #expect(try context.count(of: Member.self) == 1)
        #expect(a.name == "Impostor" && a.team == "red" && a.number == 7)
    }

    @Test func rollbackRestoresTheUniqueIndexes() throws {
        let context = try memberContext()
        let a = try context.insert(Member.self)
        a.id = 1
        try context.save()
        a.id = 2
        let b = try context.insert(Member.self)
        b.id = 1
        context.rollback()
        #expect(try context.object(Member.self, where: \.id, equals: 1) === a)
        #expect(try context.object(Member.self, where: \.id, equals: 2) == nil)
        context.delete(a)
        context.rollback()
        #expect(try context.object(Member.self, where: \.id, equals: 1) === a)
    }

    @Test func lookupWithoutAUniqueConstraintIsAClearError() throws {
        let context = try memberContext()
        let error = try #require(throws: ObjectGraphError.self) {
            try context.object(Member.self, where: \.name, equals: "x")
        }
        #expect(error.code == .noUniqueIndex)
    }

    /// An entity remembers resolved key paths by identity; a key path equal by value but a
    /// different object, more key paths than it remembers, and unknown ones still resolve
    /// (or fail) as the entity's description says.
    @Test func keyPathsResolveTheSameWhetherRememberedOrNot() throws {
        let context = try memberContext()
        let m = try context.insert(Member.self)
        m.id = 7
        m.email = "a@example.org"
        // A key path built at run time: equal to `\.id`, another object.
        let root: KeyPath<Member, Member> = \Member.self
        let built = try #require(root.appending(path: \Member.id) as KeyPath<Member, Int64>?)
        #expect(try context.object(Member.self, where: built, equals: 7) === m)
        #expect(try context.object(Member.self, where: \.id, equals: 7) === m)
        for round in 0..<3 {
            // Two key paths a round, alternating, past the eight remembered.
            for _ in 0..<6 {
                // A new object each time: the remembered ones are pushed out.
                #expect(
                    try context.object(Member.self, where: root.appending(path: \Member.id), equals: 7) === m,
                    "round \(round)")
                #expect(try context.object(Member.self, where: \.id, equals: 7) === m)
            }
        }
        let error = try #require(throws: ObjectGraphError.self) {
            try context.object(Member.self, where: \.name, equals: "x")
        }
        #expect(error.code == .noUniqueIndex)
        let unknown = try #require(throws: ObjectGraphError.self) {
            try context.object(Member.self, where: \Member.id.bigEndian, equals: 7)
        }
        #expect(unknown.code == .unknownKey)
    }

    @Test func replayRebuildsTheIndexes() throws {
        let dir = temporaryStoreDirectory()
        do {
            let store = try ObjectStore.open(at: dir, schema: try Schema(Member.self))
            for i in 0..<100 {
                try store.context.upsert(Member.self, where: \.id, equals: Int64(i)) { $0.name = "m\(i)" }
            }
            try store.context.save()
            try store.close()
        }
        let store = try ObjectStore.open(at: dir, schema: try Schema(Member.self))
        defer { try? store.close() }
        #expect(try store.context.object(Member.self, where: \.id, equals: 57)?.name == "m57")
        let dup = try store.context.insert(Member.self)
        dup.id = 57
        #expect(throws: ValidationError.self) { try store.context.save() }
    }
}
