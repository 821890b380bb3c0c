import Foundation
import GraphJournal
import ObjectGraph
import Testing

// The ways a mirroring daemon's main path could still lose data or count wrongly: a sync whose
// save fails, a payload that is one object instead of a list, an object skipped as unmodified
// whose destinations appear later, a document that names one object twice, and Foundation
// values nested deeper than any stack.

@Entity final class SafePackage {
    @Attribute(.unique) var name: String = ""
    var version: String = ""
    var maintainer: String?
    var dependsNames: [String] = []
    @Relationship(inverse: "packages") var maintainedBy: SafeMaintainer?
    @Relationship(inverse: "dependents") var depends: [SafePackage]
    @Relationship(inverse: "depends") var dependents: [SafePackage]
}

@Entity final class SafeMaintainer {
    @Attribute(.unique) var email: String = ""
    var name: String = ""
    @Relationship(inverse: "maintainedBy") var packages: [SafePackage]
}

@Entity final class SafeGuard {
    @Attribute(.unique) var id: Int64 = 0
    @Relationship(inverse: "guards") var guarded: SafeFolder?
}

@Entity final class SafeFolder {
    @Attribute(.unique) var id: Int64 = 0
    var name: String = ""
    @Relationship(deleteRule: .deny, inverse: "guarded") var guards: [SafeGuard]
}

private let safeSchemaTypes: [any Entity.Type] = [
    SafePackage.self, SafeMaintainer.self, SafeGuard.self, SafeFolder.self,
]

private func json(_ text: String) -> Data { Data(text.utf8) }

private func folderMapping() throws -> EntityMapping<SafeFolder> {
    var m = EntityMapping(SafeFolder.self)
    try m.map("id", "name")
    return m
}

private func folderDocument(_ ids: ClosedRange<Int>) -> Data {
    json("[" + ids.map { #"{"id": \#($0), "name": "f\#($0)"}"# }.joined(separator: ",") + "]")
}

/// Packages by name, versions as their modification attribute, maintainers connected by
/// e-mail and dependencies by a list of names: the shape of a Debian index mirror.
private func packageMapping() throws -> EntityMapping<SafePackage> {
    var m = EntityMapping(SafePackage.self)
    try m.map("name", "version", "maintainer")
    try m.map(["depends": "dependsNames"])
    try m.identify(by: "name")
    try m.useModificationAttribute("version")
    try m.connect("maintainedBy", by: ["maintainer": "email"])
    try m.connect("depends", by: ["dependsNames": "name"])
    return m
}

private func maintainerMapping() throws -> EntityMapping<SafeMaintainer> {
    var m = EntityMapping(SafeMaintainer.self)
    try m.map("email", "name")
    try m.identify(by: "email")
    return m
}

private func package(_ name: String, in context: ModelContext) throws -> SafePackage {
    try #require(try context.object(SafePackage.self, where: \.name, equals: name))
}

@Suite("Sync and mapping safety: nothing lost, nothing miscounted")
struct SyncSafetyTests {
    // MARK: A failed sync's save

    @Test func aSyncWhoseSaveHitsADenyRuleKeepsTheChangesPendingBeforeIt() throws {
        let context = ModelContext(schema: try Schema(safeSchemaTypes))
        try context.sync([SafeFolder.self]) { try $0.map(folderDocument(1...4), with: try folderMapping()) }
        let g = try context.insert(SafeGuard.self)
        g.id = 1
        g.guarded = try context.object(SafeFolder.self, where: \.id, equals: 4)
        try context.save()

        // Work pending before the sync: an edit and an insert.
        let edited = try #require(try context.object(SafeFolder.self, where: \.id, equals: 1))
        edited.name = "edited before the sync"
        let inserted = try context.insert(SafeGuard.self)
        inserted.id = 2

        #expect(throws: ValidationError.self) {
            // Sweeps folder 4, which its guard denies.
            try context.sync([SafeFolder.self]) { try $0.map(folderDocument(1...3), with: try folderMapping()) }
        }
        #expect(context.hasChanges, "the pending work was thrown away with the sync")
        #expect(edited.name == "edited before the sync" && edited.isUpdated)
        #expect(inserted.isInserted && inserted.id == 2)
        #expect(try context.objects(of: SafeFolder.self).count == 4)
        try context.save()
        #expect(try context.objects(of: SafeGuard.self).map(\.id).sorted() == [1, 2])
    }

    @Test func aSyncWhoseSaveHitsAFullDiskKeepsTheChangesPendingBeforeIt() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sync-safety-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let plan = JournalIO.FaultPlan()
        var options = StoreOptions()
        options.journal.io = .faulty(plan)
        let schema = try Schema(safeSchemaTypes)
        let store = try ObjectStore.open(at: dir, schema: schema, options: options)
        let context = store.context
        try context.sync([SafeFolder.self]) { try $0.map(folderDocument(1...4), with: try folderMapping()) }
        let edited = try #require(try context.object(SafeFolder.self, where: \.id, equals: 1))
        edited.name = "edited before the sync"
        let inserted = try context.insert(SafeGuard.self)
        inserted.id = 7

        plan.arm(.error(28 /* ENOSPC */), atCall: 1, of: [.pwrite])
        #expect(throws: StoreError.self) {
            try context.sync([SafeFolder.self]) { try $0.map(folderDocument(1...5), with: try folderMapping()) }
        }
        plan.disarm()
        #expect(context.hasChanges && edited.isUpdated && inserted.isInserted)
        #expect(edited.name == "edited before the sync")
        #expect(
            try context.objects(of: SafeFolder.self).map(\.id).sorted() == [1, 2, 3, 4], "the sync's insert was kept")
        try context.save()
        try store.close()
        let reopened = try ObjectStore.open(at: dir, schema: schema)
        defer { try? reopened.close() }
        #expect(try reopened.context.object(SafeFolder.self, where: \.id, equals: 1)?.name == "edited before the sync")
        #expect(try reopened.context.objects(of: SafeGuard.self).map(\.id) == [7])
    }

    // MARK: The default sweep limit

    @Test func aOneObjectPayloadDoesNotWipeTheMirror() throws {
        let context = ModelContext(schema: try Schema(safeSchemaTypes))
        try context.sync([SafeFolder.self]) { try $0.map(folderDocument(1...10), with: try folderMapping()) }
        // One JSON object where the API sends a list: mapped as a one-element collection.
        do {
            try context.sync([SafeFolder.self]) {
                try $0.map(json(#"{"id": 3, "name": "f3"}"#), with: try folderMapping())
            }
            Issue.record("a one-object payload swept nine folders of ten")
        } catch let e as SyncError {
            #expect(e.code == .sweepLimitExceeded && e.entity == "SafeFolder" && e.wouldRemove == 9)
            #expect(e.message.contains("default limit"), "\(e.message)")
        }
        #expect(try context.objects(of: SafeFolder.self).count == 10 && !context.hasChanges)
    }

    @Test func theDefaultSweepLimitIsHalfOfTheSavedObjectsInScope() throws {
        let context = ModelContext(schema: try Schema(safeSchemaTypes))
        try context.sync([SafeFolder.self]) { try $0.map(folderDocument(1...10), with: try folderMapping()) }
        // Five of ten: allowed. New objects of the same sync do not raise the limit.
        let five = try context.sync([SafeFolder.self]) { try $0.map(folderDocument(6...20), with: try folderMapping()) }
        #expect(five.counts["SafeFolder"]?.swept == 5 && five.counts["SafeFolder"]?.inserted == 10)
        // Eight of fifteen: refused; the caller consents with .unlimited.
        #expect(throws: SyncError.self) {
            try context.sync([SafeFolder.self]) { try $0.map(folderDocument(14...20), with: try folderMapping()) }
        }
        let all = try context.sync([SafeFolder.self], sweepLimit: .unlimited) {
            try $0.map(folderDocument(14...20), with: try folderMapping())
        }
        #expect(all.counts["SafeFolder"]?.swept == 8)
        // An empty sync the caller allowed is consent to sweep everything in scope.
        try context.sync([SafeFolder.self]) { sync in
            try sync.map(json("[]"), with: try folderMapping())
            sync.allowEmptySync(of: SafeFolder.self)
        }
        #expect(try context.objects(of: SafeFolder.self).isEmpty)
    }

    // MARK: Connections of objects skipped as unmodified

    @Test func aPackageSkippedAsUnmodifiedStillLinksToADependencyThatAppearsLater() throws {
        let context = ModelContext(schema: try Schema(safeSchemaTypes))
        let packages = try packageMapping()
        let first = json(
            #"[{"name": "curl", "version": "1", "depends": ["libc6", "zlib1g"]}, {"name": "libc6", "version": "2"}]"#)
        try context.sync([SafePackage.self]) { try $0.map(first, with: packages) }
        #expect(try package("curl", in: context).depends.map(\.name) == ["libc6"])
        // zlib1g appears; curl's version did not change, so curl is skipped as unmodified.
        let second = json(
            #"[{"name": "curl", "version": "1", "depends": ["libc6", "zlib1g"]}, {"name": "libc6", "version": "2"}, {"name": "zlib1g", "version": "3"}]"#
        )
        let r = try context.sync([SafePackage.self]) { try $0.map(second, with: packages) }
        #expect(
            try package("curl", in: context).depends.map(\.name).sorted() == ["libc6", "zlib1g"],
            "curl never linked to zlib1g")
        #expect(r.counts["SafePackage"]?.inserted == 1 && r.counts["SafePackage"]?.updated == 1, "\(r.counts)")
        // zlib1g goes away, then comes back: the link comes back with it.
        let third = json(
            #"[{"name": "curl", "version": "1", "depends": ["libc6", "zlib1g"]}, {"name": "libc6", "version": "2"}]"#)
        try context.sync([SafePackage.self]) { try $0.map(third, with: packages) }
        #expect(try package("curl", in: context).depends.map(\.name) == ["libc6"])
        try context.sync([SafePackage.self]) { try $0.map(second, with: packages) }
        #expect(try package("curl", in: context).depends.map(\.name).sorted() == ["libc6", "zlib1g"])
        // The no-op resync changes nothing and counts nothing as updated.
        let again = try context.sync([SafePackage.self]) { try $0.map(second, with: packages) }
        #expect(
            again.counts["SafePackage"]?.updated == 0 && again.counts["SafePackage"]?.unchanged == 3, "\(again.counts)")
        #expect(!context.hasChanges)
    }

    @Test func aPackageSkippedAsUnmodifiedLinksToAMaintainerMappedLater() throws {
        let context = ModelContext(schema: try Schema(safeSchemaTypes))
        let doc = json(#"[{"name": "curl", "version": "1", "maintainer": "ada@example.org"}]"#)
        try context.map(doc, with: try packageMapping())
        try context.save()
        #expect(try package("curl", in: context).maintainedBy == nil)
        try context.map(json(#"[{"email": "ada@example.org", "name": "Ada"}]"#), with: try maintainerMapping())
        try context.save()
        let r = try context.map(doc, with: try packageMapping())
        #expect(try package("curl", in: context).maintainedBy?.name == "Ada")
        #expect(r.counts.updated == 1 && r.counts.skippedUnmodified == 0, "\(r.counts)")
    }

    // MARK: Phantom updates and honest counts

    @Test func aMaintainerListedTwiceWithTwoSpellingsIsNotAPhantomUpdate() throws {
        let context = ModelContext(schema: try Schema(safeSchemaTypes))
        let document = json(
            #"""
            [{"email": "ada@example.org", "name": "Ada Lovelace"}, {"email": "bob@example.org", "name": "Bob"},
             {"email": "ada@example.org", "name": "ada lovelace"}]
            """#)
        let first = try context.map(document, with: try maintainerMapping())
        #expect(first.counts.inserted == 2)
        try context.save()
        // The last source for an object wins.
        #expect(
            try context.object(SafeMaintainer.self, where: \.email, equals: "ada@example.org")?.name == "ada lovelace")
        let again = try context.map(document, with: try maintainerMapping())
        #expect(again.counts.updated == 0 && again.counts.unchanged == 2, "\(again.counts)")
        #expect(!context.hasChanges)
        // A real change still counts.
        let changed = try context.map(
            json(#"[{"email": "bob@example.org", "name": "Robert"}]"#), with: try maintainerMapping())
        #expect(changed.counts.updated == 1)
    }

    @Test func unresolvedConnectionsTellAMissingKeyFromAKeyThatMatchesNothing() throws {
        let context = ModelContext(schema: try Schema(safeSchemaTypes))
        try context.map(json(#"[{"email": "ada@example.org", "name": "Ada"}]"#), with: try maintainerMapping())
        let document = json(
            #"""
            [{"name": "curl", "version": "1", "maintainer": "ada@example.org", "depends": ["libc6", "virtual-x"]},
             {"name": "libc6", "version": "1", "maintainer": "nobody@example.org"},
             {"name": "zlib1g", "version": "1", "depends": []}]
            """#)
        let r = try context.map(document, with: try packageMapping())
        let maintainer = try #require(r.counts.connections["maintainedBy"])
        #expect(maintainer.resolved == 1 && maintainer.withoutKey == 1 && maintainer.unresolved == 1)
        #expect(maintainer.sampleUnmatchedKeys == ["nobody@example.org"], "\(maintainer)")
        let depends = try #require(r.counts.connections["depends"])
        #expect(
            depends.resolved == 1 && depends.withoutKey == 2 && depends.unresolved == 1 && depends.unmatchedKeys == 1)
        #expect(depends.sampleUnmatchedKeys == ["virtual-x"], "\(depends)")
        #expect(
            r.counts.unresolvedConnections == 2,
            "one unknown maintainer, one unknown dependency; empty lists are not unresolved")
    }

    @Test func aSyncKeepsItsMappingsUnresolvedConnections() throws {
        let context = ModelContext(schema: try Schema(safeSchemaTypes))
        let document = json(
            #"[{"name": "curl", "version": "1", "maintainer": "nobody@example.org", "depends": ["gone"]}]"#)
        let r = try context.sync([SafePackage.self]) { try $0.map(document, with: try packageMapping()) }
        let counts = try #require(r.counts["SafePackage"])
        #expect(counts.unresolvedConnections == 2, "one object, unresolved in each of its two connections")
        #expect(counts.connections["maintainedBy"]?.sampleUnmatchedKeys == ["nobody@example.org"])
        #expect(counts.connections["depends"]?.sampleUnmatchedKeys == ["gone"])
    }

    // MARK: Foundation values nested deeper than a stack

    @Test func aFoundationValueNestedTenThousandDeepIsRefusedNotACrash() throws {
        let context = ModelContext(schema: try Schema(safeSchemaTypes))
        var deepArray: Any = [Any]()
        for _ in 0..<10_000 { deepArray = [deepArray] }
        #expect {
            try context.map(jsonObject: deepArray, with: try folderMapping())
        } throws: { ($0 as? MappingError)?.code == .tooDeeplyNested }

        var deepObject: Any = [String: Any]()
        for _ in 0..<10_000 { deepObject = ["a": deepObject] }
        #expect {
            try context.map(jsonObject: [["id": 1, "name": deepObject]], with: try folderMapping())
        } throws: { error in
            guard let e = error as? MappingError else { return false }
            return e.code == .tooDeeplyNested && e.sourceIndex == 0 && e.attribute == "name"
        }
        #expect(!context.hasChanges)
        // A thousand levels are fine where they belong (an error that prints them, here).
        var thousand: Any = [Any]()
        for _ in 0..<1_000 { thousand = [thousand] }
        #expect {
            try context.map(jsonObject: [["id": 1, "name": thousand]], with: try folderMapping())
        } throws: { ($0 as? MappingError)?.code == .untransformableValue }
    }
}
