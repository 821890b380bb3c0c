/// An object of an entity known only from a journal's recorded schema, with no Swift class of
/// its own: read and write it by key (`attributeValue(forKey:)`, `setValue(_:forKey:)`).
///
/// Tools open a store with ``ObjectStore/openDynamic(at:options:)`` to get these.
public final class DynamicObject: Entity {
    /// A placeholder: each dynamic object's real description is that of its own entity
    /// (``entity``).
    public static let entityDescription = EntityDescription(
        name: "DynamicObject", type: DynamicObject.self, attributes: [])
    /// None: a dynamic object has no code of its own.
    public static var implementedHooks: EntityHooks { [] }
    /// The object's storage handle.
    public var _backing: ObjectBacking
    /// Creates an instance over existing storage (materialization).
    public init(_backing: ObjectBacking) { self._backing = _backing }

    /// The description of the entity this object belongs to.
    public var entity: EntityDescription { _backing.entity }
}
