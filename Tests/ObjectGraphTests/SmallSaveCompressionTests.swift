import Foundation
import GraphJournal
import ObjectGraph
import ObjectGraphTestSupport
import Testing

/// Saves of one object each are compressed against the saves before them in their segment
/// (`Docs/JournalFormat.md`, "History").
@Suite struct SmallSaveCompressionTests {
    /// 20,000 saves of one inserted person, values drawn from short lists with a fixed seed:
    /// the segments hold well under the raw payload bytes, 24-byte record headers included,
    /// and the store reads back after a reopen.
    @Test func savesOfOneObjectTakeLessSpaceThanTheirPayloads() throws {
        let dir = temporaryStoreDirectory()
        let first = ["Anna", "Ben", "Clara", "David", "Emma", "Felix", "Greta", "Hugo", "Ida", "Jonas"]
        let last = ["Schmidt", "Meyer", "Weber", "Wagner", "Becker", "Hoffmann", "Koch", "Richter"]
        let cities = ["Berlin", "Hamburg", "Munich", "Cologne", "Frankfurt", nil]
        var generator = SeededGenerator(seed: 7)
        let count = 20_000
        var options = StoreOptions()
        options.durability = .none
        do {
            let store = try ObjectStore.open(at: dir, schema: storeSchema, options: options)
            for i in 0..<count {
                let f = first[Int.random(in: 0..<first.count, using: &generator)],
                    l = last[Int.random(in: 0..<last.count, using: &generator)]
                let p = try store.context.insert(Person.self)
                p.id = Int64(i); p.name = "\(f) \(l)"; p.email = "\(f.lowercased()).\(l.lowercased())@example.com"
                p.city = cities[Int.random(in: 0..<cities.count, using: &generator)]
                p.age = Int.random(in: 18...80, using: &generator)
                p.score = Double(Int.random(in: 0..<1000, using: &generator)) / 10
                try store.context.save()
            }
            let stats = store.stats
            let ratio = Double(stats.bytesOnDisk) / Double(stats.rawPayloadBytes)
            print(
                "\(count) saves of one object: raw payloads \(stats.rawPayloadBytes) bytes (\(stats.rawPayloadBytes / Int64(count)) a save), stored payloads \(stats.storedPayloadBytes), segments \(stats.bytesOnDisk) bytes: \(String(format: "%.1f", 100 * ratio)) % of raw"
            )
            #expect(ratio < 0.85)
            #expect(Double(stats.storedPayloadBytes) / Double(stats.rawPayloadBytes) < 0.55)
            try store.close()
        }
        let store = try ObjectStore.open(at: dir, schema: storeSchema, options: options)
        defer { try? store.close() }
        #expect(try store.context.objects(of: Person.self).count == count)
    }
}
