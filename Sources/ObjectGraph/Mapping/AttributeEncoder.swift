import Foundation

/// One source's values for the slots of one entity: what a Swift value maps to before it is
/// written into an object (``ModelContext/upsert(_:as:identifiedBy:)-(V,_,_)``, ``ModelContext/upsert(structValue:entityNamed:identifiedBy:)``).
///
/// A slot is either untouched (the source did not name its attribute: an existing object keeps
/// its value, a new one its default) or set, to a value of the attribute's storage type or to
/// `nil`. Reused across the values of a batch: ``reset()`` clears only the slots the last value
/// set.
///
/// The arrays opt out of dynamic exclusivity checking: a buffer belongs to one call on one
/// context's isolation domain, and no method holds an access to one of them across a call that
/// touches the same array.
final class AttributeSlots {
    /// Per slot, the value to store when ``isSet`` says the slot was set (`nil`: no value).
    @exclusivity(unchecked) private(set) var values: [AttributeValue?]
    /// Per slot, whether the source set it.
    @exclusivity(unchecked) private(set) var isSet: [Bool]
    /// The slots set since the last reset, in the order first set.
    @exclusivity(unchecked) private(set) var touched: [Int] = []

    /// A buffer for an entity of `count` slots, with nothing set.
    init(count: Int) {
        values = Array(repeating: nil, count: count)
        isSet = Array(repeating: false, count: count)
        touched.reserveCapacity(count)
    }

    /// Sets `slot` to `value` (`nil` for no value); a later set of the same slot wins.
    @inline(__always)
    func set(_ slot: Int, _ value: AttributeValue?) {
        if !isSet[slot] {
            isSet[slot] = true
            touched.append(slot)
        }
        values[slot] = value
    }

    /// The value of `slot` when it is set and not `nil`.
    @inline(__always)
    func value(_ slot: Int) -> AttributeValue? { isSet[slot] ? values[slot] : nil }

    /// Clears every slot set since the last reset.
    func reset() {
        for s in touched {
            values[s] = nil
            isSet[s] = false
        }
        touched.removeAll(keepingCapacity: true)
    }
}

/// An `Encoder` that writes the encoded properties of a value straight into an
/// ``AttributeSlots`` buffer of one entity, by key: each key names an attribute
/// (`EntityDescription.slot(forKey:)`), and each value becomes that attribute's stored value.
///
/// - `Bool`, the integers, `Double`, `Float` and `String` arrive through the container's
///   typed `encode` methods; `Date`, `UUID`, `URL` and `Data` through its generic one, and are
///   recognised by type before anything else is tried. Integers convert between widths when the
///   value fits the attribute's type.
/// - A `RawRepresentable` value (an enum) is stored as its raw value, which must be a case of
///   the attribute's own type when the attribute holds an enum.
/// - Any other value goes to a ``AttributeValueKind/codable`` attribute of the same Swift type,
///   stored as ``CodableAttributeCoder``'s JSON.
/// - `encodeNil` and a `nil` given to `encodeIfPresent` set the attribute to `nil` (refused for
///   a non-optional attribute): the same value gives the same object whether it comes through
///   `Codable` or through reflection.
/// - `superEncoder()` hands out the encoder itself, so the properties a superclass encodes
///   there map onto the same object.
///
/// A key the entity has no attribute for throws ``MappingError`` `unknownProperty`; a value its
/// attribute cannot hold, or a nested container (whose contents no attribute stores), throws
/// `unstorableProperty`. The methods that cannot throw (`unkeyedContainer()`, nested containers)
/// record the failure, and ``encode(_:sourceIndex:)`` throws it when the value is done, so a
/// value's own `encode(to:)` cannot swallow it.
///
/// Made once per batch and reused for every value: key lookups follow the order the previous
/// value used its keys (a string comparison, no hashing, no allocation), and the keyed
/// container handed out is kept and handed out again for the same key type.
final class AttributeEncoder: Encoder {
    /// The entity whose attributes the keys name.
    let entity: EntityDescription
    /// The values of the value being encoded.
    let slots: AttributeSlots

    // Per slot, what the checks need, copied out of the attribute descriptions once.
    private let types: [AttributeType]
    private let kinds: [AttributeValueKind]
    private let optionals: [Bool]
    private let rawValueChecks: [AttributeValidator?]
    private let relationships: [Bool]
    /// Per `.codable` slot, the Swift type last found to be the attribute's own.
    @exclusivity(unchecked) private var checkedCodableTypes: [ObjectIdentifier?]

    /// The keys in the order the values so far used them, with their slots.
    @exclusivity(unchecked) private var keyNames: [String] = []
    @exclusivity(unchecked) private var keySlots: [Int] = []
    /// How many keys the current value has used.
    @exclusivity(unchecked) private var position = 0

    /// The first failure of the current value.
    @exclusivity(unchecked) private(set) var failure: MappingError?
    /// The index of the current value in its batch, for errors.
    @exclusivity(unchecked) private var sourceIndex: Int?
    /// The keyed container last handed out (a `KeyedEncodingContainer<Key>`), handed out again
    /// for the same `Key`. It refers to this encoder: ``finish()`` drops it.
    @exclusivity(unchecked) private var cachedContainer: Any?

    /// An encoder for values of `entity`.
    init(entity: EntityDescription) {
        self.entity = entity
        let attributes = entity.attributes
        slots = AttributeSlots(count: attributes.count)
        types = attributes.map(\.type)
        kinds = attributes.map(\.valueKind)
        optionals = attributes.map(\.isOptional)
        rawValueChecks = attributes.map(\.rawValueCheck)
        relationships = attributes.map(\.isRelationship)
        checkedCodableTypes = Array(repeating: nil, count: attributes.count)
    }

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// Encodes `value` into ``slots`` (cleared first).
    ///
    /// - Throws: ``MappingError`` (`unknownProperty`, `unstorableProperty`, `codingFailed`),
    ///   carrying `sourceIndex`.
    func encode<V: Encodable>(_ value: V, sourceIndex: Int?) throws(MappingError) {
        slots.reset()
        position = 0
        failure = nil
        self.sourceIndex = sourceIndex
        do {
            try value.encode(to: self)
        } catch {
            if let failure { throw failure }
            if let mapping = error as? MappingError { throw mapping.located(at: sourceIndex) }
            throw MappingError(
                .codingFailed, "a \(V.self) value could not be encoded into \(entity.name): \(error)",
                sourceIndex: sourceIndex, entity: entity.name)
        }
        if let failure { throw failure }
    }

    /// Drops the container kept for reuse, which refers back to this encoder.
    func finish() { cachedContainer = nil }

    // MARK: Encoder

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if let cached = cachedContainer as? KeyedEncodingContainer<Key> { return cached }
        let container = KeyedEncodingContainer(AttributeEncodingContainer<Key>(encoder: self))
        cachedContainer = container
        return container
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        note(
            MappingError(
                .codingFailed, "a value mapped onto \(entity.name) must encode keyed properties, not an array",
                sourceIndex: sourceIndex, entity: entity.name))
        return DiscardingEncodingContainer()
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        note(
            MappingError(
                .codingFailed, "a value mapped onto \(entity.name) must encode keyed properties, not a single value",
                sourceIndex: sourceIndex, entity: entity.name))
        return DiscardingEncodingContainer()
    }

    // MARK: Values

    /// Records `error` as the value's failure unless one came first, and returns it.
    @discardableResult
    func note(_ error: MappingError) -> MappingError {
        if failure == nil { failure = error }
        return failure ?? error
    }

    /// The slot of the attribute `key` names.
    @inline(__always)
    func slot(for key: some CodingKey) throws(MappingError) -> Int {
        let name = key.stringValue
        let k = position
        position = k &+ 1
        if k < keyNames.count, keyNames[k] == name { return keySlots[k] }
        return try resolve(name, at: k)
    }

    private func resolve(_ name: String, at k: Int) throws(MappingError) -> Int {
        guard let slot = entity.slot(forKey: name), !relationships[slot] else {
            let what =
                entity.slot(forKey: name) != nil || entity.relationships.contains { $0.name == name }
                ? "'\(name)' is a relationship of \(entity.name), which a value cannot set"
                : "\(entity.name) has no attribute '\(name)'"
            throw note(
                MappingError(
                    .unknownProperty, "\(what); the value's property '\(name)' has nowhere to go",
                    sourceIndex: sourceIndex, keyPath: name, entity: entity.name, attribute: name))
        }
        if k < keyNames.count {
            keyNames[k] = name
            keySlots[k] = slot
        } else if k == keyNames.count {
            keyNames.append(name)
            keySlots.append(slot)
        }
        return slot
    }

    /// Sets the attribute `key` names to `nil`.
    func encodeNil(forKey key: some CodingKey) throws(MappingError) {
        let s = try slot(for: key)
        guard optionals[s] else {
            let name = entity.attributes[s].name
            throw note(
                MappingError(
                    .unstorableProperty, "\(entity.name).\(name) is not optional, and the value's '\(name)' is nil",
                    sourceIndex: sourceIndex, keyPath: key.stringValue, value: "nil", entity: entity.name,
                    attribute: name))
        }
        slots.set(s, nil)
    }

    /// Sets the attribute `key` names to a value of a stored type.
    @inline(__always)
    func encodePrimitive<P: PrimitiveAttribute>(_ value: P, forKey key: some CodingKey) throws(MappingError) {
        try encodePrimitive(value, slot: try slot(for: key), key: key)
    }

    /// Sets slot `s` to a value of a stored type: as it is when the attribute holds that type,
    /// else converted and checked.
    @inline(__always)
    private func encodePrimitive<P: PrimitiveAttribute>(
        _ value: P, slot s: Int, key: some CodingKey
    ) throws(MappingError) {
        if kinds[s] == .primitive && types[s] == P.attributeType {
            slots.set(s, value.attributeValue)
            return
        }
        if kinds[s] == .codable {
            try encodeCodable(value, slot: s, key: key)
            return
        }
        try store(value, slot: s, key: key)
    }

    /// Sets the attribute `key` names to any `Encodable` value.
    func encodeValue<T: Encodable>(_ value: T, forKey key: some CodingKey) throws(MappingError) {
        if T.self == Date.self, let v = value as? Date { return try encodePrimitive(v, forKey: key) }
        if T.self == UUID.self, let v = value as? UUID { return try encodePrimitive(v, forKey: key) }
        if T.self == URL.self, let v = value as? URL { return try encodePrimitive(v, forKey: key) }
        if T.self == Data.self, let v = value as? Data { return try encodePrimitive(v, forKey: key) }
        if let optional = value as? any ValueMappingOptional {
            guard let wrapped = optional.wrappedValue else { return try encodeNil(forKey: key) }
            guard let encodable = wrapped as? any Encodable else { return try encodeNil(forKey: key) }
            return try encodeValue(encodable, forKey: key)
        }
        let s = try slot(for: key)
        if kinds[s] == .codable { return try encodeCodable(value, slot: s, key: key) }
        if let primitive = value as? any PrimitiveAttribute { return try encodePrimitive(primitive, slot: s, key: key) }
        try store(value, slot: s, key: key)
    }

    /// Stores `value` into a primitive or raw-value slot through the rules every source shares
    /// (``AttributeDescription/storedValue(for:)``).
    private func store(_ value: Any, slot s: Int, key: some CodingKey) throws(MappingError) {
        let attribute = entity.attributes[s]
        switch attribute.storedValue(for: value) {
        case .success(let v):
            slots.set(s, v)
        case .failure(let problem):
            throw note(
                problem.error(
                    entity: entity.name, attribute: attribute, property: key.stringValue, value: value,
                    source: "the value's",
                    sourceIndex: sourceIndex))
        }
    }

    /// Stores `value` as the JSON of a `.codable` slot, when the value is of the attribute's type.
    private func encodeCodable<T: Encodable>(_ value: T, slot s: Int, key: some CodingKey) throws(MappingError) {
        let attribute = entity.attributes[s]
        if checkedCodableTypes[s] != ObjectIdentifier(T.self) {
            guard attribute.holdsCodable(typeNamed: "\(T.self)") else {
                throw note(
                    StoredValueProblem.wrongType.error(
                        entity: entity.name, attribute: attribute, property: key.stringValue, value: value,
                        source: "the value's",
                        sourceIndex: sourceIndex))
            }
            checkedCodableTypes[s] = ObjectIdentifier(T.self)
        }
        let data: Data
        do {
            data = try CodableAttributeCoder.encode(value)
        } catch {
            throw note(
                StoredValueProblem.encodingFailed("\(error)").error(
                    entity: entity.name, attribute: attribute, property: key.stringValue, value: value,
                    source: "the value's",
                    sourceIndex: sourceIndex))
        }
        if let problem = attribute.codableProblem(data, encodedFrom: T.self) {
            throw note(
                StoredValueProblem.notDecodable(problem).error(
                    entity: entity.name, attribute: attribute, property: key.stringValue, value: value,
                    source: "the value's", sourceIndex: sourceIndex))
        }
        slots.set(s, .data(data))
    }

    /// Records that the value encodes `key` as a nested container, which no attribute stores.
    func refuseNested(forKey key: some CodingKey) {
        let name = key.stringValue
        note(
            MappingError(
                .unstorableProperty,
                "the value encodes '\(name)' as a nested container, which no attribute of \(entity.name) stores; "
                    + "give the property a Codable type of its own and a Codable attribute",
                sourceIndex: sourceIndex, keyPath: name, entity: entity.name,
                attribute: entity.slot(forKey: name) != nil ? name : nil))
    }
}

/// The keyed container of ``AttributeEncoder``: every method hands its key and value to the
/// encoder.
struct AttributeEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: AttributeEncoder

    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil(forKey key: Key) throws { try encoder.encodeNil(forKey: key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { try encoder.encodePrimitive(value, forKey: key) }
    mutating func encode(_ value: String, forKey key: Key) throws { try encoder.encodePrimitive(value, forKey: key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try encoder.encodePrimitive(value, forKey: key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try encoder.encodePrimitive(value, forKey: key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try encoder.encodePrimitive(value, forKey: key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try encoder.encodePrimitive(value, forKey: key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try encoder.encodePrimitive(value, forKey: key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try encoder.encodePrimitive(value, forKey: key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try encoder.encodePrimitive(value, forKey: key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try encoder.encodePrimitive(value, forKey: key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try encoder.encodePrimitive(value, forKey: key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try encoder.encodePrimitive(value, forKey: key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try encoder.encodePrimitive(value, forKey: key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try encoder.encodePrimitive(value, forKey: key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try encoder.encodeValue(value, forKey: key)
    }

    // A nil optional sets its attribute to nil, where the defaults would leave the key out.
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        encoder.refuseNested(forKey: key)
        return KeyedEncodingContainer(DiscardingKeyedEncodingContainer<NestedKey>())
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        encoder.refuseNested(forKey: key)
        return DiscardingEncodingContainer()
    }

    mutating func superEncoder() -> any Encoder { encoder }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        encoder.refuseNested(forKey: key)
        return DiscardingEncoder()
    }
}

// MARK: Containers whose values go nowhere

/// What ``AttributeEncoder`` hands out where a value has no attribute to go to, after it
/// recorded the failure: it accepts and drops everything, so that the value's `encode(to:)`
/// runs to its end and the recorded failure is what the caller sees.
struct DiscardingEncoder: Encoder {
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(DiscardingKeyedEncodingContainer<Key>())
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { DiscardingEncodingContainer() }
    func singleValueContainer() -> any SingleValueEncodingContainer { DiscardingEncodingContainer() }
}

/// A keyed container that drops what it is given (see ``DiscardingEncoder``).
struct DiscardingKeyedEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    var codingPath: [any CodingKey] { [] }
    mutating func encodeNil(forKey key: Key) throws {}
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {}
    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(DiscardingKeyedEncodingContainer<NestedKey>())
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        DiscardingEncodingContainer()
    }
    mutating func superEncoder() -> any Encoder { DiscardingEncoder() }
    mutating func superEncoder(forKey key: Key) -> any Encoder { DiscardingEncoder() }
}

/// An unkeyed and single-value container that drops what it is given (see ``DiscardingEncoder``).
struct DiscardingEncodingContainer: UnkeyedEncodingContainer, SingleValueEncodingContainer {
    var codingPath: [any CodingKey] { [] }
    private(set) var count = 0
    mutating func encodeNil() throws { count += 1 }
    mutating func encode<T: Encodable>(_ value: T) throws { count += 1 }
    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type
    ) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(DiscardingKeyedEncodingContainer<NestedKey>())
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { DiscardingEncodingContainer() }
    mutating func superEncoder() -> any Encoder { DiscardingEncoder() }
}

// MARK: Optionals

/// An `Optional` seen through `Any`: what a value mapping unwraps.
protocol ValueMappingOptional {
    /// The wrapped value, or `nil`.
    var wrappedValue: Any? { get }
}

extension Optional: ValueMappingOptional {
    var wrappedValue: Any? { self.map { $0 as Any } }
}
