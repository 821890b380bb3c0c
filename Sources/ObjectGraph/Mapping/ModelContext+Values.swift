import Foundation

// Swift values as sources: structs through reflection, Encodable values through
// AttributeEncoder, both written into objects by SlotValueWriter.

extension ModelContext {
    // MARK: Structs, through reflection

    /// Inserts a new object of the entity named `name` holding the stored properties of the
    /// struct `value`, read through reflection (`Mirror`): each property sets the attribute of
    /// the same name. Never looks for an existing object: two values insert two objects, even
    /// when all their values are equal (Core Data's `insertNewObject(forEntityName:into:)`).
    ///
    /// ```swift
    /// struct BookmarkRecord { var url: URL; var title: String }
    /// try context.insert(structValue: BookmarkRecord(url: home, title: "Home"), entityNamed: "Bookmark")
    /// try context.insert(structValue: BookmarkRecord(url: home, title: "Start"), entityNamed: "Bookmark")  // a second object
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
    /// - Attributes the struct has no property for get their defaults. `awakeFromInsert` runs
    ///   before the values are set, as for an insert by hand.
    ///
    /// A unique constraint still holds: an insert whose key another object has is a collision
    /// that the save reports or merges, as for any insert. Atomic: when anything throws, the
    /// context is as it was before the call.
    ///
    /// - Returns: The object inserted.
    /// - Throws: ``MappingError`` with code `unknownEntity` (no entity named `name`),
    ///   `notAStruct` (`value` is not a struct), `unknownProperty` (a property the entity has no
    ///   attribute for; relationships are not set from values), `unstorableProperty` (a
    ///   property whose type or value its attribute cannot hold, or `nil` for a non-optional
    ///   attribute) or `codingFailed` (a `Codable` property whose encoding threw). Each names
    ///   the entity, and the property and attribute concerned.
    @discardableResult
    public func insert(structValue value: Any, entityNamed name: String) throws -> any Entity {
        let table = try valueMappingTable(named: name)
        return table.instance(row: try writeStruct(value, into: table, identifiedBy: nil))
    }

    /// Inserts a new object of `type` holding the stored properties of the struct `value`, read
    /// through reflection; see ``insert(structValue:entityNamed:)`` for every rule. Never looks
    /// for an existing object.
    ///
    /// ```swift
    /// let first = try context.insert(structValue: BookmarkRecord(url: home, title: "Home"), as: Bookmark.self)
    /// let second = try context.insert(structValue: BookmarkRecord(url: home, title: "Start"), as: Bookmark.self)
    /// // first !== second: two bookmarks of the same URL
    /// ```
    ///
    /// - Throws: ``MappingError``, as ``insert(structValue:entityNamed:)`` does; `unknownEntity`
    ///   when `type` is not in the context's schema.
    @discardableResult
    public func insert<T: Entity>(structValue value: Any, as type: T.Type) throws -> T {
        let table = try valueMappingTable(for: type)
        return try valueMappingObject(row: writeStruct(value, into: table, identifiedBy: nil), in: table, as: type)
    }

    /// Updates the object of the entity named `name` that the struct `value` identifies, or
    /// inserts one, from the struct's stored properties, read through reflection (`Mirror`).
    ///
    /// ```swift
    /// struct PersonRecord { var id: Int64; var name: String; var city: String? }
    /// // Person declares its identity: `@Attribute(.unique) var id: Int64`.
    /// let person = try context.upsert(structValue: PersonRecord(id: 7, name: "Ada", city: nil),
    ///                                  entityNamed: "Person")
    /// ```
    ///
    /// Values convert as ``insert(structValue:entityNamed:)`` says. Attributes the struct has
    /// no property for keep their values (an existing object) or get their defaults (a new one).
    ///
    /// Identification (``ValueIdentity``): the object updated is the one whose identifying
    /// attributes hold the struct's values for them, compared as stored bytes. By default
    /// (``ValueIdentity/declared``) they are the ones the model declares: its
    /// ``IdentifiedEntity`` declaration, else its one unique constraint; an entity that declares
    /// neither is refused rather than guessed at. `identifiedBy: .attribute("url")` names
    /// them; `identifiedBy: .inferred` guesses from the attribute names, and
    /// ``ValueIdentity/identificationAttributes(for:)-(EntityDescription)`` says what it picks.
    /// - A `nil` value for an identifying attribute identifies nothing: a new object is
    ///   inserted.
    /// - A struct without a property for an identifying attribute is refused.
    /// - A value that identifies several existing objects is refused; none of them is changed.
    ///
    /// The lookup goes through an index, O(1) whatever the number of objects, and finds the
    /// objects inserted earlier in the same unsaved transaction: the unique constraint's index
    /// when one consists of exactly the identifying attributes, else a hash index of them that
    /// the context builds at the first such lookup and keeps up to date from then on (in
    /// memory only, about 30 bytes per object).
    ///
    /// An update goes through change tracking: a value equal to the stored one changes nothing,
    /// and an object whose values are all equal is not updated. Atomic: when anything throws,
    /// the context is as it was before the call.
    ///
    /// - Parameters:
    ///   - value: The struct whose stored properties set the attributes.
    ///   - name: The name of the entity, as the context's schema has it.
    ///   - identity: The attributes that identify the object; by default the model's.
    /// - Returns: The object created or updated.
    /// - Throws: ``MappingError`` with a code of ``insert(structValue:entityNamed:)``, or:
    ///   `invalidIdentification` (no identity declared, several unique constraints and no
    ///   declaration, a struct without a property for an identifying attribute), `unknownAttribute`
    ///   (`identity` names what is no attribute) or `ambiguousIdentification` (several objects
    ///   have the value's identity). Each names the entity, and the attribute concerned.
    @discardableResult
    public func upsert(
        structValue value: Any, entityNamed name: String, identifiedBy identity: ValueIdentity = .declared
    ) throws -> any Entity {
        let table = try valueMappingTable(named: name)
        return table.instance(row: try writeStruct(value, into: table, identifiedBy: identity))
    }

    /// Updates the object of `type` that the struct `value` identifies, or inserts one, from
    /// the struct's stored properties, read through reflection; see
    /// ``upsert(structValue:entityNamed:identifiedBy:)`` for every rule.
    ///
    /// ```swift
    /// let person = try context.upsert(structValue: record, as: Person.self)
    /// let bookmark = try context.upsert(structValue: saved, as: Bookmark.self, identifiedBy: .attribute("url"))
    /// ```
    ///
    /// - Parameters:
    ///   - value: The struct whose stored properties set the attributes.
    ///   - type: The entity class.
    ///   - identity: The attributes that identify the object; by default the model's.
    /// - Throws: ``MappingError``, as ``upsert(structValue:entityNamed:identifiedBy:)`` does;
    ///   `unknownEntity` when `type` is not in the context's schema.
    @discardableResult
    public func upsert<T: Entity>(
        structValue value: Any, as type: T.Type, identifiedBy identity: ValueIdentity = .declared
    ) throws -> T {
        let table = try valueMappingTable(for: type)
        return try valueMappingObject(row: writeStruct(value, into: table, identifiedBy: identity), in: table, as: type)
    }

    /// Writes the struct `value` into the object it identifies, or a new one (`identity` nil:
    /// always a new one); returns its row.
    private func writeStruct(_ value: Any, into table: EntityTable, identifiedBy identity: ValueIdentity?) throws -> Int
    {
        let writer = try SlotValueWriter(table: table, identifiedBy: identity)
        let slots = try structSlots(value, entity: table.entity)
        return try _withImportSavepoint { try writer.write(slots, sourceIndex: nil) }
    }

    /// The values of a struct's stored properties for the slots of `entity`.
    private func structSlots(_ value: Any, entity: EntityDescription) throws(MappingError) -> AttributeSlots {
        let mirror = Mirror(reflecting: value)
        guard mirror.displayStyle == .struct else {
            let kind = mirror.displayStyle.map { "\($0)" } ?? "a plain value"
            throw MappingError(
                .notAStruct,
                "a \(type(of: value)) is not a struct (it is \(kind)); only a struct's stored properties map onto \(entity.name)",
                value: "\(value)", entity: entity.name)
        }
        let slots = AttributeSlots(count: entity.attributes.count)
        for child in mirror.children {
            guard let name = child.label else { continue }
            guard let s = entity.slot(forKey: name), !entity.attributes[s].isRelationship else {
                let what =
                    entity.slot(forKey: name) != nil || entity.relationships.contains { $0.name == name }
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
                        .unstorableProperty,
                        "\(entity.name).\(name) is not optional, and the struct's '\(name)' is nil",
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
                    entity: entity.name, attribute: attribute, property: name, value: unwrapped, source: "the struct's",
                    sourceIndex: nil)
            }
        }
        return slots
    }

    // MARK: Encodable values

    /// Inserts a new object of `type` from an `Encodable` value: each key the value encodes
    /// sets the attribute of the same name, without reflection. Never looks for an existing
    /// object: two values insert two objects.
    ///
    /// ```swift
    /// struct BookmarkRecord: Codable { var url: URL; var title: String }
    /// let bookmark = try context.insert(BookmarkRecord(url: home, title: "Home"), as: Bookmark.self)
    /// ```
    ///
    /// Values convert as for ``insert(structValue:entityNamed:)`` (enums by raw value, other
    /// `Codable` properties into `Codable` attributes of their type); a `nil` optional sets
    /// `nil` (refused for a non-optional attribute; the synthesized `encodeIfPresent` counts as
    /// setting it), and attributes the value does not encode get their defaults. Properties a
    /// superclass encodes through `superEncoder()` map onto the same object. Atomic.
    ///
    /// - Returns: The object inserted.
    /// - Throws: ``MappingError`` with code `unknownEntity` (`type` is not in the schema),
    ///   `unknownProperty` (an encoded key that names no attribute), `unstorableProperty` (a
    ///   value its attribute cannot hold, `nil` for a non-optional attribute, or a key encoded
    ///   as a nested container) or `codingFailed` (the value encodes no keyed properties, or
    ///   its encoding threw).
    @discardableResult
    public func insert<T: Entity, V: Encodable>(_ value: V, as type: T.Type) throws -> T {
        try writeEncodable(value, as: type, identifiedBy: nil)
    }

    /// Inserts one new object of `type` per `Encodable` value, in order, with the rules of
    /// ``insert(_:as:)-(V,_)``; returns the objects in the order of the values.
    ///
    /// ```swift
    /// let bookmarks = try context.insert(records, as: Bookmark.self)
    /// try context.save()
    /// ```
    ///
    /// Made for bulk use: one encoder, one keyed container and one buffer of attribute values
    /// serve every value. Atomic as a whole: when a value fails, every change this call made is
    /// undone.
    ///
    /// Arrays come here through their own overload. Another sequence that is `Encodable`
    /// itself, such as a `Set`, comes here when the result is typed `[T]`.
    ///
    /// - Throws: ``MappingError`` as ``insert(_:as:)-(V,_)`` throws it, whose
    ///   ``MappingError/sourceIndex`` is the position of the failing value in `values`.
    @discardableResult
    public func insert<T: Entity, S: Sequence>(_ values: S, as type: T.Type) throws -> [T] where S.Element: Encodable {
        try writeBatch(values, as: type, identifiedBy: nil)
    }

    /// Inserts one new object of `type` per element of the array `values`: the batch
    /// ``insert(_:as:)-(S,_)``, chosen for arrays (which are `Encodable` values themselves).
    ///
    /// ```swift
    /// let bookmarks = try context.insert([home, start], as: Bookmark.self)
    /// ```
    ///
    /// - Throws: ``MappingError`` whose ``MappingError/sourceIndex`` is the failing element's index.
    @discardableResult
    public func insert<T: Entity, E: Encodable>(_ values: [E], as type: T.Type) throws -> [T] {
        try writeBatch(values, as: type, identifiedBy: nil)
    }

    /// Updates the object of `type` that the `Encodable` value identifies, or inserts one: each
    /// key the value encodes sets the attribute of the same name, without reflection.
    ///
    /// ```swift
    /// struct PersonRecord: Codable { var id: Int64; var name: String; var city: String? }
    /// let person = try context.upsert(PersonRecord(id: 7, name: "Ada", city: nil), as: Person.self)
    /// ```
    ///
    /// Values convert as ``insert(_:as:)-(V,_)`` says; keys the value does not encode leave
    /// their attributes alone. The object is found as
    /// ``upsert(structValue:entityNamed:identifiedBy:)`` finds it: by the model's declared
    /// identity unless `identity` says otherwise, through an index. Atomic.
    ///
    /// - Parameters:
    ///   - value: The value whose encoded keys set the attributes.
    ///   - type: The entity class.
    ///   - identity: The attributes that identify the object; by default the model's.
    /// - Returns: The object created or updated.
    /// - Throws: ``MappingError`` with a code of ``insert(_:as:)-(V,_)``, or
    ///   `invalidIdentification`, `unknownAttribute` or `ambiguousIdentification` as
    ///   ``upsert(structValue:entityNamed:identifiedBy:)`` throws them (a value that does not
    ///   encode an identifying attribute has no property for it).
    @discardableResult
    public func upsert<T: Entity, V: Encodable>(
        _ value: V, as type: T.Type, identifiedBy identity: ValueIdentity = .declared
    ) throws -> T {
        try writeEncodable(value, as: type, identifiedBy: identity)
    }

    /// Updates or inserts one object of `type` per `Encodable` value, in order, with the rules
    /// of ``upsert(_:as:identifiedBy:)-(V,_,_)``; returns the objects in the order of the
    /// values (an object that several values identify appears once per value, with the last
    /// value's attributes).
    ///
    /// ```swift
    /// let people = try context.upsert(records, as: Person.self)
    /// try context.save()
    /// ```
    ///
    /// Made for bulk use: one encoder, one keyed container and one buffer of attribute values
    /// serve every value, and each value's object is found through an index in O(1), those
    /// inserted by earlier values of the call included.
    ///
    /// Atomic as a whole: when a value fails, every change this call made is undone.
    ///
    /// Arrays come here through their own overload. Another sequence that is `Encodable`
    /// itself, such as a `Set`, comes here when the result is typed `[T]`
    /// (`let people: [Person] = try context.upsert(set, as: Person.self)`).
    ///
    /// - Parameters:
    ///   - values: The values, one object each.
    ///   - type: The entity class.
    ///   - identity: The attributes that identify the objects; by default the model's.
    /// - Throws: ``MappingError`` as ``upsert(_:as:identifiedBy:)-(V,_,_)`` throws it, whose
    ///   ``MappingError/sourceIndex`` is the position of the failing value in `values`.
    @discardableResult
    public func upsert<T: Entity, S: Sequence>(
        _ values: S, as type: T.Type, identifiedBy identity: ValueIdentity = .declared
    ) throws -> [T]
    where S.Element: Encodable {
        try writeBatch(values, as: type, identifiedBy: identity)
    }

    /// Updates or inserts one object of `type` per element of the array `values`: the batch
    /// ``upsert(_:as:identifiedBy:)-(S,_,_)``, chosen for arrays (which are `Encodable` values
    /// themselves).
    ///
    /// ```swift
    /// let people = try context.upsert([ada, grace], as: Person.self)
    /// ```
    ///
    /// - Parameters:
    ///   - values: The values, one object each.
    ///   - type: The entity class.
    ///   - identity: The attributes that identify the objects; by default the model's.
    /// - Throws: ``MappingError`` whose ``MappingError/sourceIndex`` is the failing element's index.
    @discardableResult
    public func upsert<T: Entity, E: Encodable>(
        _ values: [E], as type: T.Type, identifiedBy identity: ValueIdentity = .declared
    ) throws -> [T] {
        try writeBatch(values, as: type, identifiedBy: identity)
    }

    /// Updates or inserts one object of `type` per `Encodable` value, as
    /// ``upsert(_:as:identifiedBy:)-(S,_,_)`` does, without creating an instance for any of
    /// them: Core Data's `NSBatchInsertRequest`. The values go straight into the entity's table,
    /// with the same conversions, identification, typed and unique checks, and atomicity; the
    /// result counts what was inserted and updated, with the objects' IDs when asked for.
    ///
    /// ```swift
    /// let result = try context.batchUpsert(records, into: Person.self)
    /// try context.save()  // one journal record
    /// print(result.inserted, result.updated)
    /// ```
    ///
    /// No lifecycle hook runs for the values: a new object's `awakeFromInsert` is not called
    /// (Core Data's batch insert calls none either). The objects are pending changes of the
    /// context like any other until the save, which runs the save hooks (`willSave`,
    /// validation, `didSave`) for the entities that have them, creating their instances then;
    /// an entity without hooks is saved from its table, with no instance at all. An object
    /// looked up later gets its instance then, awoken by `awakeFromFetch` once saved.
    ///
    /// - Parameters:
    ///   - values: The values, one object each.
    ///   - type: The entity class.
    ///   - identity: The attributes that identify the objects; by default the model's.
    ///     `nil` inserts every value as a new object.
    ///   - returningIDs: Whether the result lists the objects' IDs, in the order of the values.
    /// - Throws: ``MappingError`` as ``upsert(_:as:identifiedBy:)-(S,_,_)`` throws it; every
    ///   change the call made is undone then.
    @discardableResult
    public func batchUpsert<T: Entity, S: Sequence>(
        _ values: S, into type: T.Type, identifiedBy identity: ValueIdentity? = .declared, returningIDs: Bool = false
    ) throws -> BatchUpsertResult
    where S.Element: Encodable {
        let table = try valueMappingTable(for: type)
        let writer = try SlotValueWriter(table: table, identifiedBy: identity)
        writer.awakesInserts = false
        // Two encoders, one value apart: the value after the one being written is encoded first,
        // and the index bucket its key hashes to is prefetched, so that the lookup of each value
        // finds its bucket cached (in a table past the CPU's caches each lookup is otherwise a
        // miss of about 150 ns, paid before anything else of the value can proceed).
        var current = AttributeEncoder(entity: table.entity)
        var ahead = AttributeEncoder(entity: table.entity)
        defer {
            current.finish()
            ahead.finish()
        }
        return try _withImportSavepoint {
            table.prepareForInserts(count: values.underestimatedCount)
            var result = BatchUpsertResult()
            if returningIDs { result.objectIDs.reserveCapacity(values.underestimatedCount) }
            var iterator = values.makeIterator()
            guard let first = iterator.next() else { return result }
            try current.encode(first, sourceIndex: 0)
            var i = 0
            while true {
                // The next value's encoding may fail: the values before it are written first,
                // so that the first error in the order of the values is the one thrown.
                var next: Result<Void, any Error>?
                if let value = iterator.next() {
                    do {
                        try ahead.encode(value, sourceIndex: i + 1)
                        writer.prefetchIdentification(of: ahead.slots)
                        next = .success(())
                    } catch {
                        next = .failure(error)
                    }
                }
                let row = try writer.write(current.slots, sourceIndex: i)
                if writer.lastWriteInserted { result.inserted += 1 } else { result.updated += 1 }
                if returningIDs {
                    result.objectIDs.append(
                        ObjectID(entityName: table.entity.name, serial: table.identity.serialOfRow[row]))
                }
                guard let next else { return result }
                try next.get()
                swap(&current, &ahead)
                i += 1
            }
        }
    }

    private func writeEncodable<T: Entity, V: Encodable>(
        _ value: V, as type: T.Type, identifiedBy identity: ValueIdentity?
    ) throws -> T {
        let table = try valueMappingTable(for: type)
        let writer = try SlotValueWriter(table: table, identifiedBy: identity)
        let encoder = AttributeEncoder(entity: table.entity)
        defer { encoder.finish() }
        try encoder.encode(value, sourceIndex: nil)
        return try _withImportSavepoint {
            try valueMappingObject(row: writer.write(encoder.slots, sourceIndex: nil), in: table, as: type)
        }
    }

    private func writeBatch<T: Entity, S: Sequence>(
        _ values: S, as type: T.Type, identifiedBy identity: ValueIdentity?
    ) throws -> [T]
    where S.Element: Encodable {
        let table = try valueMappingTable(for: type)
        let writer = try SlotValueWriter(table: table, identifiedBy: identity)
        let encoder = AttributeEncoder(entity: table.entity)
        defer { encoder.finish() }
        return try _withImportSavepoint {
            table.prepareForInserts(count: values.underestimatedCount)
            var result: [T] = []
            result.reserveCapacity(values.underestimatedCount)
            var i = 0
            for value in values {
                try encoder.encode(value, sourceIndex: i)
                result.append(
                    try valueMappingObject(row: writer.write(encoder.slots, sourceIndex: i), in: table, as: type))
                i += 1
            }
            return result
        }
    }

    // MARK: Helpers

    /// The table of the entity named `name`, or ``MappingError`` `unknownEntity`.
    func valueMappingTable(named name: String) throws(MappingError) -> EntityTable {
        guard let table = table(named: name) else {
            throw MappingError(.unknownEntity, "no entity named '\(name)' in this context's schema", entity: name)
        }
        return table
    }

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
            table.register(object, row: row)
            return object
        }
        guard let object = table.instance(row: row) as? T else {
            throw MappingError(
                .unknownEntity, "the objects of \(table.entity.name) are not \(type) instances",
                entity: table.entity.name)
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
    /// It is of a `Codable` type named like the attribute's, but its JSON does not decode as
    /// the attribute's type (the decoding error's words).
    case notDecodable(String)

    /// The ``MappingError`` that names `property` of a source (`"the struct's"`) and `attribute`.
    func error(
        entity: String, attribute a: AttributeDescription, property: String, value: Any, source: String,
        sourceIndex: Int?
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
                .unstorableProperty,
                "\(entity).\(a.name) holds \(a.swiftTypeName): \(problem) (\(source) property '\(property)', a \(type(of: value)))",
                sourceIndex: sourceIndex, keyPath: property, value: shown, entity: entity, attribute: a.name)
        case .notDecodable(let problem):
            return MappingError(
                .unstorableProperty,
                "\(entity).\(a.name) holds \(a.swiftTypeName); \(source) property '\(property)', a \(type(of: value)) of that name, encodes as JSON that does not decode as it: \(problem)",
                sourceIndex: sourceIndex, keyPath: property, value: shown, entity: entity, attribute: a.name)
        case .encodingFailed(let reason):
            return MappingError(
                .codingFailed,
                "\(source) property '\(property)', a \(type(of: value)), could not be encoded for \(entity).\(a.name): \(reason)",
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
            let data: Data
            do {
                data = try CodableAttributeCoder.encode(encodable)
            } catch {
                return .failure(.encodingFailed("\(error)"))
            }
            if let problem = codableProblem(data, encodedFrom: Swift.type(of: value)) {
                return .failure(.notDecodable(problem))
            }
            return .success(.data(data))
        }
        var stored = AttributeValue.coerce(value, to: type)
        if stored == nil, let raw = value as? any RawRepresentable {
            stored = AttributeValue.coerce(raw.rawValue, to: type)
        }
        guard let stored else { return .failure(.wrongType) }
        if let check = rawValueCheck, let problem = check.check(stored) { return .failure(.notACase(problem)) }
        return .success(stored)
    }

    /// Why `data`, the JSON of a value of `type`, cannot be stored in this `Codable` attribute,
    /// or nil. A value of the attribute's own type needs no check; one of another type that
    /// bears its name (from another module or namespace) must decode as the attribute's type,
    /// so that what is stored always reads back.
    func codableProblem(_ data: Data, encodedFrom type: Any.Type) -> String? {
        guard let check = codableCheck, check.decodedType != ObjectIdentifier(type) else { return nil }
        return check.check(.data(data))
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
            code, message, byteOffset: byteOffset, sourceIndex: sourceIndex, keyPath: keyPath, value: value,
            entity: entity,
            attribute: attribute)
    }
}

// MARK: Writing

/// Writes the values of an ``AttributeSlots`` buffer into objects of one entity: finds the
/// object the identifying attributes' values name and updates it through change tracking, or
/// inserts a new object. Without identification it inserts every value.
///
/// The lookup goes through the unique index whose keys are exactly the identifying attributes,
/// or else through the table's ``IdentityIndex`` of them (made and built at the first lookup,
/// then kept up to date by the table): O(1) per value either way, pending inserts included.
/// Values compare as stored bytes, as the unique indexes compare them.
final class SlotValueWriter {
    let table: EntityTable
    /// The slots of the identifying attributes, in the order of the index that serves them;
    /// empty: every value inserts.
    let identification: [Int]
    /// The unique index whose keys are exactly the identifying attributes.
    let unique: UniqueIndex?
    /// The index of the identifying attributes when no unique index has exactly them as keys.
    let identity: IdentityIndex?
    /// Whether a new object gets an instance and its `awakeFromInsert` (false for a batch
    /// upsert, which creates no instance).
    var awakesInserts = true
    /// Whether the last ``write(_:sourceIndex:)`` inserted a new object.
    private(set) var lastWriteInserted = false

    /// A writer into `table` that identifies objects by `identity`, or inserts every value
    /// when it is nil.
    ///
    /// - Throws: ``MappingError`` as ``ValueIdentity/identificationAttributes(for:)-(EntityDescription)`` does.
    init(table: EntityTable, identifiedBy identity: ValueIdentity?) throws(MappingError) {
        self.table = table
        guard let identity else {
            identification = []
            unique = nil
            self.identity = nil
            return
        }
        let entity = table.entity
        var slots: [Int] = []
        for name in try identity.identificationAttributes(for: entity) {
            guard let s = entity.slot(forKey: name), !entity.attributes[s].isRelationship else {
                throw MappingError(
                    .invalidIdentification,
                    "the identification attributes of \(entity.name) name '\(name)', which is no attribute of it",
                    entity: entity.name, attribute: name)
            }
            slots.append(s)
        }
        if let index = table.uniqueIndex(slots: slots) {
            unique = index
            self.identity = nil
            identification = index.slots
        } else {
            let index = table.identityIndex(slots: slots)
            unique = nil
            self.identity = index
            identification = index.slots
        }
    }

    /// Writes `values` into the object they identify, or into a new object; returns its row.
    ///
    /// - Throws: ``MappingError`` `invalidIdentification` when `values` has no value for an
    ///   identifying attribute, or `ambiguousIdentification` when several objects have the
    ///   values' key; located at `sourceIndex`.
    func write(_ values: AttributeSlots, sourceIndex: Int?) throws(MappingError) -> Int {
        if !identification.isEmpty, let row = try existingRow(values, sourceIndex: sourceIndex) {
            for s in values.touched { table.set(row: row, slot: s, value: values.values[s]) }
            lastWriteInserted = false
            return row
        }
        lastWriteInserted = true
        let row: Int
        if awakesInserts && table.hooks.contains(.awakeFromInsert) {
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
            if !table.indexes.uniqueIndexes.isEmpty { table.indexAll(row: row) }
        }
        return row
    }

    // MARK: Lookup

    /// Prefetches the index bucket where the lookup of `values` (a value to be written soon)
    /// starts, when one attribute identifies objects through a unique index; a hint only.
    @inline(__always)
    func prefetchIdentification(of values: AttributeSlots) {
        guard let unique, identification.count == 1, let v = values.value(identification[0]) else { return }
        unique.prefetchHome(v.withCell { unique.hash(cell: $0) })
    }

    /// The visible row whose identifying attributes hold the values' ones, if any.
    private func existingRow(_ values: AttributeSlots, sourceIndex: Int?) throws(MappingError) -> Int? {
        let entity = table.entity
        for s in identification where !values.isSet[s] {
            let name = entity.attributes[s].name
            throw MappingError(
                .invalidIdentification,
                "the value has no property '\(name)', and \(entity.name).\(name) identifies its objects: without it, the upsert cannot "
                    + "tell which object the value describes",
                sourceIndex: sourceIndex, keyPath: name, entity: entity.name, attribute: name)
        }
        if let unique, identification.count == 1 {
            guard let v = values.value(identification[0]) else { return nil }
            guard let row = v.withCell({ table.owner(ofCell: $0, in: unique) }), table.isVisible(row: row) else {
                return nil
            }
            return row
        }
        var key: [AttributeValue] = []
        key.reserveCapacity(identification.count)
        for s in identification {
            guard let v = values.value(s) else { return nil }  // a nil key identifies nothing
            key.append(v)
        }
        if let unique {
            guard let row = withCells(key, { table.owner(ofCells: $0, in: unique) }), table.isVisible(row: row) else {
                return nil
            }
            return row
        }
        guard let identity else { return nil }
        switch withCells(key, { table.identityMatch(cells: $0, in: identity) }) {
        case .none:
            return nil
        case .one(let row):
            return row
        case .several(let a, let b):
            let names = identification.map { entity.attributes[$0].name }
            let shown = zip(names, key).map { "\($0) = \($1)" }.joined(separator: ", ")
            throw MappingError(
                .ambiguousIdentification,
                "several objects of \(entity.name) have \(shown) (serials \(table.serial(ofRow: a)) and \(table.serial(ofRow: b))), so the value "
                    + "identifies none of them: a unique constraint on \(names.joined(separator: ", ")) keeps identities unique",
                sourceIndex: sourceIndex, keyPath: names.joined(separator: ","),
                value: key.map { "\($0)" }.joined(separator: ", "),
                entity: entity.name, attribute: names.joined(separator: ", "))
        }
    }
}

/// What ``ModelContext/batchUpsert(_:into:identifiedBy:returningIDs:)`` did.
public struct BatchUpsertResult: Sendable, Equatable {
    /// The values that inserted a new object.
    public var inserted = 0
    /// The values that updated an existing object (one the call inserted included).
    public var updated = 0
    /// The objects' IDs in the order of the values, when asked for; empty otherwise.
    public var objectIDs: [ObjectID] = []

    /// A result of the given counts and IDs.
    public init(inserted: Int = 0, updated: Int = 0, objectIDs: [ObjectID] = []) {
        self.inserted = inserted
        self.updated = updated
        self.objectIDs = objectIDs
    }
}
