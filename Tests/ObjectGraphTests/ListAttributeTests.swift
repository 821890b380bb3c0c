import Foundation
import GraphJournal
import PropertyBased
import Testing

@testable import ObjectGraph

/// An entity with native list attributes.
@Entity final class Listed {
    @Attribute(.unique) var name: String = ""
    var tags: [String] = []
    var scores: [Int] = []
    var aliases: [String]?
    var ranks: [Int]?
}

/// A JSON array as a `Codable` value of its own type: how a `[String]` or `[Int]` attribute was
/// stored before lists were native (type `data`, value kind `codable`, the array's JSON).
struct JSONList<Element: Codable & Hashable>: Codable, Hashable {
    var values: [Element]
    init(_ values: [Element]) { self.values = values }
    init(from decoder: any Decoder) throws { values = try decoder.singleValueContainer().decode([Element].self) }
    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(values)
    }
}

/// A `[String]` attribute as stored before lists were native.
typealias JSONStrings = JSONList<String>
/// A `[Int]` attribute as stored before lists were native.
typealias JSONInts = JSONList<Int>

/// A JSON object: a stored value that is not a list.
struct JSONPair: Codable, Hashable {
    var a: Int
}

/// The model before native lists: the same entity, its lists stored as JSON.
enum ListedJSON {
    @Entity final class Listed {
        @Attribute(.unique) var name: String = ""
        var tags: JSONStrings = JSONStrings([])
        var scores: JSONInts = JSONInts([])
        var aliases: JSONStrings?
        var ranks: JSONInts?
    }
}

/// A model whose `tags` JSON is not an array: it cannot become a list.
enum ListedObject {
    @Entity final class Listed {
        @Attribute(.unique) var name: String = ""
        var tags: JSONPair = JSONPair(a: 0)
        var scores: JSONInts = JSONInts([])
        var aliases: JSONStrings?
        var ranks: JSONInts?
    }
}

@Suite struct ListAttributeTests {
    static let options = StoreOptions(durability: .none)

    // MARK: The encoding

    @Test func theEncodingIsTheDocumentedOne() {
        // The worked example of Docs/JournalFormat.md, "List cells".
        #expect(ListCoding.encode(strings: ["ab", "é", ""]) == [0x03, 0x02, 0x61, 0x62, 0x02, 0xC3, 0xA9, 0x00])
        #expect(
            ListCoding.encode(integers: [1, -2] as [Int64])
                == [0x02, 0x01, 0, 0, 0, 0, 0, 0, 0, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(ListCoding.encode(strings: [String]()) == [0x00])
        #expect(ListCoding.encode(integers: [Int]()) == [0x00])
        // 200 strings: a two-byte count.
        #expect(ListCoding.encode(strings: Array(repeating: "", count: 200)).prefix(2) == [0xC8, 0x01])
    }

    @Test func schemaRecordsWithListsAreVersion5() throws {
        let bytes = StoredSchema(try Schema(Listed.self)).encoded()
        #expect(bytes.first == 5)
        let decoded = try StoredSchema.decode(bytes)
        #expect(decoded.entities[0].attributes.map(\.type).contains(.stringList))
        #expect(decoded.entities[0].attributes.map(\.type).contains(.intList))
        #expect(decoded.versions.isEmpty)
        // A schema without lists keeps its version.
        #expect(StoredSchema(try Schema(ListedJSON.Listed.self)).encoded().first == 1)
        // A list type in an older version is malformed.
        var older = bytes
        older[0] = 4
        let error = try #require(throws: StoreError.self) { try StoredSchema.decode(older) }
        #expect(error.message.contains("list attribute"), "\(error.message)")
    }

    /// The ASCII check that spares most strings a full UTF-8 validation sees a high byte at
    /// every position, in the eight-byte words and in the tail; a string with one still goes
    /// through the full validation.
    @Test func theASCIICheckSeesAHighByteAnywhere() {
        for length in 0..<20 {
            let ascii = [UInt8](repeating: 0x61, count: length)
            #expect(ascii.withUnsafeBytes { ListCoding.isASCII($0) }, "\(length)")
            for position in 0..<length {
                var bytes = ascii
                bytes[position] = 0xC3
                #expect(!bytes.withUnsafeBytes { ListCoding.isASCII($0) }, "\(length) at \(position)")
                // A lone lead byte is invalid UTF-8 wherever it sits.
                let cell = [0x01, UInt8(length)] + bytes
                #expect(
                    cell.withUnsafeBytes { ListCoding.validate($0, .stringList)?.reason }
                        == "string 0 is not valid UTF-8",
                    "\(length) at \(position)")
            }
        }
        let accented = [0x01, 0x02, 0xC3, 0xA9] as [UInt8]
        #expect(accented.withUnsafeBytes { ListCoding.validate($0, .stringList) } == nil, "é is valid UTF-8")
    }

    /// `fetch(_:as:)` reads list attributes straight from their cells into a value's arrays,
    /// optional or not, present or nil, and refuses an `[Int]` read as `[String]`.
    @Test func listsDecodeIntoValuesAsTheyAreStored() throws {
        struct Row: Decodable, Equatable {
            var name: String
            var tags: [String]
            var scores: [Int]
            var aliases: [String]?
            var ranks: [Int]?
        }
        struct Wrong: Decodable { var scores: [String] }
        let context = ModelContext(schema: try Schema(Listed.self))
        let a = try context.insert(Listed.self)
        a.name = "a"
        a.tags = ["x", "é", ""]
        a.scores = [Int.min, -1, 0, Int.max]
        a.aliases = ["alias"]
        let b = try context.insert(Listed.self)
        b.name = "b"
        b.ranks = []
        let rows = try context.fetch(FetchDescriptor<Listed>(sortBy: [SortDescriptor(\.name)]), as: Row.self)
        #expect(
            rows == [
                Row(
                    name: "a", tags: ["x", "é", ""], scores: [Int.min, -1, 0, Int.max], aliases: ["alias"], ranks: nil),
                Row(name: "b", tags: [], scores: [], aliases: nil, ranks: []),
            ])
        #expect(throws: DecodingError.self) { try context.fetch(FetchDescriptor<Listed>(), as: Wrong.self) }
    }

    @Test func malformedCellsAreRefusedNamingTheProblem() {
        func problem(_ bytes: [UInt8], _ type: AttributeType) -> String? {
            bytes.withUnsafeBytes { ListCoding.validate($0, type)?.reason }
        }
        #expect(problem([], .stringList) == "truncated varint")
        #expect(problem([0x80], .stringList) == "truncated varint")
        #expect(problem([0x01, 0x85], .stringList) == "string 0: truncated varint")
        #expect(problem([0xFF, 0xFF, 0xFF, 0x7F], .stringList)?.contains("cannot fit") == true)
        #expect(problem([0x02, 0x01, 0x61], .stringList)?.contains("string 1") == true)
        #expect(problem([0x01, 0x05, 0x61], .stringList)?.contains("runs past the end") == true)
        #expect(problem([0x01, 0x02, 0xC3, 0x28], .stringList) == "string 0 is not valid UTF-8")
        #expect(problem([0x01, 0x01, 0x61, 0x00], .stringList) == "1 bytes after the last string")
        #expect(problem([0x80, 0x00], .stringList) == "varint is not minimal")
        #expect(
            problem([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02], .intList)
                == "varint overflows 64 bits")
        #expect(problem([0x02, 1, 0, 0, 0, 0, 0, 0, 0], .intList)?.contains("2 integers need 16 bytes") == true)
        #expect(problem([0xFF, 0xFF, 0xFF, 0xFF, 0x0F], .intList) != nil)
        #expect(problem([0x00], .stringList) == nil)
        #expect(problem([0x00], .intList) == nil)
        // Reading a malformed cell never traps: it stops at the problem.
        #expect([0xFF, 0xFF, 0xFF, 0x7F, 0x01].withUnsafeBytes { ListCoding.strings($0) }.count <= 1)
        #expect([0xFF, 0xFF, 0xFF, 0x7F, 0x01].withUnsafeBytes { ListCoding.integers($0) }.isEmpty)
    }

    @Test func listsRoundTripThroughTheirEncoding() async {
        // Any character from the null character to the last before the surrogates (1 to 3
        // bytes of UTF-8; four-byte ones are in the store tests).
        let strings = Gen.character(in: "\u{0}"..."\u{D7FF}").string(of: 0...12).array(of: 0...40)
        await propertyCheck(count: 200, input: strings) { list in
            let bytes = ListCoding.encode(strings: list)
            #expect(bytes.withUnsafeBytes { ListCoding.validate($0, .stringList) } == nil)
            #expect(bytes.withUnsafeBytes { ListCoding.strings($0) } == list)
        }
        await propertyCheck(count: 200, input: Gen.int64(in: Int64.min...Int64.max).array(of: 0...40)) { list in
            let bytes = ListCoding.encode(integers: list)
            #expect(bytes.withUnsafeBytes { ListCoding.validate($0, .intList) } == nil)
            #expect(bytes.withUnsafeBytes { ListCoding.integers($0) } == list)
        }
    }

    // MARK: Stores

    static let long = (0..<20_000).map { "item \($0) ✓" }
    static let unicode = ["", "é", "日本", "😀", "a\u{0}b", "\"quoted\"\\", "line\nbreak"]

    static func insertSamples(_ context: ModelContext) throws {
        try context.insert(Listed.self) {
            $0.name = "empty"
        }
        try context.insert(Listed.self) {
            $0.name = "unicode"
            $0.tags = Self.unicode
            $0.scores = [0, -1, 1, Int.min, Int.max]
            $0.aliases = []
            $0.ranks = [42]
        }
        try context.insert(Listed.self) {
            $0.name = "long"
            $0.tags = Self.long
            $0.scores = Array(0..<50_000)
        }
    }

    static func checkSamples(_ context: ModelContext) throws {
        let byName = Dictionary(uniqueKeysWithValues: try context.objects(of: Listed.self).map { ($0.name, $0) })
        let empty = try #require(byName["empty"])
        #expect(empty.tags == [] && empty.scores == [] && empty.aliases == nil && empty.ranks == nil)
        let unicode = try #require(byName["unicode"])
        #expect(unicode.tags == Self.unicode)
        #expect(unicode.scores == [0, -1, 1, Int.min, Int.max])
        #expect(unicode.aliases == [])
        #expect(unicode.ranks == [42])
        let long = try #require(byName["long"])
        #expect(long.tags == Self.long)
        #expect(long.scores == Array(0..<50_000))
    }

    @Test func listsSurviveSaveReopenAndCompaction() throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        do {
            let store = try ObjectStore.open(at: dir, schema: try Schema(Listed.self), options: Self.options)
            try Self.insertSamples(store.context)
            try store.context.save()
            // An update of a list, and one set to an equal list (no change).
            let unicode = try #require(try store.context.object(Listed.self, where: \.name, equals: "unicode"))
            unicode.ranks = [1, 2, 3]
            unicode.ranks = [42]
            #expect(!store.context.hasChanges, "an equal list is no change")
            unicode.aliases = ["x"]
            try store.context.save()
            unicode.aliases = []
            try store.context.save()
            try store.close()
        }
        do {
            let store = try ObjectStore.open(at: dir, schema: try Schema(Listed.self), options: Self.options)
            try Self.checkSamples(store.context)
            try store.compact()
            try store.close()
        }
        let store = try ObjectStore.open(at: dir, schema: try Schema(Listed.self), options: Self.options)
        try Self.checkSamples(store.context)
        try store.close()
    }

    @Test func dynamicAccessUsesListValues() throws {
        let context = ModelContext(schema: try Schema(Listed.self))
        let object = try context.insert(Listed.self) { $0.tags = ["a"] }
        #expect(try object.attributeValue(forKey: "tags") == .stringList(["a"]))
        try object.setValue(["b", "c"], forKey: "tags")
        #expect(object.tags == ["b", "c"])
        try object.setValue([1, 2] as [Int], forKey: "scores")
        #expect(object.scores == [1, 2])
        #expect(try object.attributeValue(forKey: "scores") == .intList([1, 2]))
        #expect(throws: (any Error).self) { try object.setValue([1, "x"] as [Any], forKey: "tags") }
        #expect(object.tags == ["b", "c"])
    }

    // MARK: Damage

    /// A store of one object written by hand: a schema record and one transaction record
    /// whose `tags` cell is `cell`, with right checksums.
    static func writeHandMade(_ dir: URL, cell: [UInt8]) throws -> [UInt8] {
        let schema = StoredSchema(try Schema(Listed.self)).encoded()
        let store = try ObjectStore.open(at: dir, schema: try Schema(Listed.self), options: Self.options)
        try store.context.insert(Listed.self) { $0.name = "seed" }
        try store.context.save()
        try store.close()
        // Transaction version 1: one block of entity 0, next serial 3, one insert (serial 2).
        var payload: [UInt8] = [1, 1, 0, 3, 1, 4]
        payload += [0, 1, UInt8(ascii: "x")]  // name
        payload += [0, UInt8(cell.count)] + cell  // tags
        payload += [0, 1, 0]  // scores: []
        payload += [1, 0x01]  // aliases: nil
        payload += [1, 0x01]  // ranks: nil
        payload += [0, 0]  // no updates, no deletes
        let journal = try Journal.open(directory: dir)
        let sequence = try journal.append(payload, schema: schema)
        try journal.close()
        return [UInt8(truncatingIfNeeded: sequence)]
    }

    @Test func aListCellThatDoesNotDecodeIsRefusedNamingEntityAttributeAndRecord() throws {
        // The hand-made record is right when its cell is.
        do {
            let dir = temporaryStoreDirectory()
            defer { try? FileManager.default.removeItem(at: dir) }
            _ = try Self.writeHandMade(dir, cell: ListCoding.encode(strings: ["ok"]))
            let store = try ObjectStore.open(at: dir, schema: try Schema(Listed.self), options: Self.options)
            #expect(try store.context.object(Listed.self, where: \.name, equals: "x")?.tags == ["ok"])
            try store.close()
        }
        for (cell, reason) in [
            ([0x01, 0x85] as [UInt8], "truncated varint"), ([0x09, 0x01, 0x61], "cannot fit"),
            ([0x01, 0x02, 0xC3, 0x28], "not valid UTF-8"),
        ] {
            let dir = temporaryStoreDirectory()
            defer { try? FileManager.default.removeItem(at: dir) }
            let sequence = try Self.writeHandMade(dir, cell: cell)
            let error = try #require(throws: StoreError.self) {
                try ObjectStore.open(at: dir, schema: try Schema(Listed.self), options: Self.options)
            }
            // The last record of the active segment: refused by the open's check of the tail.
            #expect(error.code == .journal || error.code == .corruptPayload, "\(error)")
            #expect(error.message.contains("record \(sequence[0])"), "\(error.message)")
            #expect(error.message.contains("Listed.tags"), "\(error.message)")
            #expect(error.message.contains(reason), "\(error.message)")
        }
    }

    // MARK: Stores written before native lists

    static func writeJSONStore(_ dir: URL) throws {
        let store = try ObjectStore.open(at: dir, schema: try Schema(ListedJSON.Listed.self), options: Self.options)
        try store.context.insert(ListedJSON.Listed.self) {
            $0.name = "a"
            $0.tags = JSONStrings(Self.unicode)
            $0.scores = JSONInts([1, -2, Int.max])
            $0.aliases = JSONStrings([])
        }
        try store.context.insert(ListedJSON.Listed.self) { $0.name = "b" }
        try store.context.save()
        let b = try #require(try store.context.object(ListedJSON.Listed.self, where: \.name, equals: "b"))
        b.ranks = JSONInts([7])
        try store.context.save()
        try store.close()
    }

    @Test func aStoreOfJSONListsIsConvertedAtOpen() throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try Self.writeJSONStore(dir)
        for _ in 0..<3 {
            let store = try ObjectStore.open(at: dir, schema: try Schema(Listed.self), options: Self.options)
            let a = try #require(try store.context.object(Listed.self, where: \.name, equals: "a"))
            let b = try #require(try store.context.object(Listed.self, where: \.name, equals: "b"))
            #expect(a.tags == Self.unicode && a.scores == [1, -2, Int.max] && a.aliases == [] && a.ranks == nil)
            #expect(b.tags == [] && b.scores == [] && b.aliases == nil && b.ranks == [7])
            // A save after the conversion writes the native schema; the next open reads both.
            a.ranks = [3]
            try store.context.save()
            a.ranks = nil
            try store.context.save()
            try store.close()
        }
        let store = try ObjectStore.open(at: dir, schema: try Schema(Listed.self), options: Self.options)
        try store.compact()
        try store.close()
        let again = try ObjectStore.open(at: dir, schema: try Schema(Listed.self), options: Self.options)
        #expect(try again.context.object(Listed.self, where: \.name, equals: "a")?.tags == Self.unicode)
        try again.close()
    }

    @Test func aStoredJSONValueThatIsNotTheListFailsTheOpenAndChangesNothing() throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        do {
            let store = try ObjectStore.open(
                at: dir, schema: try Schema(ListedObject.Listed.self), options: Self.options)
            try store.context.insert(ListedObject.Listed.self) { $0.name = "a" }
            try store.context.save()
            try store.close()
        }
        let before = try CodableEvolutionTests.files(dir)
        let error = try #require(throws: StoreError.self) {
            try ObjectStore.open(at: dir, schema: try Schema(Listed.self), options: Self.options)
        }
        #expect(error.code == .incompatibleSchema)
        #expect(error.message.contains("Listed.tags of object 1"), "\(error.message)")
        #expect(error.message.contains("{\"a\":0}"), "\(error.message)")
        #expect(try CodableEvolutionTests.files(dir) == before)
    }

    // MARK: Mapping

    static func mapping() throws -> EntityMapping<Listed> {
        var m = EntityMapping(Listed.self)
        try m.map("name", "tags", "scores", "aliases", "ranks")
        try m.identify(by: "name")
        return m
    }

    @Test func jsonArraysMapIntoLists() throws {
        let context = ModelContext(schema: try Schema(Listed.self))
        try context.map(
            Data(#"[{"name":"a","tags":["x","é\n"],"scores":[1,-2,3.0,1e3],"aliases":null,"ranks":[]}]"#.utf8),
            with: try Self.mapping())
        let a = try #require(try context.object(Listed.self, where: \.name, equals: "a"))
        #expect(a.tags == ["x", "é\n"] && a.scores == [1, -2, 3, 1000] && a.aliases == nil && a.ranks == [])
    }

    @Test func hostileArraysAreRefusedWithNothingStored() throws {
        let context = ModelContext(schema: try Schema(Listed.self))
        for (field, text, reason) in [
            ("tags", #"["x", 1]"#, "element 1 (1) is not a string"),
            ("tags", #"[null]"#, "element 0 (null) is not a string"),
            ("tags", #"[["x"]]"#, "is not a string"),
            ("scores", #"[1, "2"]"#, "element 1 (\"2\") is not an integer"),
            ("scores", #"[9223372036854775808]"#, "is not an integer within Int's range"),
            ("scores", #"[1e300]"#, "is not an integer"),
            ("scores", #"[1.5]"#, "is not an integer"),
            ("tags", #""x""#, "cannot become Listed.tags"),
            ("scores", #"{"a": 1}"#, "cannot become Listed.scores"),
        ] {
            let error = try #require(throws: MappingError.self) {
                try context.map(Data(#"[{"name":"a","\#(field)":\#(text)}]"#.utf8), with: try Self.mapping())
            }
            #expect(error.code == .untransformableValue)
            #expect(error.message.contains(reason), "\(error.message)")
            #expect(error.attribute == field)
            #expect(try context.objects(of: Listed.self).isEmpty)
        }
        // A huge array maps whole.
        let huge = "[" + (0..<100_000).map { "\($0)" }.joined(separator: ",") + "]"
        try context.map(Data(#"[{"name":"h","scores":\#(huge)}]"#.utf8), with: try Self.mapping())
        #expect(try context.object(Listed.self, where: \.name, equals: "h")?.scores.count == 100_000)
    }
}
