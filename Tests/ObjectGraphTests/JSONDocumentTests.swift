import Foundation
import ObjectGraphTestSupport
import Testing

@testable import ObjectGraph

/// Tests of the simdjson tape reader (JSONDocument) and of the locator that names the byte where
/// a malformed document goes wrong (JSONSyntaxLocator).
@Suite struct JSONDocumentTests {
    // MARK: Helpers

    /// Parses `text`.
    static func parse(_ text: String) throws -> JSONDocument {
        try JSONDocument(parsing: Data(text.utf8))
    }

    /// Parses `bytes`, returning the document or the error.
    static func parse(bytes: [UInt8]) -> Result<JSONDocument, MappingError> {
        bytes.withUnsafeBytes { buffer in
            Result { () throws(MappingError) in try JSONDocument(parsing: buffer) }
        }
    }

    /// The locator's verdict on `bytes`.
    static func locate(_ bytes: [UInt8]) -> JSONSyntaxError? {
        bytes.withUnsafeBytes { JSONSyntaxLocator.firstError(in: $0) }
    }

    /// The error parsing `bytes` throws, or nil when they parse.
    static func parseError(_ bytes: [UInt8]) -> MappingError? {
        if case .failure(let error) = parse(bytes: bytes) { return error }
        return nil
    }

    /// The elements of the array `node`.
    static func elements(_ document: JSONDocument, _ node: Int) -> [Int] {
        var nodes: [Int] = []
        document.forEachElement(node) { nodes.append($0) }
        return nodes
    }

    /// The fields of the object `node`, keys decoded.
    static func fields(_ document: JSONDocument, _ node: Int) -> [(key: String, value: Int)] {
        var fields: [(key: String, value: Int)] = []
        document.forEachField(node) { key, value in fields.append((String(decoding: key, as: UTF8.self), value)) }
        return fields
    }

    /// Whether `number` is `.int(expected)`.
    static func isInt(_ number: JSONNumber, _ expected: Int64) -> Bool {
        if case .int(let value) = number { return value == expected }
        return false
    }

    /// A small document with every kind of value, escapes, non-ASCII text, nesting and empty
    /// containers, as an importer would receive it. Its numbers are short, so that no single-byte
    /// change puts one out of simdjson's range.
    static let realisticDocument = Array(
        #"""
        [{"id": 17, "name": "zlib1g", "version": "1:1.3.dfsg-3", "size": 9.5e1, "essential": true,
          "tags": ["lib", "c\u00e9", "\ud83d\ude00"], "maintainer": null, "note": "a\n\"q\" é",
          "deps": {}, "conf": []},
         {"id": -4, "name": "", "arch": [false, 0.25, {"x": [1]}]}]
        """#.utf8)

    // MARK: Values of every kind

    /// Every scalar kind reads back with its value, Int64 limits and negative zero included.
    /// A kept parser gives its working buffers' pages back after each parse (they read as
    /// zeros afterwards): documents larger, smaller and larger again than the last, and one that
    /// fails, parse into it as into a fresh parser.
    @Test func aKeptParserParsesEveryDocumentAfterGivingBackItsWorkingPages() throws {
        let parser = try #require(JSONParser())
        func document(_ count: Int, tag: String) -> Data {
            Data(
                ("[" + (0..<count).map { #"{"id": \#($0), "name": "\#(tag)-\#($0)"}"# }.joined(separator: ",") + "]")
                    .utf8)
        }
        for (count, tag) in [(40_000, "large"), (3, "small"), (0, "empty"), (60_000, "larger"), (40_000, "again")] {
            let data = document(count, tag: tag)
            let kept = try JSONDocument(parsing: data, reusing: parser)
            let fresh = try JSONDocument(parsing: data)
            let keptNames = Self.elements(kept, kept.root).map { kept.string(kept.field($0, named: "name") ?? 0) }
            let freshNames = Self.elements(fresh, fresh.root).map { fresh.string(fresh.field($0, named: "name") ?? 0) }
            #expect(keptNames.count == count)
            #expect(keptNames == freshNames, "\(tag)")
            #expect(keptNames.last == (count > 0 ? "\(tag)-\(count - 1)" : nil))
        }
        #expect(throws: MappingError.self) {
            try JSONDocument(parsing: Data(#"[{"id": 1, "name": "#.utf8), reusing: parser)
        }
        let after = try JSONDocument(parsing: Data(#"[{"id": 1, "name": "last"}]"#.utf8), reusing: parser)
        #expect(Self.elements(after, after.root).map { after.string(after.field($0, named: "name") ?? 0) } == ["last"])
    }

    /// A large document (4 MiB and more) is read where it lies when simdjson's padding past its
    /// end is on its last page, and copied first otherwise; either way, and whatever the bytes
    /// after it hold, it parses as the same document, fresh or into a kept parser, and a damaged
    /// one fails at the same byte. The page after the document's is unreadable, so that a read
    /// past the end the check should have prevented crashes the test.
    @Test func aLargeDocumentParsesTheSameWhereverItEndsOnItsPage() throws {
        let names = (0..<120_000).map { "package-\($0)-\(String(repeating: "x", count: $0 % 7))" }
        let text = "[" + names.map { #"{"name": "\#($0)", "size": \#($0.utf8.count)}"# }.joined(separator: ",") + "]"
        let document = Array(text.utf8)
        #expect(document.count >= 4 << 20)
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let parser = try #require(JSONParser())
        let guarded = (document.count + 2 * page - 1) / page * page
        let mapping = try #require(
            mmap(nil, guarded + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
            "mmap")
        #expect(mapping != MAP_FAILED)
        defer { munmap(mapping, guarded + page) }
        #expect(mprotect(mapping + guarded, page, PROT_NONE) == 0)
        let memory = UnsafeMutableRawBufferPointer(start: mapping, count: guarded)
        // How many bytes of its last page follow the document: none, fewer than, exactly and
        // more than simdjson's 64 bytes of padding.
        for gap in [0, 1, 63, 64, 65, 1000] {
            // What follows the document could be read as JSON if simdjson trusted it.
            memory.initializeMemory(as: UInt8.self, repeating: UInt8(ascii: "7"))
            for i in stride(from: guarded - page, to: guarded, by: 3) { memory[i] = UInt8(ascii: "\"") }
            let start = guarded - gap - document.count
            UnsafeMutableRawBufferPointer(rebasing: memory[start..<(start + document.count)]).copyBytes(from: document)
            let bytes = UnsafeRawBufferPointer(rebasing: memory[start..<(start + document.count)])
            for parsed in [try JSONDocument(parsing: bytes), try JSONDocument(parsing: bytes, reusing: parser)] {
                let elements = Self.elements(parsed, parsed.root)
                #expect(elements.count == names.count, "gap \(gap)")
                #expect(
                    elements.last.flatMap { parsed.field($0, named: "name") }.map { parsed.string($0) } == names.last)
            }
            // The last closing bracket missing: the error names the end of the input.
            let damaged = UnsafeRawBufferPointer(rebasing: bytes[..<(bytes.count - 1)])
            for attempt in [
                Result { () throws(MappingError) in try JSONDocument(parsing: damaged) },
                Result { () throws(MappingError) in try JSONDocument(parsing: damaged, reusing: parser) },
            ] {
                guard case .failure(let error) = attempt else {
                    Issue.record("gap \(gap): a truncated document parsed")
                    continue
                }
                #expect(error.code == .malformedJSON)
                #expect(error.byteOffset == damaged.count, "gap \(gap): \(error.message)")
            }
        }
    }

    @Test func scalarsOfEveryKindReadBackFromTheTape() throws {
        let document = try Self.parse(
            #"[null, true, false, 0, -5, 9223372036854775807, -9223372036854775808, 1.5, -0.0, 1e300, 2.5E-3, "text"]"#)
        let nodes = Self.elements(document, document.root)
        #expect(
            nodes.map { document.kind($0) } == [
                .null, .bool, .bool, .number, .number, .number, .number, .number, .number, .number, .number, .string,
            ])
        #expect(document.bool(nodes[1]) == true)
        #expect(document.bool(nodes[2]) == false)
        #expect(Self.isInt(document.number(nodes[3]), 0))
        #expect(Self.isInt(document.number(nodes[4]), -5))
        #expect(Self.isInt(document.number(nodes[5]), .max))
        #expect(Self.isInt(document.number(nodes[6]), .min))
        let doubles: [Double] = nodes[7...10].map {
            if case .double(let value) = document.number($0) { return value }
            return .nan
        }
        #expect(doubles == [1.5, -0.0, 1e300, 2.5e-3])
        if case .double(let negativeZero) = document.number(nodes[8]) { #expect(negativeZero.sign == .minus) }
        #expect(document.string(nodes[11]) == "text")
    }

    /// Integers above Int64.max (up to UInt64.max) come back as `.uint`, not as doubles.
    @Test func integersBeyondInt64ReadAsUnsigned() throws {
        let document = try Self.parse("[9223372036854775808, 18446744073709551615]")
        let values: [UInt64] = Self.elements(document, document.root).map {
            if case .uint(let value) = document.number($0) { return value }
            return 0
        }
        #expect(values == [9_223_372_036_854_775_808, .max])
    }

    /// A number written with a fraction or an exponent is a double even when it is whole.
    @Test func integersAsDoublesStayDoubles() throws {
        let document = try Self.parse("[1.0, 1e2, 123456789012345678901234567890.5]")
        let kinds = Self.elements(document, document.root).map { node -> String in
            switch document.number(node) {
            case .int: "int"
            case .uint: "uint"
            case .double(let value): "double \(value)"
            }
        }
        #expect(kinds == ["double 1.0", "double 100.0", "double 1.2345678901234568e+29"])
    }

    /// A bare scalar is a whole document, whitespace around it allowed.
    @Test func rootScalarsAreDocuments() throws {
        #expect(try Self.parse("42").kind(1) == .number)
        let string = try Self.parse(#"  "alone"  "#)
        #expect(string.string(string.root) == "alone")
        #expect(try Self.parse("null").kind(1) == .null)
    }

    /// Keys and values come back with every escape decoded, surrogate pairs and NUL included.
    @Test func escapesAndUnicodeDecodeInKeysAndValues() throws {
        let document = try Self.parse(
            #"{"k\u00e9y\n": "a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\ud83d\ude00é😀", "\u0000": "nul\u0000byte"}"#)
        let fields = Self.fields(document, document.root)
        #expect(fields.map(\.key) == ["kéy\n", "\u{0}"])
        #expect(document.string(fields[0].value) == "a\"b\\c/d\u{8}\u{c}\n\r\tAé😀é😀")
        #expect(Array(document.stringBytes(fields[1].value)) == Array("nul\u{0}byte".utf8))
        #expect(document.field(document.root, named: "kéy\n") == fields[0].value)
    }

    /// Empty arrays and objects count 0 and yield nothing.
    @Test func emptyArraysAndObjectsHaveNoChildren() throws {
        let document = try Self.parse(#"[[], {}, [[]], {"a": {}}]"#)
        let nodes = Self.elements(document, document.root)
        #expect(nodes.map { document.kind($0) } == [.array, .object, .array, .object])
        #expect(nodes.map { document.count($0) } == [0, 0, 1, 1])
        #expect(Self.elements(document, nodes[0]).isEmpty)
        #expect(Self.fields(document, nodes[1]).isEmpty)
        #expect(document.field(nodes[1], named: "a") == nil)
        #expect(Self.elements(document, nodes[2]).map { document.count($0) } == [0])
    }

    /// `next(after:)` steps over nested containers and number payload words to the sibling.
    @Test func nextSkipsWholeContainersAndNumberPayloads() throws {
        let document = try Self.parse(#"[{"a": [1, [2, {"b": 3}]], "c": 4.5}, 7, "s", [], true]"#)
        let nodes = Self.elements(document, document.root)
        #expect(nodes.count == 5)
        for (node, following) in zip(nodes, nodes.dropFirst()) {
            #expect(document.next(after: node) == following)
        }
        let inner = try #require(document.field(nodes[0], named: "a"))
        let nested = Self.elements(document, inner)
        #expect(nested.map { document.kind($0) } == [.number, .array])
        #expect(document.jsonText(nested[1]) == #"[2,{"b":3}]"#)
        #expect(document.next(after: document.root) == document.next(after: nodes[4]) + 1)
    }

    /// `count` is the number of elements of an array and of fields of an object.
    @Test func countIsElementsForArraysAndFieldsForObjects() throws {
        let document = try Self.parse(#"[[1, 2, 3], {"a": 1, "b": [1, 2], "c": {"d": 1}}, ["x", null]]"#)
        #expect(document.count(document.root) == 3)
        #expect(Self.elements(document, document.root).map { document.count($0) } == [3, 3, 2])
    }

    /// A saturated tape count (0xFFFFFF) makes `count` walk the container for the exact number.
    @Test func countWalksTheContainerWhenTheTapeCountIsSaturated() {
        // [null, null, null] and {"a": null, "b": null}, with the tape's 24-bit counts saturated
        // (0xFFFFFF) as simdjson writes them for containers of 2^24 − 1 or more children.
        func word(_ tag: Character, _ payload: UInt64) -> UInt64 {
            UInt64(tag.asciiValue!) << 56 | payload
        }
        let saturated: UInt64 = 0xFF_FFFF << 32
        let array = JSONDocument(
            tape: [
                word("r", 6), word("[", saturated | 6), word("n", 0), word("n", 0), word("n", 0), word("]", 1),
                word("r", 0),
            ],
            stringBuffer: [])
        #expect(array.count(array.root) == 3)
        #expect(Self.elements(array, array.root).count == 3)
        let object = JSONDocument(
            tape: [
                word("r", 7), word("{", saturated | 7), word("\"", 0), word("n", 0), word("\"", 6), word("n", 0),
                word("}", 1), word("r", 0),
            ],
            stringBuffer: [1, 0, 0, 0, UInt8(ascii: "a"), 0, 1, 0, 0, 0, UInt8(ascii: "b"), 0])
        #expect(object.count(object.root) == 2)
        #expect(Self.fields(object, object.root).map(\.key) == ["a", "b"])
        #expect(object.field(object.root, named: "b") == 5)
    }

    // MARK: Field lookup

    /// Hints settle on each key's position, move when a record's order differs, and stay on a miss.
    @Test func fieldHintFollowsRecordsWithTheSameFieldOrder() throws {
        let document = try Self.parse(
            #"[{"id": 1, "name": "a", "size": 3}, {"id": 2, "name": "b", "size": 4}, {"size": 5, "id": 3}]"#)
        let records = Self.elements(document, document.root)
        let keys = ["id", "name", "size"].map { Array($0.utf8) }
        var hints = [0, 0, 0]
        func lookUp(_ record: Int, _ key: Int) -> String? {
            keys[key].withUnsafeBytes { bytes in
                document.field(records[record], named: bytes, hint: &hints[key]).map { document.jsonText($0) }
            }
        }
        #expect([lookUp(0, 0), lookUp(0, 1), lookUp(0, 2)] == ["1", #""a""#, "3"])
        #expect(hints == [0, 1, 2])
        #expect([lookUp(1, 0), lookUp(1, 1), lookUp(1, 2)] == ["2", #""b""#, "4"])
        #expect(hints == [0, 1, 2])
        // The third record has another order and no name: the hints move, a miss leaves its hint.
        #expect([lookUp(2, 0), lookUp(2, 1), lookUp(2, 2)] == ["3", nil, "5"])
        #expect(hints == [1, 1, 0])
    }

    /// Whatever the hint (negative, wrong, past the end), the lookup finds what a hintless one does.
    @Test func fieldWithAnyHintFindsTheSameValueAsWithout() throws {
        let document = try Self.parse(#"{"a": 1, "bb": [2], "c": {"a": 9}, "dd": 4}"#)
        for key in ["a", "bb", "c", "dd", "zz", ""] {
            let expected = document.field(document.root, named: key)
            for start in [-5, 0, 1, 2, 3, 4, 100] {
                var hint = start
                let found = Array(key.utf8).withUnsafeBytes { document.field(document.root, named: $0, hint: &hint) }
                #expect(found == expected, "key \(key), hint \(start)")
            }
        }
    }

    /// A repeated key yields its last value, even from a hint at the first; all fields are walked.
    @Test func duplicateKeysResolveToTheLastOccurrence() throws {
        let document = try Self.parse(#"{"a": 1, "b": 2, "a": 3, "ab": 4}"#)
        let last = try #require(document.field(document.root, named: "a"))
        #expect(document.jsonText(last) == "3")
        // A hint at the first occurrence still yields the last, and moves to it.
        var hint = 0
        let hinted = Array("a".utf8).withUnsafeBytes { document.field(document.root, named: $0, hint: &hint) }
        #expect(hinted == last)
        #expect(hint == 2)
        #expect(Self.fields(document, document.root).map(\.key) == ["a", "b", "a", "ab"])
        #expect(document.count(document.root) == 4)
    }

    // MARK: JSON text

    /// `jsonText` is compact, escapes what JSON requires, and parses back to itself.
    @Test func jsonTextIsCompactAndEscaped() throws {
        let document = try Self.parse(
            #"{ "a" : [ 1 , -2 , 3.5 , true , false , null , 18446744073709551615 ] , "b\"" : "x\ny\u0001é\\" , "e": {} }"#
        )
        #expect(
            document.jsonText(document.root)
                == #"{"a":[1,-2,3.5,true,false,null,18446744073709551615],"b\"":"x\ny\u0001é\\","e":{}}"#)
        let reparsed = try Self.parse(document.jsonText(document.root))
        #expect(reparsed.jsonText(reparsed.root) == document.jsonText(document.root))
    }

    /// Long values are cut at `jsonTextLimit` characters, never inside a character, and end with "…".
    @Test func jsonTextTruncatesLongValuesWithAnEllipsis() throws {
        let long = "[" + Array(repeating: #""abcdéfghij""#, count: 1000).joined(separator: ",") + "]"
        let document = try Self.parse(long)
        let text = document.jsonText(document.root)
        #expect(text.count == JSONDocument.jsonTextLimit + 1)
        #expect(text.hasSuffix("…"))
        #expect(long.hasPrefix(text.dropLast()))
        let string = try Self.parse("\"" + String(repeating: "ü", count: 5000) + "\"")
        #expect(string.jsonText(string.root) == "\"" + String(repeating: "ü", count: 199) + "…")
    }

    // MARK: Malformed documents

    /// The `Data` initializer parses and fails as the buffer one does, empty data included.
    @Test func dataAndBufferInitializersAgree() throws {
        let bytes = Self.realisticDocument
        let fromData = try JSONDocument(parsing: Data(bytes))
        let fromBuffer = try Self.parse(bytes: bytes).get()
        #expect(fromData.jsonText(fromData.root) == fromBuffer.jsonText(fromBuffer.root))
        #expect(fromData.count(fromData.root) == 2)
        let broken = Array(bytes.dropLast())
        #expect(throws: MappingError.self) { try JSONDocument(parsing: Data(broken)) }
        #expect((try? JSONDocument(parsing: Data())) == nil)
    }

    /// The error message names the byte, the locator's reason and simdjson's own message.
    @Test func malformedJSONMessageNamesTheByteTheReasonAndSimdjsonsMessage() {
        let error = Self.parseError(Array(#"{"a": 1,}"#.utf8))
        #expect(error?.code == .malformedJSON)
        #expect(error?.byteOffset == 8)
        #expect(
            error?.message
                == "malformed JSON at byte 8: unexpected character '}', expected a key string (simdjson: The JSON document has an improper structure: missing or superfluous commas, braces, missing keys, etc.)"
        )
    }

    /// Every proper prefix of a document is malformed at its own length.
    @Test func everyTruncationFailsAtTheEndOfInput() {
        let document = Self.realisticDocument
        for length in 0..<document.count {
            let prefix = Array(document[..<length])
            let error = Self.parseError(prefix)
            #expect(error?.code == .malformedJSON, "prefix of \(length) bytes")
            #expect(error?.byteOffset == length, "prefix of \(length) bytes: \(error?.message ?? "parsed")")
        }
    }

    /// The prefixes of a root number are numbers themselves or end too early.
    @Test func truncatedRootNumbersFailAtTheEndOrParse() {
        // Some prefixes of a root number are numbers themselves; the others end too early.
        let number = Array("-12.5e+3".utf8)
        var parsedLengths: [Int] = []
        for length in 0...number.count {
            let prefix = Array(number[..<length])
            switch Self.parse(bytes: prefix) {
            case .success:
                parsedLengths.append(length)
                #expect(Self.locate(prefix) == nil)
            case .failure(let error):
                #expect(error.byteOffset == length, "prefix \(String(decoding: prefix, as: UTF8.self))")
            }
        }
        #expect(parsedLengths == [2, 3, 5, 8])
    }

    /// The bytes whose change can move an error arbitrarily far: quotes and backslashes turn
    /// text into strings and back, brackets and braces turn fields into elements, commas, colons
    /// and whitespace join or split values.
    static let structuralBytes = Set(#"[]{},:"\ "#.utf8).union([0x09, 0x0A, 0x0D])

    /// How far after a changed byte that is not structural the error may be located: changing
    /// `\ud83d\ude00` to `\nd83d\ude00` unpairs the surrogates, which shows at the second escape's
    /// second digit, 8 bytes on.
    static let corruptionSlack = 8

    /// Every byte of the document, replaced by each other byte value: simdjson and the locator
    /// accept and reject the same documents, no error is located before the changed byte (the
    /// bytes before it still begin a valid document), and a change to a non-structural byte is
    /// located within `corruptionSlack` bytes of it.
    @Test func singleByteCorruptionsAreLocatedAtOrShortlyAfterTheChangedByte() {
        let document = Self.realisticDocument
        var rejected = 0
        var bounded = 0
        for position in document.indices {
            for replacement in UInt8.min...UInt8.max where replacement != document[position] {
                var corrupted = document
                corrupted[position] = replacement
                let located = Self.locate(corrupted)
                guard let error = Self.parseError(corrupted) else {
                    #expect(
                        located == nil,
                        "simdjson accepts byte \(position) = \(replacement), the locator does not: \(String(describing: located))"
                    )
                    continue
                }
                rejected += 1
                let context = "byte \(position) = \(replacement): \(error.message)"
                #expect(located != nil, "the locator accepts what simdjson rejects: \(context)")
                guard let offset = error.byteOffset else {
                    Issue.record("no offset: \(context)")
                    continue
                }
                #expect(error.message.hasPrefix("malformed JSON at byte \(offset): "), "\(context)")
                #expect(offset >= position, "\(context)")
                if !Self.structuralBytes.contains(replacement) && !Self.structuralBytes.contains(document[position]) {
                    bounded += 1
                    #expect(offset <= position + Self.corruptionSlack, "\(context)")
                }
            }
        }
        #expect(rejected > document.count * 200)
        #expect(bounded > rejected / 3)
    }

    /// Random insertions, deletions and replacements: simdjson and the locator accept the same damaged documents.
    @Test func locatorAgreesWithSimdjsonOnRandomDamage() {
        var generator = SeededGenerator(seed: 0x5EED_7A9E)
        let alphabet =
            Array(#"{}[],:"\ u0123456789abcdefABCDEF-+.eEtrufalsn"#.utf8) + [
                0x00, 0x1F, 0x7F, 0x80, 0xC3, 0xE2, 0xED, 0xF0, 0xFF,
            ]
        for round in 0..<3000 {
            var bytes = Self.realisticDocument
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let position = Int.random(in: 0..<bytes.count, using: &generator)
                let byte = alphabet.randomElement(using: &generator)!
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes[position] = byte
                case 1: bytes.insert(byte, at: position)
                default: bytes.remove(at: position)
                }
            }
            let error = Self.parseError(bytes)
            let located = Self.locate(bytes)
            #expect(
                (error == nil) == (located == nil),
                "round \(round): simdjson \(error?.message ?? "accepts"), locator \(located.map { "\($0)" } ?? "accepts")"
            )
            if let error, let located {
                #expect(error.byteOffset == located.offset)
            }
        }
    }

    /// A malformed input and where and why it must be rejected.
    struct MalformedCase: Sendable, CustomTestStringConvertible {
        /// The input.
        let bytes: [UInt8]
        /// The byte offset the error must name.
        let offset: Int
        /// The start of the reason the message must give after the offset.
        let reason: String

        /// A case whose input is the UTF-8 of `text`.
        init(_ text: String, at offset: Int, _ reason: String) {
            self.init(Array(text.utf8), at: offset, reason)
        }

        /// A case whose input is `bytes`.
        init(_ bytes: [UInt8], at offset: Int, _ reason: String) {
            self.bytes = bytes
            self.offset = offset
            self.reason = reason
        }

        /// The input as a quoted string, invalid UTF-8 shown as U+FFFD.
        var testDescription: String { String(decoding: bytes, as: UTF8.self).debugDescription }
    }

    /// Checks that `testCase` is rejected at its offset with its reason, by simdjson and the
    /// locator alike.
    static func expectRejected(_ testCase: MalformedCase, sourceLocation: SourceLocation = #_sourceLocation) {
        let error = parseError(testCase.bytes)
        #expect(error?.code == .malformedJSON, sourceLocation: sourceLocation)
        #expect(error?.byteOffset == testCase.offset, "\(error?.message ?? "parsed")", sourceLocation: sourceLocation)
        #expect(
            error?.message.hasPrefix("malformed JSON at byte \(testCase.offset): \(testCase.reason)") == true,
            "\(error?.message ?? "parsed")", sourceLocation: sourceLocation)
    }

    /// Structural mistakes, trailing characters, empty input and a byte order mark.
    @Test(arguments: [
        MalformedCase("", at: 0, "unexpected end of input"),
        MalformedCase(" \n\t", at: 3, "unexpected end of input"),
        MalformedCase("[1, 2", at: 5, "unexpected end of input"),
        MalformedCase(#"{"a" 1}"#, at: 5, "unexpected character '1', expected ':'"),
        MalformedCase("[1 2]", at: 3, "unexpected character '2', expected ',' or ']'"),
        MalformedCase("[1,]", at: 3, "unexpected character ']', expected a value"),
        MalformedCase(#"{"a":1}}"#, at: 7, "trailing characters after the document"),
        MalformedCase(#"{"a":1} x"#, at: 8, "trailing characters after the document"),
        MalformedCase("1 2", at: 2, "trailing characters after the document"),
        MalformedCase("truex", at: 4, "trailing characters after the document"),
        MalformedCase(#""a""b""#, at: 3, "trailing characters after the document"),
        MalformedCase("[tru]", at: 4, "unexpected character ']' in 'true'"),
        MalformedCase("[nul", at: 4, "unexpected end of input in 'null'"),
        MalformedCase("[NaN]", at: 1, "unexpected character 'N', expected a value"),
        MalformedCase("[1}", at: 2, "unexpected character '}', expected ',' or ']'"),
        MalformedCase(#"{"a":1]"#, at: 6, "unexpected character ']', expected ',' or '}'"),
        MalformedCase("{1:2}", at: 1, "unexpected character '1', expected a key string or '}'"),
        MalformedCase([0xEF, 0xBB, 0xBF] + Array("[1]".utf8), at: 0, "unexpected character '\u{FEFF}'"),
        MalformedCase([UInt8(ascii: "["), 0x00, UInt8(ascii: "]")], at: 1, "unexpected control character U+0000"),
    ])
    func structuralErrorsAreLocatedAtTheOffendingByte(_ testCase: MalformedCase) {
        Self.expectRejected(testCase)
    }

    /// Number grammar errors, and numbers beyond simdjson's 64-bit and double ranges.
    @Test(arguments: [
        MalformedCase("01", at: 1, "number with leading zero"),
        MalformedCase("[-01]", at: 3, "number with leading zero"),
        MalformedCase("[-]", at: 2, "unexpected character ']', expected a digit in the number"),
        MalformedCase("-", at: 1, "unexpected end of input in a number"),
        MalformedCase("[1.]", at: 3, "unexpected character ']', expected a digit in the fraction"),
        MalformedCase("[1.e5]", at: 3, "unexpected character 'e', expected a digit in the fraction"),
        MalformedCase("[1e]", at: 3, "unexpected character ']', expected a digit in the exponent"),
        MalformedCase("[1e+]", at: 4, "unexpected character ']', expected a digit in the exponent"),
        MalformedCase("[.5]", at: 1, "unexpected character '.', expected a value"),
        MalformedCase("[+1]", at: 1, "unexpected character '+', expected a value"),
        MalformedCase("[1x]", at: 2, "unexpected character 'x', expected ',' or ']'"),
        MalformedCase("[1, 18446744073709551616]", at: 4, "integer out of the 64-bit range"),
        MalformedCase("-9223372036854775809", at: 0, "integer out of the 64-bit range"),
        MalformedCase("123456789012345678901234567890", at: 0, "integer out of the 64-bit range"),
        MalformedCase(#"{"a": 1e309}"#, at: 6, "number out of the range of a double"),
        MalformedCase("[-1.7976931348623159e308]", at: 1, "number out of the range of a double"),
        MalformedCase("1e99999999999999999999", at: 0, "number out of the range of a double"),
    ])
    func numberErrorsAreLocated(_ testCase: MalformedCase) {
        Self.expectRejected(testCase)
    }

    /// Numbers just inside simdjson's range parse, and the locator accepts them too.
    @Test func numbersAtTheEdgesOfSimdjsonsRangeParse() throws {
        let text = "[18446744073709551615, -9223372036854775808, 1.7976931348623157e308, 1e-400, 0e99999, 0.1e309]"
        let document = try Self.parse(text)
        #expect(document.count(document.root) == 6)
        #expect(Self.locate(Array(text.utf8)) == nil)
    }

    /// Unterminated strings, control characters, bad escapes and unpaired surrogate escapes.
    @Test(arguments: [
        MalformedCase(#"["abc"#, at: 5, "unterminated string"),
        MalformedCase(#"["a\"#, at: 4, "unterminated string"),
        MalformedCase("[\"a\u{1}b\"]", at: 3, "control character U+0001 in string"),
        MalformedCase("[\"tab\there\"]", at: 5, "control character U+0009 in string"),
        MalformedCase(#"["a\x"]"#, at: 4, #"invalid escape '\x'"#),
        MalformedCase(#"["\u12G4"]"#, at: 6, #"invalid \u escape: 'G' is not a hexadecimal digit"#),
        MalformedCase(#"["\ud800"]"#, at: 8, "high surrogate escape without a low surrogate escape after it"),
        MalformedCase(#"["\ud800\n"]"#, at: 9, "high surrogate escape without a low surrogate escape after it"),
        MalformedCase(#"["\ud800\u0041"]"#, at: 10, "high surrogate escape without a low surrogate escape after it"),
        MalformedCase(#"["\uD800\uDB00"]"#, at: 11, "high surrogate escape without a low surrogate escape after it"),
        MalformedCase(#"["\udc00"]"#, at: 5, "low surrogate escape without a high surrogate escape before it"),
        MalformedCase(#"{"k\uDFFF": 1}"#, at: 6, "low surrogate escape without a high surrogate escape before it"),
    ])
    func stringErrorsAreLocated(_ testCase: MalformedCase) {
        Self.expectRejected(testCase)
    }

    /// Invalid UTF-8 in and out of strings, located at the first byte no UTF-8 sequence allows.
    @Test(arguments: [
        // Lone continuation byte, overlong encodings, a UTF-16 surrogate, beyond U+10FFFF.
        MalformedCase([0x22, 0x80, 0x22], at: 1, "invalid UTF-8 (byte 0x80)"),
        MalformedCase([0x22, 0xC0, 0x80, 0x22], at: 1, "invalid UTF-8 (byte 0xC0)"),
        MalformedCase([0x22, 0xE0, 0x80, 0x80, 0x22], at: 2, "invalid UTF-8 (byte 0x80 after 0xE0)"),
        MalformedCase([0x22, 0xED, 0xA0, 0x80, 0x22], at: 2, "invalid UTF-8 (byte 0xA0 after 0xED)"),
        MalformedCase([0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], at: 2, "invalid UTF-8 (byte 0x90 after 0xF4)"),
        MalformedCase([0x22, 0xF5, 0x80, 0x80, 0x80, 0x22], at: 1, "invalid UTF-8 (byte 0xF5)"),
        MalformedCase([0x22, 0xFF, 0x22], at: 1, "invalid UTF-8 (byte 0xFF)"),
        // A sequence cut short by the closing quote, or by the end of the input.
        MalformedCase([0x22, 0xE2, 0x82, 0x22], at: 3, "invalid UTF-8 (byte 0x22 after 0xE2)"),
        MalformedCase([0x22, 0xF0, 0x9F, 0x98], at: 4, "unexpected end of input in a UTF-8 sequence"),
        // Outside strings, any non-ASCII byte is out of place.
        MalformedCase([0x5B, 0xC3, 0xA9, 0x5D], at: 1, "unexpected character 'é' (U+E9), expected a value"),
        MalformedCase([0x5B, 0xFF, 0x5D], at: 1, "unexpected byte 0xFF (not UTF-8), expected a value"),
        // Valid UTF-8 after invalid UTF-8 is still invalid; the first bad byte is reported.
        MalformedCase([0x5B, 0x22, 0x61, 0xC3, 0x28, 0x22, 0x5D], at: 4, "invalid UTF-8 (byte 0x28 after 0xC3)"),
    ])
    func invalidUTF8IsLocatedAtTheFirstBadByte(_ testCase: MalformedCase) {
        Self.expectRejected(testCase)
    }

    /// simdjson reads 1024 levels (the top-level value is level 1) but counts an array or object
    /// only when it holds something: an empty one may be at level 1024, and the first value or
    /// key at level 1025 is the error.
    @Test func nestingDeeperThanSimdjsonsLimitIsLocatedAtTheFirstTooDeepValue() throws {
        let depth = JSONSyntaxLocator.defaultMaxDepth
        #expect(depth == 1024)
        func nested(_ open: String, _ count: Int, _ inner: String, _ close: String) -> String {
            String(repeating: open, count: count) + inner + String(repeating: close, count: count)
        }
        #expect(try Self.parse(nested("[", depth - 1, "[]", "]")).count(1) == 1)
        #expect(try Self.parse(nested(#"{"a":"#, depth - 1, "{}", "}")).count(1) == 1)
        #expect(try Self.parse(nested("[", depth - 1, "1", "]")).count(1) == 1)
        let reason = "nesting deeper than 1024 levels"
        Self.expectRejected(MalformedCase(nested("[", depth, "1", "]"), at: depth, reason))
        Self.expectRejected(MalformedCase(nested("[", depth, " []", "]"), at: depth + 1, reason))
        Self.expectRejected(MalformedCase(nested(#"{"a":"#, depth, "1", "}"), at: (depth - 1) * 5 + 1, reason))
        let mixed = String(repeating: #"[{"a":"#, count: depth / 2) + "[" + String(repeating: "}]", count: depth / 2)
        // The 1024th container is the last '{'; its key, two bytes on, is at level 1025.
        Self.expectRejected(MalformedCase(mixed, at: (depth / 2 - 1) * 6 + 2, reason))
        #expect(Self.locate(Array(nested("[", depth - 1, "[]", "]").utf8)) == nil)
    }
}
