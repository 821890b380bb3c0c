import Foundation
import Testing

@testable import ObjectGraph

/// Whether `fetch` gives the same objects, in the same order, with and without the indexes.
private func sameAsScan<T: Entity>(_ context: ModelContext, _ d: FetchDescriptor<T>, _ what: String = "") throws -> [T]
{
    var scan = d
    scan.allowsIndexes = false
    let indexed = try context.fetch(d)
    let scanned = try context.fetch(scan)
    #expect(
        indexed.map(ObjectIdentifier.init) == scanned.map(ObjectIdentifier.init),
        "\(what): indexed fetch differs from the scan")
    #expect(try context.fetchCount(d) == scanned.count, "\(what): indexed fetchCount differs from the scan")
    return indexed
}

/// The table of `T` in `context`.
private func table<T: Entity>(_ context: ModelContext, _ type: T.Type) throws -> EntityTable {
    try #require(context.tables.first { $0.entity.type == type })
}

@Suite("Secondary indexes: declaration, fetches, maintenance")
struct IndexTests {
    @Test func indexMacroListsEachArrayAsOneIndexInTheEntityDescription() {
        #expect(
            Listing.entityDescription.indexes.map(\.keys) == [
                ["section"], ["maintainer", "version"], ["price"], ["released"], ["stable"], ["rating"], ["size"],
                ["level"],
            ])
    }

    @Test func handWrittenIndexNamingNoAttributeIsASchemaError() {
        final class Tag: Entity {
            var _backing = ObjectBacking(entity: Tag.entityDescription)
            static let entityDescription = EntityDescription(
                name: "Tag", type: Tag.self, attributes: [.attribute("label", String.self)],
                indexes: [IndexDescription(["label"]), IndexDescription(["colour"])])
            init(_backing: ObjectBacking) { self._backing = _backing }
        }
        #expect {
            _ = try Schema(Tag.self)
        } throws: { error in
            "\(error)".contains("index Tag(colour) names 'colour', which is no attribute")
        }
    }

    @Test func indexOnADataAttributeOrWithoutKeysOrNamingAKeyTwiceIsASchemaError() {
        final class Blob: Entity {
            var _backing = ObjectBacking(entity: Blob.entityDescription)
            static let entityDescription = EntityDescription(
                name: "Blob", type: Blob.self,
                attributes: [.attribute("bytes", Data.self), .attribute("name", String.self)],
                indexes: [IndexDescription(["bytes"]), IndexDescription([]), IndexDescription(["name", "name"])])
            init(_backing: ObjectBacking) { self._backing = _backing }
        }
        #expect {
            _ = try Schema(Blob.self)
        } throws: { error in
            let message = "\(error)"
            return message.contains("index Blob(bytes) names 'bytes', which cannot be indexed")
                && message.contains("has an index without keys") && message.contains("names 'name' twice")
        }
    }

    @Test func equalityFetchReadsTheIndexAndReturnsStorageOrder() throws {
        let context = ModelContext(schema: try Schema(Listing.self))
        for i in 0..<300 {
            let l = try context.insert(Listing.self)
            l.section = ["libs", "net", "web"][i % 3]
            l.version = i
        }
        try context.save()
        let libs = try sameAsScan(
            context, FetchDescriptor<Listing>(predicate: #Predicate { $0.section == "libs" }), "libs")
        #expect(libs.count == 100)
        #expect(libs.map(\.version) == Array(stride(from: 0, to: 300, by: 3)))
        #expect(
            try table(context, Listing.self).indexes.secondaryIndexes[0].isBuilt, "the fetch built the section index")
    }

    @Test func fetchOnAnEntityWithoutIndexesScans() throws {
        let context = ModelContext(schema: try Schema(PlainListing.self))
        for i in 0..<10 { try context.insert(PlainListing.self).section = i % 2 == 0 ? "a" : "b" }
        #expect(try context.fetchCount(FetchDescriptor<PlainListing>(predicate: #Predicate { $0.section == "a" })) == 5)
    }

    @Test func rangeOnACompoundIndexsSecondKeyAfterEqualityOnTheFirstMatchesTheScan() throws {
        let context = ModelContext(schema: try Schema(Listing.self))
        for i in 0..<500 {
            let l = try context.insert(Listing.self)
            l.maintainer = i % 7 == 0 ? nil : "m\(i % 5)"
            l.version = i % 40
        }
        let d = FetchDescriptor<Listing>(
            predicate: #Predicate { $0.maintainer == "m2" && $0.version > 10 && $0.version <= 30 })
        let found = try sameAsScan(context, d, "compound")
        #expect(!found.isEmpty)
        #expect(found.allSatisfy { $0.maintainer == "m2" && $0.version > 10 && $0.version <= 30 })
        var leading = FetchDescriptor<Listing>(predicate: #Predicate { $0.maintainer == "m3" && $0.note.isEmpty })
        leading.fetchLimit = 7
        leading.fetchOffset = 3
        _ = try sameAsScan(context, leading, "leading attribute only, non-exact")
    }

    @Test func canonicallyEquivalentStringsAreEqualKeys() throws {
        let context = ModelContext(schema: try Schema(Listing.self))
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
        for (i, s) in [composed, "cafe", decomposed, "cafz", "caf", composed].enumerated() {
            let l = try context.insert(Listing.self)
            l.section = s
            l.version = i
        }
        let equal = try sameAsScan(
            context, FetchDescriptor<Listing>(predicate: #Predicate { $0.section == decomposed }), "é")
        #expect(equal.map(\.version) == [0, 2, 5])
        let above = try sameAsScan(
            context, FetchDescriptor<Listing>(predicate: #Predicate { $0.section > "cafe" }), "> cafe")
        #expect(above.map(\.version) == [0, 2, 3, 5])
    }

    @Test func limitedSortByAnIndexedNumberWalksTheIndexAndKeepsTiesInStorageOrder() throws {
        let context = ModelContext(schema: try Schema(Listing.self))
        for i in 0..<400 {
            let l = try context.insert(Listing.self)
            l.price = Double(i % 17) - 8
            l.version = i % 9
        }
        for order in [SortOrder.forward, .reverse] {
            var d = FetchDescriptor<Listing>(sortBy: [SortDescriptor(\.price, order: order)])
            d.fetchLimit = 30
            d.fetchOffset = 5
            let walked = try sameAsScan(context, d, "sort \(order)")
            #expect(walked.count == 30)
            var two = FetchDescriptor<Listing>(
                predicate: #Predicate { $0.price > -3 },
                sortBy: [SortDescriptor(\.price, order: order), SortDescriptor(\.version, order: .reverse)])
            two.fetchLimit = 25
            _ = try sameAsScan(context, two, "two descriptors \(order)")
        }
        #expect(
            context.tables[0].indexWalk(sortSlot: 3, reverse: false, condition: nil, end: 10, committedOnly: false)
                != nil)
    }

    @Test func sortWalkFallsBackWhenAMatchingKeyIsNaN() throws {
        let context = ModelContext(schema: try Schema(Listing.self))
        for i in 0..<50 { try context.insert(Listing.self).price = i == 20 ? .nan : Double(i % 5) }
        #expect(
            context.tables[0].indexWalk(sortSlot: 3, reverse: false, condition: nil, end: 10, committedOnly: false)
                == nil)
        let equal = try sameAsScan(
            context, FetchDescriptor<Listing>(predicate: #Predicate { $0.price >= 3 }), "NaN range")
        #expect(equal.count == 20)
    }

    @Test func committedViewSeesBeforeImagesOfRowsChangedInThePendingTransaction() throws {
        let context = ModelContext(schema: try Schema(Listing.self))
        var all: [Listing] = []
        for i in 0..<200 {
            let l = try context.insert(Listing.self)
            l.section = i % 2 == 0 ? "even" : "odd"
            l.price = Double(i)
            all.append(l)
        }
        try context.save()
        // builds the index
        _ = try context.fetch(FetchDescriptor<Listing>(predicate: #Predicate { $0.section == "even" }))
        all[0].section = "odd"
        all[1].section = "even"
        context.delete(all[2])
        try context.insert(Listing.self).section = "even"
        for pending in [true, false] {
            var d = FetchDescriptor<Listing>(predicate: #Predicate { $0.section == "even" })
            d.includePendingChanges = pending
            let even = try sameAsScan(context, d, "pending \(pending)")
            #expect(even.count == (pending ? 100 : 100))
            #expect(even.contains { $0 === all[0] } == !pending)
            #expect(even.contains { $0 === all[2] } == !pending)
            var sorted = FetchDescriptor<Listing>(
                predicate: #Predicate { $0.section == "even" }, sortBy: [SortDescriptor(\.price, order: .reverse)])
            sorted.includePendingChanges = pending
            sorted.fetchLimit = 3
            _ = try sameAsScan(context, sorted, "sorted pending \(pending)")
        }
    }

    @Test func rollbackAndSavepointRollbackRestoreWhatTheIndexAnswers() throws {
        let context = ModelContext(schema: try Schema(Listing.self))
        for i in 0..<100 { try context.insert(Listing.self).section = "s\(i % 4)" }
        try context.save()
        let s1 = FetchDescriptor<Listing>(predicate: #Predicate { $0.section == "s1" })
        #expect(try sameAsScan(context, s1).count == 25)
        for l in try context.fetch(s1) { l.section = "s2" }
        #expect(try sameAsScan(context, s1).isEmpty)
        context.rollback()
        #expect(try sameAsScan(context, s1).count == 25)
        struct Abandon: Error {}
        try context.transaction { tx in
            for l in try tx.context.fetch(s1).prefix(10) { l.section = "s3" }
            #expect(try sameAsScan(tx.context, s1).count == 15)
            _ = try? tx.context.transaction { inner in
                for l in try inner.context.fetch(s1) { inner.context.delete(l) }
                for _ in 0..<5 { try inner.context.insert(Listing.self).section = "s1" }
                #expect(try sameAsScan(inner.context, s1).count == 5)
                throw Abandon()
            }
            #expect(try sameAsScan(tx.context, s1).count == 15)
        }
        #expect(try sameAsScan(context, s1).count == 15)
    }

    @Test func failedSaveKeepsThePendingChangesVisibleThroughTheIndex() throws {
        let context = ModelContext(schema: try Schema(Listing.self))
        for i in 0..<20 { try context.insert(Listing.self).version = i }
        try context.save()
        let high = FetchDescriptor<Listing>(predicate: #Predicate { $0.maintainer == nil && $0.version >= 15 })
        #expect(try sameAsScan(context, high).count == 5)
        try context.fetch(FetchDescriptor<Listing>(predicate: #Predicate { $0.version == 3 }))[0].version = 5000
        #expect(throws: ValidationError.self) { try context.save() }
        #expect(try sameAsScan(context, high).count == 6)
        context.rollback()
        #expect(try sameAsScan(context, high).count == 5)
    }

    @Test func indexesAreRebuiltAfterReopenAndCompactionWithoutAnythingStored() throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        do {
            let store = try ObjectStore.open(at: dir, schema: try Schema(PlainListing.self, Listing.self))
            for i in 0..<300 { try store.context.insert(Listing.self).section = "s\(i % 6)" }
            try store.context.save()
            for l in try store.context.fetch(FetchDescriptor<Listing>(predicate: #Predicate { $0.section == "s0" })) {
                store.context.delete(l)
            }
            try store.context.save()
            try store.compact()
            #expect(
                try sameAsScan(store.context, FetchDescriptor<Listing>(predicate: #Predicate { $0.section <= "s1" }))
                    .count == 50)
            try store.close()
        }
        // The journal holds no index: reopening builds it again from the objects.
        let store = try ObjectStore.open(at: dir, schema: try Schema(PlainListing.self, Listing.self))
        #expect(
            try sameAsScan(store.context, FetchDescriptor<Listing>(predicate: #Predicate { $0.section == "s1" })).count
                == 50)
        try store.close()
    }

    @Test func changeSetApplyOnAFollowerKeepsItsIndexesCurrent() throws {
        let backend = RecordingBackend()
        let leader = ModelContext(schema: try Schema(Listing.self), backend: backend)
        let follower = ModelContext(schema: try Schema(Listing.self))
        for i in 0..<60 { try leader.insert(Listing.self).section = "s\(i % 3)" }
        try leader.save()
        for c in backend.saved { try follower.apply(c) }
        let s0 = FetchDescriptor<Listing>(predicate: #Predicate { $0.section == "s0" })
        #expect(try sameAsScan(follower, s0).count == 20)
        for l in try leader.fetch(s0).prefix(5) { l.section = "s1" }
        for l in try leader.fetch(FetchDescriptor<Listing>(predicate: #Predicate { $0.section == "s2" })).prefix(3) {
            leader.delete(l)
        }
        try leader.save()
        for c in backend.saved.dropFirst() { try follower.apply(c) }
        #expect(try sameAsScan(follower, s0).count == 15)
        #expect(
            try sameAsScan(follower, FetchDescriptor<Listing>(predicate: #Predicate { $0.section >= "s1" })).count == 42
        )
    }
}

/// A hand-written entity "Tag" without an index, and the same entity with one: the journal
/// cannot tell them apart.
final class PlainTag: Entity {
    var _backing = ObjectBacking(entity: PlainTag.entityDescription)
    static let entityDescription = EntityDescription(
        name: "Tag", type: PlainTag.self, attributes: [.attribute("label", String.self)], keyPaths: [\PlainTag.label])
    init(_backing: ObjectBacking) { self._backing = _backing }
    var label: String {
        get { _backing.get(0, as: String.self) }
        set { _backing.set(0, newValue) }
    }
}

final class IndexedTag: Entity {
    var _backing = ObjectBacking(entity: IndexedTag.entityDescription)
    static let entityDescription = EntityDescription(
        name: "Tag", type: IndexedTag.self, attributes: [.attribute("label", String.self)],
        keyPaths: [\IndexedTag.label],
        indexes: [IndexDescription(["label"])])
    init(_backing: ObjectBacking) { self._backing = _backing }
    var label: String {
        get { _backing.get(0, as: String.self) }
        set { _backing.set(0, newValue) }
    }
}

@Suite("Secondary indexes are not stored")
struct IndexStorageTests {
    @Test func addingOrRemovingAnIndexNeedsNoMigration() throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        do {
            let store = try ObjectStore.open(at: dir, schema: try Schema(PlainTag.self))
            for i in 0..<90 { try store.context.insert(PlainTag.self).label = "t\(i % 9)" }
            try store.context.save()
            try store.close()
        }
        do {
            let store = try ObjectStore.open(at: dir, schema: try Schema(IndexedTag.self))
            let t3 = try sameAsScan(
                store.context, FetchDescriptor<IndexedTag>(predicate: #Predicate { $0.label == "t3" }), "added")
            #expect(t3.count == 10)
            #expect(try table(store.context, IndexedTag.self).indexes.secondaryIndexes[0].isBuilt)
            for t in t3 { t.label = "t4" }
            try store.context.save()
            try store.close()
        }
        let store = try ObjectStore.open(at: dir, schema: try Schema(PlainTag.self))
        #expect(
            try store.context.fetchCount(FetchDescriptor<PlainTag>(predicate: #Predicate { $0.label == "t4" })) == 20)
        try store.close()
    }
}
