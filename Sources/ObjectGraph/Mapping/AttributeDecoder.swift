import Foundation

extension Entity {
    /// The object's current attribute values as a `Decodable` value: each key the value decodes
    /// reads the attribute of the same name (the inverse of ``ModelContext/upsert(_:as:identifiedBy:)-(V,_,_)``).
    ///
    /// ```swift
    /// struct PersonRecord: Codable, Sendable { var id: Int64; var name: String; var city: String? }
    /// let record = try person.decode(as: PersonRecord.self)
    /// ```
    ///
    /// The result is a plain value, a snapshot that later changes of the object do not affect.
    /// When `V` is `Sendable` it can cross isolation domains, which the object itself cannot:
    /// this is how values leave a context's actor.
    ///
    /// Values convert as they are stored: integers to any width the value fits, enums from
    /// their raw values, `Codable` attributes from their JSON. Relationships are not decoded: a
    /// key naming a relationship, like a key naming no attribute, is missing, so that optional
    /// properties decoded with `decodeIfPresent` (as synthesized `Decodable` does) are `nil`.
    /// An attribute without a value decodes as `nil`.
    ///
    /// - Throws: `DecodingError`: `keyNotFound` for a key that names no attribute,
    ///   `valueNotFound` for an attribute without a value decoded into a non-optional property,
    ///   `typeMismatch` for a value of another type (or one out of the property's range), and
    ///   `dataCorrupted` for a `Codable` attribute whose JSON does not decode as the property's
    ///   type; or what `V`'s own `init(from:)` throws.
    public func decode<V: Decodable>(as type: V.Type = V.self) throws -> V {
        try V(from: AttributeDecoder(self))
    }
}

/// A `Decoder` that reads an object's current attribute values by key: what
/// ``Entity/decode(as:)`` decodes a value from.
///
/// A key is present when it names an attribute (relationships are not); a present attribute
/// without a value decodes as `nil`. `superDecoder()` hands out the decoder itself, as
/// ``AttributeEncoder``'s `superEncoder()` does.
final class AttributeDecoder: Decoder {
    /// The object's storage handle. This class's state is unchecked for exclusive access: one
    /// decoder serves one loop on one thread, and the checks were a thirtieth of a read (perf).
    @exclusivity(unchecked) private(set) var backing: ObjectBacking
    /// The object's entity.
    let entity: EntityDescription

    /// A decoder reading `object`.
    convenience init(_ object: some Entity) {
        self.init(backing: object._backing)
    }

    /// A decoder reading the object `backing` stands for: a table's row, with no instance.
    init(backing: ObjectBacking) {
        self.backing = backing
        entity = backing.entity
        plainTypes = entity.attributes.map { $0.valueKind == .codable ? nil : $0.type }
    }

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(AttributeDecodingContainer<Key>(decoder: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch(
            [Any].self,
            .init(
                codingPath: [],
                debugDescription: "an object of \(entity.name) decodes as keyed attributes, not an array"))
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw DecodingError.typeMismatch(
            Any.self,
            .init(
                codingPath: [],
                debugDescription: "an object of \(entity.name) decodes as keyed attributes, not a single value"))
    }

    /// The slot of the attribute `key` names, or nil when it names none (or a relationship).
    ///
    /// A value type asks for its keys in the same order for every object: the answers are kept
    /// in that order, and the next key is compared with the one expected next before any
    /// dictionary lookup (a lookup per attribute was a tenth of reading rows as values).
    func slot(for key: some CodingKey) -> Int? {
        let name = key.stringValue
        if keyCursor < keySlots.count, keySlots[keyCursor].name == name {
            keyCursor += 1
            return keySlots[keyCursor - 1].slot
        }
        if let i = keySlots.firstIndex(where: { $0.name == name }) {
            keyCursor = i + 1
            return keySlots[i].slot
        }
        var slot: Int?
        if let s = entity.slot(forKey: name), !entity.attributes[s].isRelationship { slot = s }
        if keySlots.count < Self.keptKeys {
            keySlots.append((name, slot))
            keyCursor = keySlots.count
        }
        return slot
    }

    /// The keys asked for, in the order first asked, with their slots.
    @exclusivity(unchecked) private var keySlots: [(name: String, slot: Int?)] = []
    /// Where in ``keySlots`` the next key is expected.
    @exclusivity(unchecked) private var keyCursor = 0
    /// The most keys kept.
    private static let keptKeys = 64

    /// The slot of the attribute `key` names, or `keyNotFound`.
    func requiredSlot(for key: some CodingKey) throws -> Int {
        guard let s = slot(for: key) else {
            let name = key.stringValue
            let what =
                entity.slot(forKey: name) != nil || entity.relationships.contains { $0.name == name }
                ? "'\(name)' is a relationship of \(entity.name), which is not decoded"
                : "\(entity.name) has no attribute '\(name)'"
            throw DecodingError.keyNotFound(key, .init(codingPath: [], debugDescription: what))
        }
        return s
    }

    /// The current value of slot `s` (`nil` when it has none).
    func value(_ s: Int) -> AttributeValue? { backing.dynamicValue(s) }

    /// Decodes the value of the attribute `key` names as `T`.
    func decode<T: Decodable>(_ type: T.Type, forKey key: some CodingKey) throws -> T {
        let s = try requiredSlot(for: key)
        return try decode(type, value: value(s), slot: s, key: key)
    }

    /// Decodes `value`, slot `s`'s, as `T`.
    func decode<T: Decodable>(_ type: T.Type, value: AttributeValue?, slot s: Int, key: some CodingKey) throws -> T {
        try AttributeValueDecoder(
            value: value, isCodable: entity.attributes[s].valueKind == .codable, entity: entity, slot: s, key: key
        ).decode(type)
    }

    /// The attribute's value as the stored type `T` reads it without conversion (a string as a
    /// `String`, an integer as an `Int64`, and so on); otherwise through ``decode(_:forKey:)``,
    /// which converts or throws.
    @inline(__always)
    func direct<T: Decodable>(
        _ type: T.Type, forKey key: some CodingKey, _ exact: (AttributeValue) -> T?
    ) throws -> T {
        let s = try requiredSlot(for: key)
        let v = value(s)
        if let v, let result = exact(v) { return result }
        return try decode(type, value: v, slot: s, key: key)
    }

    /// As ``direct(_:forKey:_:)``, nil when the attribute has no value.
    @inline(__always)
    func directIfPresent<T: Decodable>(
        _ type: T.Type, forKey key: some CodingKey, _ exact: (AttributeValue) -> T?
    ) throws -> T? {
        let s = try requiredSlot(for: key)
        guard let v = value(s) else { return nil }
        return try exact(v) ?? decode(type, value: v, slot: s, key: key)
    }

    /// The attribute's value read from its cell when the attribute stores `T` itself (no
    /// `AttributeValue` made); otherwise as ``decode(_:forKey:)`` reads it.
    @inline(__always)
    func stored<T: PrimitiveAttribute>(_ type: T.Type, forKey key: some CodingKey) throws -> T {
        let s = try requiredSlot(for: key)
        if storesItself(s, type), let v = backing.getOptional(s, as: T.self, generic: ()) { return v }
        return try decode(type, value: value(s), slot: s, key: key)
    }

    /// As ``stored(_:forKey:)``, nil when the attribute has no value.
    @inline(__always)
    func storedIfPresent<T: PrimitiveAttribute>(_ type: T.Type, forKey key: some CodingKey) throws -> T? {
        let s = try requiredSlot(for: key)
        if storesItself(s, type) { return backing.getOptional(s, as: T.self, generic: ()) }
        guard let v = value(s) else { return nil }
        return try decode(type, value: v, slot: s, key: key)
    }

    /// Whether slot `s` holds `T`'s own stored type as a plain value (not a `Codable`
    /// attribute's JSON).
    @inline(__always)
    private func storesItself<T: PrimitiveAttribute>(_ s: Int, _ type: T.Type) -> Bool {
        plainTypes[s] == T.attributeType
    }

    /// Per slot, its stored type, or nil for a `Codable` attribute (stored as JSON).
    private let plainTypes: [AttributeType?]

    /// Moves the decoder to `backing`'s object (a batch of rows read one after the other).
    func reading(_ backing: ObjectBacking) {
        self.backing = backing
        keyCursor = 0
    }
}

/// The keyed container of ``AttributeDecoder``.
struct AttributeDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: AttributeDecoder

    var codingPath: [any CodingKey] { [] }

    var allKeys: [Key] {
        decoder.entity.attributes.filter { !$0.isRelationship }.compactMap { Key(stringValue: $0.name) }
    }

    func contains(_ key: Key) -> Bool { decoder.slot(for: key) != nil }

    func decodeNil(forKey key: Key) throws -> Bool { decoder.value(try decoder.requiredSlot(for: key)) == nil }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        try decoder.stored(type, forKey: key)
    }
    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        try decoder.stored(type, forKey: key)
    }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        try decoder.stored(type, forKey: key)
    }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decoder.decode(type, forKey: key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int {
        try decoder.stored(type, forKey: key)
    }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decoder.decode(type, forKey: key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decoder.decode(type, forKey: key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decoder.decode(type, forKey: key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
        try decoder.stored(type, forKey: key)
    }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decoder.decode(type, forKey: key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decoder.decode(type, forKey: key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decoder.decode(type, forKey: key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decoder.decode(type, forKey: key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decoder.decode(type, forKey: key) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        // The native lists, read from their cells as they are (through the general path, the
        // type's conformances are looked up for every value).
        // `T` is the list type itself there, so the casts change nothing.
        if T.self == [String].self {
            return unsafeBitCast(try decoder.direct([String].self, forKey: key, ExactValue.strings), to: T.self)
        }
        if T.self == [Int].self {
            return unsafeBitCast(try decoder.direct([Int].self, forKey: key, ExactValue.integers), to: T.self)
        }
        return try decoder.decode(type, forKey: key)
    }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard contains(key) else { return nil }
        if T.self == [String].self {
            return unsafeBitCast(
                try decoder.directIfPresent([String].self, forKey: key, ExactValue.strings), to: T?.self)
        }
        if T.self == [Int].self {
            return unsafeBitCast(try decoder.directIfPresent([Int].self, forKey: key, ExactValue.integers), to: T?.self)
        }
        guard try !decodeNil(forKey: key) else { return nil }
        return try decode(type, forKey: key)
    }

    // The optionals synthesized `Decodable` reads, each from one read of the value (the default
    // `decodeIfPresent` reads it once to test for nil, then again to decode it).
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        guard contains(key) else { return nil }
        return try decoder.storedIfPresent(type, forKey: key)
    }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? {
        guard contains(key) else { return nil }
        return try decoder.storedIfPresent(type, forKey: key)
    }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
        guard contains(key) else { return nil }
        return try decoder.storedIfPresent(type, forKey: key)
    }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        guard contains(key) else { return nil }
        return try decoder.storedIfPresent(type, forKey: key)
    }
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
        guard contains(key) else { return nil }
        return try decoder.storedIfPresent(type, forKey: key)
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        throw nested(key)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { throw nested(key) }

    func superDecoder() throws -> any Decoder { decoder }

    func superDecoder(forKey key: Key) throws -> any Decoder { throw nested(key) }

    private func nested(_ key: Key) -> DecodingError {
        DecodingError.typeMismatch(
            [String: Any].self,
            .init(
                codingPath: [key],
                debugDescription: "an attribute of \(decoder.entity.name) is one value, not a nested container"))
    }
}

/// The native lists as the keyed container reads them without conversion, each `nil` for a
/// value of another case. Outside the generic container: a static member of
/// `AttributeDecodingContainer<Key>` made every read look up the container type's metadata, for
/// the client's `Key`.
enum ExactValue {
    static func strings(_ v: AttributeValue) -> [String]? {
        if case .stringList(let list) = v { return list }
        return nil
    }
    static func integers(_ v: AttributeValue) -> [Int]? {
        guard case .intList(let list) = v else { return nil }
        var result: [Int] = []
        result.reserveCapacity(list.count)
        for i in list {
            guard let value = Int(exactly: i) else { return nil }
            result.append(value)
        }
        return result
    }
}

/// A decoder of one attribute's value (or its absence): what a property is decoded from.
///
/// Values of stored types convert through their ``PrimitiveAttribute`` initializer (integers
/// to any width they fit, `Double` from exact integers); a `Codable` attribute's JSON decodes
/// through ``CodableAttributeCoder``; any other `Decodable` type decodes from the single value
/// (an enum from its raw value, an `Optional` from the value or its absence).
struct AttributeValueDecoder: Decoder, SingleValueDecodingContainer {
    /// The attribute's value; `nil` when it has none.
    let value: AttributeValue?
    /// Whether the value is a `Codable` attribute's JSON.
    let isCodable: Bool
    /// The entity and the attribute's slot, for messages (built only when one is needed: a
    /// read of every attribute of a million objects made one string per attribute).
    let entity: EntityDescription
    let slot: Int
    /// The key the attribute was decoded for.
    let key: any CodingKey

    /// `Entity.attribute`, for messages.
    var description: String { "\(entity.name).\(entity.attributes[slot].name)" }
    var codingPath: [any CodingKey] { [key] }

    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        throw mismatch([String: Any].self)
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw mismatch([Any].self) }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { value == nil }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        guard let value else {
            // An Optional decodes as nil from here; any other type throws valueNotFound.
            if T.self is any ValueMappingOptional.Type { return try T(from: self) }
            throw DecodingError.valueNotFound(
                type, .init(codingPath: codingPath, debugDescription: "\(description) has no value"))
        }
        if isCodable, case .data(let json) = value {
            do {
                return try CodableAttributeCoder.decode(type, from: json)
            } catch {
                throw DecodingError.dataCorrupted(
                    .init(
                        codingPath: codingPath,
                        debugDescription: "the JSON of \(description) does not decode as \(T.self)",
                        underlyingError: error))
            }
        }
        if let primitive = T.self as? any PrimitiveAttribute.Type {
            guard let decoded = Self.make(primitive, from: value) as? T else { throw mismatch(type) }
            return decoded
        }
        return try T(from: self)
    }

    /// `value` as a `P`, when it converts exactly.
    private static func make<P: PrimitiveAttribute>(_ type: P.Type, from value: AttributeValue) -> P? { P(value) }

    private func mismatch(_ type: Any.Type) -> DecodingError {
        DecodingError.typeMismatch(
            type,
            .init(
                codingPath: codingPath,
                debugDescription: "\(description) holds \(value.map { "\($0)" } ?? "nil"), not a \(type)"))
    }
}
