import Foundation
import ObjectGraph
import Testing

// Three versions of one entity, "Item", as an application's model evolves.

/// Version 1: title, price, legacyCode.
final class ItemV1: Entity {
    var _backing = ObjectBacking(entity: ItemV1.entityDescription)
    static let entityDescription = EntityDescription(
        name: "Item", type: ItemV1.self,
        attributes: [
            .attribute("title", String.self), .attribute("price", Int32.self),
            .attribute("legacyCode", String.self, optional: true),
        ])
    init(_backing: ObjectBacking) { self._backing = _backing }
    var title: String {
        get { _backing.get(0, as: String.self) }
        set { _backing.set(0, newValue) }
    }
    var price: Int32 {
        get { _backing.get(1, as: Int32.self) }
        set { _backing.set(1, newValue) }
    }
    var legacyCode: String? {
        get { _backing.getOptional(2, as: String.self) }
        set { _backing.setOptional(2, newValue) }
    }
}

/// Version 2: `title` renamed to `name`, `price` widened to Int64, `legacyCode` removed,
/// `stock` added with a default.
final class ItemV2: Entity {
    var _backing = ObjectBacking(entity: ItemV2.entityDescription)
    static let entityDescription = EntityDescription(
        name: "Item", type: ItemV2.self,
        attributes: [
            .attribute("name", String.self, originalName: "title"), .attribute("price", Int64.self),
            .attribute("stock", Int.self, default: 7),
        ])
    init(_backing: ObjectBacking) { self._backing = _backing }
    var name: String {
        get { _backing.get(0, as: String.self) }
        set { _backing.set(0, newValue) }
    }
    var price: Int64 {
        get { _backing.get(1, as: Int64.self) }
        set { _backing.set(1, newValue) }
    }
    var stock: Int {
        get { _backing.get(2, as: Int.self) }
        set { _backing.set(2, newValue) }
    }
}

/// An incompatible version: `price` became a string.
final class ItemBroken: Entity {
    var _backing = ObjectBacking(entity: ItemBroken.entityDescription)
    static let entityDescription = EntityDescription(
        name: "Item", type: ItemBroken.self,
        attributes: [.attribute("title", String.self), .attribute("price", String.self)])
    init(_backing: ObjectBacking) { self._backing = _backing }
}

/// Every file of `dir` by name, with its bytes: what "nothing on disk changed" compares.
func directoryBytes(_ dir: URL) throws -> [String: Data] {
    var result: [String: Data] = [:]
    for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) {
        result[name] = try Data(contentsOf: dir.appendingPathComponent(name))
    }
    return result
}

@Suite("Schema evolution")
struct SchemaEvolutionTests {
    func writeVersionOne(_ dir: URL) throws {
        let store = try ObjectStore.open(at: dir, schema: try Schema(ItemV1.self))
        for i in 0..<3 {
            let item = try store.context.insert(ItemV1.self)
            item.title = "item \(i)"; item.price = Int32(100 * i); item.legacyCode = "L\(i)"
        }
        try store.context.save()
        try store.close()
    }

    @Test func addedRemovedRenamedAndWidenedAttributesOpen() throws {
        let dir = temporaryStoreDirectory()
        try writeVersionOne(dir)
        do {
            let store = try ObjectStore.open(at: dir, schema: try Schema(ItemV2.self, Person.self))
            let items = try store.context.objects(of: ItemV2.self).sorted { $0.price < $1.price }
            #expect(items.map(\.name) == ["item 0", "item 1", "item 2"])
            #expect(items.map(\.price) == [0, 100, 200])
            #expect(items.allSatisfy { $0.stock == 7 })
            #expect(try store.context.count(of: Person.self) == 0)  // an added entity starts empty
            items[0].stock = 1
            try store.context.save()
            try store.close()
        }
        // The journal now holds records of both schemas; both replay.
        let store = try ObjectStore.open(at: dir, schema: try Schema(ItemV2.self, Person.self))
        defer { try? store.close() }
        #expect(try store.context.objects(of: ItemV2.self).map(\.stock).sorted() == [1, 7, 7])
    }

    @Test func incompatibleTypeChangeIsAClearErrorAndModifiesNothing() throws {
        let dir = temporaryStoreDirectory()
        try writeVersionOne(dir)
        let before = try directoryBytes(dir)
        let error = try #require(throws: StoreError.self) {
            try ObjectStore.open(at: dir, schema: try Schema(ItemBroken.self))
        }
        #expect(error.code == .incompatibleSchema)
        #expect(error.message.contains("Item.price"))
        #expect(try directoryBytes(dir) == before)
    }

    @Test func removedEntityThatStillHasObjectsIsAClearError() throws {
        let dir = temporaryStoreDirectory()
        try writeVersionOne(dir)
        let error = try #require(throws: StoreError.self) {
            try ObjectStore.open(at: dir, schema: try Schema(Person.self))
        }
        #expect(error.code == .incompatibleSchema)
        #expect(error.message.contains("'Item'") && error.message.contains("3"))
    }

    @Test func removedEntityWithNoObjectsLeftIsDropped() throws {
        let dir = temporaryStoreDirectory()
        try writeVersionOne(dir)
        do {
            let store = try ObjectStore.open(at: dir, schema: try Schema(ItemV1.self))
            for item in try store.context.objects(of: ItemV1.self) { store.context.delete(item) }
            try store.context.save()
            try store.close()
        }
        let store = try ObjectStore.open(at: dir, schema: try Schema(Person.self))
        try store.close()
    }
}
