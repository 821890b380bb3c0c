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

/// One relationship of an entity: a to-one, or a to-many (a set, or an ordered list) of objects
/// of a destination entity, always declared with its inverse on the destination.
///
/// The `@Relationship` macro builds these; written by hand:
///
/// ```swift
/// static let entityDescription = EntityDescription(
///     name: "Folder", type: Folder.self, attributes: [.attribute("name", String.self)],
///     relationships: [.toMany("files", File.self, inverse: "folder", deleteRule: .cascade)])
/// ```
///
/// How it is stored (Docs/Relationships.md):
/// - A to-one whose inverse is an unordered to-many, or another to-one, occupies a slot of its
///   own, listed at the end of ``EntityDescription/attributes`` as an optional `uint64` holding
///   the destination's serial (journaled, rolled back and replayed like any attribute). Its
///   unordered to-many inverse is not stored: it is the set of objects whose to-one points
///   back, kept in an index.
/// - A many-to-many relationship (two to-manys), and a to-many declared `ordered` with its
///   to-one inverse, are stored as **links**: per object, the list of related objects on each
///   side, in a link table of the context, journaled as link changes. Such a to-one has no slot.
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
    /// Whether a to-many keeps its objects in an order of the application's choosing
    /// (Core Data's ordered relationships): the order is stored, and inserts and moves at a
    /// position are tracked and rolled back. Always `false` for a to-one.
    public let isOrdered: Bool

    /// Creates a relationship description (the factories below read better).
    public init(
        name: String, destinationType: any Entity.Type, inverse: String, isToMany: Bool,
        deleteRule: DeleteRule = .nullify,
        isOrdered: Bool = false
    ) {
        self.name = name
        self.destinationType = destinationType
        self.inverse = inverse
        self.isToMany = isToMany
        self.deleteRule = deleteRule
        self.isOrdered = isToMany && isOrdered
    }

    /// A to-one relationship to one object of `destination` (or none).
    public static func toOne<T: Entity>(
        _ name: String, _ destination: T.Type, inverse: String, deleteRule: DeleteRule = .nullify
    ) -> RelationshipDescription {
        RelationshipDescription(
            name: name, destinationType: destination, inverse: inverse, isToMany: false, deleteRule: deleteRule)
    }

    /// A to-many relationship: a set of objects of `destination`, or an ordered list of them
    /// with `ordered: true`.
    public static func toMany<T: Entity>(
        _ name: String, _ destination: T.Type, inverse: String, deleteRule: DeleteRule = .nullify, ordered: Bool = false
    ) -> RelationshipDescription {
        RelationshipDescription(
            name: name, destinationType: destination, inverse: inverse, isToMany: true, deleteRule: deleteRule,
            isOrdered: ordered)
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
    /// A slot-stored to-one's own slot; -1 for a to-many and a link-stored to-one.
    let slot: Int
    /// The destination's slot holding the inverse when the inverse is a slot-stored to-one; -1
    /// otherwise.
    let inverseSlot: Int
    /// Whether the inverse is a to-many (then this to-one's slot is indexed by destination).
    let inverseIsToMany: Bool
    /// The link table storing this relationship (many-to-many or ordered); -1 when it is not
    /// stored as links.
    let link: Int
    /// This relationship's side of its link table: 0 or 1.
    let linkSide: Int
    /// Whether this to-many keeps an order.
    let isOrdered: Bool

    var isLinked: Bool { link >= 0 }
}

/// One relationship stored as links (a many-to-many, or an ordered to-many with its to-one
/// inverse): side 0 is the relationship declared first in schema order, side 1 its inverse.
struct ResolvedLink: Sendable, Hashable {
    /// Per side: the entity's index in the schema.
    let entities: [Int]
    /// Per side: the relationship's name.
    let names: [String]
    /// Per side: whether that side's list keeps an order.
    let ordered: [Bool]
    /// Per side: whether that side is a to-one (holds at most one object).
    let toOne: [Bool]
}

extension Schema {
    /// Whether relationship `r` of an entity is stored as links: a to-many whose inverse is a
    /// to-many too, a to-many declared ordered, or the to-one inverse of an ordered to-many.
    static func isLinked(_ r: RelationshipDescription, inverse: RelationshipDescription?) -> Bool {
        guard let inverse else { return false }
        return (r.isToMany && inverse.isToMany) || r.isOrdered || inverse.isOrdered
    }

    /// The to-ones that are stored as links, by entity index: the inverses of ordered to-manys.
    /// Their entities get descriptions without a slot for them.
    static func linkedToOnes(_ entities: [EntityDescription], byType: [ObjectIdentifier: Int]) -> [Int: Set<String>] {
        var result: [Int: Set<String>] = [:]
        for e in entities {
            for r in e.relationships where r.isToMany && r.isOrdered {
                guard let d = byType[ObjectIdentifier(r.destinationType)],
                    let inv = entities[d].relationships.first(where: { $0.name == r.inverse }), !inv.isToMany
                else { continue }
                result[d, default: []].insert(inv.name)
            }
        }
        return result
    }

    /// Resolves every entity's relationships: destination in the schema, inverse declared on
    /// it and pointing back. Returns the problems found instead of throwing, and the link
    /// tables the linked relationships need.
    static func resolveRelationships(
        _ entities: [EntityDescription], byType: [ObjectIdentifier: Int]
    ) -> ([[ResolvedRelationship]], [ResolvedLink], [String]) {
        var problems: [String] = []
        var result: [[ResolvedRelationship]] = []
        var links: [ResolvedLink] = []
        // (entity, relationship) -> (link, side), assigned when the first side is met.
        var linkOf: [[Int]: (Int, Int)] = [:]
        for (index, e) in entities.enumerated() {
            var resolved: [ResolvedRelationship] = []
            for (k, r) in e.relationships.enumerated() {
                guard let destination = byType[ObjectIdentifier(r.destinationType)] else {
                    problems.append(
                        "\(e.name).\(r.name) points at \(r.destinationType), which is not an entity of this schema")
                    continue
                }
                let d = entities[destination]
                guard let inverse = d.relationships.firstIndex(where: { $0.name == r.inverse }) else {
                    problems.append(
                        "\(e.name).\(r.name) names the inverse '\(r.inverse)', which \(d.name) does not declare")
                    continue
                }
                let inv = d.relationships[inverse]
                guard ObjectIdentifier(inv.destinationType) == ObjectIdentifier(e.type), inv.inverse == r.name else {
                    problems.append("\(e.name).\(r.name) and \(d.name).\(inv.name) are not each other's inverse")
                    continue
                }
                if destination == index && inverse == k && r.isToMany {
                    problems.append("\(e.name).\(r.name) is a to-many that is its own inverse")
                    continue
                }
                var link = -1
                var side = 0
                if isLinked(r, inverse: inv) {
                    if let (l, s) = linkOf[[index, k]] {
                        link = l
                        side = s
                    } else {
                        link = links.count
                        links.append(
                            ResolvedLink(
                                entities: [index, destination], names: [r.name, inv.name],
                                ordered: [r.isOrdered, inv.isOrdered], toOne: [!r.isToMany, !inv.isToMany]))
                        linkOf[[destination, inverse]] = (link, 1)
                    }
                }
                resolved.append(
                    ResolvedRelationship(
                        name: r.name, isToMany: r.isToMany, deleteRule: r.deleteRule, destination: destination,
                        inverse: inverse,
                        slot: r.isToMany || link >= 0 ? -1 : (e.slot(forKey: r.name) ?? -1),
                        inverseSlot: inv.isToMany || link >= 0 ? -1 : (d.slot(forKey: inv.name) ?? -1),
                        inverseIsToMany: inv.isToMany, link: link, linkSide: side, isOrdered: r.isOrdered))
            }
            result.append(resolved)
        }
        return (result, links, problems)
    }
}
