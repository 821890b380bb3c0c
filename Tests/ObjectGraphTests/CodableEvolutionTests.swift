import Foundation
import GraphJournal
import Testing

@testable import ObjectGraph

// Three versions of one entity, `Parcel`, whose `Codable` attribute types change shape: the
// same entity name in each namespace, as an app's successive models declare it.

/// The first version: dimensions of two fields.
enum ParcelV1 {
    struct Dimensions: Codable, Hashable {
        var width: Int
        var height: Int
    }

    @Entity final class Parcel {
        var label: String = ""
        var size: Dimensions = Dimensions(width: 0, height: 0)
        var extra: Dimensions?
    }

    static let schema: Schema = {
        do { return try Schema(Parcel.self) } catch { preconditionFailure("\(error)") }
    }()
}

/// A version whose dimensions gain an optional depth: it reads what version 1 wrote, and what
/// it writes with a depth is read by version 2.
enum ParcelV1b {
    struct Dimensions: Codable, Hashable {
        var width: Int
        var height: Int
        var depth: Int?
    }

    @Entity final class Parcel {
        var label: String = ""
        var size: Dimensions = Dimensions(width: 0, height: 0)
        var extra: Dimensions?
    }

    static let schema: Schema = {
        do { return try Schema(Parcel.self) } catch { preconditionFailure("\(error)") }
    }()
}

/// The second version: the depth is required, so version 1's JSON no longer decodes.
enum ParcelV2 {
    struct Dimensions: Codable, Hashable {
        var width: Int
        var height: Int
        var depth: Int
    }

    @Entity final class Parcel {
        var label: String = ""
        var size: Dimensions = Dimensions(width: 0, height: 0, depth: 0)
        var extra: Dimensions?
    }

    static let schema: Schema = {
        do { return try Schema(Parcel.self) } catch { preconditionFailure("\(error)") }
    }()
}

/// Only the optional attribute changed shape: `size` is version 1's type, `extra` version 2's.
enum ParcelOptionalChanged {
    @Entity final class Parcel {
        var label: String = ""
        var size: ParcelV1.Dimensions = ParcelV1.Dimensions(width: 0, height: 0)
        var extra: ParcelV2.Dimensions?
    }

    static let schema: Schema = {
        do { return try Schema(Parcel.self) } catch { preconditionFailure("\(error)") }
    }()
}

/// A stored `Codable` value that the model's current type cannot decode is found when the
/// store opens, or when a replica applies the record storing it, never by a getter.
@Suite struct CodableEvolutionTests {
    static let options = StoreOptions(durability: .none)

    /// A store written by version 1: parcels 1 to `count`, with `extra` on the even ones when
    /// `extras` is true.
    static func writeV1(_ dir: URL, count: Int = 3, extras: Bool = false) throws {
        let store = try ObjectStore.open(at: dir, schema: ParcelV1.schema, options: options)
        for i in 1...count {
            try store.context.insert(ParcelV1.Parcel.self) {
                $0.label = "p\(i)"
                $0.size = ParcelV1.Dimensions(width: i, height: 2 * i)
                if extras && i % 2 == 0 { $0.extra = ParcelV1.Dimensions(width: 1, height: 1) }
            }
        }
        try store.context.save()
        try store.close()
    }

    /// Every file of `dir` with its bytes.
    static func files(_ dir: URL) throws -> [String: Data] {
        var result: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) {
            result[name] = try Data(contentsOf: dir.appendingPathComponent(name))
        }
        return result
    }

    /// The error opening `dir` with `schema` throws (nil: it opened).
    static func openError(_ dir: URL, _ schema: Schema) -> StoreError? {
        do {
            let store = try ObjectStore.open(at: dir, schema: schema, options: options)
            try? store.close()
            return nil
        } catch {
            return error
        }
    }

    @Test func aStoredValueTheNewShapeCannotDecodeFailsTheOpenNamingIt() throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try Self.writeV1(dir)
        let before = try Self.files(dir)

        let error = try #require(Self.openError(dir, ParcelV2.schema))
        #expect(error.code == .incompatibleSchema)
        #expect(error.message.contains("Parcel.size of Parcel/1 holds JSON that does not decode as Dimensions"))
        #expect(error.message.contains("depth"))  // the decoding error: the key it lacks
        #expect(error.message.contains("a custom migration stage must convert"))
        #expect(error.message.contains("the store was not opened"))

        // Nothing changed on disk, the lock was released, and the old model still reads it.
        #expect(try Self.files(dir) == before)
        let store = try ObjectStore.open(at: dir, schema: ParcelV1.schema, options: Self.options)
        let sizes = try store.context.objects(of: ParcelV1.Parcel.self).map(\.size).sorted { $0.width < $1.width }
        #expect(sizes == [1, 2, 3].map { ParcelV1.Dimensions(width: $0, height: 2 * $0) })
        try store.close()
    }

    @Test func anUndecodableOptionalValueFailsTheOpenRatherThanReadingAsNil() throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try Self.writeV1(dir, count: 3, extras: true)

        let error = try #require(Self.openError(dir, ParcelOptionalChanged.schema))
        #expect(error.code == .incompatibleSchema)
        #expect(error.message.contains("Parcel.extra of Parcel/2 holds JSON that does not decode as Dimensions"))
        #expect(error.message.contains("depth"))
    }

    @Test func aNilOptionalValueNeedsNoDecoding() throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try Self.writeV1(dir, count: 3, extras: false)

        let store = try ObjectStore.open(at: dir, schema: ParcelOptionalChanged.schema, options: Self.options)
        let parcels = try store.context.objects(of: ParcelOptionalChanged.Parcel.self)
        #expect(parcels.count == 3)
        #expect(parcels.allSatisfy { $0.extra == nil })
        try store.close()
    }

    @Test func aValueOverwrittenOrDeletedLaterDoesNotFailTheOpen() throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try Self.writeV1(dir, count: 3, extras: true)
        // Version 1b reads version 1's values; it gives each a depth, and deletes parcel 3.
        do {
            let store = try ObjectStore.open(at: dir, schema: ParcelV1b.schema, options: Self.options)
            for p in try store.context.objects(of: ParcelV1b.Parcel.self) {
                if p.label == "p3" {
                    store.context.delete(p)
                    continue
                }
                p.size.depth = 7
                if p.extra != nil { p.extra?.depth = 8 }
            }
            try store.context.save()
            try store.close()
        }
        // The journal still holds version 1's values, but none is live any more.
        let store = try ObjectStore.open(at: dir, schema: ParcelV2.schema, options: Self.options)
        let parcels = try store.context.objects(of: ParcelV2.Parcel.self).sorted { $0.label < $1.label }
        #expect(parcels.map(\.label) == ["p1", "p2"])
        #expect(parcels.map(\.size.depth) == [7, 7])
        #expect(parcels.map { $0.extra?.depth } == [nil, 8])
        try store.close()
    }

    @Test func aReplicaRefusesAShippedRecordStoringAValueItsModelCannotDecode() throws {
        let source = temporaryStoreDirectory("source")
        let replicaDir = temporaryStoreDirectory("replica")
        defer {
            try? FileManager.default.removeItem(at: source)
            try? FileManager.default.removeItem(at: replicaDir)
        }
        try Self.writeV1(source, count: 2)
        var shipped: [ShippedRecord] = []
        do {
            let store = try ObjectStore.open(at: source, schema: ParcelV1.schema, options: Self.options)
            try store.forEachShippedRecord(after: 0) { shipped.append($0) }
            try store.close()
        }

        var replicaOptions = Self.options
        replicaOptions.readOnly = true
        let replica = try ObjectStore.open(at: replicaDir, schema: ParcelV2.schema, options: replicaOptions)
        var schema: [UInt8] = []
        var refused: StoreError?
        do {
            for r in shipped {
                if r.kind == .schema {
                    schema = try r.payload()
                    continue
                }
                try replica.applyShipped(r, schema: schema, origin: [1])
            }
        } catch let error as StoreError {
            refused = error
        }
        let error = try #require(refused)
        #expect(error.code == .incompatibleSchema)
        #expect(error.sequence == shipped.first { $0.kind == .transaction }?.sequence)
        #expect(error.message.contains("Parcel.size of Parcel/1 holds JSON that does not decode as Dimensions"))
        #expect(error.message.contains("a custom migration stage must convert"))
        try? replica.close()
        // The record was appended before it was applied: reopening names the same object.
        let reopened = try #require(Self.openError(replicaDir, ParcelV2.schema))
        #expect(reopened.code == .incompatibleSchema)
        #expect(reopened.message.contains("Parcel.size of Parcel/1"))
    }

    @Test func applyingAChangeSetRefusesAValueTheModelCannotDecode() throws {
        let context = ModelContext(schema: ParcelV2.schema)
        var changes = EntityChanges(entityName: "Parcel", attributeNames: ["label", "size"])
        changes.insertedSerials = [1]
        changes.insertedValues = [.string("p1"), .data(Data(#"{"height":2,"width":1}"#.utf8))]
        var set = ChangeSet()
        set.entities = [changes]
        #expect(throws: ObjectGraphError.self) { try context.apply(set) }
        #expect(try context.objects(of: ParcelV2.Parcel.self).isEmpty)
    }

    @Test func settingUndecodableJSONByKeyIsRefused() throws {
        let context = ModelContext(schema: ParcelV2.schema)
        let p = try context.insert(ParcelV2.Parcel.self)
        #expect(throws: ObjectGraphError.self) {
            try p.setValue(Data(#"{"height":2,"width":1}"#.utf8), forKey: "size")
        }
        try p.setValue(Data(#"{"depth":3,"height":2,"width":1}"#.utf8), forKey: "size")
        #expect(p.size == ParcelV2.Dimensions(width: 1, height: 2, depth: 3))
    }

    /// What the open-time check costs: 200k parcels, their values repeating (10 distinct) and
    /// all distinct. Run with `OBJECTGRAPH_MEASURE_CODABLE_CHECK=1`; prints the timings.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["OBJECTGRAPH_MEASURE_CODABLE_CHECK"] != nil))
    func measureTheOpenTimeCheck() throws {
        let count = 200_000
        for distinct in [10, count] {
            let dir = temporaryStoreDirectory("measure\(distinct)")
            defer { try? FileManager.default.removeItem(at: dir) }
            do {
                let store = try ObjectStore.open(at: dir, schema: ParcelV1.schema, options: Self.options)
                for i in 0..<count {
                    try store.context.insert(ParcelV1.Parcel.self) {
                        $0.size = ParcelV1.Dimensions(width: i % distinct, height: 3)
                    }
                }
                try store.context.save()
                try store.close()
            }
            let clock = ContinuousClock()
            var store: ObjectStore?
            let open = try clock.measure {
                store = try ObjectStore.open(at: dir, schema: ParcelV1.schema, options: Self.options)
            }
            let context = try #require(store).context
            var check = CodableValueCheck(context.tables)
            let checked = try clock.measure { try check.checkLiveObjects() }
            var uncached = Duration.zero
            let t = context.tables[0]
            let slot = try #require(t.entity.slot(forKey: "size"))
            let decode = try #require(t.codableChecks[slot])
            uncached = clock.measure {
                for row in 0..<t.rowCount {
                    if let v = t.value(row: row, slot: slot) { _ = decode.check(v) }
                }
            }
            print(
                "CodableValueCheck: \(count) objects, \(distinct) distinct values: open \(open) (check included), "
                    + "check \(checked), decoding every value \(uncached)")
            try store?.close()
        }
    }
}

// The same versions as a migration plan sees them.

extension ParcelV1: VersionedSchema {
    static let versionIdentifier = "1"
    static var models: [any Entity.Type] { [Parcel.self] }
}

extension ParcelV2: VersionedSchema {
    static let versionIdentifier = "2"
    static var models: [any Entity.Type] { [Parcel.self] }
}

/// A stage that converts version 1's dimensions to version 2's, with a depth of 1.
enum ParcelPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ParcelV1.self, ParcelV2.self] }
    static var stages: [MigrationStage] {
        [
            .custom(fromVersion: ParcelV1.self, toVersion: ParcelV2.self) { migration in
                for old in try migration.old.fetch(FetchDescriptor<ParcelV1.Parcel>()) {
                    guard let new = try migration.counterpart(of: old, as: ParcelV2.Parcel.self) else { continue }
                    new.size = ParcelV2.Dimensions(width: old.size.width, height: old.size.height, depth: 1)
                    new.extra = old.extra.map { ParcelV2.Dimensions(width: $0.width, height: $0.height, depth: 1) }
                }
            }
        ]
    }
}

/// A stage that forgets the dimensions: version 1's JSON stays, which version 2 cannot read.
enum ParcelForgetfulPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ParcelV1.self, ParcelV2.self] }
    static var stages: [MigrationStage] {
        [
            .custom(fromVersion: ParcelV1.self, toVersion: ParcelV2.self) { migration in
                for new in try migration.new.fetch(FetchDescriptor<ParcelV2.Parcel>()) { new.label += "!" }
            }
        ]
    }
}

@Suite("Codable values through a migration")
struct CodableMigrationTests {
    func writeVersionOne(_ dir: URL) throws {
        let store = try ObjectStore.open(at: dir, schema: try Schema(versioned: ParcelV1.self))
        for i in 1...3 {
            let p = try store.context.insert(ParcelV1.Parcel.self)
            p.label = "p\(i)"
            p.size = ParcelV1.Dimensions(width: i, height: 10 * i)
            p.extra = i == 2 ? ParcelV1.Dimensions(width: 7, height: 8) : nil
        }
        try store.context.save()
        try store.close()
    }

    @Test func aStageDecodesTheOldShapeAndWritesTheNewOne() throws {
        let dir = temporaryStoreDirectory()
        try writeVersionOne(dir)
        do {
            let store = try ObjectStore.open(at: dir, migrationPlan: ParcelPlan.self)
            let parcels = try store.context.fetch(FetchDescriptor<ParcelV2.Parcel>()).sorted { $0.label < $1.label }
            #expect(parcels.map(\.size) == (1...3).map { ParcelV2.Dimensions(width: $0, height: 10 * $0, depth: 1) })
            #expect(parcels.map(\.extra) == [nil, ParcelV2.Dimensions(width: 7, height: 8, depth: 1), nil])
            try store.close()
        }
        // Reopened: every value decodes as version 2's type.
        let store = try ObjectStore.open(at: dir, migrationPlan: ParcelPlan.self)
        defer { try? store.close() }
        #expect(try store.context.count(of: ParcelV2.Parcel.self) == 3)
    }

    @Test func aStageThatLeavesTheOldShapeIsRefusedBeforeAnythingIsWritten() throws {
        let dir = temporaryStoreDirectory()
        try writeVersionOne(dir)
        let before = try directoryBytes(dir)
        let error = try #require(throws: StoreError.self) {
            try ObjectStore.open(at: dir, migrationPlan: ParcelForgetfulPlan.self)
        }
        #expect(error.code == .migration)
        #expect(error.message.contains("Parcel.size of Parcel/1"), "\(error.message)")
        #expect(error.message.contains("depth"))
        let after = try directoryBytes(dir)
        #expect(after == before)
        // Still at version 1, and a plan with the conversion migrates it.
        try ObjectStore.open(at: dir, migrationPlan: ParcelPlan.self).close()
    }
}

/// Tags as strings, then as numbers: a standard collection whose declared type changed.
enum TaggedV1 {
    @Entity final class Tagged {
        var tags: [String] = []
    }
}

enum TaggedV2 {
    @Entity final class Tagged {
        var tags: [Int] = []
    }
}

@Suite("Codable standard collections")
struct CodableCollectionTests {
    @Test func aCollectionWhoseDeclaredTypeChangedIsCheckedAtOpen() throws {
        let dir = temporaryStoreDirectory()
        do {
            let store = try ObjectStore.open(at: dir, schema: try Schema(TaggedV1.Tagged.self))
            try store.context.insert(TaggedV1.Tagged.self).tags = ["a", "b"]
            try store.context.save()
            try store.close()
        }
        // The same type: its values (a native string list) read back.
        do {
            let store = try ObjectStore.open(at: dir, schema: try Schema(TaggedV1.Tagged.self))
            #expect(try store.context.objects(of: TaggedV1.Tagged.self).map(\.tags) == [["a", "b"]])
            try store.close()
        }
        // [String] → [Int]: both are native lists (stringList, intList), and a list of strings
        // cannot become a list of integers: the open refuses the change, naming the attribute.
        let error = try #require(throws: StoreError.self) {
            try ObjectStore.open(at: dir, schema: try Schema(TaggedV2.Tagged.self))
        }
        #expect(error.code == .incompatibleSchema)
        #expect(
            error.message.contains("Tagged.tags was stored as stringList and is now tags: intList"), "\(error.message)")
    }

    @Test func listAttributesDecodeAsJSONDecoderDecodesThem() throws {
        let inputs = [
            #"[]"#, #"["a","b"]"#, #" [ "a" , "b" ] "#, #"["\u00e9\n\t\"\\/", "é", "日本", "😀", "\ud83d\ude00"]"#,
            #"[""]"#, #"["a",1]"#, #"[1,2,3]"#, #"[-9223372036854775808, 9223372036854775807]"#,
            #"[9223372036854775808]"#, #"[1.0]"#, #"[1e2]"#, #"[-0]"#, #"[null]"#, #"["a",null]"#, #"[["a"]]"#,
            #"{"a":1}"#, #""a""#, #"["a""#, #"["a",]"#, #"[01]"#, #"["\ud800"]"#, #"["a"] x"#, #""#, #"[true]"#,
            "[\"\u{01}\"]",
        ]
        var bytes = Array(#"["long"#.utf8)
        bytes += Array(repeating: UInt8(ascii: "x"), count: ListAttributeDecoding.keptParserLimit + 10)
        bytes += Array(#"", "y"]"#.utf8)
        for input in inputs.map({ Data($0.utf8) }) + [Data(bytes), Data([0x5B, 0x22, 0xFF, 0x22, 0x5D])] {
            let text = String(decoding: input.prefix(80), as: UTF8.self)
            let fast = input.withUnsafeBytes { ListAttributeDecoding.decode([String].self, from: $0) }
            let slow = try? JSONDecoder().decode([String].self, from: input)
            // Taken as it is only when JSONDecoder takes it too, to the same value.
            if let fast { #expect(fast == slow, "\(text)") }
            #expect((try? CodableAttributeCoder.decode([String].self, from: input)) == slow, "\(text)")
            let fastInts = input.withUnsafeBytes { ListAttributeDecoding.decode([Int].self, from: $0) }
            let slowInts = try? JSONDecoder().decode([Int].self, from: input)
            if let fastInts { #expect(fastInts == slowInts, "\(text)") }
            #expect((try? CodableAttributeCoder.decode([Int].self, from: input)) == slowInts, "\(text)")
        }
        // The common shapes take the fast path.
        #expect(Data(#"["a","b"]"#.utf8).withUnsafeBytes { ListAttributeDecoding.strings($0) } == ["a", "b"])
        #expect(Data(#"[1,-2]"#.utf8).withUnsafeBytes { ListAttributeDecoding.integers($0) } == [1, -2])
    }
}
