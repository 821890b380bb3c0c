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
}
