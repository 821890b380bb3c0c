public import Foundation
internal import Synchronization

/// How key-value sources (JSON, dictionaries, Swift values) map onto objects of one entity:
/// RestKit's entity mapping, declared once and run with ``ModelContext/map(_:with:progress:)-(Data,_,_)``.
///
/// ```swift
/// var articles = EntityMapping(Article.self)
/// try articles.map("id", "title")                          // same names
/// try articles.map(["published_at": "publishedAt",          // source key path → attribute
///                   "meta.words": "wordCount"])
/// try articles.identify(by: "id")                          // find existing objects by id
/// try articles.useModificationAttribute("publishedAt")      // skip records not newer
/// try articles.map("author", to: "author", with: authors)  // a nested object
/// try articles.map(to: "editor", with: editors)            // one from the article's own fields
/// articles.deletionPredicate = #Predicate { $0.isRetracted } // tombstones
/// let result = try context.map(json, with: articles)
/// ```
///
/// Every name is checked when the mapping is built: a method that names an attribute or a
/// relationship the entity lacks throws ``MappingError`` with code `unknownAttribute`. A mapping
/// is a value: copy it, change the copy, and share it between tasks.
///
/// See `Docs/Mapping.md` for every rule and how it differs from RestKit.
public struct EntityMapping<T: Entity>: Sendable {
    var definition: MappingDefinition
    private var identificationFilter: Predicate<T>?
    private var tombstoneFilter: Predicate<T>?

    /// A mapping of `type` that maps nothing yet. Identification is inferred from the entity
    /// (see ``infersIdentificationAttributes``) unless set with ``identify(by:)-(String)``.
    public init(_ type: T.Type) {
        definition = MappingDefinition(entity: T.entityDescription)
    }

    /// The entity this mapping creates and updates.
    public var entity: EntityDescription { definition.entity }

    // MARK: Attributes

    /// Maps source keys to the attributes of the same names.
    ///
    /// - Throws: ``MappingError`` with code `unknownAttribute` when a name is no attribute.
    public mutating func map(_ names: String...) throws(MappingError) {
        for name in names { try map(name, to: name) }
    }

    /// Maps source keys to the attributes of the same names.
    public mutating func map(_ names: [String]) throws(MappingError) {
        for name in names { try map(name, to: name) }
    }

    /// Maps source key paths (dotted for nested objects: `"meta.published"`) to attributes.
    public mutating func map(_ keyPaths: [String: String]) throws(MappingError) {
        for (keyPath, attribute) in keyPaths.sorted(by: { $0.value < $1.value }) { try map(keyPath, to: attribute) }
    }

    /// Maps the value at `sourceKeyPath` (dotted for nested objects) to `attribute`. Mapping an
    /// attribute again replaces its earlier source.
    public mutating func map(_ sourceKeyPath: String, to attribute: String) throws(MappingError) {
        guard let a = entity.attribute(named: attribute), !a.isRelationship else {
            throw unknown(attribute, "attribute")
        }
        definition.attributes.removeAll { $0.attribute == attribute }
        definition.attributes.append(.init(sourceKeyPath: sourceKeyPath, attribute: attribute))
    }

    // MARK: Relationships

    /// Maps the nested object (to-one) or array of objects (to-many) at `sourceKeyPath` with
    /// `mapping`, and sets `relationship` to the result. Nested objects are identified like
    /// top-level ones. A `null` clears the relationship; a missing key leaves it alone.
    ///
    /// - Throws: ``MappingError`` with code `unknownAttribute` when `relationship` is not a
    ///   relationship of the entity whose destination is `U`.
    public mutating func map<U: Entity>(
        _ sourceKeyPath: String, to relationship: String, with mapping: EntityMapping<U>
    ) throws(MappingError) {
        try mapRelationship(from: sourceKeyPath, to: relationship, with: mapping)
    }

    /// Maps the source object itself with `mapping`, and sets `relationship` to the result:
    /// RestKit's relationship mapping from a `nil` key path. The destination's attributes come
    /// from this object's own fields, so one record (a package with `maintainerName` and
    /// `maintainerEmail`) maps two entities in one run:
    ///
    /// ```swift
    /// var maintainers = EntityMapping(Maintainer.self)
    /// try maintainers.map(["maintainerEmail": "email", "maintainerName": "name"])
    /// try maintainers.identify(by: "email")
    /// try packages.map(to: "maintainedBy", with: maintainers)
    /// ```
    ///
    /// The destination is identified like any nested object, so the packages of one maintainer
    /// share one object. When every identifying field is present and not `null`, the
    /// destination is mapped; when one is `null`, the relationship is cleared; when one is
    /// missing (and none is `null`), the relationship is left as it is, as a missing key leaves
    /// a nested object's. A to-many gets the one destination. Unlike other nested mappings, it
    /// is mapped for an object skipped as unmodified too (``useModificationAttribute(_:)``): the
    /// destination is an object of its own, whose fields can change while this object's
    /// modification attribute does not, and a sync must see it to keep it.
    ///
    /// - Throws: ``MappingError`` with code `unknownAttribute` when `relationship` is not a
    ///   relationship of the entity whose destination is `U`, or `invalidIdentification` when
    ///   `mapping` has no identification attributes (each run would insert a new destination
    ///   per source).
    public mutating func map<U: Entity>(to relationship: String, with mapping: EntityMapping<U>) throws(MappingError) {
        guard !mapping.identificationAttributes.isEmpty else {
            throw MappingError(
                .invalidIdentification,
                "\(U.entityDescription.name), mapped from \(entity.name)'s own fields into '\(relationship)', has no identification attributes; identify it (each run would insert a new \(U.entityDescription.name) per source)",
                entity: U.entityDescription.name, attribute: relationship)
        }
        try mapRelationship(from: nil, to: relationship, with: mapping)
    }

    /// Adds a nested mapping; a `nil` key path maps the source object itself.
    private mutating func mapRelationship<U: Entity>(
        from sourceKeyPath: String?, to relationship: String, with mapping: EntityMapping<U>
    ) throws(MappingError) {
        guard let r = entity.relationships.first(where: { $0.name == relationship }),
            ObjectIdentifier(r.destinationType) == ObjectIdentifier(U.self)
        else { throw unknown(relationship, "relationship to \(U.entityDescription.name)") }
        definition.relationships.removeAll { $0.relationship == relationship }
        definition.relationships.append(
            .init(sourceKeyPath: sourceKeyPath, relationship: relationship, mapping: mapping.definition))
    }

    /// Connects `relationship` to the destination objects whose attribute of the same name
    /// equals this object's `attribute` (RestKit's `connectedBy:` with a name).
    public mutating func connect(_ relationship: String, by attribute: String) throws(MappingError) {
        try connect(relationship, by: [attribute: attribute])
    }

    /// Connects `relationship` by several attributes with the same names on both sides.
    public mutating func connect(_ relationship: String, by attributes: [String]) throws(MappingError) {
        try connect(relationship, pairs: attributes.map { ($0, $0) })
    }

    /// Connects `relationship` by attribute pairs: this entity's attribute → the destination's.
    ///
    /// Connections are made when every source of a run is mapped, so an object can connect to
    /// one that comes later in the same payload. The destination is found through a unique
    /// index on the destination attributes in O(1), or else through a table built once per run.
    /// A to-one takes the one match; a to-many takes every match. No match leaves the
    /// relationship empty and is counted in ``MappingCounts/unresolvedConnections`` (``MappingResult/counts``).
    public mutating func connect(_ relationship: String, by pairs: [String: String]) throws(MappingError) {
        try connect(relationship, pairs: pairs.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
    }

    private mutating func connect(_ relationship: String, pairs: [(String, String)]) throws(MappingError) {
        guard let r = entity.relationships.first(where: { $0.name == relationship }) else {
            throw unknown(relationship, "relationship")
        }
        guard !pairs.isEmpty else {
            throw MappingError(
                .invalidIdentification, "the connection of \(entity.name).\(relationship) names no attribute",
                entity: entity.name, attribute: relationship)
        }
        let destination = r.destinationType.entityDescription
        for (mine, theirs) in pairs {
            guard let a = entity.attribute(named: mine), !a.isRelationship else { throw unknown(mine, "attribute") }
            guard let b = destination.attribute(named: theirs), !b.isRelationship else {
                throw MappingError(
                    .unknownAttribute,
                    "\(destination.name) has no attribute '\(theirs)' to connect \(entity.name).\(relationship) by",
                    entity: destination.name, attribute: theirs)
            }
        }
        definition.connections.removeAll { $0.relationship == relationship }
        definition.connections.append(.init(relationship: relationship, pairs: pairs))
    }

    // MARK: Identification

    /// Identifies existing objects by one attribute: a source whose transformed value equals an
    /// object's updates that object, otherwise a new object is inserted.
    public mutating func identify(by attribute: String) throws(MappingError) {
        try identify(by: [attribute])
    }

    /// Identifies existing objects by several attributes together (a compound key).
    ///
    /// - Throws: ``MappingError`` with code `invalidIdentification` for an empty list, or
    ///   `unknownAttribute` for a name the entity lacks.
    public mutating func identify(by attributes: [String]) throws(MappingError) {
        guard !attributes.isEmpty else {
            throw MappingError(
                .invalidIdentification, "the identification attributes of \(entity.name) are an empty list",
                entity: entity.name)
        }
        for name in attributes {
            guard let a = entity.attribute(named: name), !a.isRelationship else { throw unknown(name, "attribute") }
        }
        definition.identification = attributes
    }

    /// The attributes that identify existing objects: those set with
    /// ``identify(by:)-(String)``, or else the inferred one, if any.
    public var identificationAttributes: [String] {
        definition.identification
            ?? (definition.infersIdentification ?? Self.infersIdentificationAttributes
                ? MappingDefinition.inferIdentification(of: entity) : [])
    }

    /// Whether this mapping infers its identification attribute when none is set; `nil` (the
    /// default) follows ``infersIdentificationAttributes``.
    ///
    /// The order is RestKit's: the entity's own declaration (``IdentifiedEntity``), else an
    /// attribute named after the entity (`articleID` or `article_id` for `Article`), else the
    /// first of `identifier`, `id`, `ID`, `URL` and `url`.
    public var infersIdentification: Bool? {
        get { definition.infersIdentification }
        set { definition.infersIdentification = newValue }
    }

    /// Whether mappings infer identification by default. `true` unless changed; affects the
    /// runs that start after the change.
    public static var infersIdentificationAttributes: Bool {
        get { MappingDefaults.infersIdentification.load(ordering: .relaxed) }
        set { MappingDefaults.infersIdentification.store(newValue, ordering: .relaxed) }
    }

    /// A filter on the objects identification finds: an existing object for which it is false
    /// is not updated, and a new object is inserted instead (RestKit's identification predicate).
    public var identificationPredicate: Predicate<T>? {
        get { identificationFilter }
        set {
            identificationFilter = newValue
            guard let newValue else { definition.identificationFilter = nil; return }
            definition.identificationFilter = { object in
                guard let object = object as? T else { return false }
                return try newValue.evaluate(object)
            }
        }
    }

    // MARK: Modification, tombstones, invalid objects

    /// Skips an existing object whose `attribute` shows it is already up to date: for strings,
    /// when the source's value equals the stored one; for numbers and dates, unless the
    /// source's value is greater. A skipped object's source is not read further (its nested
    /// relationships included, except those mapped from its own fields with
    /// ``map(to:with:)``) and the object is not dirtied, but its connections
    /// (``connect(_:by:)-(String,String)``) are resolved again: a destination can appear, or come
    /// back after a sweep, while the object itself does not change. New objects are always mapped.
    public mutating func useModificationAttribute(_ attribute: String) throws(MappingError) {
        guard let a = entity.attribute(named: attribute), !a.isRelationship else {
            throw unknown(attribute, "attribute")
        }
        definition.modificationAttribute = attribute
    }

    /// Tombstones: when a run's mapping is done, the objects of the entity that match this
    /// predicate are deleted, those the run mapped and those stored before alike, with their
    /// delete rules. A tombstone for an ID never seen inserts nothing that is saved.
    public var deletionPredicate: Predicate<T>? {
        get { tombstoneFilter }
        set {
            tombstoneFilter = newValue
            guard let newValue else { definition.deletionFetch = nil; return }
            definition.deletionFetch = { context in
                try context.fetch(FetchDescriptor<T>(predicate: newValue)).map { $0 as any Entity }
            }
        }
    }

    /// Whether new objects that fail insert validation (required values, attribute validators,
    /// `validateForInsert`) are removed before the run returns, so that a save succeeds with the
    /// rest; ``MappingResult/discarded`` says which and why. Existing objects that fail update
    /// validation still fail the save. Default `false`.
    public var discardsInvalidObjectsOnInsert: Bool {
        get { definition.discardsInvalidObjectsOnInsert }
        set { definition.discardsInvalidObjectsOnInsert = newValue }
    }

    /// Whether an existing object's attribute whose key is missing from the source gets the
    /// attribute's default value (or `nil`). Default `false`: it keeps its value. A new
    /// object always starts with the defaults. An explicit `null` is not a missing key.
    public var assignsDefaultValueForMissingAttributes: Bool {
        get { definition.assignsDefaultValueForMissingAttributes }
        set { definition.assignsDefaultValueForMissingAttributes = newValue }
    }

    /// Date formats (`DateFormatter` patterns, POSIX locale, UTC unless the pattern has a zone)
    /// tried in order after ISO 8601 when a string becomes a `Date`.
    public var dateFormats: [String] {
        get { definition.dateFormats }
        set { definition.dateFormats = newValue }
    }

    /// Where the sources are in a document: a dotted key path to an array of objects (or to one
    /// object). `nil`: the document itself. Used for the top-level mapping of a run only.
    public var rootKeyPath: String? {
        get { definition.rootKeyPath }
        set { definition.rootKeyPath = newValue }
    }

    private func unknown(_ name: String, _ what: String) -> MappingError {
        MappingError(.unknownAttribute, "\(entity.name) has no \(what) '\(name)'", entity: entity.name, attribute: name)
    }
}

/// An entity that declares which attributes identify its objects in mappings (RestKit's
/// `RKEntityIdentificationAttributes` entity user-info key). Identification inference uses it
/// before anything else.
///
/// ```swift
/// extension Article: IdentifiedEntity {
///     static var identificationAttributes: [String] { ["slug"] }
/// }
/// ```
public protocol IdentifiedEntity: Entity {
    /// The names of the identifying attributes: one, or several for a compound key.
    static var identificationAttributes: [String] { get }
}

enum MappingDefaults {
    static let infersIdentification = Atomic<Bool>(true)
}

/// A mapping without its static type: what nested mappings and the engine work with.
struct MappingDefinition: Sendable {
    struct Attribute: Sendable {
        let sourceKeyPath: String
        let attribute: String
    }
    struct Relationship: Sendable {
        /// `nil`: the source object itself (``EntityMapping/map(to:with:)``).
        let sourceKeyPath: String?
        let relationship: String
        let mapping: MappingDefinition
    }
    struct Connection: Sendable {
        let relationship: String
        let pairs: [(String, String)]
    }

    let entity: EntityDescription
    var attributes: [Attribute] = []
    var relationships: [Relationship] = []
    var connections: [Connection] = []
    var identification: [String]?
    var infersIdentification: Bool?
    var identificationFilter: (@Sendable (any Entity) throws -> Bool)?
    var modificationAttribute: String?
    var deletionFetch: (@Sendable (ModelContext) throws -> [any Entity])?
    var discardsInvalidObjectsOnInsert = false
    var assignsDefaultValueForMissingAttributes = false
    var dateFormats: [String] = []
    var rootKeyPath: String?

    init(entity: EntityDescription) { self.entity = entity }

    /// RestKit's inference: the entity's declaration, else `<entity>ID` / `<entity>_id`, else
    /// the first of `identifier`, `id`, `ID`, `URL`, `url`. One attribute at most, or none.
    static func inferIdentification(of entity: EntityDescription) -> [String] {
        if let declared = (entity.type as? any IdentifiedEntity.Type)?.identificationAttributes, !declared.isEmpty {
            return declared
        }
        return guessIdentification(of: entity).map { [$0] } ?? []
    }

    /// The guess from names alone: the first of ``guessedNames(for:)`` that is an attribute.
    static func guessIdentification(of entity: EntityDescription) -> String? {
        guessedNames(for: entity).first { entity.attribute(named: $0).map { !$0.isRelationship } ?? false }
    }

    /// The names a guess tries, in order: `<entity>ID`, `<entity>_id`, `identifier`, `id`,
    /// `ID`, `URL`, `url`.
    static func guessedNames(for entity: EntityDescription) -> [String] {
        let name = entity.name
        let llama = (name.first.map { String($0).lowercased() } ?? "") + name.dropFirst() + "ID"
        var snake = ""
        for (i, c) in name.enumerated() {
            if c.isUppercase && i > 0 { snake += "_" }
            snake += c.lowercased()
        }
        snake += "_id"
        return [llama, snake, "identifier", "id", "ID", "URL", "url"]
    }
}
