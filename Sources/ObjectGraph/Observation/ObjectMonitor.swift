/// Reports the saved changes of one object: each save that updates it (with the changed keys)
/// and the save that deletes it. Created by ``ModelContext/monitor(_:)``.
///
/// ```swift
/// let monitor = try context.monitor(person)
/// monitor.didUpdate = { person, keys in
///     if keys.contains("age") { print(person.name, "is now", person.age) }
/// }
/// monitor.didDelete = { id in print(id, "was deleted") }
/// ```
///
/// Callbacks run synchronously after the save commits, in the context's isolation domain, after
/// the context's ``ModelContext/observe(_:)`` callbacks. The monitor reports while it is alive
/// and not cancelled; after reporting a deletion it reports nothing more.
public final class ObjectMonitor<T: Entity> {
    /// The monitored object's ID.
    public let objectID: ObjectID
    /// The context the object belongs to (`nil` once the context is gone).
    public private(set) weak var context: ModelContext?
    /// Whether a save deleted the object.
    public private(set) var isDeleted = false
    /// Called after each save that changed the object's saved values, with the object and the
    /// names of the changed attributes.
    public var didUpdate: ((T, Set<String>) -> Void)?
    /// Called after the save that deleted the object, with its ID.
    public var didDelete: ((ObjectID) -> Void)?

    private weak var observers: ContextObservers?
    private var registration: UInt64 = 0

    init(objectID: ObjectID, context: ModelContext) {
        self.objectID = objectID
        self.context = context
    }

    func register(with observers: ContextObservers, id: UInt64) {
        self.observers = observers
        registration = id
    }

    deinit { observers?.removeMonitor(registration, for: objectID) }

    /// The object, or `nil` once it is deleted (after the save) or its context is gone.
    public var object: T? { context?.object(with: objectID, as: T.self) }

    /// Stops the monitor: no callback runs after this. Safe to call more than once.
    public func cancel() {
        observers?.removeMonitor(registration, for: objectID)
        observers = nil
        didUpdate = nil
        didDelete = nil
    }
}

extension ObjectMonitor: MonitorDelivery {
    func deliverUpdate(_ keys: Set<String>, context: ModelContext) {
        guard !isDeleted, let didUpdate, let object = context.object(with: objectID, as: T.self) else { return }
        didUpdate(object, keys)
    }

    func deliverDeletion() {
        guard !isDeleted else { return }
        isDeleted = true
        observers = nil
        didDelete?(objectID)
    }
}
