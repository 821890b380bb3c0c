import Foundation
import ObjectGraph
import Testing

/// Journals written by format version 1, committed under `Fixtures/journals/`. Every later
/// version must keep opening them with the same content. Regenerate (only when adding a new
/// fixture, never to "fix" a failing test) with `OBJECTGRAPH_WRITE_FIXTURES=1 swift test --filter FormatFixture`.
@Suite("Format fixtures: journals of format version 1 keep opening", .serialized)
struct FormatFixtureTests {
    static let fixtures = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/journals")

    static let schema: Schema = {
        do { return try Schema(Person.self, Everything.self) } catch { preconditionFailure("\(error)") }
    }()

    /// The content of the `v1-clean` fixture.
    static func write(to dir: URL) throws {
        var options = StoreOptions(durability: .always)
        options.autoCompactionRatio = nil
        let store = try ObjectStore.open(at: dir, schema: schema, options: options)
        let c = store.context
        for i in 0..<20 {
            let p = try c.insert(Person.self)
            p.id = Int64(i); p.name = "Person \(i)"; p.email = "p\(i)@example.com"; p.age = 20 + i
            p.city = i % 3 == 0 ? nil : "City \(i % 4)"; p.score = Double(i) * 0.5
        }
        let e = try c.insert(Everything.self)
        e.flag = true; e.i8 = -8; e.i16 = -16; e.i32 = -32; e.i64 = -64; e.int = -1; e.u8 = 8; e.u16 = 16; e.u32 = 32
        e.u64 = .max; e.uint = 7; e.double = 0.25; e.float = -1.5; e.text = "fixture text"; e.blob = Data([0xde, 0xad])
        e.date = Date(timeIntervalSince1970: 1_800_000_000);
        e.uuid = UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16))
        e.url = URL(string: "https://www.debian.org/"); e.priority = .important; e.level = .high
        e.checksum = Checksum(algorithm: "sha256", hex: "00ff"); e.maybeText = "maybe"; e.maybeInt = 3
        try c.save()
        for p in try c.objects(of: Person.self) where p.id % 5 == 0 { c.delete(p) }
        for p in try c.objects(of: Person.self) where p.id % 5 == 1 { p.score = 100; p.city = "Moved" }
        try c.save()
        try store.close()
    }

    static func check(_ store: ObjectStore) throws {
        let people = try store.context.objects(of: Person.self).sorted { $0.id < $1.id }
        #expect(people.map(\.id) == (0..<20).filter { $0 % 5 != 0 }.map(Int64.init))
        for p in people {
            #expect(p.objectID?.serial == UInt64(p.id + 1))
            #expect(p.name == "Person \(p.id)" && p.email == "p\(p.id)@example.com" && p.age == 20 + Int(p.id))
            if p.id % 5 == 1 {
                #expect(p.score == 100 && p.city == "Moved")
            } else {
                #expect(p.score == Double(p.id) * 0.5 && p.city == (p.id % 3 == 0 ? nil : "City \(p.id % 4)"))
            }
        }
        let e = try #require(try store.context.objects(of: Everything.self).first)
        #expect(e.flag && e.i8 == -8 && e.i16 == -16 && e.i32 == -32 && e.i64 == -64 && e.int == -1)
        #expect(e.u8 == 8 && e.u16 == 16 && e.u32 == 32 && e.u64 == .max && e.uint == 7)
        #expect(e.double == 0.25 && e.float == -1.5 && e.text == "fixture text" && e.blob == Data([0xde, 0xad]))
        #expect(e.date == Date(timeIntervalSince1970: 1_800_000_000))
        #expect(e.uuid == UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)))
        #expect(e.url?.absoluteString == "https://www.debian.org/" && e.priority == .important && e.level == .high)
        #expect(e.checksum == Checksum(algorithm: "sha256", hex: "00ff") && e.maybeText == "maybe" && e.maybeInt == 3)
    }

    /// Copies a fixture to a temporary directory (opening takes a lock and may cut a torn tail).
    static func copy(_ name: String) throws -> URL {
        let dir = temporaryStoreDirectory("fixture-\(name)")
        try FileManager.default.createDirectory(at: dir.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: fixtures.appendingPathComponent(name), to: dir)
        return dir
    }

    @Test func writeFixturesWhenAsked() throws {
        guard ProcessInfo.processInfo.environment["OBJECTGRAPH_WRITE_FIXTURES"] == "1" else { return }
        let clean = Self.fixtures.appendingPathComponent("v1-clean")
        try? FileManager.default.removeItem(at: clean)
        try Self.write(to: clean)
        try? FileManager.default.removeItem(at: clean.appendingPathComponent("LOCK"))
    }

    @Test func versionOneJournalOpensWithTheSameContent() throws {
        let dir = try Self.copy("v1-clean")
        let store = try ObjectStore.open(at: dir, schema: Self.schema)
        defer { try? store.close() }
        try Self.check(store)
        #expect(store.openReport.isClean)
    }

    @Test func versionOneJournalOpensWithAnEvolvedModel() throws {
        // A model with fewer entities is fine as long as the dropped entity holds no objects;
        // here Everything holds one, so dropping it must be refused with its name.
        let dir = try Self.copy("v1-clean")
        let error = try #require(throws: StoreError.self) {
            try ObjectStore.open(at: dir, schema: try Schema(Person.self))
        }
        #expect(error.code == .incompatibleSchema)
        #expect(error.message.contains("Everything"))
    }
}
