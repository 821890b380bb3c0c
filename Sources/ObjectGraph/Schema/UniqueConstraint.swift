/// A set of attributes whose combined values no two objects of an entity may share.
///
/// Declared with `@Attribute(.unique)` on one attribute or `#Unique<T>([\.a, \.b])` for a
/// compound key (SwiftData's spelling). Objects with a `nil` in any of the key's attributes
/// are not constrained, as in SQL.
///
/// Each constraint is a hash index over the entity's objects, pending inserts and changes
/// included, so ``ModelContext/object(_:where:equals:)`` and upserts find any object in O(1).
public struct UniqueConstraint: Sendable, Hashable {
    /// What a save does when two objects share a key.
    public enum CollisionPolicy: String, Sendable, Hashable, Codable {
        /// The save fails with a ``ValidationError`` naming both objects and the constraint
        /// (DESIGN rule 13). The default.
        case fail
        /// An object inserted since the last save that collides with another object is merged
        /// into it: its non-nil values are copied onto the existing object and the inserted one
        /// vanishes (SwiftData's upsert-on-save).
        case merge
    }

    /// The attribute names making up the key, in order.
    public let keys: [String]
    /// What a save does on a collision.
    public let onCollision: CollisionPolicy

    /// Creates a constraint over `keys`.
    public init(_ keys: [String], onCollision: CollisionPolicy = .fail) {
        self.keys = keys
        self.onCollision = onCollision
    }

    /// `Entity(a, b)`, for messages.
    func name(in entity: String) -> String { "\(entity)(\(keys.joined(separator: ", ")))" }
}

/// Options of `@Attribute`.
public struct AttributeOption: Sendable, Hashable {
    let uniquePolicy: UniqueConstraint.CollisionPolicy?

    /// The attribute's value is unique among the entity's objects; a collision fails the save.
    public static let unique = AttributeOption(uniquePolicy: .fail)

    /// The attribute's value is unique; `onCollision` says what a save does on a collision.
    public static func unique(onCollision: UniqueConstraint.CollisionPolicy) -> AttributeOption {
        AttributeOption(uniquePolicy: onCollision)
    }
}
