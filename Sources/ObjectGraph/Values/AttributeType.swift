public import Foundation

/// The storage type of an attribute, as recorded in an entity description and the journal.
///
/// Every Swift type an entity can declare maps to one of these: `Int` is ``int64``, a
/// `RawRepresentable` enum is its raw value's type, `[String]` is ``stringList`` and `[Int]`
/// is ``intList``, and any other `Codable` value is ``data`` holding its JSON encoding.
public enum AttributeType: String, Sendable, Hashable, Codable, CaseIterable {
    case bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64
    case double, float, string, data, date, uuid, url
    /// A list of strings (`[String]`), held in the byte arena in a compact binary encoding: a
    /// LEB128 count, then each string's LEB128 byte length and UTF-8 bytes
    /// (`Docs/JournalFormat.md`, "List cells"). A journal whose schema has one is read only by
    /// builds that know list types (schema record version 5).
    case stringList
    /// A list of 64-bit integers (`[Int]`), held in the byte arena as a LEB128 count, then each
    /// integer in 8 bytes, little-endian (`Docs/JournalFormat.md`, "List cells").
    case intList

    /// Whether values of this type live in the per-entity byte arena (variable length)
    /// rather than in a fixed 64-bit cell.
    public var isVariableLength: Bool {
        switch self {
        case .string, .data, .uuid, .url, .stringList, .intList: true
        default: false
        }
    }

    /// Whether this is a native list type (``stringList`` or ``intList``).
    public var isList: Bool { self == .stringList || self == .intList }
}

/// How a Swift property type is mapped onto its ``AttributeType``.
public enum AttributeValueKind: String, Sendable, Hashable, Codable {
    /// A type the store holds natively (`Int`, `String`, `Date`, …).
    case primitive
    /// A `RawRepresentable` type stored as its raw value.
    case rawRepresentable
    /// A `Codable` type stored as its JSON encoding in a ``AttributeType/data`` attribute.
    /// (`[String]` and `[Int]` are not: they are ``primitive``, stored as
    /// ``AttributeType/stringList`` and ``AttributeType/intList``.)
    case codable
}

/// A dynamically typed attribute value: what `value(forKey:)` returns, what change sets carry,
/// and what import mapping works with.
///
/// `nil` is represented by `Optional<AttributeValue>.none`, never by a case of its own.
///
/// ```swift
/// let name = try person.attributeValue(forKey: "name")   // .string("Ada")
/// ```
public enum AttributeValue: Sendable, Hashable, CustomStringConvertible {
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case double(Double)
    case float(Float)
    case string(String)
    case data(Data)
    case date(Date)
    case uuid(UUID)
    case url(URL)
    /// The value of a ``AttributeType/stringList`` attribute (`[String]`).
    case stringList([String])
    /// The value of an ``AttributeType/intList`` attribute (`[Int]`), each element widened to
    /// `Int64` as ``int(_:)`` holds an `Int`.
    case intList([Int64])
    /// A to-one relationship's destination, as ``Entity/changedValues()`` and
    /// ``Entity/committedValues(forKeys:)`` report it (stored as the destination's serial).
    case object(ObjectID)
    /// A to-many relationship's members, as ``Entity/changedValues()`` and
    /// ``Entity/committedValues(forKeys:)`` report them, in serial order. Never stored.
    case objects([ObjectID])

    /// The value as a Foundation/Swift value (`Int64`, `String`, `Date`, …), for `Any`-based APIs.
    public var anyValue: Any {
        switch self {
        case .bool(let v): v
        case .int(let v): v
        case .uint(let v): v
        case .double(let v): v
        case .float(let v): v
        case .string(let v): v
        case .data(let v): v
        case .date(let v): v
        case .uuid(let v): v
        case .url(let v): v
        case .stringList(let v): v
        case .intList(let v): v
        case .object(let v): v
        case .objects(let v): v
        }
    }

    public var description: String {
        switch self {
        case .bool(let v): "\(v)"
        case .int(let v): "\(v)"
        case .uint(let v): "\(v)"
        case .double(let v): "\(v)"
        case .float(let v): "\(v)"
        case .string(let v): String(reflecting: v)
        case .data(let v): "<\(v.count) bytes>"
        case .date(let v): v.formatted(.iso8601)
        case .uuid(let v): v.uuidString
        case .url(let v): v.absoluteString
        case .stringList(let v): "[" + v.map { String(reflecting: $0) }.joined(separator: ", ") + "]"
        case .intList(let v): "[" + v.map { "\($0)" }.joined(separator: ", ") + "]"
        case .object(let v): "\(v)"
        case .objects(let v): "[" + v.map { "\($0)" }.joined(separator: ", ") + "]"
        }
    }

    /// Converts an arbitrary Swift value to the attribute value an attribute of `type` stores,
    /// or returns `nil` when the value cannot represent that type exactly.
    ///
    /// Integers convert between widths when the value fits; `Double` accepts any integer that it
    /// represents exactly; strings do not silently become numbers.
    public static func coerce(_ value: Any, to type: AttributeType) -> AttributeValue? {
        if let v = value as? AttributeValue { return coerce(attributeValue: v, to: type) }
        switch type {
        case .bool:
            return (value as? Bool).map(AttributeValue.bool)
        case .int8, .int16, .int32, .int64:
            guard let i = integerValue(value) else { return nil }
            guard let v = i.int64, type.signedRange.contains(v) else { return nil }
            return .int(v)
        case .uint8, .uint16, .uint32, .uint64:
            guard let i = integerValue(value), let v = i.uint64, v <= type.unsignedMax else { return nil }
            return .uint(v)
        case .double:
            if let d = value as? Double { return .double(d) }
            if let f = value as? Float { return .double(Double(f)) }
            if let i = integerValue(value), let d = i.exactDouble { return .double(d) }
            return nil
        case .float:
            if let f = value as? Float { return .float(f) }
            if let d = value as? Double, let f = Float(exactly: d) { return .float(f) }
            if let i = integerValue(value), let d = i.exactDouble, let f = Float(exactly: d) { return .float(f) }
            return nil
        case .string:
            return (value as? String).map(AttributeValue.string)
        case .data:
            if let d = value as? Data { return .data(d) }
            if let b = value as? [UInt8] { return .data(Data(b)) }
            return nil
        case .date:
            return (value as? Date).map(AttributeValue.date)
        case .uuid:
            return (value as? UUID).map(AttributeValue.uuid)
        case .url:
            return (value as? URL).map(AttributeValue.url)
        case .stringList:
            if let list = value as? [String] { return .stringList(list) }
            if let list = value as? [Any] {
                var strings: [String] = []
                strings.reserveCapacity(list.count)
                for element in list {
                    guard let s = element as? String else { return nil }
                    strings.append(s)
                }
                return .stringList(strings)
            }
            return nil
        case .intList:
            if let list = value as? [Int] { return .intList(list.map { Int64($0) }) }
            if let list = value as? [Int64] { return .intList(list) }
            if let list = value as? [Any] {
                var integers: [Int64] = []
                integers.reserveCapacity(list.count)
                for element in list {
                    guard let i = integerValue(element)?.int64 else { return nil }
                    integers.append(i)
                }
                return .intList(integers)
            }
            return nil
        }
    }

    /// Converts an ``AttributeValue`` of one case to the case `type` stores, when exact.
    public static func coerce(attributeValue v: AttributeValue, to type: AttributeType) -> AttributeValue? {
        switch v {
        case .bool(let b): return coerce(b, to: type)
        case .int(let i): return coerce(i, to: type)
        case .uint(let u): return coerce(u, to: type)
        case .double(let d): return coerce(d, to: type)
        case .float(let f): return coerce(f, to: type)
        case .string(let s): return coerce(s, to: type)
        case .data(let d): return coerce(d, to: type)
        case .date(let d): return coerce(d, to: type)
        case .uuid(let u): return coerce(u, to: type)
        case .url(let u): return coerce(u, to: type)
        case .stringList: return type == .stringList ? v : nil
        case .intList: return type == .intList ? v : nil
        case .object(let id): return coerce(id.serial, to: type)  // a to-one slot holds the serial
        case .objects: return nil
        }
    }

    /// The type that this value's case naturally stores as.
    public var naturalType: AttributeType {
        switch self {
        case .bool: .bool
        case .int: .int64
        case .uint: .uint64
        case .double: .double
        case .float: .float
        case .string: .string
        case .data: .data
        case .date: .date
        case .uuid: .uuid
        case .url: .url
        case .stringList: .stringList
        case .intList: .intList
        case .object: .uint64
        case .objects: .data
        }
    }
}

/// An integer of any width, widened without loss.
private enum WideInteger {
    case signed(Int64)
    case unsigned(UInt64)

    var int64: Int64? {
        switch self {
        case .signed(let v): v
        case .unsigned(let v): Int64(exactly: v)
        }
    }
    var uint64: UInt64? {
        switch self {
        case .signed(let v): UInt64(exactly: v)
        case .unsigned(let v): v
        }
    }
    var exactDouble: Double? {
        switch self {
        case .signed(let v): Double(exactly: v)
        case .unsigned(let v): Double(exactly: v)
        }
    }
}

private func integerValue(_ value: Any) -> WideInteger? {
    switch value {
    case let v as Int: .signed(Int64(v))
    case let v as Int8: .signed(Int64(v))
    case let v as Int16: .signed(Int64(v))
    case let v as Int32: .signed(Int64(v))
    case let v as Int64: .signed(v)
    case let v as UInt: .unsigned(UInt64(v))
    case let v as UInt8: .unsigned(UInt64(v))
    case let v as UInt16: .unsigned(UInt64(v))
    case let v as UInt32: .unsigned(UInt64(v))
    case let v as UInt64: .unsigned(v)
    default: nil
    }
}

extension AttributeType {
    var signedRange: ClosedRange<Int64> {
        switch self {
        case .int8: Int64(Int8.min)...Int64(Int8.max)
        case .int16: Int64(Int16.min)...Int64(Int16.max)
        case .int32: Int64(Int32.min)...Int64(Int32.max)
        default: Int64.min...Int64.max
        }
    }
    var unsignedMax: UInt64 {
        switch self {
        case .uint8: UInt64(UInt8.max)
        case .uint16: UInt64(UInt16.max)
        case .uint32: UInt64(UInt32.max)
        default: UInt64.max
        }
    }
}

// MARK: - The payload encoding

/// How the values of an attribute type are written in a transaction payload
/// (`Docs/JournalFormat.md`, "Transaction payload"). The codec switches on this, never on the
/// attribute type: a new type that reuses an encoding needs no change to the codec.
enum PayloadEncoding: Sendable {
    /// One byte, 0 or 1.
    case bool
    /// A zig-zag LEB128 varint of the cell's bits as `Int64`.
    case signedVarint
    /// A LEB128 varint of the cell's bits.
    case varint
    /// 8 bytes, little-endian.
    case fixed64
    /// 4 bytes, little-endian (the low half of the cell).
    case fixed32
    /// A varint length, then that many bytes (held in the entity's byte arena).
    case bytes
    /// As ``bytes``, but exactly 16 bytes long.
    case bytes16
    /// As ``bytes``, holding a ``AttributeType/stringList`` cell (``ListCoding``), which the
    /// reader checks as it reads it.
    case stringList
    /// As ``bytes``, holding an ``AttributeType/intList`` cell, checked as it is read.
    case intList

    /// Whether values of this encoding are a length, then that many bytes.
    var isByteString: Bool {
        switch self {
        case .bytes, .bytes16, .stringList, .intList: true
        default: false
        }
    }

    /// The bytes one value takes when its width does not depend on the value.
    var fixedWidth: Int? {
        switch self {
        case .bool: 1
        case .fixed64: 8
        case .fixed32: 4
        default: nil
        }
    }
}

/// How the 64-bit cells of an attribute type compare (``AttributeType/cellOrder``).
enum CellOrder: Sendable {
    /// As `Int64`.
    case signed
    /// As `UInt64`.
    case unsigned
    /// As `Double` (a `Date` is its interval since the reference date).
    case double
    /// As `Float`, in the cell's low 32 bits.
    case float
}

extension AttributeType {
    /// How this type's values are encoded in a transaction payload.
    var payloadEncoding: PayloadEncoding {
        switch self {
        case .bool: .bool
        case .int8, .int16, .int32, .int64: .signedVarint
        case .uint8, .uint16, .uint32, .uint64: .varint
        case .double, .date: .fixed64
        case .float: .fixed32
        case .string, .data, .url: .bytes
        case .uuid: .bytes16
        case .stringList: .stringList
        case .intList: .intList
        }
    }

    /// Whether a secondary index (``IndexDescription``) may have a key of this type: the types
    /// whose predicates fetches evaluate on storage.
    var isIndexable: Bool {
        switch self {
        case .data, .uuid, .url, .stringList, .intList: false
        default: true
        }
    }

    /// How cells of this type compare, for sorts read straight from storage; nil when their
    /// bits have no order of their own (booleans, and values held in the byte arena).
    var cellOrder: CellOrder? {
        switch self {
        case .int8, .int16, .int32, .int64: .signed
        case .uint8, .uint16, .uint32, .uint64: .unsigned
        case .double, .date: .double
        case .float: .float
        case .bool, .string, .data, .uuid, .url, .stringList, .intList: nil
        }
    }

    /// The bytes `value` takes in a transaction payload as a value of this type (its length
    /// prefix included), or nil when the value cannot be stored as this type. For tools that
    /// estimate a payload's size without encoding it.
    package func payloadSize(of value: AttributeValue) -> Int? {
        // A value of the case this type decodes to, without a conversion (the common case, and
        // a dynamic cast less per value).
        switch (payloadEncoding, value) {
        case (.bool, .bool): return 1
        case (.signedVarint, .int(let v)): return ByteWriter.varintSize(UInt64(bitPattern: (v << 1) ^ (v >> 63)))
        case (.varint, .uint(let v)): return ByteWriter.varintSize(v)
        case (.fixed64, .double), (.fixed64, .date): return 8
        case (.fixed32, .float): return 4
        case (.bytes, .string(let v)): return ByteWriter.varintSize(UInt64(v.utf8.count)) + v.utf8.count
        case (.bytes, .data(let v)): return ByteWriter.varintSize(UInt64(v.count)) + v.count
        case (.bytes16, .uuid): return 17
        case (.stringList, .stringList), (.intList, .intList):
            guard let n = ListCoding.encode(value)?.count else { return nil }
            return ByteWriter.varintSize(UInt64(n)) + n
        default: break
        }
        guard let v = AttributeValue.coerce(attributeValue: value, to: self) else { return nil }
        return v.withCell { cell in
            switch cell {
            case .fixed(let bits):
                switch payloadEncoding {
                case .bool, .fixed64, .fixed32: payloadEncoding.fixedWidth ?? 0
                case .signedVarint:
                    ByteWriter.varintSize(
                        UInt64(bitPattern: (Int64(bitPattern: bits) << 1) ^ (Int64(bitPattern: bits) >> 63)))
                case .varint: ByteWriter.varintSize(bits)
                case .bytes, .bytes16, .stringList, .intList: 1
                }
            case .bytes(let buffer): ByteWriter.varintSize(UInt64(buffer.count)) + buffer.count
            }
        }
    }
}
