import Foundation
import GraphJournal
import ObjectGraph

/// A record with a few attributes of common kinds, for stores the tests write.
@Entity final class Reading {
    var sensor: String = ""
    var value: Double = 0
    var count: Int64 = 0
    var note: String?
    var taken: Date = Date(timeIntervalSince1970: 0)
}

/// The six-attribute "people" record of the benchmarks (`Tools/Benchmarks`, `People.fill`).
@Entity final class Person {
    var id: Int64 = 0
    var name: String = ""
    var email: String = ""
    var age: Int = 0
    var city: String = ""
    var score: Double = 0
}

/// A shelf and its boxes: a store with a relationship for the tool to read without the model.
@Entity final class Shelf {
    var label: String = ""
    @Relationship(inverse: "shelf") var boxes: [Box]
}

@Entity final class Box {
    var label: String = ""
    @Relationship(inverse: "boxes") var shelf: Shelf?
}

extension Tool {
    /// A schema payload for tests that write records through the journal API.
    static func libraryObjectsSchemaBytes() throws -> [UInt8] {
        StoredSchema(try Schema(Reading.self)).encoded()
    }

    /// Writes a store of `saves` transactions of `objectsPerSave` inserts each; every save also
    /// updates and deletes some earlier objects.
    static func writeLargeStore(at dir: URL, saves: Int, objectsPerSave: Int) throws {
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        let store = try ObjectStore.open(at: dir, schema: try Schema(Reading.self), options: options)
        let context = store.context
        var all: [Reading] = []
        var n: Int64 = 0
        for save in 0..<saves {
            for _ in 0..<objectsPerSave {
                let r = try context.insert(Reading.self)
                r.sensor = "sensor-\(n % 97)"
                r.value = Double(n) * 0.125
                r.count = n
                r.note = n % 3 == 0 ? nil : "note \(n) " + String(repeating: "z", count: Int(n % 50))
                r.taken = Date(timeIntervalSince1970: 1_700_000_000 + Double(n))
                all.append(r)
                n += 1
            }
            if save > 0 {
                for i in stride(from: (save - 1) * objectsPerSave, to: save * objectsPerSave, by: 4) {
                    all[i].value += 1
                }
                for i in stride(from: (save - 1) * objectsPerSave + 1, to: save * objectsPerSave, by: 4) {
                    context.delete(all[i])
                }
            }
            try context.save()
        }
        try store.close()
    }

    /// Writes a store of `objects` people inserted in `saves` saves of equal size (the last
    /// takes the remainder), with the benchmarks' values: person `i` is named "Person i", has
    /// email "p<i>@example.com", age 20 + i % 60, city "City <i % 1000>" and score i / 2.
    static func writePeopleStore(at dir: URL, objects: Int, saves: Int) throws {
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        let store = try ObjectStore.open(at: dir, schema: try Schema(Person.self), options: options)
        let context = store.context
        let perSave = max(1, objects / saves)
        var i = 0
        while i < objects {
            for _ in 0..<(i + 2 * perSave > objects ? objects - i : perSave) {
                let p = try context.insert(Person.self)
                p.id = Int64(i)
                p.name = "Person \(i)"
                p.email = "p\(i)@example.com"
                p.age = 20 + i % 60
                p.city = "City \(i % 1000)"
                p.score = Double(i) * 0.5
                i += 1
            }
            try context.save()
        }
        try store.close()
    }
}

/// Three versions of a small model, for a store that went through migrations: version 2
/// turns an Int into a String (a custom stage), version 3 adds an attribute (lightweight).
enum ToolItemsV1: VersionedSchema {
    static let versionIdentifier = "1"
    static var models: [any Entity.Type] { [Item.self] }

    @Entity final class Item {
        var name: String = ""
        var size: Int = 0
    }
}

enum ToolItemsV2: VersionedSchema {
    static let versionIdentifier = "2"
    static var models: [any Entity.Type] { [Item.self] }

    @Entity final class Item {
        var name: String = ""
        var size: String = ""
    }
}

enum ToolItemsV3: VersionedSchema {
    static let versionIdentifier = "3"
    static var models: [any Entity.Type] { [Item.self] }

    @Entity final class Item {
        var name: String = ""
        var size: String = ""
        var stock: Int = 5
    }
}

let toolItemsStageOneToTwo = MigrationStage.custom(fromVersion: ToolItemsV1.self, toVersion: ToolItemsV2.self) {
    migration in
    for old in try migration.old.fetch(FetchDescriptor<ToolItemsV1.Item>()) {
        try migration.counterpart(of: old, as: ToolItemsV2.Item.self)?.size = "\(old.size) kB"
    }
}

enum ToolItemsPlanToTwo: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ToolItemsV1.self, ToolItemsV2.self] }
    static var stages: [MigrationStage] { [toolItemsStageOneToTwo] }
}

enum ToolItemsPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ToolItemsV1.self, ToolItemsV2.self, ToolItemsV3.self] }
    static var stages: [MigrationStage] {
        [toolItemsStageOneToTwo, .lightweight(fromVersion: ToolItemsV2.self, toVersion: ToolItemsV3.self)]
    }
}

extension Tool {
    /// Writes a store that went through versions 1, 2 and 3: three items saved at version 1;
    /// migrated to version 2 (a custom stage: a new base whose schema record lists 1, 2); then
    /// opened at version 3 (lightweight: nothing rewritten) and one item changed, which appends
    /// a schema record listing 1, 2, 3 before its transaction.
    static func writeVersionedStore(at dir: URL) throws {
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        do {
            let store = try ObjectStore.open(at: dir, schema: try Schema(versioned: ToolItemsV1.self), options: options)
            for (name, size) in [("zlib", 120), ("curl", 400), ("bash", 1800)] {
                let item = try store.context.insert(ToolItemsV1.Item.self)
                item.name = name
                item.size = size
            }
            try store.context.save()
            try store.close()
        }
        try ObjectStore.open(at: dir, migrationPlan: ToolItemsPlanToTwo.self, options: options).close()
        let store = try ObjectStore.open(at: dir, migrationPlan: ToolItemsPlan.self, options: options)
        defer { try? store.close() }
        for item in try store.context.fetch(FetchDescriptor<ToolItemsV3.Item>()) where item.name == "curl" {
            item.stock = 2
        }
        try store.context.save()
    }
}
