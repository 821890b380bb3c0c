import Foundation
import GraphJournal
import ObjectGraph
import ObjectGraphTestSupport
import Testing

@Suite("Migrations")
struct MigrationTests {
    /// Writes a version 1 store: products with a duplicate name, a deleted one, vendors as
    /// strings, a category each, and two Legacy notes.
    func writeVersionOne(_ dir: URL, versioned: Bool = true) throws {
        let schema = versioned ? try Schema(versioned: ShopV1.self) : try Schema(ShopV1.models)
        let store = try ObjectStore.open(at: dir, schema: schema)
        let context = store.context
        let tools = try context.insert(ShopV1.Category.self)
        tools.title = "tools"
        let libs = try context.insert(ShopV1.Category.self)
        libs.title = "libs"
        let rows: [(String, Int, String, String, String, ShopV1.Category)] = [
            ("zlib", 120, "Debian", "Mark Adler", "active", libs),
            ("curl", 400, "Debian", "Daniel Stenberg", "retired", tools),
            ("zlib", 130, "Upstream", "Jean-loup Gailly", "active", libs),
            ("gone", 1, "", "Nobody", "deleted", tools),
        ]
        for (name, size, vendor, fullName, status, category) in rows {
            let p = try context.insert(ShopV1.Product.self)
            p.name = name
            p.sizeKB = size
            p.vendor = vendor
            p.fullName = fullName
            p.status = status
            p.dimensions = ShopDimensionsV1(w: size, h: 2)
            p.category = category
        }
        for note in ["first", "second"] {
            let legacy = try context.insert(ShopV1.Legacy.self)
            legacy.note = note
        }
        try context.save()
        try store.close()
    }

    /// The version identifiers the journal's last schema record lists.
    func recordedVersions(_ dir: URL) throws -> [String] {
        var last: [UInt8]?
        _ = try Journal.readRecords(directory: dir.path) { record in
            if record.entry.kind == .schema { last = record.payload }
        }
        return try StoredSchema.decode(try #require(last)).versions
    }

    @Test func aCustomStageMakesEveryKindOfChange() throws {
        let dir = temporaryStoreDirectory()
        try writeVersionOne(dir)
        do {
            let store = try ObjectStore.open(at: dir, migrationPlan: ShopPlanToTwo.self)
            let context = store.context
            let products = try context.fetch(FetchDescriptor<ShopV2.Product>()).sorted { $0.code < $1.code }
            // Deleted: "gone"; the duplicate "zlib" renamed.
            #expect(products.map(\.name) == ["curl", "zlib", "zlib (3)"])
            #expect(products.map(\.sizeKB) == ["400 kB", "120 kB", "130 kB"])
            #expect(products.map(\.status) == [.retired, .active, .active])
            #expect(products.map(\.firstName) == ["Daniel", "Mark", "Jean-loup"])
            #expect(products.map(\.lastName) == ["Stenberg", "Adler", "Gailly"])
            #expect(products.map(\.code) == ["CURL-400", "ZLIB-120", "ZLIB-130"])
            #expect(products.map(\.dimensions) == [400, 120, 130].map { ShopDimensionsV2(width: $0, height: 2) })
            #expect(products.map { $0.vendor?.name } == ["Debian", "Debian", "Upstream"])
            #expect(try context.count(of: ShopV2.Vendor.self) == 2)
            #expect(products.map { $0.categories.map(\.title) } == [["tools"], ["libs"], ["libs"]])
            #expect(try context.fetch(FetchDescriptor<ShopV2.Archive>()).map(\.note).sorted() == ["first", "second"])
            // The objects kept their IDs.
            #expect(products.map { $0.objectID?.serial } == [2, 1, 3])
            try store.close()
        }
        #expect(try recordedVersions(dir) == ["1", "2"])
        // Reopened: at version 2, nothing to migrate, the same objects.
        let store = try ObjectStore.open(at: dir, migrationPlan: ShopPlanToTwo.self)
        defer { try? store.close() }
        #expect(try store.context.count(of: ShopV2.Product.self) == 3)
        #expect(store.stats.records == 2)  // the new base: its schema record and its base record
    }

    @Test func twoCustomStagesThenALightweightOneWriteOneBase() throws {
        let dir = temporaryStoreDirectory()
        try writeVersionOne(dir)
        let store = try ObjectStore.open(at: dir, migrationPlan: ShopPlan.self)
        let products = try store.context.fetch(FetchDescriptor<ShopV4.Product>()).sorted { $0.code < $1.code }
        #expect(products.map(\.displayName) == ["Daniel Stenberg", "Mark Adler", "Jean-loup Gailly"])
        #expect(products.allSatisfy { $0.stock == 5 })
        try store.close()
        #expect(try recordedVersions(dir) == ["1", "2", "3", "4"])
    }

    @Test func aLightweightStageRewritesNothing() throws {
        let dir = temporaryStoreDirectory()
        try writeVersionOne(dir)
        try ObjectStore.open(at: dir, migrationPlan: ShopPlanThree.self).close()
        #expect(try recordedVersions(dir) == ["1", "2", "3"])
        let before = try directoryBytes(dir)
        do {
            let store = try ObjectStore.open(at: dir, migrationPlan: ShopPlan.self)
            #expect(try store.context.fetch(FetchDescriptor<ShopV4.Product>()).map(\.stock) == [5, 5, 5])
            try store.close()
        }
        // Opening at version 4 wrote nothing; the next save records the version.
        #expect(try directoryBytes(dir) == before)
        let store = try ObjectStore.open(at: dir, migrationPlan: ShopPlan.self)
        try #require(try store.context.fetch(FetchDescriptor<ShopV4.Product>()).first).stock = 9
        try store.context.save()
        try store.close()
        #expect(try recordedVersions(dir) == ["1", "2", "3", "4"])
        // Reopened with a journal holding schema records of versions 3 and 4.
        let again = try ObjectStore.open(at: dir, migrationPlan: ShopPlan.self)
        defer { try? again.close() }
        #expect(try again.context.fetch(FetchDescriptor<ShopV4.Product>()).map(\.stock).sorted() == [5, 5, 9])
    }

    @Test func anUnversionedStoreIsMatchedByItsShape() throws {
        let dir = temporaryStoreDirectory()
        try writeVersionOne(dir, versioned: false)
        #expect(try recordedVersions(dir) == [])
        let store = try ObjectStore.open(at: dir, migrationPlan: ShopPlanToTwo.self)
        defer { try? store.close() }
        #expect(try store.context.count(of: ShopV2.Product.self) == 3)
        #expect(try recordedVersions(dir) == ["1", "2"])
    }

    @Test func openingAnOlderVersionWithoutAPlanNamesBothVersions() throws {
        let dir = temporaryStoreDirectory()
        try writeVersionOne(dir)
        let before = try directoryBytes(dir)
        let error = try #require(throws: StoreError.self) {
            try ObjectStore.open(at: dir, schema: try Schema(versioned: ShopV2.self))
        }
        #expect(error.code == .migration)
        #expect(error.storedVersion == "1")
        #expect(error.modelVersion == "2")
        #expect(error.message.contains("version 1") && error.message.contains("version 2"))
        #expect(try directoryBytes(dir) == before)
        // The lock was released.
        try ObjectStore.open(at: dir, schema: try Schema(versioned: ShopV1.self)).close()
    }

    @Test func aStoreNewerThanTheCodeIsRefused() throws {
        let dir = temporaryStoreDirectory()
        try writeVersionOne(dir)
        try ObjectStore.open(at: dir, migrationPlan: ShopPlanToTwo.self).close()
        let before = try directoryBytes(dir)
        let error = try #require(throws: StoreError.self) {
            try ObjectStore.open(at: dir, migrationPlan: ShopPlanOne.self)
        }
        #expect(error.code == .migration)
        #expect(error.storedVersion == "2")
        #expect(error.modelVersion == "1")
        #expect(error.message.contains("newer than this code"))
        #expect(try directoryBytes(dir) == before)
    }

    @Test func aStageThatThrowsLeavesTheStoreUntouched() throws {
        let dir = temporaryStoreDirectory()
        try writeVersionOne(dir)
        let before = try directoryBytes(dir)
        let error = try #require(throws: StoreError.self) {
            try ObjectStore.open(at: dir, migrationPlan: ShopPlanThrowing.self)
        }
        #expect(error.code == .migration)
        #expect(error.message.contains("the stage gave up"))
        #expect(try directoryBytes(dir) == before)
        let store = try ObjectStore.open(at: dir, schema: try Schema(versioned: ShopV1.self))
        defer { try? store.close() }
        #expect(try store.context.count(of: ShopV1.Product.self) == 4)
    }

    @Test func duplicatesAStageLeavesAreNamedAndNothingIsWritten() throws {
        let dir = temporaryStoreDirectory()
        try writeVersionOne(dir)
        let before = try directoryBytes(dir)
        let error = try #require(throws: StoreError.self) {
            try ObjectStore.open(at: dir, migrationPlan: ShopPlanLeavingDuplicates.self)
        }
        #expect(error.code == .migration)
        #expect(error.message.contains("Product/3"), "\(error.message)")
        #expect(error.message.contains("unique"))
        #expect(try directoryBytes(dir) == before)
    }

    @Test func aCancelledMigrationWritesNothing() async throws {
        let dir = temporaryStoreDirectory()
        try writeVersionOne(dir)
        let before = try directoryBytes(dir)
        let reports = Locked<[WorkProgress]>([])
        let task = Task {
            var options = StoreOptions()
            options.progress = { progress in
                reports.withLock { $0.append(progress) }
                if progress.operation == .migration && progress.completed == 1 {
                    withUnsafeCurrentTask { $0?.cancel() }
                }
            }
            try ObjectStore.open(at: dir, migrationPlan: ShopPlan.self, options: options).close()
        }
        let error = await #expect(throws: StoreError.self) { try await task.value }
        #expect(error?.code == .cancelled)
        #expect(try directoryBytes(dir) == before)
        let migration = reports.withLock { $0 }.filter { $0.operation == .migration }
        #expect(migration.first?.completed == 0)
        #expect(migration.first?.unit == .stages)
        #expect(migration.first?.total == 4)
    }

    @Test func aReplicaRunningAnOlderModelRefusesARecordOfANewerVersion() throws {
        let records = Locked<[ShippedRecord]>([])
        var writerOptions = StoreOptions()
        writerOptions.journal.onDurable = { shipped in records.withLock { $0.append(contentsOf: shipped) } }
        let writer = try ObjectStore.open(
            at: temporaryStoreDirectory(#function + "-writer"), schema: try Schema(versioned: ShopV2.self),
            options: writerOptions)
        defer { try? writer.close() }
        let p = try writer.context.insert(ShopV2.Product.self)
        p.name = "zlib"
        try writer.context.save()
        var replicaOptions = StoreOptions()
        replicaOptions.readOnly = true
        let replicaDirectory = temporaryStoreDirectory(#function + "-replica")
        let replica = try ObjectStore.open(
            at: replicaDirectory, schema: try Schema(versioned: ShopV1.self), options: replicaOptions)
        defer { try? replica.close() }
        var schema: [UInt8] = []
        var refusal: StoreError?
        for record in records.withLock({ $0 }) {
            if record.kind == .schema {
                schema = try record.payload()
                continue
            }
            refusal = #expect(throws: StoreError.self) {
                try replica.applyShipped(record, schema: schema, origin: [1])
            }
        }
        #expect(refusal?.code == .migration)
        #expect(refusal?.storedVersion == "2")
        #expect(refusal?.modelVersion == "1")
        #expect(replica.origin == nil)
        #expect(replica.stats.records == 0)
        #expect(try replica.context.count(of: ShopV1.Product.self) == 0)
    }

    @Test func progressReportsEachStageThenTheBase() throws {
        let dir = temporaryStoreDirectory()
        try writeVersionOne(dir)
        let reports = Locked<[WorkProgress]>([])
        var options = StoreOptions()
        options.progress = { progress in reports.withLock { $0.append(progress) } }
        try ObjectStore.open(at: dir, migrationPlan: ShopPlan.self, options: options).close()
        let migration = reports.withLock { $0 }.filter { $0.operation == .migration }
        #expect(migration.map(\.completed) == [0, 1, 2, 3, 4])
        #expect(migration.allSatisfy { $0.total == 4 })
    }
}

enum ShopPlanOne: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ShopV1.self] }
    static var stages: [MigrationStage] { [] }
}

enum ShopPlanThree: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ShopV1.self, ShopV2.self, ShopV3.self] }
    static var stages: [MigrationStage] { [shopStageOneToTwo, shopStageTwoToThree] }
}

struct StageGaveUp: Error, CustomStringConvertible {
    var description: String { "the stage gave up" }
}

enum ShopPlanThrowing: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ShopV1.self, ShopV2.self] }
    static var stages: [MigrationStage] {
        [
            .custom(fromVersion: ShopV1.self, toVersion: ShopV2.self) { migration in
                for product in try migration.new.fetch(FetchDescriptor<ShopV2.Product>()) { product.code = "x" }
                throw StageGaveUp()
            }
        ]
    }
}

enum ShopPlanLeavingDuplicates: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ShopV1.self, ShopV2.self] }
    static var stages: [MigrationStage] {
        [.custom(fromVersion: ShopV1.self, toVersion: ShopV2.self) { _ in }]
    }
}
