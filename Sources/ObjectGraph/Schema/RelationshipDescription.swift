/// What deleting an object does to the objects its relationship points at (Core Data's delete
/// rules). Applied at `delete(_:)` time, so a cascade's objects are deleted at once
/// (Docs/Semantics.md, rule 6); ``ModelContext/rollback()`` restores all of it (rule 8).
public enum DeleteRule: String, Sendable, Hashable, Codable, CaseIterable {
    /// The destination objects stay; their inverse relationship no longer points at the deleted
    /// object (a to-one inverse is set to `nil`, a to-many inverse loses it). The default.
    case nullify
    /// The destination objects are deleted too, with their own delete rules and
    /// `prepareForDeletion`.
    case cascade
    /// The save fails validation while the relationship still has a destination object.
    case deny
    /// Nothing is done: a to-one inverse keeps naming the deleted object, which reads as `nil`.
    case noAction
}

/// One relationship of an entity: a to-one or a to-many (set semantics) reference to objects of
/// a destination entity, always declared with its inverse on the destination.
///
/// The `@Relationship` macro builds these; written by hand:
///
/// ```swift
/// static let entityDescription = EntityDescription(
///     name: "Folder", type: Folder.self, attributes: [.attribute("name", String.self)],
///     relationships: [.toMany("files", File.self, inverse: "folder", deleteRule: .cascade)])
/// ```
///
/// How it is stored: a to-one relationship occupies a slot of its own, listed at the end of
/// ``EntityDescription/attributes`` as an optional `uint64` holding the destination's serial
/// (so it is journaled, rolled back and replayed like any attribute). A to-many relationship is
/// not stored: it is the set of destination objects whose to-one inverse points back, kept in an
/// index. A many-to-many relationship (two to-manys) is not supported; model the link as an
/// entity with two to-one relationships.
public struct RelationshipDescription: Sendable {
    /// The relationship's key: the Swift property name.
    public let name: String
    /// The class of the destination objects.
    public let destinationType: any Entity.Type
    /// The name of the inverse relationship on the destination.
    public let inverse: String
    /// Whether the relationship is a to-many (a set of objects) rather than a to-one.
    public let isToMany: Bool
    /// What deleting the source object does to the destination objects.
    public let deleteRule: DeleteRule

    /// Creates a relationship description (the factories below read better).
    public init(name: String, destinationType: any Entity.Type, inverse: String, isToMany: Bool, deleteRule: DeleteRule = .nullify) {
        self.name = name
        self.destinationType = destinationType
        self.inverse = inverse
        self.isToMany = isToMany
        self.deleteRule = deleteRule
    }

    /// A to-one relationship to one object of `destination` (or none).
    public static func toOne<T: Entity>(
        _ name: String, _ destination: T.Type, inverse: String, deleteRule: DeleteRule = .nullify
    ) -> RelationshipDescription {
        RelationshipDescription(name: name, destinationType: destination, inverse: inverse, isToMany: false, deleteRule: deleteRule)
    }

    /// A to-many relationship: a set of objects of `destination`.
    public static func toMany<T: Entity>(
        _ name: String, _ destination: T.Type, inverse: String, deleteRule: DeleteRule = .nullify
    ) -> RelationshipDescription {
        RelationshipDescription(name: name, destinationType: destination, inverse: inverse, isToMany: true, deleteRule: deleteRule)
    }
}

/// A relationship with its destination and inverse resolved within a ``Schema``.
struct ResolvedRelationship: Sendable {
    let name: String
    let isToMany: Bool
    let deleteRule: DeleteRule
    /// The destination entity's index in the schema.
    let destination: Int
    /// The inverse's index among the destination's relationships.
    let inverse: Int
    /// A to-one's own slot; -1 for a to-many.
    let slot: Int
    /// The destination's slot holding the inverse when the inverse is a to-one; -1 otherwise.
    let inverseSlot: Int
    /// Whether the inverse is a to-many (then this to-one's slot is indexed by destination).
    let inverseIsToMany: Bool
}

extension Schema {
    /// Resolves every entity's relationships: destination in the schema, inverse declared on
    /// it and pointing back, no many-to-many. Returns the problems found instead of throwing.
    static func resolveRelationships(_ entities: [EntityDescription], byType: [ObjectIdentifier: Int]) -> ([[ResolvedRelationship]], [String]) {
        var problems: [String] = []
        var result: [[ResolvedRelationship]] = []
        for (index, e) in entities.enumerated() {
            var resolved: [ResolvedRelationship] = []
            for (k, r) in e.relationships.enumerated() {
                guard let destination = byType[ObjectIdentifier(r.destinationType)] else {
                    problems.append("\(e.name).\(r.name) points at \(r.destinationType), which is not an entity of this schema")
                    continue
                }
                let d = entities[destination]
                guard let inverse = d.relationships.firstIndex(where: { $0.name == r.inverse }) else {
                    problems.append("\(e.name).\(r.name) names the inverse '\(r.inverse)', which \(d.name) does not declare")
                    continue
                }
                let inv = d.relationships[inverse]
                guard ObjectIdentifier(inv.destinationType) == ObjectIdentifier(e.type), inv.inverse == r.name else {
                    problems.append("\(e.name).\(r.name) and \(d.name).\(inv.name) are not each other's inverse")
                    continue
                }
                if r.isToMany && inv.isToMany {
                    problems.append(
                        "\(e.name).\(r.name) and \(d.name).\(inv.name) form a many-to-many relationship, which is not supported: "
                            + "model the link as an entity with two to-one relationships")
                    continue
                }
                if destination == index && inverse == k && r.isToMany {
                    problems.append("\(e.name).\(r.name) is a to-many that is its own inverse")
                    continue
                }
                resolved.append(ResolvedRelationship(
                    name: r.name, isToMany: r.isToMany, deleteRule: r.deleteRule, destination: destination, inverse: inverse,
                    slot: r.isToMany ? -1 : (e.slot(forKey: r.name) ?? -1),
                    inverseSlot: inv.isToMany ? -1 : (d.slot(forKey: inv.name) ?? -1),
                    inverseIsToMany: inv.isToMany))
            }
            result.append(resolved)
        }
        return (result, problems)
    }
}
