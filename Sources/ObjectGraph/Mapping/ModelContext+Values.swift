import Foundation

// Swift values as sources: structs through reflection, Encodable values through
// AttributeEncoder, both written into objects by SlotValueWriter.

extension ModelContext {
    // MARK: Structs, through reflection

    /// Creates or updates an object of the entity named `name` from the stored properties of
    /// the struct `value`, read through reflection (`Mirror`): each property sets the attribute
    /// of the same name.
    ///
    /// ```swift
    /// struct PersonRecord { var id: Int64; var name: String; var city: String? }
    /// let person = try context.upsert(structValue: PersonRecord(id: 7, name: "Ada", city: nil),
    ///                                  entityNamed: "Person")
    /// ```
    ///
    /// Values:
    /// - An optional property is unwrapped; `nil` sets the attribute to `nil`, which a
    ///   non-optional attribute refuses.
    /// - Integers convert between widths when the value fits the attribute's type, and `Double`
    ///   takes any integer it represents exactly; nothing else converts (a string never becomes
    ///   a number).
    /// - A `RawRepresentable` property (an enum) stores its raw value; for an attribute of an
    ///   enum type, the raw value must be one of that type's cases.
    /// - A property for a `Codable` attribute (``AttributeValueKind/codable``) must be of the
    ///   attribute's own type, and is stored as its JSON encoding, as the attribute's setter
    ///   stores it.
    /// - Attributes the struct has no property for keep their values (an existing object) or
    ///   get their defaults (a new one).
    ///
    /// Identification: the object to update is the one whose identification attributes equal
    /// the struct's values for them. They are the attributes an ``EntityMapping`` infers for the
    /// entity (whatever ``EntityMapping/infersIdentificationAttributes`` says, which concerns
    /// mappings only): the ``IdentifiedEntity`` declaration,
    /// else an attribute named after the entity (`personID`, `person_id`), else the first of
    /// `identifier`, `id`, `ID`, `URL`, `url`. When a unique constraint consists of exactly those
    /// attributes, the object is found through its index in O(1); otherwise every object of the
    /// entity is scanned, O(n). With no identification attribute, or a `nil` or missing value
    /// for one, a new object is inserted. Values compare as stored bytes, as unique constraints
    /// compare them.
    ///
    /// An update goes through change tracking: a value equal to the stored one changes nothing,
    /// and an object whose values are all equal is not updated. Atomic: when anything throws,
    /// the context is as it was before the call.
    ///
    /// - Returns: The object created or updated.
    /// - Throws: ``MappingError`` with code `unknownEntity` (no entity named `name`),
    ///   `notAStruct` (`value` is not a struct), `unknownProperty` (a property the entity has no
    ///   attribute for; relationships are not set from values), `unstorableProperty` (a
    ///   property whose type or value its attribute cannot hold, or `nil` for a non-optional
    ///   attribute), `codingFailed` (a `Codable` property whose encoding threw) or
    ///   `invalidIdentification` (an ``IdentifiedEntity`` names an attribute the entity lacks).
    ///   Each names the entity, and the property and attribute concerned.
    @discardableResult
    public func upsert(structValue value: Any, entityNamed name: String) throws -> any Entity {
        guard let table = table(named: name) else {
            throw MappingError(.unknownEntity, "no entity named '\(name)' in this context's schema", entity: name)
        }
        let row = try upsertStruct(value, into: table)
        return table.instance(row: row)
    }

    /// Creates or updates an object of `type` from the stored properties of the struct `value`,
    /// read through reflection; see ``upsert(structValue:entityNamed:)`` for every rule.
    ///
    /// ```swift
    /// let person = try context.upsert(structValue: record, as: Person.self)
    /// ```
    ///
    /// - Throws: ``MappingError``, as ``upsert(structValue:entityNamed:)`` does; `unknownEntity`
    ///   when `type` is not in the context's schema.
    @discardableResult
    public func upsert<T: Entity>(structValue value: Any, as type: T.Type) throws -> T {
        let table = try valueMappingTable(for: type)
        let row = try upsertStruct(value, into: table)
        return try valueMappingObject(row: row, in: table, as: type)
    }

    private func upsertStruct(_ value: Any, into table: EntityTable) throws -> Int {
        let slots = try structSlots(value, entity: table.entity)
        let writer = try SlotValueWriter(table: table, batch: false)
        return try _withImportSavepoint { writer.write(slots) }
    }

    /// The values of a struct's stored properties for the slots of `entity`.
    private func structSlots(_ value: Any, entity: EntityDescription) throws(MappingError) -> AttributeSlots {
        let mirror = Mirror(reflecting: value)
        guard mirror.displayStyle == .struct else {
            let kind = mirror.displayStyle.map { "\($0)" } ?? "a plain value"
            throw MappingError(
                .notAStruct, "a \(type(of: value)) is not a struct (it is \(kind)); only a struct's stored properties map onto \(entity.name)",
                value: "\(value)", entity: entity.name)
        }
        let slots = AttributeSlots(count: entity.attributes.count)
        for child in mirror.children {
            guard let name = child.label else { continue }
            guard let s = entity.slot(forKey: name), !entity.attributes[s].isRelationship else {
                let what = entity.slot(forKey: name) != nil || entity.relationships.contains { $0.name == name }
                    ? "'\(name)' is a relationship of \(entity.name), which a struct value cannot set"
                    : "\(entity.name) has no attribute '\(name)'"
                throw MappingError(
                    .unknownProperty, "\(what); the struct's property '\(name)' has nowhere to go",
                    keyPath: name, value: "\(child.value)", entity: entity.name, attribute: name)
            }
            let attribute = entity.attributes[s]
            guard let unwrapped = valueMappingUnwrapped(child.value) else {
                guard attribute.isOptional else {
                    throw MappingError(
                        .unstorableProperty, "\(entity.name).\(name) is not optional, and the struct's '\(name)' is nil",
                        keyPath: name, value: "nil", entity: entity.name, attribute: name)
                }
                slots.set(s, nil)
                continue
            }
            switch attribute.storedValue(for: unwrapped) {
            case .success(let v):
                slots.set(s, v)
            case .failure(let problem):
                throw problem.error(
                    entity: entity.name, attribute: attribute, property: name, value: unwrapped, source: "the struct's", sourceIndex: nil)
            }
        }
        return slots
    }

    // MARK: Encodable values

    /// Creates or updates an object of `type` from an `Encodable` value: each key the value
    /// encodes sets the attribute of the same name, without reflection.
    ///
    /// ```swift
    /// struct PersonRecord: Codable { var id: Int64; var name: String; var city: String? }
    /// let person = try context.upsert(PersonRecord(id: 7, name: "Ada", city: nil), as: Person.self)
    /// ```
    ///
    /// The rules are those of ``upsert(structValue:entityNamed:)``: values convert the same
    /// way (enums by raw value, other `Codable` properties into `Codable` attributes of their
    /// type), a `nil` optional sets `nil` (refused for a non-optional attribute; the synthesized
    /// `encodeIfPresent` counts as setting it), keys the value does not encode leave their
    /// attributes alone, and the object is found by the inferred identification attributes,
    /// in O(1) through a unique index on exactly those, otherwise by a scan of the entity's
    /// objects. Properties a superclass encodes through `superEncoder()` map onto the same
    /// object. Atomic.
    ///
    /// - Returns: The object created or updated.
    /// - Throws: ``MappingError`` with code `unknownEntity` (`type` is not in the schema),
    ///   `unknownProperty` (an encoded key that names no attribute), `unstorableProperty` (a
    ///   value its attribute cannot hold, `nil` for a non-optional attribute, or a key encoded
    ///   as a nested container), `codingFailed` (the value encodes no keyed properties, or its
    ///   encoding threw) or `invalidIdentification`.
    @discardableResult
    public func upsert<T: Entity, V: Encodable>(_ value: V, as type: T.Type) throws -> T {
        let table = try valueMappingTable(for: type)
        let writer = try SlotValueWriter(table: table, batch: false)
        let encoder = AttributeEncoder(entity: table.entity)
        defer { encoder.finish() }
        try encoder.encode(value, sourceIndex: nil)
        return try _withImportSavepoint {
            try valueMappingObject(row: writer.write(encoder.slots), in: table, as: type)
        }
    }

    /// Creates or updates one object of `type` per `Encodable` value, in order, with the rules
    /// of ``upsert(_:as:)-(V,_)``; returns the objects in the order of the values (an object
    /// that several values identify appears once per value, with the last value's attributes).
    ///
    /// ```swift
    /// let people = try context.upsert(records, as: Person.self)
    /// try context.save()
    /// ```
    ///
    /// Made for bulk use: one encoder, one keyed container and one buffer of attribute values
    /// serve every value, and without a unique index on the identification attributes the
    /// objects are found through a table of them built once per call, so n values cost O(n)
    /// lookups rather than n scans.
    ///
    /// Atomic as a whole: when a value fails, every change this call made is undone.
    ///
    /// Arrays come here through their own overload. Another sequence that is `Encodable`
    /// itself, such as a `Set`, comes here when the result is typed `[T]`
    /// (`let people: [Person] = try context.upsert(set, as: Person.self)`).
    ///
    /// - Throws: ``MappingError`` as ``upsert(_:as:)-(V,_)`` throws it, whose ``MappingError/sourceIndex``
    ///   is the position of the failing value in `values`.
    @discardableResult
    public func upsert<T: Entity, S: Sequence>(_ values: S, as type: T.Type) throws -> [T] where S.Element: Encodable {
        try upsertBatch(values, as: type)
    }

    /// Creates or updates one object of `type` per element of the array `values`: the batch
    /// ``upsert(_:as:)-(S,_)``, chosen for arrays (which are `Encodable` values themselves).
    ///
    /// - Throws: ``MappingError`` whose ``MappingError/sourceIndex`` is the failing element's index.
    @discardableResult
    public func upsert<T: Entity, E: Encodable>(_ values: [E], as type: T.Type) throws -> [T] {
        try upsertBatch(values, as: type)
    }

    private func upsertBatch<T: Entity, S: Sequence>(_ values: S, as type: T.Type) throws -> [T] where S.Element: Encodable {
        let table = try valueMappingTable(for: type)
        let writer = try SlotValueWriter(table: table, batch: true)
        let encoder = AttributeEncoder(entity: table.entity)
        defer { encoder.finish() }
        return try _withImportSavepoint {
            table.prepareForInserts(count: values.underestimatedCount)
            var result: [T] = []
            result.reserveCapacity(values.underestimatedCount)
            var i = 0
            for value in values {
                try encoder.encode(value, sourceIndex: i)
                result.append(try valueMappingObject(row: writer.write(encoder.slots), in: table, as: type))
                i += 1
            }
            return result
        }
    }

    // MARK: Helpers

    /// The table of `type`, or ``MappingError`` `unknownEntity`.
    func valueMappingTable<T: Entity>(for type: T.Type) throws(MappingError) -> EntityTable {
        do {
            return try table(for: type)
        } catch {
            throw MappingError(.unknownEntity, "\(type) is not an entity of this context's schema", entity: "\(type)")
        }
    }

    /// The object of `row` (an instance made now for a row just inserted).
    @inline(__always)
    func valueMappingObject<T: Entity>(row: Int, in table: EntityTable, as type: T.Type) throws(MappingError) -> T {
        if table.instances[row] == nil && table.isInserted(row: row) {
            let object = T(_backing: ObjectBacking(table: table, row: Int32(row)))
            table.instances[row] = object
            return object
        }
        guard let object = table.instance(row: row) as? T else {
            throw MappingError(.unknownEntity, "the objects of \(table.entity.name) are not \(type) instances", entity: table.entity.name)
        }
        return object
    }
}

/// `value` without its `Optional` wrappings, or `nil` for a `nil` at any depth.
func valueMappingUnwrapped(_ value: Any) -> Any? {
    guard let optional = value as? any ValueMappingOptional else { return value }
    return optional.wrappedValue.flatMap(valueMappingUnwrapped)
}

// MARK: Conversion

/// Why a Swift value cannot be stored by an attribute.
enum StoredValueProblem: Error {
    /// Its type is not one the attribute holds, or its value does not fit.
    case wrongType
    /// It is a raw value that is no case of the attribute's enum type (the check's words).
    case notACase(String)
    /// It is of the attribute's `Codable` type, and encoding it threw (the error's words).
    case encodingFailed(String)

    /// The ``MappingError`` that names `property` of a source (`"the struct's"`) and `attribute`.
    func error(
        entity: String, attribute a: AttributeDescription, property: String, value: Any, source: String, sourceIndex: Int?
    ) -> MappingError {
        let shown = "\(value)"
        switch self {
        case .wrongType:
            return MappingError(
                .unstorableProperty,
                "\(entity).\(a.name) holds \(a.swiftTypeName) (stored as \(a.type.rawValue)); \(source) property '\(property)' is a \(type(of: value)): \(shown)",
                sourceIndex: sourceIndex, keyPath: property, value: shown, entity: entity, attribute: a.name)
        case .notACase(let problem):
            return MappingError(
                .unstorableProperty, "\(entity).\(a.name) holds \(a.swiftTypeName): \(problem) (\(source) property '\(property)', a \(type(of: value)))",
                sourceIndex: sourceIndex, keyPath: property, value: shown, entity: entity, attribute: a.name)
        case .encodingFailed(let reason):
            return MappingError(
                .codingFailed, "\(source) property '\(property)', a \(type(of: value)), could not be encoded for \(entity).\(a.name): \(reason)",
                sourceIndex: sourceIndex, keyPath: property, value: shown, entity: entity, attribute: a.name)
        }
    }
}

extension AttributeDescription {
    /// The value this attribute stores for the Swift value `value` (not `nil`, no `Optional`):
    /// the JSON of a value of its own `Codable` type; else the value converted exactly to the
    /// storage type, or the raw value of a `RawRepresentable` value converted so; an enum
    /// attribute's raw value checked to be a case.
    func storedValue(for value: Any) -> Result<AttributeValue, StoredValueProblem> {
        if valueKind == .codable {
            guard holdsCodable(typeNamed: "\(Swift.type(of: value))"), let encodable = value as? any Encodable else {
                return .failure(.wrongType)
            }
            do {
                return .success(.data(try CodableAttributeCoder.encode(encodable)))
            } catch {
                return .failure(.encodingFailed("\(error)"))
            }
        }
        var stored = AttributeValue.coerce(value, to: type)
        if stored == nil, let raw = value as? any RawRepresentable {
            stored = AttributeValue.coerce(raw.rawValue, to: type)
        }
        guard let stored else { return .failure(.wrongType) }
        if let check = rawValueCheck, let problem = check.check(stored) { return .failure(.notACase(problem)) }
        return .success(stored)
    }

    /// Whether this `Codable` attribute holds values of the Swift type named `name`: its own
    /// type, or any type when the description names none (a hand-made description whose type
    /// name is its storage type's).
    func holdsCodable(typeNamed name: String) -> Bool {
        swiftTypeName == name || swiftTypeName == type.rawValue
    }
}

extension MappingError {
    /// This error with `sourceIndex` filled in, unless it has one.
    func located(at sourceIndex: Int?) -> MappingError {
        guard let sourceIndex, self.sourceIndex == nil else { return self }
        return MappingError(
            code, message, byteOffset: byteOffset, sourceIndex: sourceIndex, keyPath: keyPath, value: value, entity: entity,
            attribute: attribute)
    }
}

// MARK: Writing

/// Writes the values of an ``AttributeSlots`` buffer into objects of one entity: finds the
/// object the identification attributes' values name and updates it through change tracking,
/// or inserts a new object.
///
/// Identification is by the attributes `MappingDefinition.inferIdentification(of:)` returns.
/// With a unique index on exactly those, the lookup is the index's, O(1). Without one, a
/// single value scans the entity's objects (O(n)); a batch builds a hash table of them on its
/// first lookup and adds what it inserts, so that each further lookup is O(1). Values compare
/// as stored bytes, as the unique indexes compare them. When several objects share a key, the
/// first in storage order is the one found.
///
/// The mutable properties opt out of dynamic exclusivity checking, as `EntityTable`'s do: a
/// writer serves one call on its context's isolation domain, and no method holds an access to
/// one of them across a call that touches the same property.
final class SlotValueWriter {
    let table: EntityTable
    /// The slots of the identification attributes (in the unique index's order when there is
    /// one); empty: every value inserts.
    let identification: [Int]
    /// The unique index whose keys are exactly the identification attributes.
    let index: UniqueIndex?
    /// Whether lookups without an index use ``buckets`` (a batch) rather than a scan.
    let usesLookupTable: Bool

    /// Open addressing over the rows with an identification key: -1 empty, else a row. Built on
    /// the first lookup of a batch without an index.
    @exclusivity(unchecked) private var buckets: [Int32]?
    @exclusivity(unchecked) private var used = 0
    private let seed = _KeyHasher.randomSeed()
    /// The hash of the key the last lookup in ``buckets`` did not find: the key of the row
    /// inserted next, unless `awakeFromInsert` runs.
    @exclusivity(unchecked) private var missedHash: Int?

    /// A writer into `table`; `batch` when it serves many values.
    ///
    /// - Throws: ``MappingError`` `invalidIdentification` when the entity's declared
    ///   identification names an attribute it lacks.
    init(table: EntityTable, batch: Bool) throws(MappingError) {
        self.table = table
        let entity = table.entity
        var slots: [Int] = []
        for name in MappingDefinition.inferIdentification(of: entity) {
            guard let s = entity.slot(forKey: name), !entity.attributes[s].isRelationship else {
                throw MappingError(
                    .invalidIdentification, "the identification attributes of \(entity.name) name '\(name)', which is no attribute of it",
                    entity: entity.name, attribute: name)
            }
            slots.append(s)
        }
        index = slots.isEmpty ? nil : table.uniqueIndex(slots: slots)
        identification = index?.slots ?? slots
        usesLookupTable = batch
    }

    /// Writes `values` into the object they identify, or into a new object; returns its row.
    func write(_ values: AttributeSlots) -> Int {
        missedHash = nil
        if let row = existingRow(values) {
            for s in values.touched { table.set(row: row, slot: s, value: values.values[s]) }
            return row
        }
        let row: Int
        let awakened = table.hooks.contains(.awakeFromInsert)
        if awakened {
            // The hook runs before the values are set, as for an insert by hand.
            row = table.insertRow()
            table.instance(row: row).awakeFromInsert()
            for s in values.touched { table.set(row: row, slot: s, value: values.values[s]) }
        } else {
            // A new row needs no change tracking: its cells are written, then it is indexed once.
            row = table.insertRow(indexed: false)
            for s in values.touched {
                if let v = values.values[s] {
                    v.withCell { table.writeFresh(row: row, slot: s, $0) }
                } else {
                    table.nulls[row * table.maskWords + s / 64] |= 1 << UInt64(s % 64)
                }
            }
            table.touchIndexes(row: row)
            if !table.uniqueIndexes.isEmpty { table.indexAll(row: row) }
        }
        if buckets != nil {
            // The hook may have changed the key; without it the key is the one just missed.
            if let h = awakened ? rowHash(row) : missedHash ?? rowHash(row) { add(row, hash: h) }
        }
        return row
    }

    // MARK: Lookup

    /// The visible row whose identification attributes hold the values' ones, if any.
    private func existingRow(_ values: AttributeSlots) -> Int? {
        guard !identification.isEmpty else { return nil }
        if identification.count == 1 {
            guard let v = values.value(identification[0]) else { return nil }
            return v.withCell { find(cell: $0) }
        }
        var key: [AttributeValue] = []
        key.reserveCapacity(identification.count)
        for s in identification {
            guard let v = values.value(s) else { return nil }
            key.append(v)
        }
        return withCells(key) { find(cells: $0) }
    }

    /// ``existingRow(_:)`` for a one-attribute key: no array, no generic code.
    private func find(cell: RawCell) -> Int? {
        let slot = identification[0]
        if let index {
            guard let row = table.owner(ofCell: cell, in: index), table.isVisible(row: row) else { return nil }
            return row
        }
        return lookUp(hashing: { Self.combine(cell, into: &$0) }, matches: { self.row($0, holds: cell, slot: slot) })
    }

    /// ``existingRow(_:)`` for a compound key, its cells in ``identification``'s order.
    private func find(cells: [RawCell]) -> Int? {
        if let index {
            guard let row = table.owner(ofCells: cells, in: index), table.isVisible(row: row) else { return nil }
            return row
        }
        func holds(_ row: Int) -> Bool {
            for (i, s) in identification.enumerated() where !self.row(row, holds: cells[i], slot: s) { return false }
            return true
        }
        return lookUp(hashing: { hasher in for cell in cells { Self.combine(cell, into: &hasher) } }, matches: holds)
    }

    /// The visible row whose key `matches` accepts: a scan of the table, or a probe of the
    /// batch's lookup table (built on first use) with the key's hash, which `hashing` feeds.
    private func lookUp(hashing: (inout _KeyHasher) -> Void, matches: (Int) -> Bool) -> Int? {
        guard usesLookupTable else {
            for row in 0..<table.rowCount where table.isVisible(row: row) && matches(row) { return row }
            return nil
        }
        if buckets == nil { buildLookupTable() }
        guard let buckets else { return nil }
        var hasher = _KeyHasher(seed: seed)
        hashing(&hasher)
        let mask = buckets.count - 1
        let h = hasher.finalize()
        var b = h & mask
        while true {
            let r = Int(buckets[b])
            if r < 0 {
                missedHash = h
                return nil
            }
            if table.isVisible(row: r) && matches(r) { return r }
            b = (b + 1) & mask
        }
    }

    /// Whether `row`'s attribute at `slot` holds `cell`, byte for byte.
    private func row(_ row: Int, holds cell: RawCell, slot s: Int) -> Bool {
        if table.isNull(row: row, slot: s) { return false }
        let x = table.values[row * table.stride + s]
        switch cell {
        case .fixed(let bits): return !table.types[s].isVariableLength && x == bits
        case .bytes(let buffer): return table.types[s].isVariableLength && table.arena.equal(ArenaRef(x), buffer)
        }
    }

    /// Whether two rows have the same identification key.
    private func sameKey(_ a: Int, _ b: Int) -> Bool {
        for s in identification {
            let x = table.values[a * table.stride + s], y = table.values[b * table.stride + s]
            if x == y { continue }
            if !table.types[s].isVariableLength || !table.arena.equal(ArenaRef(x), ArenaRef(y)) { return false }
        }
        return true
    }

    private static func combine(_ cell: RawCell, into hasher: inout _KeyHasher) {
        switch cell {
        case .fixed(let bits): hasher.combine(bits)
        case .bytes(let buffer): hasher.combine(bytes: buffer)
        }
    }

    /// The hash of `row`'s key, equal to the hash ``find(cell:)`` and ``find(cells:)`` compute of
    /// its cells; nil when a key attribute is nil.
    private func rowHash(_ row: Int) -> Int? {
        var hasher = _KeyHasher(seed: seed)
        for s in identification {
            if table.isNull(row: row, slot: s) { return nil }
            let cell = table.values[row * table.stride + s]
            if table.types[s].isVariableLength {
                table.arena.withBytes(ArenaRef(cell)) { hasher.combine(bytes: $0) }
            } else {
                hasher.combine(cell)
            }
        }
        return hasher.finalize()
    }

    /// Fills ``buckets`` with every visible row that has a key.
    private func buildLookupTable() {
        var size = 16
        while size < table.liveCount * 2 { size <<= 1 }
        buckets = Array(repeating: -1, count: size)
        used = 0
        for row in 0..<table.rowCount where table.isVisible(row: row) {
            if let h = rowHash(row) { add(row, hash: h) }
        }
    }

    /// Adds `row` under `hash`, unless a row with its key is there already (the first stays).
    private func add(_ row: Int, hash h: Int) {
        guard var current = buckets else { return }
        buckets = nil  // `current` the only reference: changed in place
        defer { buckets = current }
        if (used + 1) * 2 > current.count {
            let rows = current.filter { $0 >= 0 }
            current = Array(repeating: -1, count: current.count * 2)
            used = 0
            for r in rows where table.isVisible(row: Int(r)) {
                if let rh = rowHash(Int(r)) { place(Int(r), hash: rh, in: &current) }
            }
        }
        place(row, hash: h, in: &current)
    }

    private func place(_ row: Int, hash h: Int, in buckets: inout [Int32]) {
        let mask = buckets.count - 1
        var b = h & mask
        while buckets[b] >= 0 {
            let r = Int(buckets[b])
            if r == row || (table.isVisible(row: r) && sameKey(r, row)) { return }
            b = (b + 1) & mask
        }
        buckets[b] = Int32(row)
        used += 1
    }
}
