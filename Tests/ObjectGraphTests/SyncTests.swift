import Foundation
import ObjectGraph
import Testing

// Models of the sync tests: folders own files (cascade), notes (nullify, invalid without an
// owner) and guards (deny).

@Entity final class SyncFolder {
    @Attribute(.unique) var id: Int64 = 0
    var name: String = ""
    var region: String = "eu"
    var version: Int = 0
    @Relationship(deleteRule: .cascade, inverse: "folder") var files: [SyncFile]
    @Relationship(inverse: "owner") var notes: [SyncNote]
    @Relationship(deleteRule: .deny, inverse: "guarded") var guards: [SyncGuard]
}

@Entity final class SyncFile {
    @Attribute(.unique) var id: Int64 = 0
    var name: String = ""
    @Relationship(inverse: "files") var folder: SyncFolder?
}

@Entity final class SyncNote {
    @Attribute(.unique) var id: Int64 = 0
    var text: String = ""
    @Relationship(inverse: "notes") var owner: SyncFolder?
}

extension SyncNote: SyncValidated {
    var isInvalidForSync: Bool { owner == nil }
}

@Entity final class SyncGuard {
    @Attribute(.unique) var id: Int64 = 0
    @Relationship(inverse: "guards") var guarded: SyncFolder?
}

/// Forwards its mark to its notes instead of (not only) along cascade rules.
@Entity final class SyncShelf {
    @Attribute(.unique) var id: Int64 = 0
    @Relationship(inverse: "shelf") var books: [SyncBook]
}

@Entity final class SyncBook {
    @Attribute(.unique) var id: Int64 = 0
    @Relationship(inverse: "books") var shelf: SyncShelf?
}

extension SyncShelf: SyncMarkForwarding {
    static var relationshipsForwardingSyncMarks: [String] { ["books"] }
}

private let syncSchemaTypes: [any Entity.Type] = [
    SyncFolder.self, SyncFile.self, SyncNote.self, SyncGuard.self, SyncShelf.self, SyncBook.self,
]

private func syncContext() throws -> ModelContext { ModelContext(schema: try Schema(syncSchemaTypes)) }

private func folders() throws -> EntityMapping<SyncFolder> {
    var m = EntityMapping(SyncFolder.self)
    try m.map("id", "name", "region", "version")
    var files = EntityMapping(SyncFile.self)
    try files.map("id", "name")
    try m.map("files", to: "files", with: files)
    return m
}

private func doc(_ ids: [Int], region: String = "eu", version: Int = 1) -> Data {
    Data(
        ("["
            + ids.map { #"{"id": \#($0), "name": "f\#($0)", "region": "\#(region)", "version": \#(version)}"# }.joined(
                separator: ",") + "]").utf8)
}

private func ids(_ context: ModelContext) throws -> [Int64] {
    try context.objects(of: SyncFolder.self).map(\.id).sorted()
}

@Suite("Syncs: DKDBManager's deprecated objects, swept safely")
struct SyncTests {
    @Test func theSweepRemovesWhatTheSyncNoLongerMentionsAndStaysSweptAfterReopen() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sync-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let schema = try Schema(syncSchemaTypes)
        do {
            let store = try ObjectStore.open(at: dir, schema: schema)
            try store.context.sync([SyncFolder.self]) { try $0.map(doc([1, 2, 3, 4]), with: try folders()) }
            let before = store.stats.records
            let r = try store.context.sync([SyncFolder.self]) { try $0.map(doc([1, 3, 5]), with: try folders()) }
            #expect(store.stats.records == before + 1, "one sync, one journal record")
            #expect(
                r.counts["SyncFolder"]?.swept == 2 && r.counts["SyncFolder"]?.inserted == 1
                    && r.counts["SyncFolder"]?.unchanged == 2)
            #expect(try ids(store.context) == [1, 3, 5])
            try store.close()
        }
        let reopened = try ObjectStore.open(at: dir, schema: schema)
        #expect(try ids(reopened.context) == [1, 3, 5])
    }

    @Test func objectsInsertedDuringTheSyncAreNeverSwept() throws {
        let context = try syncContext()
        try context.sync([SyncFolder.self]) { try $0.map(doc([1, 2]), with: try folders()) }
        try context.sync([SyncFolder.self]) { sync in
            try sync.map(doc([1]), with: try folders())
            let local = try context.insert(SyncFolder.self)
            local.id = 99
        }
        #expect(try ids(context) == [1, 99])
    }

    @Test func marksFollowCascadeRelationshipsByDefault() throws {
        let context = try syncContext()
        let m = try folders()
        try context.sync([SyncFolder.self, SyncFile.self]) { sync in
            try sync.map(
                Data(
                    #"[{"id": 1, "files": [{"id": 10, "name": "a"}, {"id": 11, "name": "b"}]}, {"id": 2, "files": [{"id": 20}]}]"#
                        .utf8), with: m)
        }
        // The second sync lists folder 1 without its files (a summary): the files follow their
        // folder's mark along the cascade rule; folder 2 and its file are swept.
        let r = try context.sync([SyncFolder.self, SyncFile.self]) { sync in
            try sync.map(Data(#"[{"id": 1}]"#.utf8), with: m)
        }
        #expect(try ids(context) == [1])
        #expect(try context.objects(of: SyncFile.self).map(\.id).sorted() == [10, 11])
        #expect(
            r.counts["SyncFolder"]?.swept == 1 && r.counts["SyncFile"]?.swept == 0,
            "file 20 went with its folder's cascade, not the sweep")
    }

    @Test func anEntityDeclaringItsForwardingForwardsAlongThoseRelationships() throws {
        let context = try syncContext()
        var shelves = EntityMapping(SyncShelf.self)
        try shelves.map("id")
        var books = EntityMapping(SyncBook.self)
        try books.map("id")
        try shelves.map("books", to: "books", with: books)
        try context.sync([SyncShelf.self, SyncBook.self]) {
            try $0.map(Data(#"[{"id": 1, "books": [{"id": 7}, {"id": 8}]}]"#.utf8), with: shelves)
        }
        try context.sync([SyncShelf.self, SyncBook.self]) { try $0.map(Data(#"[{"id": 1}]"#.utf8), with: shelves) }
        #expect(try context.objects(of: SyncBook.self).map(\.id).sorted() == [7, 8])
    }

    @Test func invalidObjectsAreDeletedAndCheckedAgainAfterTheSweep() throws {
        let context = try syncContext()
        var notes = EntityMapping(SyncNote.self)
        try notes.map("id", "text")
        var m = try folders()
        try m.map("notes", to: "notes", with: notes)
        try context.sync([SyncFolder.self, SyncNote.self]) {
            try $0.map(Data(#"[{"id": 1, "notes": [{"id": 5}]}, {"id": 2, "notes": [{"id": 6}]}]"#.utf8), with: m)
        }
        // Both notes are listed (marked), but folder 2 is swept: note 6 loses its owner
        // (nullify), is then invalid, and goes in the check after the sweep.
        let r = try context.sync([SyncFolder.self, SyncNote.self]) { sync in
            try sync.map(Data(#"[{"id": 1, "notes": [{"id": 5}]}]"#.utf8), with: m)
            try sync.map(Data(#"[{"id": 5}, {"id": 6}]"#.utf8), with: notes)
        }
        #expect(try context.objects(of: SyncNote.self).map(\.id) == [5])
        #expect(
            r.counts["SyncFolder"]?.swept == 1 && r.counts["SyncNote"]?.invalid == 1 && r.counts["SyncNote"]?.swept == 0
        )
    }

    @Test func aScopedSyncSweepsOnlyInsideItsScopeAsForOnePageOfAPaginatedAPI() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sync-scope-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let schema = try Schema(syncSchemaTypes)
        do {
            let store = try ObjectStore.open(at: dir, schema: schema)
            let context = store.context
            try context.sync([SyncFolder.self]) { sync in
                try sync.map(doc([1, 2], region: "eu"), with: try folders())
                try sync.map(doc([3, 4], region: "us"), with: try folders())
            }
            // Page "us" only: folder 4 is gone from it; the "eu" folders are outside the scope.
            try context.sync([SyncFolder.self]) { sync in
                try sync.scope(SyncFolder.self, to: #Predicate { $0.region == "us" })
                try sync.map(doc([3], region: "us"), with: try folders())
            }
            #expect(try ids(context) == [1, 2, 3])
            try store.close()
        }
        let reopened = try ObjectStore.open(at: dir, schema: schema)
        #expect(try ids(reopened.context) == [1, 2, 3], "what was outside the scope is intact after reopen")
    }

    // MARK: Failures first

    @Test func aMappingErrorMidPayloadSweepsNothingAndLeavesTheContextAsBefore() throws {
        let context = try syncContext()
        try context.sync([SyncFolder.self]) { try $0.map(doc([1, 2, 3]), with: try folders()) }
        #expect(throws: MappingError.self) {
            try context.sync([SyncFolder.self]) { sync in
                try sync.map(
                    Data(#"[{"id": 1, "name": "changed"}, {"id": 2, "version": "x"}]"#.utf8), with: try folders())
            }
        }
        #expect(try ids(context) == [1, 2, 3] && !context.hasChanges)
        #expect(try context.object(SyncFolder.self, where: \.id, equals: 1)?.name == "f1")
    }

    @Test func anEmptyPayloadRefusesToWipeTheEntityUnlessAllowed() throws {
        let context = try syncContext()
        try context.sync([SyncFolder.self]) { try $0.map(doc([1, 2]), with: try folders()) }
        do {
            try context.sync([SyncFolder.self]) { try $0.map(Data("[]".utf8), with: try folders()) }
            Issue.record("an empty sync swept everything")
        } catch let e as SyncError {
            #expect(e.code == .emptySync && e.entity == "SyncFolder" && e.wouldRemove == 2)
        }
        #expect(try ids(context) == [1, 2] && !context.hasChanges)
        try context.sync([SyncFolder.self]) { sync in
            try sync.map(Data("[]".utf8), with: try folders())
            sync.allowEmptySync(of: SyncFolder.self)
        }
        #expect(try ids(context) == [])
    }

    @Test func aSweepAboveItsLimitRefusesAndSaysHowManyItWouldRemove() throws {
        let context = try syncContext()
        try context.sync([SyncFolder.self]) { try $0.map(doc(Array(1...10)), with: try folders()) }
        do {
            try context.sync([SyncFolder.self], sweepLimit: .fraction(0.5)) {
                try $0.map(doc([1, 2, 3]), with: try folders())
            }
            Issue.record("the limit was not enforced")
        } catch let e as SyncError {
            #expect(e.code == .sweepLimitExceeded && e.wouldRemove == 7)
        }
        #expect(try ids(context).count == 10)
        let r = try context.sync([SyncFolder.self], sweepLimit: .count(7)) {
            try $0.map(doc([1, 2, 3]), with: try folders())
        }
        #expect(r.counts["SyncFolder"]?.swept == 7)
    }

    @Test func aDenyRuleHitByTheSweepFailsTheSaveAndUndoesTheSync() throws {
        let context = try syncContext()
        try context.sync([SyncFolder.self]) { try $0.map(doc([1, 2]), with: try folders()) }
        let g = try context.insert(SyncGuard.self)
        g.id = 1
        g.guarded = try context.object(SyncFolder.self, where: \.id, equals: 2)
        try context.save()
        #expect(throws: ValidationError.self) {
            try context.sync([SyncFolder.self]) { try $0.map(doc([1], version: 2), with: try folders()) }
        }
        #expect(try ids(context) == [1, 2] && !context.hasChanges)
        #expect(try context.object(SyncFolder.self, where: \.id, equals: 1)?.version == 1)
    }

    @Test func aCancelledSyncChangesNothing() throws {
        let context = try syncContext()
        try context.sync([SyncFolder.self]) { try $0.map(doc([1, 2]), with: try folders()) }
        #expect(throws: ObjectGraphError.self) {
            try context.sync([SyncFolder.self]) { sync in
                try sync.map(doc([1]), with: try folders())
                try sync.cancel()
            }
        }
        #expect(try ids(context) == [1, 2] && !context.hasChanges)
    }

    @Test func aSyncInsideATransactionCommitsIntoItOrRollsBackAlone() throws {
        let context = try syncContext()
        try context.sync([SyncFolder.self]) { try $0.map(doc([1, 2]), with: try folders()) }
        try context.transaction { tx in
            let extra = try tx.context.insert(SyncFile.self)
            extra.id = 1
            _ = try? tx.context.sync([SyncFolder.self]) { sync in
                try sync.map(doc([1]), with: try folders())
                try sync.cancel()
            }
            #expect(try ids(tx.context) == [1, 2], "the failed sync rolled back alone")
            try tx.context.sync([SyncFolder.self]) { try $0.map(doc([2]), with: try folders()) }
        }
        #expect(try ids(context) == [2] && !context.hasChanges)
        #expect(try context.count(of: SyncFile.self) == 1)
    }
}
