import Foundation

/// The binary encoding of the native list attribute types, ``AttributeType/stringList`` and
/// ``AttributeType/intList``: the bytes a list cell holds in the entity's byte arena, and, after
/// their length, in a transaction payload (`Docs/JournalFormat.md`, "List cells").
///
/// ```
/// stringList := varint count  (varint byteCount  UTF-8 × byteCount) × count
/// intList    := varint count  (8 bytes, Int64 little-endian) × count
/// varint     := unsigned LEB128, minimal (no trailing 0x80 … 0x00 continuation)
/// ```
///
/// Integers are fixed-width rather than varints: a list decodes with one bounds check (the
/// cell must be exactly its header plus 8 bytes per element) and a copy, with no branch per
/// element, and the check that a cell is well formed is that one comparison; the journal's LZ4
/// compression takes back most of the high zero bytes of small numbers.
///
/// The encoding is canonical (minimal varints, nothing after the last element), so equal lists
/// encode to equal bytes: change tracking compares a cell's bytes. ``validate(_:_:)`` refuses
/// anything else, and bounds the element count by the cell's length before anything is
/// allocated (each string takes at least its one-byte length, each integer 8 bytes).
package enum ListCoding {
    /// Why a list cell's bytes do not decode (``validate(_:_:)``).
    package struct Malformed: Error, CustomStringConvertible, Equatable {
        /// The offset within the cell where the problem is.
        package let offset: Int
        /// What is wrong.
        package let reason: String

        package var description: String { "at byte \(offset) of the list: \(reason)" }
    }

    // MARK: Encoding

    /// The encoding of `strings`.
    package static func encode(strings: some Collection<String>) -> [UInt8] {
        var size = ByteWriter.varintSize(UInt64(strings.count))
        for s in strings { size += ByteWriter.varintSize(UInt64(s.utf8.count)) + s.utf8.count }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size)
        appendVarint(UInt64(strings.count), to: &bytes)
        for var s in strings {
            s.makeContiguousUTF8()
            appendVarint(UInt64(s.utf8.count), to: &bytes)
            bytes.append(contentsOf: s.utf8)
        }
        return bytes
    }

    /// The encoding of `integers`.
    package static func encode<I: FixedWidthInteger>(integers: some Collection<I>) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(ByteWriter.varintSize(UInt64(integers.count)) + 8 * integers.count)
        appendVarint(UInt64(integers.count), to: &bytes)
        for i in integers {
            withUnsafeBytes(of: Int64(truncatingIfNeeded: i).littleEndian) { bytes.append(contentsOf: $0) }
        }
        return bytes
    }

    /// The encoding of a list value (``AttributeValue/stringList(_:)`` or
    /// ``AttributeValue/intList(_:)``); nil for any other case.
    package static func encode(_ value: AttributeValue) -> [UInt8]? {
        switch value {
        case .stringList(let list): encode(strings: list)
        case .intList(let list): encode(integers: list)
        default: nil
        }
    }

    private static func appendVarint(_ value: UInt64, to bytes: inout [UInt8]) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    // MARK: Decoding

    /// Reads a minimal varint at `offset`, advancing it; nil (and `offset` unchanged) when the
    /// bytes end first, it overflows 64 bits, or it is not minimal.
    private static func varint(_ bytes: UnsafeRawBufferPointer, _ offset: inout Int) -> (UInt64, String?) {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        var i = offset
        while i < bytes.count {
            let b = bytes[i]
            i += 1
            if shift == 63 && b > 1 { return (0, "varint overflows 64 bits") }
            value |= UInt64(b & 0x7f) << shift
            if b & 0x80 == 0 {
                if b == 0 && i - offset > 1 { return (0, "varint is not minimal") }
                offset = i
                return (value, nil)
            }
            shift += 7
        }
        return (0, "truncated varint")
    }

    /// Checks that `bytes` are a well-formed cell of `type` (a list type); nil when they are,
    /// else the problem. Never allocates in proportion to a claimed count.
    package static func validate(_ bytes: UnsafeRawBufferPointer, _ type: AttributeType) -> Malformed? {
        var offset = 0
        let (count, problem) = varint(bytes, &offset)
        if let problem { return Malformed(offset: 0, reason: problem) }
        let left = bytes.count - offset
        switch type {
        case .intList:
            guard count <= UInt64(left / 8), Int(count) * 8 == left else {
                return Malformed(
                    offset: 0,
                    reason:
                        "\(count) integers need \(count.multipliedReportingOverflow(by: 8).partialValue) bytes; the cell has \(left) after its count"
                )
            }
            return nil
        case .stringList:
            // Each string takes at least its one-byte length.
            guard count <= UInt64(left) else {
                return Malformed(offset: 0, reason: "\(count) strings cannot fit in the \(left) bytes after the count")
            }
            for index in 0..<Int(count) {
                let start = offset
                let (length, problem) = varint(bytes, &offset)
                if let problem { return Malformed(offset: start, reason: "string \(index): \(problem)") }
                guard length <= UInt64(bytes.count - offset) else {
                    return Malformed(
                        offset: start, reason: "string \(index) of \(length) bytes runs past the end of the list")
                }
                let end = offset + Int(length)
                let element = UnsafeRawBufferPointer(rebasing: bytes[offset..<end])
                guard isASCII(element) || String(validating: element, as: UTF8.self) != nil else {
                    return Malformed(offset: offset, reason: "string \(index) is not valid UTF-8")
                }
                offset = end
            }
            guard offset == bytes.count else {
                return Malformed(offset: offset, reason: "\(bytes.count - offset) bytes after the last string")
            }
            return nil
        default:
            return Malformed(offset: 0, reason: "\(type.rawValue) is not a list type")
        }
    }

    /// Whether every byte of `bytes` is ASCII (and so the bytes are valid UTF-8), eight at a
    /// time. Names, tags and identifiers usually are: an open validates every string of every
    /// list it replays, and `String(validating:as:)` made each one a `String`.
    static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        var high: UInt64 = 0
        while i + 8 <= bytes.count {
            high |= bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            i += 8
        }
        while i < bytes.count {
            high |= UInt64(bytes[i])
            i += 1
        }
        return high & 0x8080_8080_8080_8080 == 0
    }

    /// The strings of a well-formed ``AttributeType/stringList`` cell. A cell that is not
    /// well formed (never stored: every way in validates) reads as the strings decoded up to
    /// the problem, invalid UTF-8 repaired; it never traps.
    package static func strings(_ bytes: UnsafeRawBufferPointer) -> [String] {
        var offset = 0
        let (count, problem) = varint(bytes, &offset)
        guard problem == nil else { return [] }
        var list: [String] = []
        list.reserveCapacity(Int(min(count, UInt64(bytes.count - offset))))
        for _ in 0..<min(count, UInt64(bytes.count - offset)) {
            let (length, problem) = varint(bytes, &offset)
            guard problem == nil, length <= UInt64(bytes.count - offset) else { break }
            let end = offset + Int(length)
            list.append(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[offset..<end]), as: UTF8.self))
            offset = end
        }
        return list
    }

    /// Calls `body` with the UTF-8 bytes of each string of a ``AttributeType/stringList``
    /// cell, in order, without building the strings; stops where the cell is malformed.
    package static func forEachString(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) {
        var offset = 0
        let (count, problem) = varint(bytes, &offset)
        guard problem == nil else { return }
        for _ in 0..<min(count, UInt64(bytes.count - offset)) {
            let (length, problem) = varint(bytes, &offset)
            guard problem == nil, length <= UInt64(bytes.count - offset) else { return }
            let end = offset + Int(length)
            body(UnsafeRawBufferPointer(rebasing: bytes[offset..<end]))
            offset = end
        }
    }

    /// The integers of a well-formed ``AttributeType/intList`` cell; as many whole integers as
    /// the cell holds when it is not well formed.
    package static func integers<I: FixedWidthInteger>(
        _ bytes: UnsafeRawBufferPointer, as _: I.Type = Int64.self
    ) -> [I] {
        var offset = 0
        let (count, problem) = varint(bytes, &offset)
        guard problem == nil else { return [] }
        let n = Int(min(count, UInt64((bytes.count - offset) / 8)))
        return [I](unsafeUninitializedCapacity: n) { buffer, initialized in
            for k in 0..<n {
                let v = Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 8 * k, as: Int64.self))
                buffer.initializeElement(at: k, to: I(truncatingIfNeeded: v))
            }
            initialized = n
        }
    }

    /// A list cell as JSON text (an array of strings or of integers), for tools and messages;
    /// nil when the cell is not well formed.
    package static func json(_ bytes: UnsafeRawBufferPointer, _ type: AttributeType) -> String? {
        guard validate(bytes, type) == nil else { return nil }
        switch type {
        case .intList:
            return "[" + integers(bytes).map { "\($0)" }.joined(separator: ",") + "]"
        default:
            return "[" + strings(bytes).map(jsonString).joined(separator: ",") + "]"
        }
    }

    /// `s` as a JSON string literal.
    package static func jsonString(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

// MARK: JSON lists written before lists were native

extension ListCoding {
    /// The native list type a stored attribute's values are converted to when the model now
    /// declares it as `[String]` or `[Int]`: the JSON of a `Codable` value (type `data`), as
    /// such lists were stored before they were native. Nil for every other pair (no conversion).
    ///
    /// Every applier of stored records asks this one question (open's replay through
    /// ``SchemaMapping/listConversions``, an applied shipped record in ``JSONLists``), so they
    /// convert the same attributes.
    static func conversion(from stored: AttributeDescription, to current: AttributeDescription) -> AttributeType? {
        stored.type == .data && stored.valueKind == .codable && current.type.isList ? current.type : nil
    }

    /// The native cell of a list stored as the JSON of a `Codable` value: what the attribute
    /// holds once its type is `list` (``AttributeType/stringList`` or ``AttributeType/intList``).
    ///
    /// - Throws: what `JSONDecoder` throws when the JSON is not a list of that element type
    ///   (``RecordRules/listNotConvertible(_:attribute:serial:json:to:_:)`` words it).
    static func cell(convertingJSON json: UnsafeRawBufferPointer, to list: AttributeType) throws -> [UInt8] {
        let data = Data(json)
        return list == .stringList
            ? encode(strings: try CodableAttributeCoder.decode([String].self, from: data))
            : encode(integers: try CodableAttributeCoder.decode([Int].self, from: data))
    }
}

/// The element type of a natively stored list attribute: `String` (``AttributeType/stringList``)
/// and `Int` (``AttributeType/intList``). `[String]`, `[Int]` and their optionals are stored in
/// a compact binary encoding (`Docs/JournalFormat.md`, "List cells"), not as JSON.
///
/// The library provides every conformance; conforming other types is not supported.
public protocol ListAttributeElement: Codable, Sendable, Equatable {
    /// The storage type of a list of this element type.
    static var listAttributeType: AttributeType { get }
    /// Decodes a list from its stored cell.
    static func _decodeList(_ bytes: UnsafeRawBufferPointer) -> [Self]
    /// The stored cell of `list`.
    static func _encodeList(_ list: [Self]) -> [UInt8]
    /// The list held by a dynamic attribute value of the matching case.
    static func _list(_ value: AttributeValue) -> [Self]?
    /// `list` as a dynamic attribute value.
    static func _attributeValue(_ list: [Self]) -> AttributeValue
}

extension String: ListAttributeElement {
    public static var listAttributeType: AttributeType { .stringList }
    public static func _decodeList(_ bytes: UnsafeRawBufferPointer) -> [String] { ListCoding.strings(bytes) }
    public static func _encodeList(_ list: [String]) -> [UInt8] { ListCoding.encode(strings: list) }
    public static func _list(_ value: AttributeValue) -> [String]? {
        guard case .stringList(let list) = value else { return nil }
        return list
    }
    public static func _attributeValue(_ list: [String]) -> AttributeValue { .stringList(list) }
}

extension Int: ListAttributeElement {
    public static var listAttributeType: AttributeType { .intList }
    public static func _decodeList(_ bytes: UnsafeRawBufferPointer) -> [Int] {
        ListCoding.integers(bytes, as: Int.self)
    }
    public static func _encodeList(_ list: [Int]) -> [UInt8] { ListCoding.encode(integers: list) }
    public static func _list(_ value: AttributeValue) -> [Int]? {
        guard case .intList(let list) = value else { return nil }
        return list.map { Int(truncatingIfNeeded: $0) }
    }
    public static func _attributeValue(_ list: [Int]) -> AttributeValue { .intList(list.map { Int64($0) }) }
}

/// `[String]` and `[Int]` are stored natively (``AttributeType/stringList``,
/// ``AttributeType/intList``).
extension Array: PrimitiveAttribute where Element: ListAttributeElement {
    public static var attributeType: AttributeType { Element.listAttributeType }
    public static var _zero: [Element] { [] }
    public static func _decode(_ cell: RawCell) -> [Element] {
        guard case .bytes(let buffer) = cell else { return [] }
        return Element._decodeList(buffer)
    }
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R {
        try Element._encodeList(self).withUnsafeBytes { try body(.bytes($0)) }
    }
    public init?(_ attributeValue: AttributeValue) {
        guard let v = AttributeValue.coerce(attributeValue: attributeValue, to: Element.listAttributeType),
            let list = Element._list(v)
        else { return nil }
        self = list
    }
    public var attributeValue: AttributeValue { Element._attributeValue(self) }
}
