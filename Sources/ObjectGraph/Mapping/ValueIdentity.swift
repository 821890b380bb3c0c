/// Which attributes identify the object that a Swift value (a struct or an `Encodable` value)
/// describes, when an upsert converts it: the object whose identifying attributes hold the
/// value's values for them is updated; when there is none, a new object is inserted.
///
/// ```swift
/// // The model's own identity: a unique constraint or an IdentifiedEntity declaration.
/// try context.upsert(structValue: person, as: Person.self)
/// // Named by the caller.
/// try context.upsert(structValue: bookmark, as: Bookmark.self, identifiedBy: .attribute("url"))
/// // Guessed from the attribute names, only when asked; check the guess in a test:
/// #expect(try ValueIdentity.inferred.identificationAttributes(for: Bookmark.self) == ["url"])
/// ```
///
/// To create a new object for every value, with no identity at all, convert with
/// ``ModelContext/insert(structValue:as:)`` or ``ModelContext/insert(_:as:)-(V,_)`` instead.
///
/// The values of the identifying attributes compare as stored bytes, as unique constraints
/// compare them. A value whose identifying attribute is `nil` identifies nothing and inserts a
/// new object; a value that has no property at all for an identifying attribute is refused
/// (``MappingError`` `invalidIdentification`), and so is a value that identifies several
/// existing objects (`ambiguousIdentification`): the upsert never picks one of them.
public enum ValueIdentity: Sendable, Hashable {
    /// The identity the model declares: the entity's ``IdentifiedEntity`` declaration, else
    /// its one unique constraint. An entity that declares none, or that has several unique
    /// constraints and no declaration saying which identifies it, is refused: name the
    /// attributes with ``attributes(_:)`` or ``attribute(_:)``. The default of every upsert.
    case declared
    /// The attributes named here, together (a compound key when there are several).
    case attributes([String])
    /// The declared identity, or else a guess from the attribute names, RestKit's: an attribute
    /// named after the entity (`bookmarkID`, then `bookmark_id` for `Bookmark`), else the first
    /// of `identifier`, `id`, `ID`, `URL` and `url`. A guess is a convenience for prototypes;
    /// ``identificationAttributes(for:)-(T.Type)`` says what it picks.
    case inferred

    /// One attribute, by name: `.attributes([name])`.
    ///
    /// ```swift
    /// try context.upsert(structValue: bookmark, as: Bookmark.self, identifiedBy: .attribute("url"))
    /// ```
    public static func attribute(_ name: String) -> ValueIdentity { .attributes([name]) }

    /// The names of the attributes this identity stands for in `type`: what an upsert of a
    /// value of `type` with this identity looks objects up by.
    ///
    /// ```swift
    /// #expect(try ValueIdentity.declared.identificationAttributes(for: Person.self) == ["id"])
    /// ```
    ///
    /// - Throws: ``MappingError`` as ``identificationAttributes(for:)-(EntityDescription)`` does.
    public func identificationAttributes<T: Entity>(for type: T.Type) throws(MappingError) -> [String] {
        try identificationAttributes(for: type.entityDescription)
    }

    /// The names of the attributes this identity stands for in `entity`.
    ///
    /// ```swift
    /// let names = try ValueIdentity.inferred.identificationAttributes(for: Bookmark.entityDescription)
    /// ```
    ///
    /// - Throws: ``MappingError`` naming the entity (and the attribute, when one is at fault)
    ///   with code `invalidIdentification`: an empty list of attributes or one naming an
    ///   attribute twice; an entity that declares no identity (``declared``) or from whose
    ///   attribute names none can be guessed either (``inferred``); several unique constraints
    ///   and no declaration; an ``IdentifiedEntity`` declaration naming what is no attribute.
    ///   With code `unknownAttribute`: a name given to ``attributes(_:)`` that is no attribute
    ///   of the entity, or is a relationship.
    public func identificationAttributes(for entity: EntityDescription) throws(MappingError) -> [String] {
        switch self {
        case .attributes(let names):
            guard !names.isEmpty else {
                throw MappingError(
                    .invalidIdentification,
                    "the identification attributes of \(entity.name) are an empty list; to insert every value, call insert",
                    entity: entity.name)
            }
            var seen: Set<String> = []
            for name in names {
                guard let a = entity.attribute(named: name), !a.isRelationship else {
                    let what =
                        entity.relationships.contains { $0.name == name }
                        ? "'\(name)' is a relationship of \(entity.name), not an attribute"
                        : "\(entity.name) has no attribute '\(name)'"
                    throw MappingError(
                        .unknownAttribute, "\(what), so it cannot identify its objects", entity: entity.name,
                        attribute: name)
                }
                guard seen.insert(name).inserted else {
                    throw MappingError(
                        .invalidIdentification, "the identification attributes of \(entity.name) name '\(name)' twice",
                        entity: entity.name,
                        attribute: name)
                }
            }
            return names
        case .declared:
            guard let names = try Self.declaredIdentity(of: entity) else {
                throw MappingError(
                    .invalidIdentification,
                    "\(entity.name) declares no identity (no unique constraint, no IdentifiedEntity declaration), so an upsert cannot tell "
                        + "which object a value describes: name its attributes with identifiedBy: .attribute(\"…\"), ask for a guess from "
                        + "the attribute names with identifiedBy: .inferred, or call insert to create an object for every value",
                    entity: entity.name)
            }
            return names
        case .inferred:
            if let names = try Self.declaredIdentity(of: entity) { return names }
            guard let guessed = MappingDefinition.guessIdentification(of: entity) else {
                throw MappingError(
                    .invalidIdentification,
                    "\(entity.name) declares no identity, and none of its attribute names suggests one (\(MappingDefinition.guessedNames(for: entity).joined(separator: ", "))): "
                        + "name its attributes with identifiedBy: .attribute(\"…\"), or call insert to create an object for every value",
                    entity: entity.name)
            }
            return [guessed]
        }
    }

    /// The entity's declared identity: its ``IdentifiedEntity`` declaration, else its one
    /// unique constraint; nil when it declares neither.
    static func declaredIdentity(of entity: EntityDescription) throws(MappingError) -> [String]? {
        if let declared = (entity.type as? any IdentifiedEntity.Type)?.identificationAttributes, !declared.isEmpty {
            for name in declared {
                guard let a = entity.attribute(named: name), !a.isRelationship else {
                    throw MappingError(
                        .invalidIdentification,
                        "the IdentifiedEntity declaration of \(entity.name) names '\(name)', which is no attribute of it",
                        entity: entity.name, attribute: name)
                }
            }
            return declared
        }
        switch entity.uniqueConstraints.count {
        case 0:
            return nil
        case 1:
            return entity.uniqueConstraints[0].keys
        default:
            let names = entity.uniqueConstraints.map { $0.name(in: entity.name) }.joined(separator: ", ")
            throw MappingError(
                .invalidIdentification,
                "\(entity.name) has several unique constraints (\(names)) and no IdentifiedEntity declaration saying which identifies "
                    + "its objects: name it with identifiedBy: .attributes([…])",
                entity: entity.name)
        }
    }
}
