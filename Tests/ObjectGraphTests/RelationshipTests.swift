import Foundation
import ObjectGraph
import Testing

/// A folder owns its files: deleting it deletes them (cascade).
@Entity final class Folder {
    var name: String = ""
    @Relationship(deleteRule: .cascade, inverse: "folder") var files: [FileItem]
    @Transient var log: [String] = []
    @Transient var filesSeenAtDeletion = -1

    func prepareForDeletion() {
        filesSeenAtDeletion = files.count  // relationships are still intact here (Docs/Semantics.md, rule 6)
        log.append("prepareForDeletion")
    }
}

@Entity final class FileItem {
    var name: String = ""
    @Relationship(inverse: "files") var folder: Folder?
    @Transient var deletedWhileFolderWas: String?

    func prepareForDeletion() { deletedWhileFolderWas = folder?.name ?? "none" }
}

/// Members outlive their team (nullify, the default).
@Entity final class Team {
    var name: String = ""
    @Relationship(inverse: "team") var members: [TeamMember]
}

@Entity final class TeamMember {
    var name: String = ""
    @Relationship(inverse: "members") var team: Team?
}

/// One-to-one: a citizen holds at most one passport and deleting the citizen deletes it.
@Entity final class Citizen {
    var name: String = ""
    @Relationship(deleteRule: .cascade, inverse: "holder") var passport: Passport?
}

@Entity final class Passport {
    var number: String = ""
    @Relationship(inverse: "passport") var holder: Citizen?
}

/// A library that still has books cannot be deleted (deny).
@Entity final class Library {
    var name: String = ""
    @Relationship(deleteRule: .deny, inverse: "library") var books: [Book]
}

@Entity final class Book {
    var title: String = ""
    @Relationship(inverse: "books") var library: Library?
}

/// A tree: deleting a node deletes its subtree.
@Entity final class TreeNode {
    var label: Int = 0
    @Relationship(deleteRule: .cascade, inverse: "parent") var children: [TreeNode]
    @Relationship(deleteRule: .noAction, inverse: "children") var parent: TreeNode?
}

let relationshipSchema: Schema = {
    do {
        return try Schema(
            Folder.self, FileItem.self, Team.self, TeamMember.self, Citizen.self, Passport.self, Library.self,
            Book.self, TreeNode.self)
    } catch { preconditionFailure("\(error)") }
}()

@Suite("Relationships: inverses and delete rules (Docs/Semantics.md, rules 5, 6, 8)")
struct RelationshipTests {
    func context() -> ModelContext { ModelContext(schema: relationshipSchema) }

    @Test func settingAToOneMaintainsTheToManyInverse() throws {
        let c = context()
        let a = try c.insert(Folder.self), b = try c.insert(Folder.self)
        let f = try c.insert(FileItem.self)
        f.folder = a
        #expect(a.files.map(\.objectID) == [f.objectID])
        f.folder = b
        #expect(a.files.isEmpty && b.files.map(\.objectID) == [f.objectID])
        f.folder = nil
        #expect(b.files.isEmpty && f.folder == nil)
    }

    @Test func settingAToManyMaintainsEveryToOneInverse() throws {
        let c = context()
        let a = try c.insert(Folder.self), b = try c.insert(Folder.self)
        let x = try c.insert(FileItem.self), y = try c.insert(FileItem.self), z = try c.insert(FileItem.self)
        a.files = [x, y, x]  // set semantics: x once
        #expect(a.files.count == 2 && x.folder === a && y.folder === a && z.folder == nil)
        b.files = [y, z]  // y leaves a for b
        #expect(a.files.map(\.objectID) == [x.objectID] && y.folder === b && z.folder === b)
        a.files = []  // leaving objects get nil
        #expect(x.folder == nil && a.files.isEmpty)
        // An object not yet in a context joins the relationship's context.
        let fresh = FileItem()
        fresh.name = "fresh"
        b.files = b.files + [fresh]
        #expect(fresh.modelContext === c && fresh.folder === b && b.files.count == 3)
    }

    @Test func oneToOneKeepsBothSidesAndStealsFromThePreviousPartner() throws {
        let c = context()
        let ann = try c.insert(Citizen.self), bob = try c.insert(Citizen.self)
        let p1 = try c.insert(Passport.self), p2 = try c.insert(Passport.self)
        ann.passport = p1
        #expect(p1.holder === ann)
        p1.holder = bob  // bob takes p1: ann loses it
        #expect(bob.passport === p1 && ann.passport == nil)
        bob.passport = p2  // p1 is left without a holder
        #expect(p1.holder == nil && p2.holder === bob)
    }

    @Test func rule6CascadeRunsPrepareForDeletionOnEveryObjectReachedBeforeTearingDown() throws {
        let c = context()
        let folder = try c.insert(Folder.self)
        folder.name = "docs"
        let files = try (0..<3).map { i in
            try c.insert(FileItem.self) {
                $0.name = "f\(i)"; $0.folder = folder
            }
        }
        try c.save()
        c.delete(folder)
        #expect(folder.log == ["prepareForDeletion"] && folder.filesSeenAtDeletion == 3)
        // The cascade applied at once: every file is deleted, and saw its folder in its hook.
        #expect(files.allSatisfy { $0.isDeleted && $0.deletedWhileFolderWas == "docs" })
        #expect(try c.count(of: FileItem.self) == 0)
        try c.save()
        #expect(try c.objects(of: FileItem.self).isEmpty && !c.hasChanges)
    }

    @Test func rule8RollbackRestoresTheWholeCascadeAndEveryInverse() throws {
        let c = context()
        let folder = try c.insert(Folder.self)
        let team = try c.insert(Team.self)
        for i in 0..<5 {
            try c.insert(FileItem.self) {
                $0.name = "f\(i)"; $0.folder = folder
            }
            try c.insert(TeamMember.self) {
                $0.name = "m\(i)"; $0.team = team
            }
        }
        try c.save()
        c.delete(folder)
        c.delete(team)
        let members = try c.objects(of: TeamMember.self)
        #expect(members.allSatisfy { $0.team == nil && $0.changedValues().keys.contains("team") })
        c.rollback()
        #expect(folder.files.count == 5 && team.members.count == 5 && !folder.isDeleted)
        #expect(try c.objects(of: FileItem.self).allSatisfy { $0.folder === folder && !$0.isDeleted })
        #expect(members.allSatisfy { $0.team === team })
        #expect(!c.hasChanges)
    }

    @Test func nullifyClearsTheInverseAndTheChangeShowsInChangedAndCommittedValues() throws {
        let c = context()
        let team = try c.insert(Team.self)
        let m = try c.insert(TeamMember.self)
        m.team = team
        try c.save()
        let teamSerial = try #require(team.objectID?.serial)
        c.delete(team)
        #expect(m.team == nil && m.isUpdated)
        #expect(m.changedValues()["team"] == .some(nil))
        #expect(
            try m.committedValues(forKeys: ["team"])["team"]
                == .some(.object(ObjectID(entityName: "Team", serial: teamSerial))))
        try c.save()
        #expect(m.team == nil && !c.hasChanges)
    }

    @Test func denyFailsTheSaveListingEveryFailureAndChangesNothing() throws {  // Docs/Semantics.md, rule 5
        let c = context()
        let library = try c.insert(Library.self)
        library.name = "City"
        let book = try c.insert(Book.self)
        book.library = library
        let folder = try c.insert(Folder.self)
        try c.save()
        c.delete(library)
        // Until the save, a to-one still returns its deleted destination (as Core Data does).
        #expect(library.isDeleted && book.library?.isDeleted == true && library.books.isEmpty == false)
        c.delete(folder)
        let error = try #require(throws: ValidationError.self) { try c.save() }
        #expect(error.failures.count == 1)
        #expect(error.failures[0].key == "books" && error.failures[0].objectID == library.objectID)
        // the context kept its pending changes (Docs/Semantics.md, rule 12)
        #expect(library.isDeleted && folder.isDeleted)
        c.delete(book)
        try c.save()
        #expect(try c.count(of: Library.self) + c.count(of: Book.self) == 0)
    }

    @Test func noActionLeavesTheInverseNamingTheDeletedObjectWhichReadsAsNil() throws {
        let c = context()
        let root = try c.insert(TreeNode.self), child = try c.insert(TreeNode.self)
        child.parent = root
        try c.save()
        c.delete(child)  // parent has noAction: root is untouched
        #expect(!root.hasChanges && root.children.isEmpty)
        try c.save()
        #expect(root.children.isEmpty && !c.hasChanges)
        // The other way round: the children keep naming a deleted parent, which they return
        // (isDeleted) until the save and read as nil after it.
        let orphan = try c.insert(TreeNode.self)
        let parent = try c.insert(TreeNode.self)
        parent.children = [orphan]
        try c.save()
        orphan.parent = nil
        orphan.parent = parent
        c.rollback()
        #expect(orphan.parent === parent)
    }

    @Test func aLongCascadeChainUsesNoRecursion() throws {
        let c = context()
        var node = try c.insert(TreeNode.self)
        let root = node
        for i in 1..<20_000 {
            let next = try c.insert(TreeNode.self)
            next.label = i
            next.parent = node
            node = next
        }
        try c.save()
        c.delete(root)
        #expect(try c.count(of: TreeNode.self) == 0)
        c.rollback()
        #expect(try c.count(of: TreeNode.self) == 20_000 && node.parent?.label == 19_998)
    }

    @Test func aTransactionThatThrowsRestoresRelationships() throws {
        let c = context()
        let team = try c.insert(Team.self)
        let m = try c.insert(TeamMember.self)
        m.team = team
        try c.save()
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try c.transaction { _ in
                c.delete(team)
                let other = try c.insert(Team.self)
                m.team = other
                throw Stop()
            }
        }
        #expect(m.team === team && team.members.map(\.objectID) == [m.objectID] && !team.isDeleted)
        // The index answers correctly after the rollback and keeps being maintained.
        m.team = nil
        #expect(team.members.isEmpty)
    }

    @Test func dynamicAccessReadsAndSetsRelationshipsByKey() throws {
        let c = context()
        let team = try c.insert(Team.self)
        let m = try c.insert(TeamMember.self)
        try m.setValue(team, forKey: "team")
        #expect(try (team.value(forKey: "members") as? [any Entity])?.count == 1)
        #expect(try m.value(forKey: "team") as? Team === team)
        try team.setValue([TeamMember](), forKey: "members")
        #expect(m.team == nil)
        #expect(throws: ObjectGraphError.self) { try m.setValue("not an object", forKey: "team") }
    }

    @Test func relationshipsSurviveSaveAndReplay() throws {
        let dir = temporaryStoreDirectory()
        do {
            let store = try ObjectStore.open(at: dir, schema: relationshipSchema)
            let c = store.context
            let folder = try c.insert(Folder.self)
            folder.name = "docs"
            for i in 0..<10 {
                try c.insert(FileItem.self) {
                    $0.name = "f\(i)"; $0.folder = folder
                }
            }
            let ann = try c.insert(Citizen.self)
            ann.passport = try c.insert(Passport.self)
            try c.save()
            try store.close()
        }
        let store = try ObjectStore.open(at: dir, schema: relationshipSchema)
        let c = store.context
        let folder = try #require(try c.objects(of: Folder.self).first)
        #expect(folder.files.count == 10 && folder.files.allSatisfy { $0.folder === folder })
        let ann = try #require(try c.objects(of: Citizen.self).first)
        #expect(ann.passport?.holder === ann)
        c.delete(folder)
        try c.save()
        try store.close()
        // Tools read the journal without the model code: the to-one slot is named and typed.
        let dynamic = try ObjectStore.openDynamic(at: dir)
        let file = try #require(dynamic.context.schema.entity(named: "FileItem"))
        #expect(file.attribute(named: "folder")?.destinationEntity == "Folder")
        try dynamic.compact()  // what `graph-journal compact` does: the relationship slots survive
        try dynamic.close()
        let reopened = try ObjectStore.open(at: dir, schema: relationshipSchema)
        defer { try? reopened.close() }
        #expect(try reopened.context.count(of: FileItem.self) + reopened.context.count(of: Folder.self) == 0)
        let citizen = try #require(try reopened.context.objects(of: Citizen.self).first)
        #expect(citizen.passport?.holder === citizen)
    }

    @Test func schemaRefusesMissingOrMismatchedInverses() {
        final class A: Entity {
            var _backing = ObjectBacking(entity: A.entityDescription)
            static let entityDescription = EntityDescription(
                name: "A", type: A.self, attributes: [],
                relationships: [.toMany("bs", B.self, inverse: "as"), .toOne("lonely", B.self, inverse: "missing")])
            init(_backing: ObjectBacking) { self._backing = _backing }
        }
        final class B: Entity {
            var _backing = ObjectBacking(entity: B.entityDescription)
            static let entityDescription = EntityDescription(
                name: "B", type: B.self, attributes: [], relationships: [.toMany("as", A.self, inverse: "bs")])
            init(_backing: ObjectBacking) { self._backing = _backing }
        }
        let error = #expect(throws: SchemaError.self) { try Schema(A.self, B.self) }
        let message = error.map { "\($0)" } ?? ""
        #expect(!message.contains("many-to-many"))  // a many-to-many is fine
        #expect(message.contains("'missing'"))
        #expect(throws: SchemaError.self) { try Schema(A.self) }  // B is not in the schema
    }
}

@Suite("Relationships and observation")
struct RelationshipObservationTests {
    @Test func aToManyThatGainsOrLosesMembersIsReportedWithItsKey() throws {
        let c = ModelContext(schema: relationshipSchema)
        let a = try c.insert(Team.self), b = try c.insert(Team.self)
        let m = try c.insert(TeamMember.self)
        m.team = a
        try c.save()
        var seen: [ContextChanges] = []
        let token = c.observe { seen.append($0) }
        defer { token.cancel() }
        m.team = b  // a loses m, b gains it
        try c.save()
        let changes = try #require(seen.last)
        #expect(changes.changedKeys(of: try #require(m.objectID)) == ["team"])
        #expect(changes.changedKeys(of: try #require(a.objectID)) == ["members"])
        #expect(changes.changedKeys(of: try #require(b.objectID)) == ["members"])
        let monitor = try c.monitor(b)
        var keys: Set<String> = []
        monitor.didUpdate = { _, k in keys = k }
        try c.insert(TeamMember.self) { $0.team = b }
        try c.save()
        #expect(keys == ["members"])
    }
}

/// A tag merged on collision: its notes and its badge move to the existing tag.
@Entity final class MergingTag {
    @Attribute(.unique(onCollision: .merge)) var label: String = ""
    @Relationship(inverse: "tag") var notes: [TagNote]
    @Relationship(inverse: "owner") var badge: TagBadge?
}

@Entity final class TagNote {
    var text: String = ""
    @Relationship(inverse: "notes") var tag: MergingTag?
}

@Entity final class TagBadge {
    var color: String = ""
    @Relationship(inverse: "badge") var owner: MergingTag?
}

@Suite("Relationships and unique merges")
struct RelationshipMergeTests {
    @Test func aMergedObjectsRelationshipsMoveToTheExistingObject() throws {
        let c = ModelContext(schema: try Schema(MergingTag.self, TagNote.self, TagBadge.self))
        let existing = try c.insert(MergingTag.self)
        existing.label = "swift"
        let old = try c.insert(TagNote.self)
        old.tag = existing
        try c.save()
        let duplicate = try c.insert(MergingTag.self)
        duplicate.label = "swift"
        let fresh = try c.insert(TagNote.self)
        fresh.tag = duplicate
        let badge = try c.insert(TagBadge.self)
        badge.owner = duplicate
        try c.save()
        #expect(try c.count(of: MergingTag.self) == 1)
        #expect(Set(existing.notes.compactMap(\.objectID)) == Set([old.objectID, fresh.objectID].compactMap { $0 }))
        #expect(fresh.tag === existing && badge.owner === existing && existing.badge === badge)
    }
}

@Suite("Relationships in fetches")
struct RelationshipFetchTests {
    @Test func aPredicateThroughARelationshipIsEvaluatedByFoundation() throws {
        let c = ModelContext(schema: relationshipSchema)
        let docs = try c.insert(Folder.self)
        docs.name = "docs"
        let other = try c.insert(Folder.self)
        other.name = "other"
        for i in 0..<6 {
            try c.insert(FileItem.self) {
                $0.name = "f\(i)"; $0.folder = i % 2 == 0 ? docs : other
            }
        }
        try c.insert(FileItem.self) { $0.name = "loose" }
        let inDocs = try c.fetch(
            FetchDescriptor<FileItem>(
                predicate: #Predicate { $0.folder?.name == "docs" }, sortBy: [SortDescriptor(\.name)]))
        #expect(inDocs.map(\.name) == ["f0", "f2", "f4"])
        let loose = try c.fetch(FetchDescriptor<FileItem>(predicate: #Predicate { $0.folder?.name == nil }))
        #expect(loose.map(\.name) == ["loose"])
        #expect(try c.fetchCount(FetchDescriptor<Folder>(predicate: #Predicate { $0.files.count > 2 })) == 2)
    }
}

@Suite("Relationships to the object itself")
struct SelfRelationshipTests {
    @Test func anObjectCanBeRelatedToItselfAndDeletedWithoutLooping() throws {
        let c = ModelContext(schema: relationshipSchema)
        let node = try c.insert(TreeNode.self)
        node.parent = node
        #expect(node.children.map(\.objectID) == [node.objectID])
        node.children = [node]
        #expect(node.parent === node)
        let ann = try c.insert(Citizen.self)
        try c.save()
        c.delete(node)  // cascades to itself: deleted once
        #expect(node.isDeleted && ann.passport == nil)
        try c.save()
        #expect(try c.count(of: TreeNode.self) == 0)
    }
}

@Suite("Relationships set before insertion")
struct StandaloneRelationshipTests {
    @Test func aGraphBuiltBeforeInsertionIsInsertedWithItsRelationshipsAndInverses() throws {
        let c = ModelContext(schema: relationshipSchema)
        let docs = Folder()
        docs.name = "docs"
        let a = FileItem(), b = FileItem()
        a.name = "a"
        b.name = "b"
        docs.files = [a, b, a]
        let loose = FileItem()
        loose.folder = docs  // recorded on the file's side only until insertion
        #expect(docs.files.count == 2 && loose.folder === docs && docs.modelContext == nil)
        try c.insert(docs)
        #expect(a.modelContext === c && b.modelContext === c && a.folder === docs && b.folder === docs)
        #expect(loose.modelContext == nil)  // nothing points at it from the inserted graph
        try c.insert(loose)
        #expect(Set(docs.files.compactMap(\.objectID)) == Set([a, b, loose].compactMap(\.objectID)))
        // One-to-one, both sides set before insertion: one insert brings in both.
        let ann = Citizen(), p = Passport()
        ann.passport = p
        p.holder = ann
        try c.insert(ann)
        #expect(p.modelContext === c && ann.passport === p && p.holder === ann)
        try c.save()
        #expect(try c.count(of: FileItem.self) == 3 && !c.hasChanges)
    }
}

@Suite("Relationships in changedValues and committedValues")
struct RelationshipChangedValuesTests {
    @Test func toOnesAndToManysAppearAsObjectsWithTheirCommittedState() throws {
        let c = ModelContext(schema: relationshipSchema)
        let a = try c.insert(Folder.self), b = try c.insert(Folder.self)
        let x = try c.insert(FileItem.self), y = try c.insert(FileItem.self)
        a.files = [x]
        let ids = { (files: [FileItem]) in files.compactMap(\.objectID) }
        // Inserted: every relationship with a value.
        #expect(a.changedValues()["files"] == .some(.objects(ids([x]))))
        #expect(x.changedValues()["folder"] == .some(.object(try #require(a.objectID))))
        try c.save()
        #expect(a.changedValues().isEmpty && x.changedValues().isEmpty)
        y.folder = a  // a gains y
        x.folder = b  // a loses x, b gains x
        #expect(a.changedValues()["files"] == .some(.objects(ids([y]))))
        #expect(b.changedValues()["files"] == .some(.objects(ids([x]))))
        #expect(x.changedValues()["folder"] == .some(.object(try #require(b.objectID))))
        #expect(try a.committedValues(forKeys: ["files"])["files"] == .some(.objects(ids([x]))))
        #expect(try x.committedValues(forKeys: ["folder"])["folder"] == .some(.object(try #require(a.objectID))))
        #expect(try b.committedValues()["files"] == .some(.objects([])))
        // Putting things back is no change.
        x.folder = a
        y.folder = nil
        #expect(a.changedValues()["files"] == nil && b.changedValues()["files"] == nil)
        c.delete(x)  // a deleted member leaves the to-many
        #expect(a.changedValues()["files"] == .some(.objects([])))
        #expect(try a.committedValues(forKeys: ["files"])["files"] == .some(.objects(ids([x]))))
    }
}
