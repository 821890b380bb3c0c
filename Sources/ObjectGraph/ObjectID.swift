/// The permanent identity of an object: its entity's name and a 64-bit serial.
///
/// Assigned at insertion, never reused (not even after a rollback), stable across restarts once
/// the journal persists it, and safe to pass between isolation domains. There are no temporary
/// IDs: an object has its final ID from the moment it is inserted.
///
/// ```swift
/// let id = package.objectID!          // "Package/42"
/// let again = context.object(with: id, as: Package.self)
/// ```
public struct ObjectID: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// The entity's name.
    public let entityName: String
    /// The serial, unique within the entity, starting at 1.
    public let serial: UInt64

    /// Creates an object ID from its parts (as read from a journal or an external reference).
    public init(entityName: String, serial: UInt64) {
        self.entityName = entityName
        self.serial = serial
    }

    /// `Entity/serial`, e.g. `Package/42`.
    public var description: String { "\(entityName)/\(serial)" }

    public static func < (a: ObjectID, b: ObjectID) -> Bool {
        (a.entityName, a.serial) < (b.entityName, b.serial)
    }
}
