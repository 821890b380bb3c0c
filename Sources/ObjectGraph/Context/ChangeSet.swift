/// Everything one save changed, in a form that needs no model code: the narrow interface
/// between the object graph and its persistence.
///
/// A save hands one change set to the context's ``PersistenceBackend``; opening a store feeds
/// the change sets it recorded back through ``ModelContext/apply(_:)``. Values are listed by
/// attribute name, so a change set written with one version of a model can be read by another.
public struct ChangeSet: Sendable, Hashable {
    /// The changes of each entity that changed, in schema order.
    public var entities: [EntityChanges]

    /// Creates a change set.
    public init(entities: [EntityChanges] = []) { self.entities = entities }

    /// Whether nothing changed.
    public var isEmpty: Bool { entities.allSatisfy(\.isEmpty) }

    /// The total number of inserted, updated and deleted objects.
    public var objectCount: Int {
        entities.reduce(0) { $0 + $1.insertedSerials.count + Set($1.updates.map(\.serial)).count + $1.deletedSerials.count }
    }
}

/// The changes of one entity in one save.
///
/// Inserted objects are stored column-free and row-major: object `i` has the values
/// `insertedValues[i * attributeNames.count ..< (i + 1) * attributeNames.count]`, in the order of
/// ``attributeNames``. Updates list only the attributes whose values changed.
public struct EntityChanges: Sendable, Hashable {
    /// One changed attribute of one existing object.
    public struct FieldUpdate: Sendable, Hashable {
        /// The object's serial.
        public var serial: UInt64
        /// The attribute's index in ``EntityChanges/attributeNames``.
        public var attribute: Int
        /// The new value (`nil`: set to nil).
        public var value: AttributeValue?

        /// Creates a field update.
        public init(serial: UInt64, attribute: Int, value: AttributeValue?) {
            self.serial = serial
            self.attribute = attribute
            self.value = value
        }
    }

    /// The entity's name.
    public var entityName: String
    /// The attribute names that ``insertedValues`` and ``FieldUpdate/attribute`` refer to.
    public var attributeNames: [String]
    /// The serials of the inserted objects.
    public var insertedSerials: [UInt64]
    /// The inserted objects' values, row-major (see the type's discussion).
    public var insertedValues: [AttributeValue?]
    /// The changed attributes of updated objects.
    public var updates: [FieldUpdate]
    /// The serials of the deleted objects.
    public var deletedSerials: [UInt64]

    /// Creates the changes of one entity.
    public init(
        entityName: String, attributeNames: [String], insertedSerials: [UInt64] = [],
        insertedValues: [AttributeValue?] = [], updates: [FieldUpdate] = [], deletedSerials: [UInt64] = []
    ) {
        self.entityName = entityName
        self.attributeNames = attributeNames
        self.insertedSerials = insertedSerials
        self.insertedValues = insertedValues
        self.updates = updates
        self.deletedSerials = deletedSerials
    }

    /// Whether nothing changed.
    public var isEmpty: Bool { insertedSerials.isEmpty && updates.isEmpty && deletedSerials.isEmpty }
}

/// Where the saves of a context that no ``ObjectStore`` owns go: a test backend, or
/// persistence of your own. A context saves through one internal door, which either hands the
/// backend a ``ChangeSet`` or, for an ``ObjectStore``'s context, encodes the tables straight
/// into a journal record (see `Docs/Architecture.md`, "The door").
///
/// ``persist(_:)`` must be atomic: it records all of the change set or, by throwing, none of it.
/// When it throws, the save fails and the context keeps its pending changes
/// (Docs/Semantics.md, rule 12).
public protocol PersistenceBackend: AnyObject {
    /// Records one save's changes durably (as durably as the backend promises), or throws.
    func persist(_ changes: ChangeSet) throws
}
