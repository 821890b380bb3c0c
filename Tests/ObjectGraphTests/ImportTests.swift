import Foundation
import ObjectGraph
import Testing

/// The source of one imported record, with CoreStore's test flags.
struct ImportSourceRecord {
    var id: Int64?
    var number: Int
    var text: String
    var flags: Set<String> = []
}

struct TestInsertError: Error {}
struct TestUpdateError: Error {}
struct TestIDError: Error {}

/// CoreStore's TestEntity1, as an ObjectGraph entity importable by unique ID.
@Entity final class ImportedEntity {
    @Attribute(.unique) var testEntityID: Int64 = 0
    var testNumber: Int?
    var testString: String?
}

extension ImportedEntity: ImportableUniqueObject {
    typealias ImportSource = ImportSourceRecord

    static var uniqueIDKeyPath: ReferenceWritableKeyPath<ImportedEntity, Int64> { \.testEntityID }

    static func uniqueID(from source: ImportSourceRecord, in context: ModelContext) throws -> Int64? {
        if source.flags.contains("throw_on_id") { throw TestIDError() }
        return source.id
    }

    static func shouldInsert(from source: ImportSourceRecord, in context: ModelContext) -> Bool {
        !source.flags.contains("skip_insert")
    }

    static func shouldUpdate(from source: ImportSourceRecord, in context: ModelContext) -> Bool {
        !source.flags.contains("skip_update")
    }

    func didInsert(from source: ImportSourceRecord, in context: ModelContext) throws {
        #expect(testEntityID == source.id)  // the unique ID is set before didInsert runs
        if source.flags.contains("throw_on_insert") {
            testNumber = -1  // a half-built object: must not survive the failed import
            throw TestInsertError()
        }
        testNumber = source.number
        testString = source.text
    }

    func update(from source: ImportSourceRecord, in context: ModelContext) throws {
        if source.flags.contains("throw_on_update") {
            testNumber = -1
            throw TestUpdateError()
        }
        testNumber = source.number
        testString = source.text
    }
}

/// A non-unique importable entity (CoreStore's ImportableObject).
@Entity final class ImportedLog {
    var line: String = ""
}

extension ImportedLog: ImportableObject {
    typealias ImportSource = String
    static func shouldInsert(from source: String, in context: ModelContext) -> Bool { !source.hasPrefix("#") }
    func didInsert(from source: String, in context: ModelContext) throws {
        if source == "boom" { throw TestInsertError() }
        line = source
    }
}

/// An importable entity whose `didInsert` meddles with the unique index during the import:
/// `number` is another ID that it inserts as a sibling ("sibling") or takes for itself ("take").
@Entity final class MeddlingImport {
    @Attribute(.unique) var key: Int64 = 0
    var note: String = ""
}

extension MeddlingImport: ImportableUniqueObject {
    typealias ImportSource = ImportSourceRecord

    static var uniqueIDKeyPath: ReferenceWritableKeyPath<MeddlingImport, Int64> { \.key }

    static func uniqueID(from source: ImportSourceRecord, in context: ModelContext) throws -> Int64? { source.id }

    func didInsert(from source: ImportSourceRecord, in context: ModelContext) throws {
        note = source.text
        if source.flags.contains("sibling") {
            let sibling = try context.insert(MeddlingImport.self)
            sibling.key = Int64(source.number)
            sibling.note = "sibling"
        }
        if source.flags.contains("take") { key = Int64(source.number) }
    }

    func update(from source: ImportSourceRecord, in context: ModelContext) throws { note = source.text }
}

/// An importable entity with non-empty defaults, for rows allocated in room a bulk import made.
@Entity final class DefaultedImport {
    @Attribute(.unique) var key: Int64 = 0
    var label: String = "unlabelled"
    var count: Int = 7
    var note: String?
}

extension DefaultedImport: ImportableUniqueObject {
    typealias ImportSource = Int64
    static var uniqueIDKeyPath: ReferenceWritableKeyPath<DefaultedImport, Int64> { \.key }
    static func uniqueID(from source: Int64, in context: ModelContext) throws -> Int64? { source }
    static func shouldInsert(from source: Int64, in context: ModelContext) -> Bool { source % 3 != 0 }
    func update(from source: Int64, in context: ModelContext) throws {
        if source % 2 == 0 { label = "even \(source)" }
    }
}

/// CoreStore's ImportTests, re-created: objects 101–105 are seeded first.
@Suite("Import (CoreStore's ImportTests, re-created)")
struct ImportTests {
    func seeded() throws -> ModelContext {
        let context = ModelContext(schema: try Schema(ImportedEntity.self, ImportedLog.self))
        for i in 1...5 {
            let e = try context.insert(ImportedEntity.self)
            e.testEntityID = Int64(100 + i); e.testNumber = i; e.testString = "nil:TestEntity1:\(i)"
        }
        try context.save()
        return context
    }

    func source(_ id: Int64?, _ n: Int, _ flags: Set<String> = []) -> ImportSourceRecord {
        ImportSourceRecord(id: id, number: n, text: "nil:TestEntity1:\(n)", flags: flags)
    }

    @Test func importUniqueObjectCanSkipImport() throws {
        let context = try seeded()
        #expect(try context.importUniqueObject(ImportedEntity.self, from: source(106, 6, ["skip_insert"])) == nil)
        #expect(try context.count(of: ImportedEntity.self) == 5)
        #expect(try context.importUniqueObject(ImportedEntity.self, from: source(105, 6, ["skip_update"])) == nil)
        #expect(try context.object(ImportedEntity.self, where: \.testEntityID, equals: 105)?.testNumber == 5)
    }

    /// Differs from CoreStore on purpose: CoreStore keeps the half-built object 106 (count 6,
    /// attributes nil); our imports are atomic, so the failed insert leaves nothing behind.
    @Test func importUniqueObjectCanThrowErrorAndLeavesNoHalfBuiltObject() throws {
        let context = try seeded()
        let insertError = try #require(throws: ImportError.self) {
            try context.importUniqueObject(ImportedEntity.self, from: source(106, 6, ["throw_on_insert"]))
        }
        #expect(insertError.underlying is TestInsertError)
        #expect(try context.count(of: ImportedEntity.self) == 5)
        #expect(try context.object(ImportedEntity.self, where: \.testEntityID, equals: 106) == nil)

        let updateError = try #require(throws: ImportError.self) {
            try context.importUniqueObject(ImportedEntity.self, from: source(105, 6, ["throw_on_update"]))
        }
        #expect(updateError.underlying is TestUpdateError)
        let existing = try #require(try context.object(ImportedEntity.self, where: \.testEntityID, equals: 105))
        #expect(existing.testNumber == 5 && existing.testString == "nil:TestEntity1:5")
        #expect(!context.hasChanges)
    }

    @Test func importUniqueObjectCanImportCorrectly() throws {
        let context = try seeded()
        let inserted = try #require(try context.importUniqueObject(ImportedEntity.self, from: source(106, 6)))
        #expect(try context.count(of: ImportedEntity.self) == 6)
        #expect(inserted.testEntityID == 106 && inserted.testNumber == 6)
        let updated = try #require(try context.importUniqueObject(ImportedEntity.self, from: source(106, 7)))
        #expect(updated === inserted)  // found among the pending inserts, in O(1)
        #expect(updated.testNumber == 7 && updated.testString == "nil:TestEntity1:7")
        #expect(try context.count(of: ImportedEntity.self) == 6)
    }

    @Test func importUniqueObjectsCanSkipImport() throws {
        let context = try seeded()
        let objects = try context.importUniqueObjects(
            ImportedEntity.self,
            sourceArray: [source(106, 6, ["skip_insert"]), source(107, 7), source(105, 8, ["skip_update"])])
        #expect(objects.map(\.testEntityID) == [107])
        #expect(try context.count(of: ImportedEntity.self) == 6)
        #expect(try context.object(ImportedEntity.self, where: \.testEntityID, equals: 105)?.testNumber == 5)
    }

    @Test func importUniqueObjectsThrowingOnAnIDCreatesNothing() throws {
        let context = try seeded()
        let error = try #require(throws: ImportError.self) {
            try context.importUniqueObjects(
                ImportedEntity.self, sourceArray: [source(106, 6), source(107, 7, ["throw_on_id"])])
        }
        #expect(error.sourceIndex == 1)
        #expect(try context.count(of: ImportedEntity.self) == 5)
    }

    /// Differs from CoreStore on purpose: the whole import is undone and the error names the
    /// failing source; changes made before the import in the same transaction stay.
    @Test func importUniqueObjectsThatThrowsUndoesTheWholeImportOnly() throws {
        let context = try seeded()
        let before = try #require(try context.object(ImportedEntity.self, where: \.testEntityID, equals: 101))
        before.testString = "changed before the import"
        let error = try #require(throws: ImportError.self) {
            try context.importUniqueObjects(
                ImportedEntity.self,
                sourceArray: [source(102, 20), source(106, 6), source(107, 7, ["throw_on_insert"]), source(108, 8)])
        }
        #expect(error.sourceIndex == 2)
        #expect(try context.count(of: ImportedEntity.self) == 5)
        #expect(try context.object(ImportedEntity.self, where: \.testEntityID, equals: 102)?.testNumber == 2)
        #expect(before.testString == "changed before the import")
        #expect(context.updatedObjects.count == 1)
    }

    @Test func importUniqueObjectsUpdatesExistingAndLastDuplicateWinsInFirstAppearanceOrder() throws {
        let context = try seeded()
        let objects = try context.importUniqueObjects(
            ImportedEntity.self,
            sourceArray: [
                source(106, 6), source(105, 50), source(107, 7), source(106, 60), source(nil, 0), source(105, 51),
            ])
        #expect(objects.map(\.testEntityID) == [106, 105, 107])
        #expect(objects.map(\.testNumber) == [60, 51, 7])
        #expect(try context.count(of: ImportedEntity.self) == 7)
    }

    @Test func sourcesWithoutAnIDShiftNoOtherSourceInABatchWithoutDuplicates() throws {
        // No ID repeats, so the import keeps no table of winners: each object must still get
        // its own source although the sources without an ID shift the positions.
        let context = try seeded()
        let objects = try context.importUniqueObjects(
            ImportedEntity.self,
            sourceArray: [source(nil, 0), source(108, 8), source(nil, 1), source(109, 9), source(105, 50)])
        #expect(objects.map(\.testEntityID) == [108, 109, 105])
        #expect(objects.map(\.testNumber) == [8, 9, 50])
    }

    @Test func importUniqueObjectsMaintainsOrderOfInputSourceArray() throws {
        let context = try seeded()
        let sources = [source(107, 7), source(106, 6), source(103, 30)]
        let objects = try context.importUniqueObjects(ImportedEntity.self, sourceArray: sources)
        #expect(objects.map(\.testEntityID) == [107, 106, 103])
        for (object, s) in zip(objects, sources) {
            #expect(object.testNumber == s.number && object.testString == s.text)
        }
    }

    @Test func preProcessCanFilterTheMapping() throws {
        let context = try seeded()
        let objects = try context.importUniqueObjects(
            ImportedEntity.self, sourceArray: [source(106, 6), source(107, 7)],
            preProcess: { $0.filter { $0.key != 106 } })
        #expect(objects.map(\.testEntityID) == [107])
    }

    @Test func importObjectsSkipsAndIsAtomic() throws {
        let context = try seeded()
        let logs = try context.importObjects(ImportedLog.self, sourceArray: ["a", "#comment", "b"])
        #expect(logs.map(\.line) == ["a", "b"])
        let error = try #require(throws: ImportError.self) {
            try context.importObjects(ImportedLog.self, sourceArray: ["c", "boom"])
        }
        #expect(error.sourceIndex == 1)
        #expect(try context.count(of: ImportedLog.self) == 2)
    }

    /// An import into an empty entity indexes its (distinct) IDs without comparing keys, while
    /// nothing else has changed the index. A hook that inserts an object with a later ID of the
    /// same import, or gives its object such an ID, must still surface as a duplicate at save.
    @Test(arguments: ["sibling", "take"])
    func hookThatTakesALaterIDOfTheImportIsAReportedDuplicate(meddling: String) throws {
        let context = ModelContext(schema: try Schema(MeddlingImport.self))
        let sources = (1...40).map { i in
            ImportSourceRecord(id: Int64(i), number: 30, text: "s\(i)", flags: i == 3 ? [meddling] : [])
        }
        let objects = try context.importUniqueObjects(MeddlingImport.self, sourceArray: sources)
        #expect(objects.count == 40)
        let error = try #require(throws: ValidationError.self) { try context.save() }
        #expect(error.failures.contains { $0.reason.contains("MeddlingImport(key)") })
        // Both holders of 30 are found by the index once one of them gives it up.
        let holders = try context.fetch(MeddlingImport.self) { $0.key == 30 }
        #expect(holders.count == 2)
        holders[0].key = 1000
        try context.save()
        #expect(try context.fetch(MeddlingImport.self) { _ in true }.count == (meddling == "sibling" ? 41 : 40))
        #expect(try context.upsert(MeddlingImport.self, where: \.key, equals: 30) { _ in }.isInserted == false)
    }

    /// A bulk import grows the ID's index first; a duplicate already pending in it (two inserted
    /// objects with one ID) must survive the growth and still fail the save. (The growth used to
    /// forget it.)
    @Test func pendingDuplicateSurvivesTheIndexGrowthOfABulkImport() throws {
        let context = ModelContext(schema: try Schema(ImportedEntity.self))
        let a = try context.insert(ImportedEntity.self)
        a.testEntityID = 7
        let b = try context.insert(ImportedEntity.self)
        b.testEntityID = 7
        let sources = (1000..<3000).map { source(Int64($0), $0) }
        #expect(try context.importUniqueObjects(ImportedEntity.self, sourceArray: sources).count == 2000)
        let error = try #require(throws: ValidationError.self) { try context.save() }
        #expect(error.failures.contains { $0.reason.contains("ImportedEntity(testEntityID)") })
        b.testEntityID = 8
        try context.save()
    }

    /// A bulk import into an empty entity makes room for all its rows up front; rows it skips
    /// (`shouldInsert` false), rows after a rollback and rows after the arena was compacted
    /// (which moves the default strings) must all still start with the defaults.
    @Test func rowsAllocatedInRoomAnImportMadeStartWithTheDefaults() throws {
        let context = ModelContext(schema: try Schema(DefaultedImport.self))
        // Room for 20,000 rows; a third are skipped, so a third of the room is left over.
        let imported = try context.importUniqueObjects(DefaultedImport.self, sourceArray: Array(Int64(1)...20_000))
        #expect(imported.count == 13_334)
        #expect(
            imported.allSatisfy {
                $0.count == 7 && $0.note == nil
                    && ($0.key % 2 == 0 ? $0.label == "even \($0.key)" : $0.label == "unlabelled")
            })
        try context.save()
        // Mostly garbage after a few rounds: a save then compacts the arena, which moves the
        // default's bytes and rewrites the defaults' cells.
        for round in 0..<3 {
            for object in imported { object.label = String(repeating: "\(round)", count: 200) }
            try context.save()
        }
        let fresh = try context.insert(DefaultedImport.self)  // a row in the room left over
        fresh.key = -1
        #expect(fresh.label == "unlabelled" && fresh.count == 7 && fresh.note == nil)
        context.rollback()
        let later = try context.importUniqueObjects(DefaultedImport.self, sourceArray: Array(Int64(50_001)...50_004))
        #expect(later.map(\.label) == ["even 50002", "unlabelled"])
        #expect(later.allSatisfy { $0.count == 7 && $0.note == nil })
    }

    @Test func firstImportWithEveryIDTwiceIsLinear() throws {
        let context = ModelContext(schema: try Schema(ImportedEntity.self))
        let n = 20_000
        let sources = (0..<n * 2).map { source(Int64($0 % n), $0) }
        let start = ContinuousClock.now
        let objects = try context.importUniqueObjects(ImportedEntity.self, sourceArray: sources)
        let elapsed = ContinuousClock.now - start
        #expect(objects.count == n)
        #expect(objects[0].testNumber == n)  // last duplicate wins
        print("import of \(2 * n) sources with every ID twice (debug build): \(elapsed)")
    }
}

@Suite("Transactions")
struct TransactionTests {
    @Test func transactionCommitsWhenTheClosureReturns() throws {
        let backend = RecordingBackend()
        let context = ModelContext(schema: try Schema(Member.self), backend: backend)
        let count = try context.transaction { tx in
            try tx.context.upsert(Member.self, where: \.id, equals: 1) { $0.name = "a" }
            try tx.context.upsert(Member.self, where: \.id, equals: 2) { $0.name = "b" }
            return try tx.context.count(of: Member.self)
        }
        #expect(count == 2)
        #expect(backend.saved.count == 1)
        #expect(!context.hasChanges)
    }

    @Test func transactionRollsBackEverythingWhenTheClosureThrowsAndKeepsEarlierChanges() throws {
        let context = ModelContext(schema: try Schema(Member.self))
        let a = try context.upsert(Member.self, where: \.id, equals: 1) { $0.name = "a" }
        try context.save()
        a.name = "pending before"
        struct Failure: Error {}
        #expect(throws: Failure.self) {
            try context.transaction { tx in
                a.name = "inside"
                try tx.context.upsert(Member.self, where: \.id, equals: 2)
                tx.context.delete(a)
                throw Failure()
            }
        }
        #expect(a.name == "pending before" && !a.isDeleted)
        #expect(try context.count(of: Member.self) == 1)
        #expect(try context.object(Member.self, where: \.id, equals: 1) === a)
    }

    @Test func cancelRollsBackAndReportsCancellation() throws {
        let context = ModelContext(schema: try Schema(Member.self))
        let error = try #require(throws: ObjectGraphError.self) {
            try context.transaction { tx in
                try tx.context.upsert(Member.self, where: \.id, equals: 1)
                try tx.cancel()
            }
        }
        #expect(error.code == .cancelled)
        #expect(try context.count(of: Member.self) == 0)
    }

    @Test func innerTransactionRollsBackAloneInsideAnOuterOne() throws {
        let context = ModelContext(schema: try Schema(Member.self))
        try context.transaction { tx in
            try tx.context.upsert(Member.self, where: \.id, equals: 1)
            _ = try? tx.context.transaction { inner in
                try inner.context.upsert(Member.self, where: \.id, equals: 2)
                try inner.cancel()
            }
        }
        #expect(try context.objects(of: Member.self).map(\.id) == [1])
        #expect(!context.hasChanges)
    }
}

/// An entity importable by a string key, and one by a floating-point key, for identity tests.
@Entity final class NamedImport {
    @Attribute(.unique) var name: String = ""
    var sources: Int = 0
}

extension NamedImport: ImportableUniqueObject {
    typealias ImportSource = String
    static var uniqueIDKeyPath: ReferenceWritableKeyPath<NamedImport, String> { \.name }
    static func uniqueID(from source: String, in context: ModelContext) throws -> String? { source }
    func update(from source: String, in context: ModelContext) throws { sources += 1 }
}

@Entity final class MeasuredImport {
    @Attribute(.unique) var value: Double = 0
    var sources: Int = 0
}

extension MeasuredImport: ImportableUniqueObject {
    typealias ImportSource = Double
    static var uniqueIDKeyPath: ReferenceWritableKeyPath<MeasuredImport, Double> { \.value }
    static func uniqueID(from source: Double, in context: ModelContext) throws -> Double? { source }
    func update(from source: Double, in context: ModelContext) throws { sources += 1 }
}

/// Identity is byte equality (Docs/Semantics.md, rule 15): one batch, two batches and a lookup
/// all agree.
@Suite("Import identity: stored bytes, as the unique index compares")
struct ImportIdentityTests {
    static let composed = "caf\u{E9}"  // é as one scalar
    static let decomposed = "cafe\u{301}"  // e and a combining acute accent

    @Test func canonicallyEquivalentStringsAreTwoIDsInOneBatchAsInTwo() throws {
        #expect(Self.composed == Self.decomposed, "Swift's == says they are one string")
        let oneBatch = ModelContext(schema: try Schema(NamedImport.self))
        let imported = try oneBatch.importUniqueObjects(
            NamedImport.self, sourceArray: [Self.composed, Self.decomposed])
        #expect(imported.count == 2)
        let twoBatches = ModelContext(schema: try Schema(NamedImport.self))
        _ = try twoBatches.importUniqueObjects(NamedImport.self, sourceArray: [Self.composed])
        _ = try twoBatches.importUniqueObjects(NamedImport.self, sourceArray: [Self.decomposed])
        for context in [oneBatch, twoBatches] {
            #expect(try context.objects(of: NamedImport.self).count == 2)
            let byComposed = try #require(try context.object(NamedImport.self, where: \.name, equals: Self.composed))
            let byDecomposed = try #require(
                try context.object(NamedImport.self, where: \.name, equals: Self.decomposed))
            #expect(byComposed !== byDecomposed)
            #expect(Array(byDecomposed.name.utf8) == Array(Self.decomposed.utf8))
            try context.save()
        }
        // A repeat of the same bytes is the same object.
        let again = try oneBatch.importUniqueObjects(NamedImport.self, sourceArray: [Self.decomposed, Self.decomposed])
        #expect(again.count == 1)
        #expect(try oneBatch.objects(of: NamedImport.self).count == 2)
    }

    @Test func zeroAndNegativeZeroAreTwoIDsAndNaNIsOne() throws {
        let context = ModelContext(schema: try Schema(MeasuredImport.self))
        let imported = try context.importUniqueObjects(MeasuredImport.self, sourceArray: [0.0, -0.0, .nan, .nan, 0.0])
        #expect(imported.count == 3)
        #expect(
            imported.map { $0.value.bitPattern } == [
                Double(0).bitPattern, (-Double(0)).bitPattern, Double.nan.bitPattern,
            ])
        #expect(try context.object(MeasuredImport.self, where: \.value, equals: -0.0) === imported[1])
        #expect(try context.object(MeasuredImport.self, where: \.value, equals: 0.0) === imported[0])
        let later = ModelContext(schema: try Schema(MeasuredImport.self))
        _ = try later.importUniqueObjects(MeasuredImport.self, sourceArray: [0.0])
        _ = try later.importUniqueObjects(MeasuredImport.self, sourceArray: [-0.0])
        #expect(try later.objects(of: MeasuredImport.self).count == 2)
    }
}
