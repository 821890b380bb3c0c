/// The description of one entity: its name, Swift type and persisted attributes in slot order.
///
/// The `@Entity` macro generates one as the class's `entityDescription`. Written by hand:
///
/// ```swift
/// final class Tag: Entity {
///     var _backing = ObjectBacking(entity: Tag.entityDescription)
///     static let entityDescription = EntityDescription(
///         name: "Tag", type: Tag.self, attributes: [.attribute("label", String.self)])
///     init(_backing: ObjectBacking) { self._backing = _backing }
///     var label: String {
///         get { _backing.get(0, as: String.self) }
///         set { _backing.set(0, newValue) }
///     }
/// }
/// ```
public final class EntityDescription: Sendable, CustomStringConvertible {
    /// The entity's name, unique within a schema and recorded in the journal.
    public let name: String
    /// The Swift class that represents the entity's objects.
    public let type: any Entity.Type
    /// The persisted attributes; an attribute's index is its slot. The to-one relationships
    /// follow the declared attributes, one slot each (an optional `uint64` holding the
    /// destination's serial, with ``AttributeDescription/isRelationship`` set).
    public let attributes: [AttributeDescription]
    /// The relationships, to-one and to-many, in declaration order.
    public let relationships: [RelationshipDescription]
    /// The unique constraints, attribute-level ones first.
    public let uniqueConstraints: [UniqueConstraint]
    /// The non-unique indexes fetches may use (``IndexDescription``); not stored in the journal.
    public let indexes: [IndexDescription]
    let slotByName: [String: Int]
    /// Key paths of the model class's attribute properties → slots (macro-generated).
    nonisolated(unsafe) let slotByKeyPath: [AnyKeyPath: Int]
    /// The key paths ``slot(for:)`` found lately, by identity (a lookup without hashing).
    let resolvedKeyPaths = KeyPathSlotCache()
    /// Per constraint, the slots of its keys.
    let uniqueSlots: [[Int]]
    /// Per index, the slots of its keys (only for indexes without problems).
    let indexSlots: [[Int]]
    let problems: [String]

    /// Creates an entity description.
    ///
    /// Problems such as duplicate attribute names are not fatal here; ``Schema``'s initializers
    /// report them as ``SchemaError``.
    ///
    /// - Parameters:
    ///   - name: The entity's name.
    ///   - type: The class representing its objects.
    ///   - attributes: The persisted attributes in slot order.
    ///   - keyPaths: The class's key paths of the attributes, in slot order, so that typed APIs
    ///     (unique lookups, import) can name an attribute by key path. Optional.
    ///   - uniqueConstraints: Compound unique constraints (`#Unique`); single-attribute ones
    ///     can also come from an attribute's options.
    ///   - relationships: The relationships, each with its inverse declared on the destination.
    ///   - indexes: Non-unique indexes that fetches may use (`#Index`); kept in memory only, so
    ///     adding or removing one needs no migration.
    public convenience init(
        name: String, type: any Entity.Type, attributes: [AttributeDescription], keyPaths: [AnyKeyPath] = [],
        uniqueConstraints: [UniqueConstraint] = [], relationships: [RelationshipDescription] = [],
        indexes: [IndexDescription] = []
    ) {
        self.init(
            name: name, type: type, attributes: attributes, keyPaths: keyPaths, uniqueConstraints: uniqueConstraints,
            relationships: relationships, indexes: indexes, linkedToOnes: [])
    }

    /// The same entity with no slot for the to-ones in `linkedToOnes` (the inverses of ordered
    /// to-manys, stored as links): what a ``Schema`` holds for it.
    func withoutSlots(for linkedToOnes: Set<String>) -> EntityDescription {
        EntityDescription(
            name: name, type: type, attributes: Array(attributes.prefix(declaredCount)), keyPaths: declaredKeyPaths,
            uniqueConstraints: declaredConstraints, relationships: relationships, indexes: indexes,
            linkedToOnes: linkedToOnes)
    }

    /// The attributes declared (the to-one slots follow them).
    let declaredCount: Int
    nonisolated(unsafe) let declaredKeyPaths: [AnyKeyPath]
    let declaredConstraints: [UniqueConstraint]

    init(
        name: String, type: any Entity.Type, attributes declared: [AttributeDescription], keyPaths: [AnyKeyPath],
        uniqueConstraints: [UniqueConstraint], relationships: [RelationshipDescription], indexes: [IndexDescription],
        linkedToOnes: Set<String>
    ) {
        self.name = name
        self.type = type
        self.relationships = relationships
        declaredCount = declared.count
        declaredKeyPaths = keyPaths
        declaredConstraints = uniqueConstraints
        let attributes =
            declared
            + relationships.filter { !$0.isToMany && !linkedToOnes.contains($0.name) }.map {
                AttributeDescription(toOne: $0.name)
            }
        self.attributes = attributes
        var slots: [String: Int] = [:]
        var problems: [String] = []
        for (i, a) in attributes.enumerated() {
            if slots[a.name] != nil {
                problems.append("entity '\(name)' declares attribute '\(a.name)' twice")
            } else {
                slots[a.name] = i
            }
            if let p = a.problem { problems.append("entity '\(name)': \(p)") }
            if a.name.isEmpty { problems.append("entity '\(name)' has an attribute with an empty name") }
        }
        if name.isEmpty { problems.append("an entity has an empty name") }
        var keyPathSlots: [AnyKeyPath: Int] = [:]
        for (i, k) in keyPaths.enumerated() where i < declared.count { keyPathSlots[k] = i }
        if !keyPaths.isEmpty && keyPaths.count != declared.count {
            problems.append("entity '\(name)' lists \(keyPaths.count) key paths for \(declared.count) attributes")
        }
        var names = Set(attributes.map(\.name))
        for r in relationships where r.isToMany || linkedToOnes.contains(r.name) {
            if !names.insert(r.name).inserted { problems.append("entity '\(name)' declares '\(r.name)' twice") }
        }
        let constraints =
            attributes.compactMap { a in a.uniquePolicy.map { UniqueConstraint([a.name], onCollision: $0) } }
            + uniqueConstraints
        var constraintSlots: [[Int]] = []
        for c in constraints {
            let cs = c.keys.compactMap { slots[$0] }
            if c.keys.isEmpty { problems.append("entity '\(name)' has a unique constraint without keys") }
            for k in c.keys where slots[k] == nil {
                problems.append("unique constraint \(c.name(in: name)) names '\(k)', which is no attribute")
            }
            constraintSlots.append(cs)
        }
        var indexSlots: [[Int]] = []
        for index in indexes {
            var problem: String?
            var slotsOfIndex: [Int] = []
            if index.keys.isEmpty { problem = "entity '\(name)' has an index without keys" }
            for k in index.keys where problem == nil {
                guard let s = slots[k] else {
                    problem = "index \(index.name(in: name)) names '\(k)', which is no attribute"
                    break
                }
                let a = attributes[s]
                if a.isRelationship || a.valueKind == .codable || !a.type.isIndexable {
                    problem =
                        "index \(index.name(in: name)) names '\(k)', which cannot be indexed "
                        + "(an index key is an integer, floating-point, Date, Bool or String attribute)"
                } else if slotsOfIndex.contains(s) {
                    problem = "index \(index.name(in: name)) names '\(k)' twice"
                }
                slotsOfIndex.append(s)
            }
            if let problem { problems.append(problem) } else { indexSlots.append(slotsOfIndex) }
        }
        self.indexes = indexes
        self.indexSlots = indexSlots
        self.uniqueConstraints = constraints
        self.uniqueSlots = constraintSlots
        self.slotByKeyPath = keyPathSlots
        self.slotByName = slots
        self.problems = problems
    }

    /// The slot of the attribute named `key`, or `nil` when there is none.
    public func slot(forKey key: String) -> Int? { slotByName[key] }

    /// The slots of the attributes named `keys`, in their order; `unknownKey` naming the first
    /// that names none.
    func slots(forKeys keys: [String]) throws(ObjectGraphError) -> [Int] {
        var result: [Int] = []
        result.reserveCapacity(keys.count)
        for key in keys {
            guard let s = slot(forKey: key) else {
                throw ObjectGraphError(.unknownKey, "\(name) has no attribute '\(key)'", entity: name, key: key)
            }
            result.append(s)
        }
        return result
    }

    /// The slot of the attribute a key path of the model class names, or `nil` when the
    /// description lists no such key path.
    public func slot(for keyPath: AnyKeyPath) -> Int? {
        if let slot = resolvedKeyPaths.slot(for: keyPath) { return slot }
        guard let slot = slotByKeyPath[keyPath] else { return nil }
        resolvedKeyPaths.remember(keyPath, slot: slot)
        return slot
    }

    /// The attribute named `key`, or `nil` when there is none.
    public func attribute(named key: String) -> AttributeDescription? {
        slotByName[key].map { attributes[$0] }
    }

    public var description: String {
        "\(name)("
            + attributes.map { "\($0.name): \($0.swiftTypeName)\($0.isOptional ? "?" : "")" }.joined(separator: ", ")
            + ")"
    }
}

/// The set of entities a context or store holds.
///
/// ```swift
/// let schema = try Schema(Package.self, Maintainer.self)
/// let context = ModelContext(schema: schema)
/// ```
public struct Schema: Sendable {
    /// The entities, in the order given.
    public let entities: [EntityDescription]
    let indexByName: [String: Int]
    let indexByType: [ObjectIdentifier: Int]
    /// Per entity, its relationships resolved against this schema.
    let relationships: [[ResolvedRelationship]]
    /// The relationships stored as links (many-to-many and ordered), one table each.
    let links: [ResolvedLink]
    /// The identifier of the ``VersionedSchema`` this schema was made from
    /// (``init(versioned:)``); nil for a schema of entity types alone. The journal records
    /// it with the schema, so that opening with a ``SchemaMigrationPlan`` knows which version
    /// a store holds.
    public internal(set) var versionIdentifier: String?

    /// Creates a schema of the given entity types.
    ///
    /// - Throws: ``SchemaError`` for an empty schema, two entities with one name, the same type
    ///   listed twice, or a problem inside an entity description (duplicate attribute names, a
    ///   default value that cannot be encoded).
    public init(_ types: [any Entity.Type]) throws(SchemaError) {
        guard !types.isEmpty else { throw SchemaError(message: "a schema needs at least one entity") }
        var byName: [String: Int] = [:]
        var byType: [ObjectIdentifier: Int] = [:]
        var entities: [EntityDescription] = []
        var problems: [String] = []
        for type in types {
            let d = type.entityDescription
            if byType[ObjectIdentifier(type)] != nil {
                problems.append("\(type) is listed twice")
                continue
            }
            if ObjectIdentifier(d.type) != ObjectIdentifier(type) {
                problems.append("\(type).entityDescription describes \(d.type), not \(type)")
            }
            if byName[d.name] != nil {
                problems.append("two entities are named '\(d.name)'")
                continue
            }
            problems += d.problems
            byName[d.name] = entities.count
            byType[ObjectIdentifier(type)] = entities.count
            entities.append(d)
        }
        if problems.isEmpty {
            for (index, names) in Self.linkedToOnes(entities, byType: byType) {
                entities[index] = entities[index].withoutSlots(for: names)
            }
        }
        let (relationships, links, relationshipProblems) =
            problems.isEmpty ? Self.resolveRelationships(entities, byType: byType) : ([], [], [])
        problems += relationshipProblems
        guard problems.isEmpty else { throw SchemaError(message: problems.joined(separator: "; ")) }
        self.entities = entities
        self.indexByName = byName
        self.indexByType = byType
        self.relationships = relationships
        self.links = links
    }

    /// A schema rebuilt from the one a journal records, with ``DynamicObject`` standing in for
    /// every entity's class: what tools use to read, dump and compact a store without the
    /// application's model code.
    public init(dynamic stored: StoredSchema) throws(SchemaError) {
        var byName: [String: Int] = [:]
        var problems: [String] = []
        let entities = stored.entities.enumerated().map { i, e in
            EntityDescription(name: e.name, type: DynamicObject.self, attributes: e.attributes)
        }
        for (i, d) in entities.enumerated() {
            if byName[d.name] != nil { problems.append("two entities are named '\(d.name)'") }
            byName[d.name] = i
            problems += d.problems
        }
        guard problems.isEmpty else { throw SchemaError(message: problems.joined(separator: "; ")) }
        self.entities = entities
        self.indexByName = byName
        self.indexByType = [:]
        self.relationships = entities.map { _ in [] }
        // The links as recorded; a dynamic context stores, replays and compacts them without
        // knowing the relationships' classes.
        self.links = stored.links.map {
            ResolvedLink(entities: $0.entities, names: $0.names, ordered: $0.ordered, toOne: $0.toOne)
        }
    }

    /// Creates a schema of the given entity types.
    public init(_ types: any Entity.Type...) throws(SchemaError) {
        try self.init(types)
    }

    /// The entity named `name`, or `nil`.
    public func entity(named name: String) -> EntityDescription? {
        indexByName[name].map { entities[$0] }
    }
}
