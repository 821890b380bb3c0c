import Foundation
import GraphJournal
import ObjectGraph
import Testing

/// An entity with native list attributes (`stringList`, `intList`, and their optionals), for
/// stores the tool reads without the model.
@Entity final class Playbill {
    var title: String = ""
    var cast: [String] = []
    var seats: [Int] = []
    var notes: [String]?
    var ratings: [Int]?
}

/// `dump`, `export`, `verify` and `stats` on stores with native list attributes: a list is a
/// JSON array wherever the tool writes values, and a list cell that does not decode is damage
/// at its record.
@Suite("GraphJournalTool: list attributes", .serialized)
struct ListToolTests {
    /// Strings that need escaping in JSON, and characters beyond ASCII.
    static let cast = ["quote \" and backslash \\", "tab\tnewline\n", "control \u{1}", "é日本😀", ""]
    static let seats = [0, -1, Int.min, Int.max]
    /// How `seats` reads as a JSON array, exactly.
    static let seatsJSON = "[0,-1,-9223372036854775808,9223372036854775807]"

    /// A store of two playbills: one with every list set (`notes` empty, `ratings` nil), one
    /// with every default; a second save sets the second one's `ratings`.
    static func writeStore() throws -> URL {
        let dir = Tool.temporaryURL("lists")
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        let store = try ObjectStore.open(at: dir, schema: try Schema(Playbill.self), options: options)
        try store.context.insert(Playbill.self) {
            $0.title = "full"
            $0.cast = Self.cast
            $0.seats = Self.seats
            $0.notes = []
        }
        let empty = try store.context.insert(Playbill.self) { $0.title = "empty" }
        try store.context.save()
        empty.ratings = [-5, 7]
        try store.context.save()
        try store.close()
        return dir
    }

    /// The JSON object of `line`.
    static func object(_ line: some StringProtocol) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    @Test func dumpWritesListsAsJSONArrays() throws {
        let dir = try Self.writeStore()
        // The records: the insert of both objects, then the update.
        let records = try Tool.run(["dump", dir.path])
        #expect(records.status == 0 && records.stderr.isEmpty, "\(records.stderr)")
        let lines = records.stdout.split(separator: "\n")
        let insert = try #require(lines.first { $0.contains("\"inserted\"") })
        let entities = try #require(try Self.object(insert)["entities"] as? [[String: Any]])
        let inserted = try #require(entities.first?["inserted"] as? [[String: Any]])
        #expect(inserted.count == 2)
        let full = try #require(inserted.first?["values"] as? [String: Any])
        #expect(full["cast"] as? [String] == Self.cast)
        #expect(full["notes"] as? [String] == [])
        #expect(full["ratings"] is NSNull)
        let defaults = try #require(inserted.last?["values"] as? [String: Any])
        #expect(defaults["cast"] as? [String] == [] && defaults["seats"] as? [Int] == [])
        #expect(defaults["notes"] is NSNull && defaults["ratings"] is NSNull)
        // Integers are written exactly, the extremes of Int64 too.
        #expect(insert.contains("\"seats\":\(Self.seatsJSON)"), "\(insert)")
        #expect(insert.contains(#""control \u0001""#), "\(insert)")
        let update = try #require(lines.first { $0.contains(#""updated":[{"#) })
        #expect(update.contains(#""ratings":[-5,7]"#), "\(update)")

        // The live objects.
        let objects = try Tool.run(["dump", "--objects", dir.path])
        #expect(objects.status == 0 && objects.stderr.isEmpty, "\(objects.stderr)")
        let live = try objects.stdout.split(separator: "\n").map(Self.object)
        #expect(live.count == 2)
        let first = try #require(live.first?["attributes"] as? [String: Any])
        #expect(first["cast"] as? [String] == Self.cast && first["notes"] as? [String] == [])
        #expect(first["ratings"] is NSNull)
        let second = try #require(live.last?["attributes"] as? [String: Any])
        #expect(second["ratings"] as? [Int] == [-5, 7] && second["notes"] is NSNull)
        #expect(objects.stdout.contains("\"seats\":\(Self.seatsJSON)"))
    }

    @Test func exportWritesListsAsJSONArraysInJSONLinesAndSQLite() throws {
        let dir = try Self.writeStore()
        let jsonl = try Tool.run(["export", dir.path, "--format", "jsonl"])
        #expect(jsonl.status == 0 && jsonl.stderr.isEmpty, "\(jsonl.stderr)")
        let objects = try #require(try ExportTests.parse(jsonl.stdout)["Playbill"])
        let full = try #require(objects[1]?["attributes"] as? [String: Any])
        #expect(full["cast"] as? [String] == Self.cast)
        #expect(full["notes"] as? [String] == [] && full["ratings"] is NSNull)
        let empty = try #require(objects[2]?["attributes"] as? [String: Any])
        #expect(empty["cast"] as? [String] == [] && empty["seats"] as? [Int] == [])
        #expect(empty["notes"] is NSNull && empty["ratings"] as? [Int] == [-5, 7])
        #expect(jsonl.stdout.contains("\"seats\":\(Self.seatsJSON)"))

        guard SQLite3.isInstalled else { return }
        let db = Tool.temporaryURL("lists.sqlite")
        let result = try Tool.run(["export", dir.path, "--format", "sqlite", "--output", db.path])
        #expect(result.status == 0 && result.stdout.isEmpty && result.stderr.isEmpty, "\(result.stderr)")
        // A list is a TEXT column holding a JSON array, for SQLite's JSON functions.
        #expect(
            try SQLite3.query(db, "SELECT name, type FROM pragma_table_info('Playbill') ORDER BY cid")
                == ["id|INTEGER", "title|TEXT", "cast|TEXT", "seats|TEXT", "notes|TEXT", "ratings|TEXT"])
        #expect(
            try SQLite3.value(
                db,
                "SELECT typeof(\"cast\"), json_valid(\"cast\"), json_array_length(\"cast\"), seats, notes, quote(ratings) FROM Playbill WHERE id = 1"
            ) == "text|1|5|\(Self.seatsJSON)|[]|NULL")
        #expect(
            try SQLite3.value(
                db, "SELECT \"cast\", seats, quote(notes), ratings FROM Playbill WHERE id = 2") == "[]|[]|NULL|[-5,7]")
        // Each string reads back as it was stored, escapes and all.
        for (i, s) in Self.cast.enumerated() {
            let literal = "'" + s.replacingOccurrences(of: "'", with: "''") + "'"
            #expect(
                try SQLite3.value(
                    db, "SELECT json_extract(\"cast\", '$[\(i)]') = \(literal) FROM Playbill WHERE id = 1")
                    == "1", "\(s.debugDescription)")
        }
        #expect(
            try SQLite3.value(
                db, "SELECT json_extract(seats, '$[2]'), json_extract(seats, '$[3]') FROM Playbill WHERE id = 1")
                == "-9223372036854775808|9223372036854775807")
    }

    // MARK: Damage

    /// The store of ``writeStore()`` followed by `payloads` appended as transaction records
    /// with right checksums (the store's schema in force), each a hand-made payload of entity
    /// `Playbill`; returns the store and the sequence of each.
    static func storeWithRecords(_ payloads: [[UInt8]]) throws -> (URL, [UInt64]) {
        let dir = try Self.writeStore()
        let schema = StoredSchema(try Schema(Playbill.self)).encoded()
        let journal = try Journal.open(directory: dir.path)
        var sequences: [UInt64] = []
        for payload in payloads { sequences.append(try journal.append(payload, schema: schema)) }
        try journal.close()
        return (dir, sequences)
    }

    /// A transaction inserting object 3 with `cast` and `seats` as the given cells (other lists nil).
    static func insert(cast: [UInt8], seats: [UInt8]) -> [UInt8] {
        // Version 1, one block of entity 0, next serial 4, one insert (serial 3).
        var payload: [UInt8] = [1, 1, 0, 4, 1, 6]
        payload += [0, 1, UInt8(ascii: "x")]  // title
        payload += [0, UInt8(cast.count)] + cast
        payload += [0, UInt8(seats.count)] + seats
        payload += [1, 0x01]  // notes: nil
        payload += [1, 0x01]  // ratings: nil
        payload += [0, 0]  // no updates, no deletes
        return payload
    }

    /// A transaction setting object 1's `cast` to the cell `cast`.
    static func update(cast: [UInt8]) -> [UInt8] {
        // Version 1, one block of entity 0, next serial 3, no inserts, one update of serial 1:
        // one field, attribute 1 (cast) not nil, then its value; no deletes.
        [1, 1, 0, 3, 0, 1, 1, 1, 2, UInt8(cast.count)] + cast + [0]
    }

    static let good = ListCoding.encode(strings: ["ok"])
    static let goodInts = ListCoding.encode(integers: [1, 2] as [Int])

    @Test func handMadeRecordsWithWellFormedListsVerifyClean() throws {
        let (dir, _) = try Self.storeWithRecords([
            Self.insert(cast: Self.good, seats: Self.goodInts), Self.update(cast: Self.good),
        ])
        let verify = try Tool.run(["verify", dir.path])
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        let objects = try Tool.run(["dump", "--objects", dir.path])
        #expect(objects.status == 0)
        #expect(objects.stdout.contains(#""title":"x""#) && objects.stdout.contains(#""seats":[1,2]"#))
    }

    /// Each damaged record: what is wrong, its payload, the attribute and the reason named.
    static let damaged: [(String, [UInt8], String, String)] = [
        (
            "a string count larger than the cell", insert(cast: [0x09, 0x01, 0x61], seats: goodInts), "cast",
            "cannot fit"
        ),
        (
            "invalid UTF-8", insert(cast: [0x01, 0x02, 0xC3, 0x28], seats: goodInts), "cast",
            "string 0 is not valid UTF-8"
        ),
        ("a truncated varint", insert(cast: [0x01, 0x85], seats: goodInts), "cast", "truncated varint"),
        (
            "an integer count larger than the cell", insert(cast: good, seats: [0x02, 1, 0, 0, 0, 0, 0, 0, 0]), "seats",
            "2 integers need 16 bytes"
        ),
        (
            "bytes after the last string, in an update", update(cast: [0x01, 0x01, 0x61, 0x00]), "cast",
            "1 bytes after the last string"
        ),
    ]

    @Test(arguments: ListToolTests.damaged)
    func aListCellThatDoesNotDecodeIsDamageAtItsRecord(
        label: String, payload: [UInt8], attribute: String, reason: String
    ) throws {
        // The damaged record, then a good one after it: the damage is in the middle.
        let (dir, sequences) = try Self.storeWithRecords([
            payload, Self.insert(cast: Self.good, seats: Self.goodInts),
        ])
        let damaged = try #require(sequences.first)
        let verify = try Tool.run(["verify", dir.path])
        #expect(verify.status == 3, "\(label): \(verify.stdout)\(verify.stderr)")
        #expect(verify.stderr.isEmpty, "\(label): \(verify.stderr)")
        let line = try #require(
            verify.stdout.split(separator: "\n").first { $0.hasPrefix("payload:") }, "\(label): \(verify.stdout)")
        #expect(line.contains("(record \(damaged))"), "\(label): \(line)")
        #expect(line.contains("Playbill.\(attribute)"), "\(label): \(line)")
        #expect(line.contains("list value does not decode"), "\(label): \(line)")
        #expect(line.contains(reason), "\(label): \(line)")
        #expect(verify.stdout.contains("verdict: corrupt"), "\(label)")
        // The JSON report names the same record.
        let json = try Tool.run(["verify", "--json", dir.path])
        #expect(json.status == 3)
        #expect(json.stdout.contains("list value does not decode"), "\(label): \(json.stdout)")

        // stats still reads the store: its figures, the record that does not decode left out,
        // and a health line that sends to verify, as for any payload that does not decode.
        let stats = try Tool.run(["stats", dir.path])
        #expect(stats.status == 0 && stats.stderr.isEmpty, "\(label): \(stats.stdout)\(stats.stderr)")
        #expect(stats.stdout.contains("records           5 (1 schema, 4 transaction, 0 base)"), "\(stats.stdout)")
        #expect(stats.stdout.contains("Playbill        3 live objects"), "\(label): \(stats.stdout)")
        #expect(
            stats.stdout.contains("health            corrupt (a record does not decode; run verify)"),
            "\(label): \(stats.stdout)")
        // dump writes the records before it, and stops there naming it.
        let dump = try Tool.run(["dump", dir.path])
        #expect(dump.status == 3, "\(label): \(dump.stderr)")
        #expect(dump.stderr.contains("Playbill.\(attribute)"), "\(label): \(dump.stderr)")
    }
}
