public import Foundation

/// A stored attribute cell as the core holds it: a fixed 64-bit pattern, or bytes in the
/// entity's arena. Only valid for the duration of the call that hands it out.
public enum RawCell {
    /// Integers, booleans, floating point and dates, as a 64-bit pattern.
    case fixed(UInt64)
    /// Strings (UTF-8), data, UUIDs (16 bytes) and URLs (UTF-8 of `absoluteString`).
    case bytes(UnsafeRawBufferPointer)
}

/// A Swift type the store holds natively: `Bool`, the fixed-width integers, `Int`, `UInt`,
/// `Double`, `Float`, `String`, `Data`, `Date`, `UUID` and `URL`.
///
/// The library provides every conformance; conforming other types is not supported. Enums with
/// a primitive raw value and other `Codable` types are stored through their raw value or their
/// JSON encoding instead.
public protocol PrimitiveAttribute: Codable, Sendable, Equatable {
    /// The storage type this Swift type maps to.
    static var attributeType: AttributeType { get }
    /// The value an unset, non-optional attribute reads as before validation catches it.
    static var _zero: Self { get }
    /// Decodes a value from its stored cell.
    static func _decode(_ cell: RawCell) -> Self
    /// Calls `body` with the value's stored cell.
    func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R
    /// Creates a value from a dynamic attribute value of the matching case.
    init?(_ attributeValue: AttributeValue)
    /// The value as a dynamic attribute value.
    var attributeValue: AttributeValue { get }
}

extension PrimitiveAttribute where Self: FixedWidthInteger & SignedInteger {
    public static var _zero: Self { 0 }
    public static func _decode(_ cell: RawCell) -> Self {
        guard case .fixed(let bits) = cell else { return 0 }
        return Self(truncatingIfNeeded: Int64(bitPattern: bits))
    }
    // Inlinable: a call from another module (an import's ID) is otherwise unspecialized and
    // dispatches each integer conversion through witness tables (~100 instructions, callgrind).
    @inlinable
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R {
        try body(.fixed(UInt64(bitPattern: Int64(self))))
    }
    public init?(_ attributeValue: AttributeValue) {
        guard let v = AttributeValue.coerce(attributeValue: attributeValue, to: Self.attributeType),
            case .int(let i) = v, let x = Self(exactly: i)
        else { return nil }
        self = x
    }
    public var attributeValue: AttributeValue { .int(Int64(self)) }
}

extension PrimitiveAttribute where Self: FixedWidthInteger & UnsignedInteger {
    public static var _zero: Self { 0 }
    public static func _decode(_ cell: RawCell) -> Self {
        guard case .fixed(let bits) = cell else { return 0 }
        return Self(truncatingIfNeeded: bits)
    }
    @inlinable
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R {
        try body(.fixed(UInt64(self)))
    }
    public init?(_ attributeValue: AttributeValue) {
        guard let v = AttributeValue.coerce(attributeValue: attributeValue, to: Self.attributeType),
            case .uint(let u) = v, let x = Self(exactly: u)
        else { return nil }
        self = x
    }
    public var attributeValue: AttributeValue { .uint(UInt64(self)) }
}

// Each integer type implements `_withCell` and `_decode` itself, although the generic
// defaults above compute the same: a protocol witness for a default defined in a generic
// extension calls the unspecialized generic code, whose integer conversions dispatch through
// witness tables (about 120 instructions per call instead of a handful; callgrind, a 1M import
// calls them several times per object).
extension Int: PrimitiveAttribute {
    public static var attributeType: AttributeType { .int64 }
    @inlinable
    public static func _decode(_ cell: RawCell) -> Int {
        guard case .fixed(let bits) = cell else { return 0 }
        return Int(truncatingIfNeeded: Int64(bitPattern: bits))
    }
    @inlinable
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R {
        try body(.fixed(UInt64(bitPattern: Int64(self))))
    }
}
extension Int8: PrimitiveAttribute {
    public static var attributeType: AttributeType { .int8 }
    @inlinable
    public static func _decode(_ cell: RawCell) -> Int8 {
        guard case .fixed(let bits) = cell else { return 0 }
        return Int8(truncatingIfNeeded: Int64(bitPattern: bits))
    }
    @inlinable
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R {
        try body(.fixed(UInt64(bitPattern: Int64(self))))
    }
}
extension Int16: PrimitiveAttribute {
    public static var attributeType: AttributeType { .int16 }
    @inlinable
    public static func _decode(_ cell: RawCell) -> Int16 {
        guard case .fixed(let bits) = cell else { return 0 }
        return Int16(truncatingIfNeeded: Int64(bitPattern: bits))
    }
    @inlinable
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R {
        try body(.fixed(UInt64(bitPattern: Int64(self))))
    }
}
extension Int32: PrimitiveAttribute {
    public static var attributeType: AttributeType { .int32 }
    @inlinable
    public static func _decode(_ cell: RawCell) -> Int32 {
        guard case .fixed(let bits) = cell else { return 0 }
        return Int32(truncatingIfNeeded: Int64(bitPattern: bits))
    }
    @inlinable
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R {
        try body(.fixed(UInt64(bitPattern: Int64(self))))
    }
}
extension Int64: PrimitiveAttribute {
    public static var attributeType: AttributeType { .int64 }
    @inlinable
    public static func _decode(_ cell: RawCell) -> Int64 {
        guard case .fixed(let bits) = cell else { return 0 }
        return Int64(truncatingIfNeeded: Int64(bitPattern: bits))
    }
    @inlinable
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R {
        try body(.fixed(UInt64(bitPattern: Int64(self))))
    }
}
extension UInt: PrimitiveAttribute {
    public static var attributeType: AttributeType { .uint64 }
    @inlinable
    public static func _decode(_ cell: RawCell) -> UInt {
        guard case .fixed(let bits) = cell else { return 0 }
        return UInt(truncatingIfNeeded: bits)
    }
    @inlinable
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R { try body(.fixed(UInt64(self))) }
}
extension UInt8: PrimitiveAttribute {
    public static var attributeType: AttributeType { .uint8 }
    @inlinable
    public static func _decode(_ cell: RawCell) -> UInt8 {
        guard case .fixed(let bits) = cell else { return 0 }
        return UInt8(truncatingIfNeeded: bits)
    }
    @inlinable
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R { try body(.fixed(UInt64(self))) }
}
extension UInt16: PrimitiveAttribute {
    public static var attributeType: AttributeType { .uint16 }
    @inlinable
    public static func _decode(_ cell: RawCell) -> UInt16 {
        guard case .fixed(let bits) = cell else { return 0 }
        return UInt16(truncatingIfNeeded: bits)
    }
    @inlinable
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R { try body(.fixed(UInt64(self))) }
}
extension UInt32: PrimitiveAttribute {
    public static var attributeType: AttributeType { .uint32 }
    @inlinable
    public static func _decode(_ cell: RawCell) -> UInt32 {
        guard case .fixed(let bits) = cell else { return 0 }
        return UInt32(truncatingIfNeeded: bits)
    }
    @inlinable
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R { try body(.fixed(UInt64(self))) }
}
extension UInt64: PrimitiveAttribute {
    public static var attributeType: AttributeType { .uint64 }
    @inlinable
    public static func _decode(_ cell: RawCell) -> UInt64 {
        guard case .fixed(let bits) = cell else { return 0 }
        return UInt64(truncatingIfNeeded: bits)
    }
    @inlinable
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R { try body(.fixed(UInt64(self))) }
}

extension Bool: PrimitiveAttribute {
    public static var attributeType: AttributeType { .bool }
    public static var _zero: Bool { false }
    public static func _decode(_ cell: RawCell) -> Bool {
        guard case .fixed(let bits) = cell else { return false }
        return bits != 0
    }
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R { try body(.fixed(self ? 1 : 0)) }
    public init?(_ attributeValue: AttributeValue) {
        guard case .bool(let b) = attributeValue else { return nil }
        self = b
    }
    public var attributeValue: AttributeValue { .bool(self) }
}

extension Double: PrimitiveAttribute {
    public static var attributeType: AttributeType { .double }
    public static var _zero: Double { 0 }
    public static func _decode(_ cell: RawCell) -> Double {
        guard case .fixed(let bits) = cell else { return 0 }
        return Double(bitPattern: bits)
    }
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R { try body(.fixed(bitPattern)) }
    public init?(_ attributeValue: AttributeValue) {
        guard case .double(let d) = AttributeValue.coerce(attributeValue: attributeValue, to: .double) else {
            return nil
        }
        self = d
    }
    public var attributeValue: AttributeValue { .double(self) }
}

extension Float: PrimitiveAttribute {
    public static var attributeType: AttributeType { .float }
    public static var _zero: Float { 0 }
    public static func _decode(_ cell: RawCell) -> Float {
        guard case .fixed(let bits) = cell else { return 0 }
        return Float(bitPattern: UInt32(truncatingIfNeeded: bits))
    }
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R { try body(.fixed(UInt64(bitPattern))) }
    public init?(_ attributeValue: AttributeValue) {
        guard case .float(let f) = AttributeValue.coerce(attributeValue: attributeValue, to: .float) else { return nil }
        self = f
    }
    public var attributeValue: AttributeValue { .float(self) }
}

extension Date: PrimitiveAttribute {
    public static var attributeType: AttributeType { .date }
    public static var _zero: Date { Date(timeIntervalSinceReferenceDate: 0) }
    public static func _decode(_ cell: RawCell) -> Date {
        guard case .fixed(let bits) = cell else { return _zero }
        return Date(timeIntervalSinceReferenceDate: Double(bitPattern: bits))
    }
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R {
        try body(.fixed(timeIntervalSinceReferenceDate.bitPattern))
    }
    public init?(_ attributeValue: AttributeValue) {
        guard case .date(let d) = attributeValue else { return nil }
        self = d
    }
    public var attributeValue: AttributeValue { .date(self) }
}

extension String: PrimitiveAttribute {
    public static var attributeType: AttributeType { .string }
    public static var _zero: String { "" }
    public static func _decode(_ cell: RawCell) -> String {
        guard case .bytes(let buffer) = cell else { return "" }
        return String(decoding: buffer, as: UTF8.self)
    }
    @inline(__always)
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R {
        // Borrowed: `withUTF8` is mutating, and the copy it needs retained and released the
        // string's storage around every write (two atomic operations per string attribute).
        if let result = try utf8.withContiguousStorageIfAvailable({ try body(.bytes(UnsafeRawBufferPointer($0))) }) {
            return result
        }
        var copy = self
        return try copy.withUTF8 { try body(.bytes(UnsafeRawBufferPointer($0))) }
    }
    public init?(_ attributeValue: AttributeValue) {
        guard case .string(let s) = attributeValue else { return nil }
        self = s
    }
    public var attributeValue: AttributeValue { .string(self) }
}

extension Data: PrimitiveAttribute {
    public static var attributeType: AttributeType { .data }
    public static var _zero: Data { Data() }
    public static func _decode(_ cell: RawCell) -> Data {
        guard case .bytes(let buffer) = cell else { return Data() }
        return Data(buffer)
    }
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R {
        try withUnsafeBytes { try body(.bytes($0)) }
    }
    public init?(_ attributeValue: AttributeValue) {
        guard case .data(let d) = attributeValue else { return nil }
        self = d
    }
    public var attributeValue: AttributeValue { .data(self) }
}

extension UUID: PrimitiveAttribute {
    public static var attributeType: AttributeType { .uuid }
    public static var _zero: UUID { UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)) }
    public static func _decode(_ cell: RawCell) -> UUID {
        guard case .bytes(let buffer) = cell, buffer.count == 16 else { return _zero }
        return UUID(uuid: buffer.loadUnaligned(as: uuid_t.self))
    }
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R {
        var bytes = uuid
        return try withUnsafeBytes(of: &bytes) { try body(.bytes($0)) }
    }
    public init?(_ attributeValue: AttributeValue) {
        guard case .uuid(let u) = attributeValue else { return nil }
        self = u
    }
    public var attributeValue: AttributeValue { .uuid(self) }
}

extension URL: PrimitiveAttribute {
    public static var attributeType: AttributeType { .url }
    public static var _zero: URL { URL(fileURLWithPath: "/") }
    public static func _decode(_ cell: RawCell) -> URL {
        guard case .bytes(let buffer) = cell else { return _zero }
        return URL(string: String(decoding: buffer, as: UTF8.self)) ?? _zero
    }
    public func _withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R {
        try absoluteString._withCell(body)
    }
    public init?(_ attributeValue: AttributeValue) {
        guard case .url(let u) = attributeValue else { return nil }
        self = u
    }
    public var attributeValue: AttributeValue { .url(self) }
}

extension AttributeValue {
    /// Calls `body` with the stored cell of this value.
    func withCell<R>(_ body: (RawCell) throws -> R) rethrows -> R {
        switch self {
        case .bool(let v): try v._withCell(body)
        case .int(let v): try v._withCell(body)
        case .uint(let v): try v._withCell(body)
        case .double(let v): try v._withCell(body)
        case .float(let v): try v._withCell(body)
        case .string(let v): try v._withCell(body)
        case .data(let v): try v._withCell(body)
        case .date(let v): try v._withCell(body)
        case .uuid(let v): try v._withCell(body)
        case .url(let v): try v._withCell(body)
        case .stringList(let v): try ListCoding.encode(strings: v).withUnsafeBytes { try body(.bytes($0)) }
        case .intList(let v): try ListCoding.encode(integers: v).withUnsafeBytes { try body(.bytes($0)) }
        case .object(let id): try id.serial._withCell(body)
        case .objects(let ids): try ids.map(\.serial).withUnsafeBytes { try body(.bytes($0)) }
        }
    }

    /// Decodes the value an attribute of `type` holds in `cell`.
    static func decode(_ cell: RawCell, as type: AttributeType) -> AttributeValue {
        switch type {
        case .bool: .bool(Bool._decode(cell))
        case .int8, .int16, .int32, .int64: .int(Int64._decode(cell))
        case .uint8, .uint16, .uint32, .uint64: .uint(UInt64._decode(cell))
        case .double: .double(Double._decode(cell))
        case .float: .float(Float._decode(cell))
        case .string: .string(String._decode(cell))
        case .data: .data(Data._decode(cell))
        case .date: .date(Date._decode(cell))
        case .uuid: .uuid(UUID._decode(cell))
        case .url: .url(URL._decode(cell))
        case .stringList: .stringList([String]._decode(cell))
        case .intList:
            if case .bytes(let buffer) = cell { .intList(ListCoding.integers(buffer)) } else { .intList([]) }
        }
    }
}
