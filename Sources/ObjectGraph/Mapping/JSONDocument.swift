internal import CPrefetch
internal import CSimdJSON
import Foundation
internal import GraphJournal

/// A simdjson parser and document kept between parses: parsing into it again reuses buffers
/// that are already allocated, and the document's tape and strings stay paged in. A large
/// document's buffers are several times its size, and their page faults are much of its parse
/// time. The working buffers (the structural indexes, and the padded copy of the input when
/// it is not read in place; together about 1.3 times the input) give their pages back after
/// each parse, since nothing reads them until the next one: for the real job's 34 MiB
/// document, a second parse into a kept parser took 0.039–0.048 s against 0.014–0.023 s when
/// they stayed paged in and 0.07–0.11 s for a first parse, and the first sync's peak resident
/// memory fell from 237–243 MiB to 181–183 MiB (3 alternating runs each, load average 3.6;
/// measured before large documents were read in place). Buffers under 1 MiB keep their pages.
final class JSONParser {
    let handle: OpaquePointer
    /// Whether a document is reading this parser's buffers now.
    var inUse = false

    /// A parser, or `nil` when memory for it cannot be allocated.
    init?() {
        guard let handle = og_json_new() else { return nil }
        self.handle = handle
    }

    deinit { og_json_free(handle) }
}

/// The kind of a JSON value.
enum JSONKind: Sendable {
    case null, bool, number, string, array, object
}

/// A JSON number as simdjson parsed it: an integer that fits `Int64` is `.int`, a larger
/// non-negative integer (up to `UInt64.max`) is `.uint`, and a number with a fraction or an
/// exponent is `.double`. Integers beyond 64 bits and doubles beyond `Double`'s range are
/// malformed documents.
enum JSONNumber: Sendable {
    case int(Int64)
    case uint(UInt64)
    case double(Double)
}

/// A parsed JSON document, read in place from simdjson's tape (see og_simdjson.h): a node is
/// the tape index of a value, `root` the top-level value. Nothing is copied out of the tape
/// until asked for: string bytes are views into the document's string buffer, and walking
/// arrays and objects allocates nothing.
///
/// Node arguments must be value nodes of this document (from `root`, `forEachElement`,
/// `forEachField` or `field`), and the accessor must match the node's `kind`.
final class JSONDocument {
    /// Who owns the tape and the string buffer.
    private enum Storage {
        /// A document from simdjson, freed with og_json_free.
        case simdjson(OpaquePointer)
        /// A reusable parser's document, handed back to it when this document goes.
        case reused(JSONParser)
        /// Copies of a hand-made tape and string buffer.
        case owned(UnsafeMutableBufferPointer<UInt64>, UnsafeMutableBufferPointer<UInt8>)
    }

    /// The owner of `tape` and `strings`, released when the document is.
    private let storage: Storage
    /// The tape: 64-bit words, a tag in the top byte.
    private let tape: UnsafePointer<UInt64>
    /// The string buffer the tape's string words point into.
    private let strings: UnsafePointer<UInt8>

    /// Parses `bytes`. Malformed JSON throws ``MappingError/Code/malformedJSON`` whose
    /// `byteOffset` is the offset of the first byte that cannot be read (the length of the
    /// input when it ends too early). A document simdjson cannot hold (4 GiB or more) or allocate
    /// throws the same code without an offset.
    convenience init(parsing bytes: UnsafeRawBufferPointer) throws(MappingError) {
        self.init(storage: .simdjson(try Self.parse(bytes)))
    }

    /// Parses the bytes of `data` into `parser`'s buffers, as `init(parsing:)` does for a new
    /// document; the parser is busy until this document is released.
    convenience init(parsing data: Data, reusing parser: JSONParser) throws(MappingError) {
        parser.inUse = true
        let code = data.withUnsafeBytes {
            og_json_parse_into(parser.handle, $0.baseAddress, $0.count, Self.hugePageSize)
        }
        guard code == Int32(OG_JSON_SUCCESS) else {
            parser.inUse = false
            throw data.withUnsafeBytes { Self.malformedJSONError(in: $0, simdjsonCode: code) }
        }
        self.init(storage: .reused(parser))
    }

    /// Parses `bytes` into `parser`'s buffers, as ``init(parsing:reusing:)-(Data,_)`` does.
    convenience init(parsing bytes: UnsafeRawBufferPointer, reusing parser: JSONParser) throws(MappingError) {
        parser.inUse = true
        let code = og_json_parse_into(parser.handle, bytes.baseAddress, bytes.count, Self.hugePageSize)
        guard code == Int32(OG_JSON_SUCCESS) else {
            parser.inUse = false
            throw Self.malformedJSONError(in: bytes, simdjsonCode: code)
        }
        self.init(storage: .reused(parser))
    }

    /// Parses the bytes of `data`, as `init(parsing:)` does for a buffer.
    convenience init(parsing data: Data) throws(MappingError) {
        let parsed = data.withUnsafeBytes { bytes in
            Result { () throws(MappingError) in try Self.parse(bytes) }
        }
        self.init(storage: .simdjson(try parsed.get()))
    }

    /// A document over a copy of a hand-made `tape` and `stringBuffer`, which must follow
    /// simdjson's tape format exactly (nothing is checked). For tests of tape shapes too large
    /// to parse, such as counts past the tape's 24-bit limit.
    convenience init(tape: [UInt64], stringBuffer: [UInt8]) {
        let tapeCopy = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: max(tape.count, 1))
        _ = tapeCopy.initialize(from: tape)
        let stringCopy = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(stringBuffer.count, 1))
        _ = stringCopy.initialize(from: stringBuffer)
        self.init(storage: .owned(tapeCopy, stringCopy))
    }

    /// A document over the tape and strings of `storage`.
    private init(storage: Storage) {
        self.storage = storage
        switch storage {
        case .simdjson(let handle):
            tape = og_json_tape(handle)
            strings = og_json_string_buffer(handle)
        case .reused(let parser):
            tape = og_json_tape(parser.handle)
            strings = og_json_string_buffer(parser.handle)
        case .owned(let tapeCopy, let stringCopy):
            tape = UnsafePointer(tapeCopy.baseAddress!)
            strings = UnsafePointer(stringCopy.baseAddress!)
        }
    }

    deinit {
        switch storage {
        case .simdjson(let handle):
            og_json_free(handle)
        case .reused(let parser):
            parser.inUse = false
        case .owned(let tapeCopy, let stringCopy):
            tapeCopy.deallocate()
            stringCopy.deallocate()
        }
    }

    /// The transparent huge page size a large document's parse buffers are marked for (0: none):
    /// the journal's choice (`HugePages`), so that `OBJECTGRAPH_HUGE_PAGES=off` turns both off.
    static let hugePageSize = HugePages.size ?? 0

    /// Runs simdjson over `bytes`; on failure, locates the first bad byte for the error.
    private static func parse(_ bytes: UnsafeRawBufferPointer) throws(MappingError) -> OpaquePointer {
        var code: Int32 = 0
        if let handle = og_json_parse(bytes.baseAddress, bytes.count, Self.hugePageSize, &code) {
            return handle
        }
        throw malformedJSONError(in: bytes, simdjsonCode: code)
    }

    /// The error for a document simdjson rejected with `code`.
    private static func malformedJSONError(in bytes: UnsafeRawBufferPointer, simdjsonCode code: Int32) -> MappingError {
        let simdjsonMessage = String(cString: og_json_error_message(code))
        if Int(code) == OG_JSON_CAPACITY || Int(code) == OG_JSON_MEMALLOC {
            // The document may well be JSON; it is too large to parse here. No byte is at fault.
            return MappingError(
                .malformedJSON, "JSON document of \(bytes.count) bytes cannot be parsed: \(simdjsonMessage)")
        }
        let maxDepth = Int(og_json_max_depth())
        if let error = JSONSyntaxLocator.firstError(in: bytes, maxDepth: maxDepth) {
            return MappingError(
                .malformedJSON,
                "malformed JSON at byte \(error.offset): \(error.reason) (simdjson: \(simdjsonMessage))",
                byteOffset: error.offset
            )
        }
        // The locator accepts what simdjson rejects, so they disagree on some rule. simdjson's
        // word is final; with no position known, the offset is 0, the start of the document.
        return MappingError(.malformedJSON, "malformed JSON (simdjson: \(simdjsonMessage))", byteOffset: 0)
    }

    // MARK: Tape words

    /// The tag of tape word `index` (its top byte, an ASCII character).
    @inline(__always)
    private func tag(_ index: Int) -> UInt8 {
        UInt8(truncatingIfNeeded: tape[index] &>> 56)
    }

    /// The low 56 bits of tape word `index`.
    @inline(__always)
    private func payload(_ index: Int) -> UInt64 {
        tape[index] & 0x00FF_FFFF_FFFF_FFFF
    }

    /// The index of the `]` or `}` that closes the array or object at `node`.
    @inline(__always)
    private func closingIndex(_ node: Int) -> Int {
        Int(truncatingIfNeeded: tape[node] & 0xFFFF_FFFF) - 1
    }

    /// The bytes of the string whose tape word is `index` (a value or a key).
    @inline(__always)
    private func stringAt(_ index: Int) -> UnsafeRawBufferPointer {
        let start = UnsafeRawPointer(strings + Int(truncatingIfNeeded: payload(index)))
        let length = Int(start.loadUnaligned(as: UInt32.self).littleEndian)
        return UnsafeRawBufferPointer(start: start + 4, count: length)
    }

    /// Whether the key whose tape word is `index` has exactly the bytes of `key`.
    @inline(__always)
    private func keyEquals(_ index: Int, _ key: UnsafeRawBufferPointer) -> Bool {
        let start = UnsafeRawPointer(strings + Int(truncatingIfNeeded: payload(index)))
        let length = Int(start.loadUnaligned(as: UInt32.self).littleEndian)
        guard length == key.count else { return false }
        return length == 0 || memcmp(start + 4, key.baseAddress!, length) == 0
    }

    // MARK: Values

    /// The top-level value.
    var root: Int { 1 }

    /// What kind of value `node` is.
    @inline(__always)
    func kind(_ node: Int) -> JSONKind {
        switch tag(node) {
        case UInt8(ascii: "\""): return .string
        case UInt8(ascii: "l"), UInt8(ascii: "u"), UInt8(ascii: "d"): return .number
        case UInt8(ascii: "{"): return .object
        case UInt8(ascii: "["): return .array
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return .bool
        default:
            assert(tag(node) == UInt8(ascii: "n"), "tape index \(node) is not a value")
            return .null
        }
    }

    /// The value of the boolean `node`.
    @inline(__always)
    func bool(_ node: Int) -> Bool {
        tag(node) == UInt8(ascii: "t")
    }

    /// The value of the number `node`.
    @inline(__always)
    func number(_ node: Int) -> JSONNumber {
        let bits = tape[node + 1]
        switch tag(node) {
        case UInt8(ascii: "l"): return .int(Int64(bitPattern: bits))
        case UInt8(ascii: "u"): return .uint(bits)
        default:
            assert(tag(node) == UInt8(ascii: "d"), "tape index \(node) is not a number")
            return .double(Double(bitPattern: bits))
        }
    }

    /// The UTF-8 bytes of the string `node`, escapes decoded; valid while the document lives
    /// (no copy).
    @inline(__always)
    func stringBytes(_ node: Int) -> UnsafeRawBufferPointer {
        stringAt(node)
    }

    /// The string `node` as a `String`.
    func string(_ node: Int) -> String {
        String(decoding: stringAt(node), as: UTF8.self)
    }

    /// The number of elements of the array `node`, or of fields of the object `node`. Exact
    /// even past the 2^24 − 1 the tape can hold, by walking the container then.
    func count(_ node: Int) -> Int {
        let stored = Int(truncatingIfNeeded: (payload(node) &>> 32) & 0xFF_FFFF)
        guard stored == 0xFF_FFFF else { return stored }
        let end = closingIndex(node)
        let isObject = tag(node) == UInt8(ascii: "{")
        var index = node + 1
        var count = 0
        while index < end {
            index = next(after: isObject ? index + 1 : index)
            count += 1
        }
        return count
    }

    /// The tape index just past `node`'s value: past a whole array or object, past the payload
    /// word of a number.
    @inline(__always)
    func next(after node: Int) -> Int {
        switch tag(node) {
        case UInt8(ascii: "["), UInt8(ascii: "{"): return Int(truncatingIfNeeded: tape[node] & 0xFFFF_FFFF)
        case UInt8(ascii: "l"), UInt8(ascii: "u"), UInt8(ascii: "d"): return node + 2
        default: return node + 1
        }
    }

    /// Calls `body` with each element of the array `node`, in order.
    @inline(__always)
    func forEachElement(_ array: Int, _ body: (Int) throws -> Void) rethrows {
        let end = closingIndex(array)
        var index = array + 1
        while index < end {
            try body(index)
            index = next(after: index)
        }
    }

    /// Calls `body` with each field of the object `node`, in document order, duplicates
    /// included: the key's raw UTF-8 bytes (escapes decoded, valid while the document lives) and
    /// the value's node.
    @inline(__always)
    func forEachField(_ object: Int, _ body: (UnsafeRawBufferPointer, Int) throws -> Void) rethrows {
        let end = closingIndex(object)
        var index = object + 1
        while index < end {
            try body(stringAt(index), index + 1)
            index = next(after: index + 1)
        }
    }

    /// The value of the field named `key` (UTF-8 bytes) in the object `object`, or nil.
    ///
    /// An object with the key more than once yields its last occurrence, as `JSONSerialization`
    /// does. `hint` is the position (0 for the first field) where the previous lookup of the same
    /// key found it; start it at 0. That field is compared first, and when it matches, only the
    /// fields after it are searched for a later duplicate (a key of another length is rejected
    /// without comparing bytes), so records with their fields in the same order cost one key
    /// comparison per lookup. Otherwise every field is compared, and `hint` is set to where the
    /// key was found.
    func field(_ object: Int, named key: UnsafeRawBufferPointer, hint: inout Int) -> Int? {
        let end = closingIndex(object)
        // Start at the hinted field when it has the key (the fields before it cannot be the
        // last occurrence then), else at the first field.
        var index = object + 1
        var position = 0
        if hint >= 0 {
            while index < end && position < hint {
                index = next(after: index + 1)
                position += 1
            }
            if index >= end || !keyEquals(index, key) {
                index = object + 1
                position = 0
            }
        }
        var found: Int?
        while index < end {
            if keyEquals(index, key) {
                found = index + 1
                hint = position
            }
            index = next(after: index + 1)
            position += 1
        }
        return found
    }

    /// Prefetches the tape and the string bytes a few hundred bytes past those of the object
    /// `object`: the next records' lines, for a walk over a large document, whose tape and
    /// strings (written by the parse) are out of the caches again. A hardware prefetcher stops
    /// at each 4 KB page.
    @inline(__always)
    func prefetchPast(_ object: Int) {
        let t = UnsafeRawPointer(tape + object)
        cprefetch_read(t + 512)
        cprefetch_read(t + 576)
        cprefetch_read(t + 640)
        guard object + 1 < closingIndex(object) else { return }
        let s = UnsafeRawPointer(strings + Int(truncatingIfNeeded: payload(object + 1)))
        cprefetch_read(s + 256)
        cprefetch_read(s + 320)
    }

    /// The value of the field at `position` (0 for the first) of the object `object` when that
    /// field is named `key`, else nil: a guess for prefetching, without the search for a later
    /// duplicate that ``field(_:named:hint:)`` makes.
    @inline(__always)
    func field(_ object: Int, named key: UnsafeRawBufferPointer, atPosition position: Int) -> Int? {
        let end = closingIndex(object)
        var index = object + 1
        var p = 0
        while index < end && p < position {
            index = next(after: index + 1)
            p += 1
        }
        guard index < end else { return nil }
        // Compared here byte by byte: keys are short, and a call of memcmp per source cost
        // more than the comparison.
        let start = UnsafeRawPointer(strings + Int(truncatingIfNeeded: payload(index)))
        let length = Int(start.loadUnaligned(as: UInt32.self).littleEndian)
        guard length == key.count else { return nil }
        for k in 0..<length where start.load(fromByteOffset: 4 + k, as: UInt8.self) != key[k] { return nil }
        return index + 1
    }

    /// The value of the field named `key` in the object `object`, or nil (the last occurrence
    /// when the key is there more than once).
    func field(_ object: Int, named key: String) -> Int? {
        var hint = -1
        var key = key
        return key.withUTF8 { field(object, named: UnsafeRawBufferPointer($0), hint: &hint) }
    }

    // MARK: JSON text

    /// The longest `jsonText`, in characters, before it is cut and ends with "…".
    static let jsonTextLimit = 200

    /// `node`'s value as compact JSON text (strings escaped), for error messages; values longer
    /// than ``jsonTextLimit`` characters are cut there and end with "…".
    func jsonText(_ node: Int) -> String {
        var writer = TextWriter(byteBudget: Self.jsonTextLimit * 4 + 4)
        write(node, to: &writer)
        let text = String(decoding: writer.bytes, as: UTF8.self)
        guard writer.isTruncated || text.count > Self.jsonTextLimit else { return text }
        return String(text.prefix(Self.jsonTextLimit)) + "…"
    }

    /// `node`'s value as compact JSON with its objects' keys sorted (by their UTF-8 bytes), the
    /// form `Codable` attributes store: what a JSON value mapped to such an attribute becomes.
    func jsonData(_ node: Int) -> Data {
        var writer = TextWriter(byteBudget: Int.max)
        write(node, to: &writer, sortingKeys: true)
        return Data(writer.bytes)
    }

    /// UTF-8 output that stops growing once it passes its budget (at a character boundary).
    private struct TextWriter {
        /// The text so far.
        var bytes: [UInt8] = []
        /// The length past which nothing more is appended.
        let byteBudget: Int
        /// Whether something was left out for want of budget.
        var isTruncated = false

        /// An empty text that grows to about `byteBudget` bytes.
        init(byteBudget: Int) {
            self.byteBudget = byteBudget
            if byteBudget < 1 << 16 { bytes.reserveCapacity(byteBudget + 8) }
        }

        /// Whether the budget is spent; marks the text truncated if so.
        mutating func isFull() -> Bool {
            if bytes.count >= byteBudget { isTruncated = true }
            return isTruncated
        }

        /// Appends `text` unless the budget is spent.
        mutating func append(_ text: String) {
            if !isFull() { bytes.append(contentsOf: text.utf8) }
        }

        /// Appends `byte` unless the budget is spent.
        mutating func append(_ byte: UInt8) {
            if !isFull() { bytes.append(byte) }
        }

        /// Appends `string` quoted and escaped as JSON.
        mutating func appendQuoted(_ string: UnsafeRawBufferPointer) {
            append(UInt8(ascii: "\""))
            for byte in string {
                // Stop only before a byte that starts a character, so the text stays UTF-8.
                if byte & 0xC0 != 0x80 && isFull() { return }
                switch byte {
                case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
                case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
                case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
                case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
                case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
                case 0x08: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
                case 0x0C: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
                case 0x00..<0x20:
                    let hex = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
                default: bytes.append(byte)
                }
            }
            append(UInt8(ascii: "\""))
        }
    }

    /// Writes `node` as compact JSON, stopping once `writer` is full; with `sortingKeys`, each
    /// object's fields in the order of their keys' bytes.
    private func write(_ node: Int, to writer: inout TextWriter, sortingKeys: Bool = false) {
        guard !writer.isFull() else { return }
        switch kind(node) {
        case .null:
            writer.append("null")
        case .bool:
            writer.append(bool(node) ? "true" : "false")
        case .number:
            switch number(node) {
            case .int(let value): writer.append(String(value))
            case .uint(let value): writer.append(String(value))
            case .double(let value): writer.append(value.description)
            }
        case .string:
            writer.appendQuoted(stringAt(node))
        case .array:
            writer.append(UInt8(ascii: "["))
            let end = closingIndex(node)
            var index = node + 1
            while index < end && !writer.isFull() {
                if index != node + 1 { writer.append(UInt8(ascii: ",")) }
                write(index, to: &writer, sortingKeys: sortingKeys)
                index = next(after: index)
            }
            writer.append(UInt8(ascii: "]"))
        case .object:
            writer.append(UInt8(ascii: "{"))
            let end = closingIndex(node)
            var keys: [Int] = []
            var index = node + 1
            while index < end {
                keys.append(index)
                index = next(after: index + 1)
            }
            if sortingKeys {
                keys.sort { a, b in stringAt(a).lexicographicallyPrecedes(stringAt(b)) }
            }
            for (i, key) in keys.enumerated() {
                if writer.isFull() { break }
                if i > 0 { writer.append(UInt8(ascii: ",")) }
                writer.appendQuoted(stringAt(key))
                writer.append(UInt8(ascii: ":"))
                write(key + 1, to: &writer, sortingKeys: sortingKeys)
            }
            writer.append(UInt8(ascii: "}"))
        }
    }
}
