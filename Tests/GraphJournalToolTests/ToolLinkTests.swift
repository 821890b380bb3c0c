import Foundation
import GraphJournal
import ObjectGraph
import ObjectGraphTestSupport
import Testing

/// A mixtape orders its songs; a song orders the mixtapes it is on (an ordered many-to-many,
/// ordered on both sides).
@Entity final class Mixtape {
    var name: String = ""
    @Relationship(inverse: "mixtapes", ordered: true) var songs: [Song]
}

@Entity final class Song {
    var title: String = ""
    @Relationship(inverse: "songs", ordered: true) var mixtapes: [Mixtape]
}

/// Articles and keywords: a many-to-many, sets both ways.
@Entity final class Article {
    var title: String = ""
    @Relationship(inverse: "articles") var keywords: [Keyword]
}

@Entity final class Keyword {
    var word: String = ""
    @Relationship(inverse: "keywords") var articles: [Article]
}

/// A binder's sheets, in order, each in one binder (an ordered one-to-many: its to-one side is
/// stored as links too).
@Entity final class Binder {
    var label: String = ""
    @Relationship(deleteRule: .cascade, inverse: "binder", ordered: true) var sheets: [Sheet]
}

@Entity final class Sheet {
    var heading: String = ""
    @Relationship(inverse: "sheets") var binder: Binder?
}

/// Modules importing modules: a many-to-many of an entity with itself.
@Entity final class Module {
    var name: String = ""
    @Relationship(inverse: "importedBy") var imports: [Module]
    @Relationship(inverse: "imports") var importedBy: [Module]
}

/// The worked example of `Docs/JournalFormat.md`: a playlist orders its tracks, a track is on
/// many playlists.
@Entity final class Playlist {
    var name: String = ""
    @Relationship(inverse: "playlists", ordered: true) var tracks: [Track]
}

@Entity final class Track {
    var title: String = ""
    @Relationship(inverse: "tracks") var playlists: [Playlist]
}

/// Runs the built `graph-journal` on stores whose relationships are stored as links (written
/// with the typed entities above) and checks what each command makes of the link records
/// against the library's own reading of the same store.
@Suite("GraphJournalTool: relationships stored as links", .serialized)
struct ToolLinkTests {
    static func schema() throws -> Schema {
        try Schema(Mixtape.self, Song.self, Article.self, Keyword.self, Binder.self, Sheet.self, Module.self)
    }

    static func options() -> StoreOptions {
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        return options
    }

    /// Every object's links as the library sees them, by "Entity/serial" then relationship
    /// name: the related objects' serials, in order on an ordered side, sorted otherwise; a
    /// to-one side as a list of at most one. A context of Binder and Sheet alone gives theirs.
    static func libraryLinks(_ c: ModelContext) throws -> [String: [String: [UInt64]]] {
        func serial(_ o: some Entity) -> UInt64 { o.objectID?.serial ?? 0 }
        var result: [String: [String: [UInt64]]] = [:]
        let names = Set(c.schema.entities.map(\.name))
        guard names.contains("Mixtape") else {
            for b in try c.objects(of: Binder.self) { result["Binder/\(serial(b))"] = ["sheets": b.sheets.map(serial)] }
            for h in try c.objects(of: Sheet.self) {
                result["Sheet/\(serial(h))"] = ["binder": h.binder.map { [serial($0)] } ?? []]
            }
            return result
        }
        for m in try c.objects(of: Mixtape.self) { result["Mixtape/\(serial(m))"] = ["songs": m.songs.map(serial)] }
        for s in try c.objects(of: Song.self) { result["Song/\(serial(s))"] = ["mixtapes": s.mixtapes.map(serial)] }
        for a in try c.objects(of: Article.self) {
            result["Article/\(serial(a))"] = ["keywords": a.keywords.map(serial).sorted()]
        }
        for k in try c.objects(of: Keyword.self) {
            result["Keyword/\(serial(k))"] = ["articles": k.articles.map(serial).sorted()]
        }
        for b in try c.objects(of: Binder.self) { result["Binder/\(serial(b))"] = ["sheets": b.sheets.map(serial)] }
        for h in try c.objects(of: Sheet.self) {
            result["Sheet/\(serial(h))"] = ["binder": h.binder.map { [serial($0)] } ?? []]
        }
        for m in try c.objects(of: Module.self) {
            result["Module/\(serial(m))"] = [
                "imports": m.imports.map(serial).sorted(), "importedBy": m.importedBy.map(serial).sorted(),
            ]
        }
        return result
    }

    /// The links `graph-journal dump --objects` writes, in the form of ``libraryLinks(_:)``.
    static func toolLinks(_ dir: URL, _ extra: [String] = []) throws -> [String: [String: [UInt64]]] {
        let dump = try Tool.run(["dump", "--objects"] + extra + [dir.path])
        #expect(dump.status == 0, "\(dump.stderr)")
        var result: [String: [String: [UInt64]]] = [:]
        for line in dump.stdout.split(separator: "\n") {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let key = "\(object["entity"] as? String ?? "?")/\(object["serial"] as? Int ?? -1)"
            var links: [String: [UInt64]] = [:]
            for (name, value) in object["links"] as? [String: Any] ?? [:] {
                if let list = value as? [Int] {
                    links[name] = list.map(UInt64.init)
                } else if let one = value as? Int {
                    links[name] = [UInt64(one)]
                } else {
                    links[name] = []
                }
            }
            result[key] = links
        }
        return result
    }

    /// A store of every kind of relationship stored as links, changed in three saves: links
    /// added, removed, moved, objects deleted with links (left implicit by the records), a sheet
    /// moved to another binder (its to-one side replaced). `states` gets the library's links
    /// after each save.
    static func writeStore(at dir: URL, states: inout [[String: [String: [UInt64]]]]) throws {
        let store = try ObjectStore.open(at: dir, schema: try schema(), options: options())
        let c = store.context
        let songs = try (0..<5).map { i in try c.insert(Song.self) { $0.title = "s\(i)" } }
        let m1 = try c.insert(Mixtape.self) { $0.name = "road trip" }
        let m2 = try c.insert(Mixtape.self) { $0.name = "late night" }
        m1.songs = songs
        m2.songs = [songs[4], songs[0]]
        let keywords = try (0..<3).map { i in try c.insert(Keyword.self) { $0.word = "k\(i)" } }
        let a1 = try c.insert(Article.self) { $0.title = "a1" }
        let a2 = try c.insert(Article.self) { $0.title = "a2" }
        a1.keywords = keywords
        a2.keywords = [keywords[1]]
        let b1 = try c.insert(Binder.self) { $0.label = "b1" }
        let b2 = try c.insert(Binder.self) { $0.label = "b2" }
        let sheets = try (0..<4).map { i in try c.insert(Sheet.self) { $0.heading = "h\(i)" } }
        b1.sheets = Array(sheets[0..<3])
        b2.sheets = [sheets[3]]
        let libc = try c.insert(Module.self) { $0.name = "libc" }
        let zlib = try c.insert(Module.self) { $0.name = "zlib" }
        let curl = try c.insert(Module.self) { $0.name = "curl" }
        curl.imports = [libc, zlib]
        zlib.imports = [libc]
        try c.save()
        states.append(try libraryLinks(c))

        try c.move(in: "songs", of: m1, from: 4, to: 0)
        try c.remove(songs[2], from: "songs", of: m1)
        try c.add(songs[2], to: "songs", of: m1, at: 1)
        try c.move(in: "mixtapes", of: songs[0], from: 1, to: 0)
        c.delete(songs[1])
        c.delete(keywords[0])
        try c.add(sheets[1], to: "sheets", of: b2, at: 0)
        a2.keywords = [keywords[2]]
        c.delete(zlib)
        try c.save()
        states.append(try libraryLinks(c))

        let s5 = try c.insert(Song.self) { $0.title = "s5" }
        try c.add(s5, to: "songs", of: m2, at: 1)
        try c.add(s5, to: "songs", of: m1)
        sheets[0].binder = b2
        c.delete(b1)  // cascades to its sheets
        try c.save()
        states.append(try libraryLinks(c))
        try store.close()
    }

    /// The decompressed payloads of a store's records, in order, with their kind.
    static func payloads(_ dir: URL) throws -> [(kind: JournalRecord.Kind?, payload: [UInt8])] {
        var result: [(JournalRecord.Kind?, [UInt8])] = []
        _ = try Journal.readRecords(directory: dir.path) { result.append(($0.entry.kind, $0.payload)) }
        return result
    }

    // MARK: dump

    @Test func dumpObjectsWritesTheLinksTheLibraryReadsAfterEverySave() throws {
        let dir = Tool.temporaryURL("links-dump-objects")
        var states: [[String: [String: [UInt64]]]] = []
        try Self.writeStore(at: dir, states: &states)
        // Records: 1 schema, then one transaction per save.
        for (i, state) in states.enumerated() {
            #expect(try Self.toolLinks(dir, ["--to-seq", "\(i + 2)"]) == state, "after save \(i + 1)")
        }
        let store = try ObjectStore.open(at: dir, schema: try Self.schema(), options: Self.options())
        defer { try? store.close() }
        #expect(try Self.libraryLinks(store.context) == states.last)
        let songs = try Tool.run(["dump", "--objects", "--entity", "Mixtape", dir.path])
        #expect(
            songs.stdout == """
                {"entity":"Mixtape","serial":1,"attributes":{"name":"road trip"},"links":{"songs":[5,3,1,4,6]}}
                {"entity":"Mixtape","serial":2,"attributes":{"name":"late night"},"links":{"songs":[5,6,1]}}

                """)
        let sheets = try Tool.run(["dump", "--objects", "--entity", "Sheet", dir.path])
        #expect(
            sheets.stdout == """
                {"entity":"Sheet","serial":1,"attributes":{"heading":"h0"},"links":{"binder":2}}
                {"entity":"Sheet","serial":2,"attributes":{"heading":"h1"},"links":{"binder":2}}
                {"entity":"Sheet","serial":4,"attributes":{"heading":"h3"},"links":{"binder":2}}

                """,
            "sheet 3 went with binder 1 (cascade), the others had moved to binder 2; the to-one side is a serial")
    }

    @Test func longListsAgreeWithTheLibraryAfterRemovalsMovesAndDeletions() throws {
        // Lists of hundreds of members: the replay indexes unordered lists of 64 or more, and
        // drops the index when they shrink below 32.
        let dir = Tool.temporaryURL("links-long")
        var expected: [[String: [String: [UInt64]]]] = []
        do {
            let store = try ObjectStore.open(at: dir, schema: try Self.schema(), options: Self.options())
            let c = store.context
            let keywords = try (0..<3).map { i in try c.insert(Keyword.self) { $0.word = "k\(i)" } }
            let articles = try (0..<300).map { i in try c.insert(Article.self) { $0.title = "a\(i)" } }
            for (i, a) in articles.enumerated() {
                a.keywords = keywords.enumerated().filter { i % ($0.offset + 1) == 0 }.map(\.element)
            }
            let m = try c.insert(Mixtape.self) { $0.name = "long" }
            let songs = try (0..<200).map { i in try c.insert(Song.self) { $0.title = "s\(i)" } }
            m.songs = songs
            try c.save()
            expected.append(try Self.libraryLinks(c))
            for i in stride(from: 0, to: 300, by: 7) { try c.remove(keywords[0], from: "keywords", of: articles[i]) }
            for i in stride(from: 3, to: 300, by: 11) { c.delete(articles[i]) }
            for i in stride(from: 0, to: 200, by: 9) { try c.remove(songs[i], from: "songs", of: m) }
            for i in 0..<40 { try c.move(in: "songs", of: m, from: (i * 37) % 150, to: (i * 53) % 150) }
            for i in stride(from: 5, to: 200, by: 13) { c.delete(songs[i]) }
            try c.save()
            expected.append(try Self.libraryLinks(c))
            // Shrink keyword 0 below 32 members, then grow it again.
            for a in keywords[0].articles.dropFirst(20) { try c.remove(keywords[0], from: "keywords", of: a) }
            try c.save()
            let deleted = Set(stride(from: 3, to: 300, by: 11))
            for (i, a) in articles.prefix(120).enumerated() where !deleted.contains(i) {
                try c.add(keywords[0], to: "keywords", of: a)
            }
            try c.save()
            expected.append(try Self.libraryLinks(c))
            try store.close()
        }
        #expect(try Self.toolLinks(dir, ["--to-seq", "2"]) == expected[0])
        #expect(try Self.toolLinks(dir, ["--to-seq", "3"]) == expected[1])
        #expect(try Self.toolLinks(dir) == expected[2])
        #expect(try Tool.run(["verify", dir.path]).status == 0)
    }

    @Test func aToOneOnSideZeroWithItsOrderedInverseOnSideOne() throws {
        // Sheet before Binder: side 0 is the to-one, side 1 the ordered list, so order edits are
        // on side 1, and a base record rebuilds the binders' order from side 1's edits.
        let dir = Tool.temporaryURL("links-side-one")
        let schema = try Schema(Sheet.self, Binder.self)
        var expected: [[String: [String: [UInt64]]]] = []
        do {
            let store = try ObjectStore.open(at: dir, schema: schema, options: Self.options())
            let c = store.context
            let binders = try (0..<2).map { i in try c.insert(Binder.self) { $0.label = "b\(i)" } }
            let sheets = try (0..<8).map { i in try c.insert(Sheet.self) { $0.heading = "h\(i)" } }
            binders[0].sheets = [sheets[5], sheets[1], sheets[7], sheets[0]]
            binders[1].sheets = [sheets[2], sheets[6]]
            try c.save()
            expected.append(try Self.libraryLinks(c))
            try c.move(in: "sheets", of: binders[0], from: 3, to: 1)
            sheets[3].binder = binders[0]
            try c.add(sheets[4], to: "sheets", of: binders[1], at: 0)
            try c.add(sheets[2], to: "sheets", of: binders[0], at: 2)
            c.delete(sheets[1])
            try c.save()
            expected.append(try Self.libraryLinks(c))
            try store.close()
        }
        #expect(try Self.toolLinks(dir, ["--to-seq", "2"]) == expected[0])
        #expect(try Self.toolLinks(dir) == expected[1])
        let schemaLine = try Tool.run(["dump", "--to-seq", "1", dir.path]).stdout
        #expect(schemaLine.contains(#""relationship":"Sheet.binder ↔ Binder.sheets (ordered)""#))
        #expect(try Tool.run(["compact", dir.path]).status == 0)
        #expect(try Self.toolLinks(dir) == expected[1])
        let store = try ObjectStore.open(at: dir, schema: schema, options: Self.options())
        defer { try? store.close() }
        #expect(try Self.libraryLinks(store.context) == expected[1])
    }

    @Test(arguments: Array(UInt64(1)...8))
    func randomEditsReadTheSameInTheToolAndTheLibrary(seed: UInt64) throws {
        // Saves of random inserts, deletes, adds, removes and moves on every kind of link; after
        // each save the tool's lists must be the library's, and after a compaction too.
        var rng = SeededGenerator(seed: seed)
        let dir = Tool.temporaryURL("links-random")
        var expected: [[String: [String: [UInt64]]]] = []
        do {
            let store = try ObjectStore.open(at: dir, schema: try Self.schema(), options: Self.options())
            let c = store.context
            for _ in 0..<12 {
                for _ in 0..<Int.random(in: 1...4, using: &rng) {
                    _ = try c.insert(Song.self) { $0.title = "s" }
                    _ = try c.insert(Keyword.self) { $0.word = "k" }
                    _ = try c.insert(Sheet.self) { $0.heading = "h" }
                    _ = try c.insert(Module.self) { $0.name = "m" }
                }
                let noMixtape = try c.objects(of: Mixtape.self).isEmpty
                if Bool.random(using: &rng) || noMixtape { _ = try c.insert(Mixtape.self) { $0.name = "m" } }
                let noArticle = try c.objects(of: Article.self).isEmpty
                if Bool.random(using: &rng) || noArticle { _ = try c.insert(Article.self) { $0.title = "a" } }
                let noBinder = try c.objects(of: Binder.self).isEmpty
                if Bool.random(using: &rng) || noBinder { _ = try c.insert(Binder.self) { $0.label = "b" } }
                for _ in 0..<Int.random(in: 5...25, using: &rng) {
                    let mixtapes = try c.objects(of: Mixtape.self), songs = try c.objects(of: Song.self)
                    let articles = try c.objects(of: Article.self), keywords = try c.objects(of: Keyword.self)
                    let binders = try c.objects(of: Binder.self), sheets = try c.objects(of: Sheet.self)
                    let modules = try c.objects(of: Module.self)
                    guard let m = mixtapes.randomElement(using: &rng), let s = songs.randomElement(using: &rng),
                        let a = articles.randomElement(using: &rng), let k = keywords.randomElement(using: &rng),
                        let b = binders.randomElement(using: &rng), let h = sheets.randomElement(using: &rng),
                        let x = modules.randomElement(using: &rng), let y = modules.randomElement(using: &rng)
                    else { continue }
                    switch Int.random(in: 0..<12, using: &rng) {
                    case 0: try c.add(s, to: "songs", of: m, at: Int.random(in: 0...m.songs.count, using: &rng))
                    case 1: try c.remove(s, from: "songs", of: m)
                    case 2 where m.songs.count > 1:
                        try c.move(
                            in: "songs", of: m, from: Int.random(in: 0..<m.songs.count, using: &rng),
                            to: Int.random(in: 0..<m.songs.count, using: &rng))
                    case 3 where s.mixtapes.count > 1:
                        try c.move(
                            in: "mixtapes", of: s, from: Int.random(in: 0..<s.mixtapes.count, using: &rng),
                            to: Int.random(in: 0..<s.mixtapes.count, using: &rng))
                    case 4: try c.add(k, to: "keywords", of: a)
                    case 5: try c.remove(k, from: "keywords", of: a)
                    case 6: try c.add(h, to: "sheets", of: b, at: Int.random(in: 0...b.sheets.count, using: &rng))
                    case 7: h.binder = Bool.random(using: &rng) ? b : nil
                    case 8: try c.add(y, to: "imports", of: x)
                    case 9: try c.remove(y, from: "importedBy", of: x)
                    case 10:
                        switch Int.random(in: 0..<4, using: &rng) {
                        case 0: c.delete(s)
                        case 1: c.delete(k)
                        case 2: c.delete(h)
                        default: c.delete(x)
                        }
                    default: m.songs = m.songs.shuffled(using: &rng).dropLast(Int.random(in: 0...1, using: &rng))
                    }
                }
                try c.save()
                expected.append(try Self.libraryLinks(c))
            }
            try store.close()
        }
        for (i, state) in expected.enumerated() {
            #expect(try Self.toolLinks(dir, ["--to-seq", "\(i + 2)"]) == state, "seed \(seed), after save \(i + 1)")
        }
        #expect(try Tool.run(["verify", dir.path]).status == 0)
        #expect(try Tool.run(["compact", dir.path]).status == 0)
        #expect(try Self.toolLinks(dir) == expected.last, "seed \(seed), compacted")
        let store = try ObjectStore.open(at: dir, schema: try Self.schema(), options: Self.options())
        defer { try? store.close() }
        #expect(
            try Self.libraryLinks(store.context) == expected.last,
            "seed \(seed), the library after the tool's compaction")
    }

    @Test func dumpRecordsListTheLinkChangesOfTheWorkedExample() throws {
        let dir = try Self.writeWorkedExample()
        let dump = try Tool.run(["dump", dir.path])
        #expect(dump.status == 0 && dump.stderr.isEmpty)
        #expect(
            dump.stdout == """
                {"seq":1,"kind":"schema","entities":[{"entity":"Playlist","attributes":[{"name":"name","type":"string","optional":false,\
                "default":""}]},{"entity":"Track","attributes":[{"name":"title","type":"string","optional":false,"default":""}]}],\
                "links":[{"relationship":"Playlist.tracks (ordered) ↔ Track.playlists (set)","sides":[{"entity":"Playlist",\
                "relationship":"tracks","ordered":true,"toOne":false},{"entity":"Track","relationship":"playlists","ordered":false,\
                "toOne":false}]}],"versions":[]}
                {"seq":2,"kind":"transaction","entities":[{"entity":"Playlist","inserted":[{"serial":1,"values":{"name":"mix"}}],\
                "updated":[],"deleted":[]},{"entity":"Track","inserted":[{"serial":1,"values":{"title":"a"}},{"serial":2,"values":\
                {"title":"b"}},{"serial":3,"values":{"title":"c"}}],"updated":[],"deleted":[]}],"links":[{"relationship":\
                "Playlist.tracks (ordered) ↔ Track.playlists (set)","removed":[],"added":[[{"entity":"Playlist","serial":1},\
                {"entity":"Track","serial":1}],[{"entity":"Playlist","serial":1},{"entity":"Track","serial":2}],[{"entity":\
                "Playlist","serial":1},{"entity":"Track","serial":3}]],"orders":[]}]}
                {"seq":3,"kind":"transaction","entities":[],"links":[{"relationship":"Playlist.tracks (ordered) ↔ Track.playlists (set)",\
                "removed":[],"added":[],"orders":[{"side":0,"entity":"Playlist","serial":1,"relationship":"tracks","placements":\
                [{"entity":"Track","serial":3,"index":0}]}]}]}

                """)
        for line in dump.stdout.split(separator: "\n") {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "every line is JSON")
        }
        let objects = try Tool.run(["dump", "--objects", dir.path])
        #expect(
            objects.stdout == """
                {"entity":"Playlist","serial":1,"attributes":{"name":"mix"},"links":{"tracks":[3,1,2]}}
                {"entity":"Track","serial":1,"attributes":{"title":"a"},"links":{"playlists":[1]}}
                {"entity":"Track","serial":2,"attributes":{"title":"b"},"links":{"playlists":[1]}}
                {"entity":"Track","serial":3,"attributes":{"title":"c"},"links":{"playlists":[1]}}

                """)
    }

    @Test func dumpOfOneEntityKeepsTheLinkChangesItIsASideOf() throws {
        let dir = Tool.temporaryURL("links-dump-entity")
        var states: [[String: [String: [UInt64]]]] = []
        try Self.writeStore(at: dir, states: &states)
        let dump = try Tool.run(["dump", "--entity", "Sheet", dir.path])
        #expect(dump.status == 0)
        let lines = try dump.stdout.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
        #expect(lines.map { $0["seq"] as? Int } == [1, 2, 3, 4])
        for line in lines {
            for link in line["links"] as? [[String: Any]] ?? [] {
                #expect(link["relationship"] as? String == "Binder.sheets (ordered) ↔ Sheet.binder")
            }
        }
        // Save 2 put sheet 2 first in binder 2: a removal from binder 1 (its to-one side is
        // replaced), an addition to binder 2, and an order edit placing it at index 0.
        let save2 = try #require((lines[2]["links"] as? [[String: Any]])?.first)
        func pairs(_ key: String) -> [String] {
            (save2[key] as? [[[String: Any]]] ?? []).map { pair in
                pair.map { "\($0["entity"] as? String ?? "?")/\($0["serial"] as? Int ?? -1)" }.joined(separator: " ")
            }
        }
        #expect(pairs("removed") == ["Binder/1 Sheet/2"])
        #expect(pairs("added") == ["Binder/2 Sheet/2"])
        let orders = try #require(save2["orders"] as? [[String: Any]])
        #expect(
            orders.count == 1 && orders.first?["serial"] as? Int == 2 && orders.first?["entity"] as? String == "Binder")
    }

    // MARK: stats

    @Test func statsListsEachRelationshipWithItsLinksAndWhatTheRecordsHold() throws {
        let dir = Tool.temporaryURL("links-stats")
        var states: [[String: [String: [UInt64]]]] = []
        try Self.writeStore(at: dir, states: &states)
        let final = try #require(states.last)
        func count(_ entity: String, _ name: String) -> Int {
            final.filter { $0.key.hasPrefix(entity + "/") }.reduce(0) { $0 + ($1.value[name]?.count ?? 0) }
        }
        // What the records hold, from the dump.
        var held: [String: (added: Int, removed: Int, orders: Int)] = [:]
        for line in try Tool.run(["dump", dir.path]).stdout.split(separator: "\n") {
            let record = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            for link in record["links"] as? [[String: Any]] ?? [] {
                let name = try #require(link["relationship"] as? String)
                var h = held[name] ?? (0, 0, 0)
                h.added += (link["added"] as? [Any])?.count ?? 0
                h.removed += (link["removed"] as? [Any])?.count ?? 0
                h.orders += (link["orders"] as? [Any])?.count ?? 0
                held[name] = h
            }
        }
        let expected: [(String, Int)] = [
            ("Mixtape.songs (ordered) ↔ Song.mixtapes (ordered)", count("Mixtape", "songs")),
            ("Article.keywords (set) ↔ Keyword.articles (set)", count("Article", "keywords")),
            ("Binder.sheets (ordered) ↔ Sheet.binder", count("Binder", "sheets")),
            ("Module.imports (set) ↔ Module.importedBy (set)", count("Module", "imports")),
        ]
        #expect(expected.map(\.1) == [8, 3, 3, 1])
        let stats = try Tool.run(["stats", dir.path])
        #expect(stats.status == 0)
        var text = "links\n"
        for (name, links) in expected {
            let h = held[name] ?? (0, 0, 0)
            text +=
                "  " + name.padding(toLength: expected.map(\.0.count).max()! + 2, withPad: " ", startingAt: 0)
                + "\(links) link\(links == 1 ? "" : "s") (records: \(h.added) added, \(h.removed) removed, \(h.orders) order edit\(h.orders == 1 ? "" : "s"))\n"
        }
        #expect(stats.stdout.contains(text + "health            clean\n"), "\(stats.stdout)")

        let json = try #require(
            try JSONSerialization.jsonObject(with: try Tool.run(["stats", "--json", dir.path]).stdoutBytes)
                as? [String: Any])
        let links = try #require(json["links"] as? [[String: Any]])
        #expect(links.map { $0["relationship"] as? String } == expected.map(\.0))
        #expect(links.map { $0["links"] as? Int } == expected.map(\.1))
        #expect(links.map { $0["pairsAdded"] as? Int } == expected.map { held[$0.0]?.added ?? 0 })
        #expect(links.map { $0["pairsRemoved"] as? Int } == expected.map { held[$0.0]?.removed ?? 0 })
        #expect(links.map { $0["orderEdits"] as? Int } == expected.map { held[$0.0]?.orders ?? 0 })
        let sides = try #require(links[2]["sides"] as? [[String: Any]])
        #expect(
            sides.map {
                "\($0["entity"] as? String ?? "").\($0["relationship"] as? String ?? "") \($0["ordered"] as? Bool ?? false) \($0["toOne"] as? Bool ?? false)"
            }
                == ["Binder.sheets true false", "Sheet.binder false true"])
        #expect(json["health"] as? String == "clean")
    }

    @Test func statsLiveEstimateCountsTheLinks() throws {
        // Many links and few objects: the links are most of what a compaction writes.
        let dir = Tool.temporaryURL("links-estimate")
        do {
            let store = try ObjectStore.open(at: dir, schema: try Self.schema(), options: Self.options())
            let c = store.context
            let keywords = try (0..<40).map { i in try c.insert(Keyword.self) { $0.word = "k\(i)" } }
            for i in 0..<60 {
                let a = try c.insert(Article.self) { $0.title = "a\(i)" }
                a.keywords = keywords.enumerated().filter { ($0.offset * 7 + i) % 3 != 0 }.map(\.element)
            }
            try c.save()
            try store.close()
        }
        let stats = try #require(
            try JSONSerialization.jsonObject(with: try Tool.run(["stats", "--json", dir.path]).stdoutBytes)
                as? [String: Any])
        let estimate = try #require(stats["liveBytesEstimate"] as? Int)
        #expect(try Tool.run(["compact", dir.path]).status == 0)
        let after = try #require(
            try JSONSerialization.jsonObject(with: try Tool.run(["stats", "--json", dir.path]).stdoutBytes)
                as? [String: Any])
        let actual = try #require(after["bytesOnDisk"] as? Int)
        #expect(abs(estimate - actual) * 5 <= actual, "estimate \(estimate) vs \(actual) written")
    }

    // MARK: verify

    @Test func verifyIsCleanOnAStoreWithLinksAndCountsItsRecords() throws {
        let dir = Tool.temporaryURL("links-verify")
        var states: [[String: [String: [UInt64]]]] = []
        try Self.writeStore(at: dir, states: &states)
        let result = try Tool.run(["verify", dir.path])
        #expect(result.status == 0)
        #expect(
            result.stdout == """
                verify \(dir.path)
                segments: 0000000001.log
                records: 4 (1 schema, 3 transaction, 0 base, 0 skipped), last sequence 4
                verdict: clean

                """)
    }

    /// A store with the worked example's schema whose last record is `payload`, appended
    /// through the journal API: its framing and checksum are valid.
    static func storeEndingIn(_ payload: [UInt8], name: String) throws -> URL {
        let example = try writeWorkedExample()
        let records = try payloads(example)
        let dir = Tool.temporaryURL(name)
        let journal = try Journal.open(directory: dir.path, options: JournalOptions(durability: .none))
        let schema = records.first?.payload ?? []
        for record in records.dropFirst() { _ = try journal.append(record.payload, schema: schema) }
        _ = try journal.append(payload, schema: schema)
        try journal.close()
        return dir
    }

    @Test func verifyReportsAMalformedLinkSectionAsCorruptionAtItsRecord() throws {
        // version 2, no entity block, one link block: link 1, which the schema (one link) does
        // not have; a pair cut short; an order index that does not ascend.
        let cases: [([UInt8], String)] = [
            ([2, 0, 1, 1, 0, 0, 0], "malformed payload at byte 3: count 1 exceeds 0"),
            ([2, 0, 1, 0, 0, 1, 2], "malformed payload at byte 7: truncated varint"),
            ([2, 0, 1, 0, 0, 0, 1, 1, 2, 3, 1, 2, 0], "malformed payload at byte 12: order index 0 after 1"),
        ]
        for (payload, detail) in cases {
            let dir = try Self.storeEndingIn(payload, name: "links-malformed")
            let result = try Tool.run(["verify", dir.path])
            #expect(result.status == 3, "\(payload)")
            let line = result.stdout.split(separator: "\n").first { $0.hasPrefix("payload: ") }.map(String.init) ?? ""
            #expect(line.hasPrefix("payload: 0000000001.log at byte "), "\(payload): \(result.stdout)")
            #expect(
                line.contains(" (record 4): transaction does not decode against the schema in force: "),
                "\(payload): \(line)")
            #expect(line.contains(detail), "\(payload): \(line)")
            // The offset is the record's: the library names the same record when it refuses.
            let offset = try #require(Int(line.split(separator: " ")[4]))
            let entry = try #require(try Journal.inspect(directory: dir.path).entries.last)
            #expect(Int(entry.offset) == offset)
            #expect(
                result.stdout.hasSuffix(
                    "verdict: corrupt (`graph-journal repair --keep-prefix` keeps the valid prefix, saving the rest aside)\n"
                ))
            #expect(throws: (any Error).self) { try ObjectStore.openDynamic(at: dir).close() }
            let json = try #require(
                try JSONSerialization.jsonObject(with: try Tool.run(["verify", "--json", dir.path]).stdoutBytes)
                    as? [String: Any])
            let problems = try #require(json["problems"] as? [[String: Any]])
            #expect(
                problems.count == 1 && problems.first?["kind"] as? String == "payload"
                    && problems.first?["offset"] as? Int == offset)
            #expect(problems.first?["sequence"] as? Int == 4)
        }
    }

    @Test func verifyReportsALinkOfAnObjectThatDoesNotExist() throws {
        // The example's playlist 1 linked to track 9, which was never inserted.
        let dir = try Self.storeEndingIn([2, 0, 1, 0, 0, 1, 2, 9, 0], name: "links-missing")
        let result = try Tool.run(["verify", dir.path])
        #expect(result.status == 3)
        let problems = result.stdout.split(separator: "\n").filter { $0.hasPrefix("payload: ") }
        #expect(problems.count == 1, "\(result.stdout)")
        #expect(
            problems.first?.hasSuffix(
                "(record 4): Playlist.tracks ↔ Track.playlists: link of Track/9, which does not exist") == true,
            "\(result.stdout)")
        // The library refuses to open it, naming the same record.
        #expect(throws: (any Error).self) { try ObjectStore.openDynamic(at: dir).close() }
        // stats and dump --objects say so too.
        #expect(
            try Tool.run(["stats", dir.path]).stdout.contains(
                "health            corrupt (a record does not decode; run verify)"))
        let objects = try Tool.run(["dump", "--objects", dir.path])
        #expect(objects.status == 3)
        #expect(
            objects.stderr.contains(
                "(record 4): Playlist.tracks ↔ Track.playlists: link of Track/9, which does not exist"))

        let others: [([UInt8], String)] = [
            // removed: (1, 9); added: none; no order edit
            ([2, 0, 1, 0, 1, 2, 9, 0, 0], "link of Track/9, which does not exist"),
            // removed: (1, 2) twice
            ([2, 0, 1, 0, 2, 2, 2, 0, 2, 0, 0], "unlink of Playlist/1 and Track/2, which are not linked"),
            // added: (1, 1), which the first save linked
            ([2, 0, 1, 0, 0, 1, 2, 1, 0], "link of Playlist/1 and Track/1, which are linked already"),
            // playlist 1's order: track 7 at index 0
            ([2, 0, 1, 0, 0, 0, 1, 1, 1, 7, 0], "link of Track/7, which does not exist"),
            // playlist 1's order: track 1 at index 3, past the end of the other two
            (
                [2, 0, 1, 0, 0, 0, 1, 1, 1, 1, 3],
                "order of Playlist/1 names a member it does not have or an index past its end"
            ),
            // a block deleting track 2 (its links go with it), then removed: (1, 2)
            ([2, 1, 1, 4, 0, 0, 1, 4, 1, 0, 1, 2, 2, 0, 0], "link of Track/2, which does not exist"),
        ]
        for (payload, message) in others {
            let dir = try Self.storeEndingIn(payload, name: "links-missing")
            let verify = try Tool.run(["verify", dir.path])
            #expect(verify.status == 3, "\(payload)")
            #expect(
                verify.stdout.contains("(record 4): Playlist.tracks ↔ Track.playlists: \(message)\n"),
                "\(payload): \(verify.stdout)")
            #expect(throws: (any Error).self, "\(payload)") { try ObjectStore.openDynamic(at: dir).close() }
        }
    }

    @Test func repairKeepsThePrefixBeforeABadLinkRecord() throws {
        let dir = try Self.storeEndingIn([2, 0, 1, 0, 0, 1, 2, 9, 0], name: "links-repair")
        let repair = try Tool.run(["repair", "--keep-prefix", "--yes", dir.path])
        #expect(repair.status == 0, "\(repair.stdout) \(repair.stderr)")
        #expect(try Tool.run(["verify", dir.path]).status == 0)
        let store = try ObjectStore.open(
            at: dir, schema: try Schema(Playlist.self, Track.self), options: Self.options())
        defer { try? store.close() }
        let playlist = try #require(try store.context.objects(of: Playlist.self).first)
        #expect(playlist.tracks.map(\.title) == ["c", "a", "b"])
    }

    // MARK: A to-one relationship that became one stored as links

    /// "Binder" and "Sheet" as an earlier model declared them: an unordered one-to-many, whose
    /// to-one side is a slot of the sheet (a serial in its attributes, not links).
    final class SlotBinder: Entity {
        var _backing = ObjectBacking(entity: SlotBinder.entityDescription)
        static let entityDescription = EntityDescription(
            name: "Binder", type: SlotBinder.self, attributes: [.attribute("label", String.self)],
            relationships: [.toMany("sheets", SlotSheet.self, inverse: "binder")])
        init(_backing: ObjectBacking) { self._backing = _backing }
    }

    final class SlotSheet: Entity {
        var _backing = ObjectBacking(entity: SlotSheet.entityDescription)
        static let entityDescription = EntityDescription(
            name: "Sheet", type: SlotSheet.self, attributes: [.attribute("heading", String.self)],
            relationships: [.toOne("binder", SlotBinder.self, inverse: "sheets")])
        init(_backing: ObjectBacking) { self._backing = _backing }
    }

    @Test func aToOneThatBecameLinksIsReadAsTheLibraryMigratesIt() throws {
        let dir = Tool.temporaryURL("links-migrated")
        do {
            let store = try ObjectStore.open(
                at: dir, schema: try Schema(SlotBinder.self, SlotSheet.self), options: Self.options())
            let c = store.context
            let b1 = try c.insert(SlotBinder.self), b2 = try c.insert(SlotBinder.self)
            try b1.setValue("b1", forKey: "label")
            try b2.setValue("b2", forKey: "label")
            var sheets: [SlotSheet] = []
            for i in 0..<5 {
                let h = try c.insert(SlotSheet.self)
                try h.setValue("h\(i)", forKey: "heading")
                try h.setValue(i < 3 ? b1 : b2, forKey: "binder")
                sheets.append(h)
            }
            try c.save()
            try sheets[2].setValue(nil, forKey: "binder")  // a later record updates the slot
            try sheets[3].setValue(b1, forKey: "binder")
            c.delete(sheets[4])
            try c.save()
            try store.close()
        }
        // The slot's values, read as links under the new model; its first save writes the new
        // schema record (links) and link records that rely on the migrated links.
        let expected: [String: [String: [UInt64]]]
        do {
            let store = try ObjectStore.open(
                at: dir, schema: try Schema(Binder.self, Sheet.self), options: Self.options())
            let c = store.context
            let binders = try c.objects(of: Binder.self)
            #expect(binders.map { $0.sheets.map(\.heading) } == [["h0", "h1", "h3"], []])
            try c.move(in: "sheets", of: binders[0], from: 2, to: 0)
            try c.remove(try #require(binders[0].sheets.last), from: "sheets", of: binders[0])
            let sheets = try c.objects(of: Sheet.self)
            try c.add(sheets[2], to: "sheets", of: binders[1])
            try c.save()
            expected = try Self.libraryLinks(c)
            try store.close()
        }
        #expect(try Self.toolLinks(dir) == expected)
        let verify = try Tool.run(["verify", dir.path])
        #expect(verify.status == 0, "\(verify.stdout)")
        let stats = try Tool.run(["stats", dir.path])
        #expect(
            stats.stdout.contains(
                "links\n  Binder.sheets (ordered) ↔ Sheet.binder  3 links (records: 1 added, 1 removed, 1 order edit)\n"
            ),
            "\(stats.stdout)")
        #expect(try Tool.run(["compact", dir.path]).status == 0)
        #expect(try Self.toolLinks(dir) == expected)
    }

    // MARK: compact

    @Test func compactKeepsEveryLinkAndEveryOrder() throws {
        let dir = Tool.temporaryURL("links-compact")
        var states: [[String: [String: [UInt64]]]] = []
        try Self.writeStore(at: dir, states: &states)
        let objectsBefore = try Tool.run(["dump", "--objects", dir.path]).stdout
        let result = try Tool.run(["compact", dir.path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try Tool.run(["verify", dir.path]).status == 0)
        #expect(try Tool.run(["dump", "--objects", dir.path]).stdout == objectsBefore)
        let store = try ObjectStore.open(at: dir, schema: try Self.schema(), options: Self.options())
        #expect(try Self.libraryLinks(store.context) == states.last)
        try store.close()
        // The base record holds every link as an added pair, and the orders of side 1 (ordered
        // here: Song.mixtapes) that appending side 0's lists does not give.
        let dump = try Tool.run(["dump", dir.path]).stdout.split(separator: "\n")
        #expect(dump.count == 2 && dump[1].hasPrefix("{\"seq\":6,\"kind\":\"base\""))
        let base = try #require(try JSONSerialization.jsonObject(with: Data(dump[1].utf8)) as? [String: Any])
        let links = try #require(base["links"] as? [[String: Any]])
        #expect(links.map { ($0["added"] as? [Any])?.count } == [8, 3, 3, 1])
        #expect(links.allSatisfy { ($0["removed"] as? [Any])?.isEmpty == true })
        // Compacting again changes nothing the library or the tool reads.
        #expect(try Tool.run(["compact", dir.path]).status == 0)
        #expect(try Tool.run(["dump", "--objects", dir.path]).stdout == objectsBefore)
    }

    // MARK: The worked example of Docs/JournalFormat.md

    /// The store of the format document's worked example: a playlist "mix" with tracks "a",
    /// "b", "c" in one save, then "c" moved to the front in a second.
    static func writeWorkedExample() throws -> URL {
        let dir = Tool.temporaryURL("links-example")
        let store = try ObjectStore.open(at: dir, schema: try Schema(Playlist.self, Track.self), options: options())
        let c = store.context
        let mix = try c.insert(Playlist.self) { $0.name = "mix" }
        mix.tracks = try ["a", "b", "c"].map { t in try c.insert(Track.self) { $0.title = t } }
        try c.save()
        try c.move(in: "tracks", of: mix, from: 2, to: 0)
        try c.save()
        try store.close()
        return dir
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined(separator: " ") }

    @Test func theWorkedExampleHasTheBytesTheFormatDocumentShows() throws {
        let dir = try Self.writeWorkedExample()
        let entries = try Journal.inspect(directory: dir.path).entries
        #expect(
            entries.map { "\($0.offset) \($0.rawLength) \($0.storedLength) \($0.compressed)" } == [
                "48 104 80 true", "152 40 40 false", "216 13 12 true",
            ])
        let records = try Self.payloads(dir)
        #expect(records.map(\.kind) == [.schema, .transaction, .transaction])
        #expect(
            Self.hex(records[0].payload) == """
                03 02 08 50 6c 61 79 6c 69 73 74 01 04 6e 61 6d 65 06 73 74 72 69 6e 67 09 70 72 69 6d 69 74 69 76 65 06 53 74 72 69 6e \
                67 02 00 05 54 72 61 63 6b 01 05 74 69 74 6c 65 06 73 74 72 69 6e 67 09 70 72 69 6d 69 74 69 76 65 06 53 74 72 69 6e 67 \
                02 00 01 00 06 74 72 61 63 6b 73 01 01 09 70 6c 61 79 6c 69 73 74 73 00
                """)
        #expect(
            Self.hex(records[1].payload) == """
                03 02 00 02 01 02 00 03 6d 69 78 00 00 01 04 03 02 02 02 00 01 61 01 62 01 63 00 00 01 00 00 00 03 01 02 03 02 02 02 00
                """)
        #expect(Self.hex(records[2].payload) == "03 00 01 00 00 00 00 00 01 01 01 03 00")
    }
}

/// Writes a store of many links when `GRAPH_JOURNAL_LINKS_STORE` names a directory (it must not
/// exist yet), for measuring the tool on links: 100,000 articles with 10 keywords each out of
/// 1,000 (1M links) in 10 saves, then 1,000 articles losing a keyword; a mixtape of 100,000
/// songs, then 1,000 of them removed and 1,000 moved.
@Suite("GraphJournalTool: links benchmark store")
struct ToolLinksBenchmarkStore {
    @Test func writeLinksStoreWhenAsked() throws {
        guard let path = ProcessInfo.processInfo.environment["GRAPH_JOURNAL_LINKS_STORE"] else { return }
        let store = try ObjectStore.open(
            at: URL(fileURLWithPath: path), schema: try ToolLinkTests.schema(), options: ToolLinkTests.options())
        let c = store.context
        let keywords = try (0..<1000).map { i in try c.insert(Keyword.self) { $0.word = "k\(i)" } }
        var articles: [Article] = []
        for save in 0..<10 {
            for i in 0..<10_000 {
                let n = save * 10_000 + i
                let a = try c.insert(Article.self) { $0.title = "a\(n)" }
                a.keywords = (0..<10).map { keywords[(n * 7 + $0 * 97) % 1000] }
                articles.append(a)
            }
            try c.save()
        }
        for a in articles.prefix(1000) { try c.remove(a.keywords[0], from: "keywords", of: a) }
        try c.save()
        let m = try c.insert(Mixtape.self) { $0.name = "long" }
        m.songs = try (0..<100_000).map { i in try c.insert(Song.self) { $0.title = "s\(i)" } }
        try c.save()
        for i in 0..<1000 { try c.remove(m.songs[i * 50], from: "songs", of: m) }
        for i in 0..<1000 { try c.move(in: "songs", of: m, from: (i * 37) % 90_000, to: (i * 91) % 90_000) }
        try c.save()
        try store.close()
    }
}
