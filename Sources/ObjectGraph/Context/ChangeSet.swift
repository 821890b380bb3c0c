/// Everything one save changed, in a form that needs no model code: the narrow interface
/// between the object graph and its persistence.
///
/// A save hands one change set to the context's ``PersistenceBackend``; opening a store feeds
/// the change sets it recorded back through ``ModelContext/apply(_:)``. Values are listed by
/// attribute name, so a change set written with one version of a model can be read by another.
public struct ChangeSet: Sendable, Hashable {
    /// The changes of each entity that changed, in schema order.
    public var entities: [EntityChanges]

    /// The changes of the relationships stored as links (many-to-many and ordered), one entry
    /// per relationship that changed.
    public var links: [LinkChanges] = []

    /// Creates a change set.
    public init(entities: [EntityChanges] = [], links: [LinkChanges] = []) {
        self.entities = entities
        self.links = links
    }

    /// Whether nothing changed.
    public var isEmpty: Bool { entities.allSatisfy(\.isEmpty) && links.allSatisfy(\.isEmpty) }

    /// The total number of inserted, updated and deleted objects.
    public var objectCount: Int {
        entities.reduce(0) {
            $0 + $1.insertedSerials.count + Set($1.updates.map(\.serial)).count + $1.deletedSerials.count
        }
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

/// The changes of one relationship stored as links (a many-to-many, or an ordered to-many with
/// its inverse) in one save, named by its two sides.
///
/// Applied after the entities' changes: ``removed``, then ``added`` (each appended to the end
/// of both objects' lists), then ``orders``. The links of a deleted object are not listed: the
/// deletion removes them.
public struct LinkChanges: Sendable, Hashable {
    /// Two related objects: the serial of side 0's object and of side 1's.
    public struct Pair: Sendable, Hashable {
        /// The serial of side 0's object.
        public var serial0: UInt64
        /// The serial of side 1's object.
        public var serial1: UInt64
        /// Creates a pair.
        public init(_ serial0: UInt64, _ serial1: UInt64) {
            self.serial0 = serial0
            self.serial1 = serial1
        }
    }

    /// Rearranges one object's ordered list: each member named is taken out, then put back at
    /// its index, in ascending index order; the other members keep their relative order.
    public struct Order: Sendable, Hashable {
        /// The side (0 or 1) the list is on.
        public var side: Int
        /// The serial of the object whose list it is.
        public var owner: UInt64
        /// The members that move, in ascending index order.
        public var placements: [Placement]
        /// Creates an order edit.
        public init(side: Int, owner: UInt64, placements: [Placement]) {
            self.side = side
            self.owner = owner
            self.placements = placements
        }
    }

    /// One member of an ``Order`` and where it ends up.
    public struct Placement: Sendable, Hashable {
        /// The member's serial.
        public var member: UInt64
        /// Its index in the list afterwards.
        public var index: Int
        /// Creates a placement.
        public init(member: UInt64, index: Int) {
            self.member = member
            self.index = index
        }
    }

    /// Per side: the entity's name.
    public var entityNames: [String]
    /// Per side: the relationship's name.
    public var relationshipNames: [String]
    /// The links removed.
    public var removed: [Pair]
    /// The links added, in the order they are appended.
    public var added: [Pair]
    /// The order edits of ordered lists.
    public var orders: [Order]

    /// Creates the changes of one relationship.
    public init(
        entityNames: [String], relationshipNames: [String], removed: [Pair] = [], added: [Pair] = [],
        orders: [Order] = []
    ) {
        self.entityNames = entityNames
        self.relationshipNames = relationshipNames
        self.removed = removed
        self.added = added
        self.orders = orders
    }

    /// Whether nothing changed.
    public var isEmpty: Bool { removed.isEmpty && added.isEmpty && orders.isEmpty }
}
