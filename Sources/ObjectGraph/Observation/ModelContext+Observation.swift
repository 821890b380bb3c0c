extension ModelContext {
    /// Calls `body` with the changes of every later successful save, synchronously, right after
    /// the save commits and before `save()` returns. Keep the returned token: observation ends
    /// when it is cancelled or deinitialized.
    ///
    /// ```swift
    /// let token = context.observe { changes in
    ///     print("inserted", changes.inserted.count, "deleted", changes.deleted.count)
    /// }
    /// try context.save()     // prints
    /// token.cancel()
    /// ```
    ///
    /// Observers never see a failed save (validation or backend error) and never see a save
    /// half-applied: the tables have committed when `body` runs. A save that changed nothing is
    /// not delivered. `body` runs in the context's isolation domain and may use the context,
    /// save included: changes of a save made inside an observer are delivered to every observer
    /// after the current delivery ends (so all observers see saves in commit order), which means
    /// such a nested `save()` returns before its own delivery.
    ///
    /// - Parameter body: Called once per save with that save's changes.
    /// - Returns: The registration; cancel it (or let it go) to stop observing.
    public func observe(_ body: @escaping (ContextChanges) -> Void) -> ObservationToken {
        let o = ensureObservers()
        return ObservationToken(observers: o, id: o.addCallback(body))
    }

    /// A new stream of the changes of every successful save made after this property is read,
    /// in commit order (nothing is dropped: the stream buffers until consumed).
    ///
    /// ```swift
    /// let changes = context.changes
    /// Task { for await c in changes { print(c.updated.count) } }
    /// ```
    ///
    /// Each read returns a separate stream. A stream stops receiving when its consumer is
    /// cancelled, and finishes when the context is deinitialized. The same delivery rules as
    /// ``observe(_:)`` apply (after commit, never for a failed save, never empty).
    public var changes: AsyncStream<ContextChanges> {
        let hub = ensureObservers().streams
        let (stream, continuation) = AsyncStream<ContextChanges>.makeStream()
        let id = hub.add(continuation)
        continuation.onTermination = { [weak hub] _ in hub?.remove(id) }
        return stream
    }

    /// A monitor of one object's saved changes (CoreStore's `ObjectMonitor`): it reports each
    /// save that updates the object, with the changed keys, and the save that deletes it.
    ///
    /// ```swift
    /// let monitor = try context.monitor(person)
    /// monitor.didUpdate = { person, keys in print(person.name, "changed", keys) }
    /// monitor.didDelete = { id in print(id, "is gone") }
    /// ```
    ///
    /// The monitor reports while it is alive and not cancelled; keep a reference to it. An
    /// object inserted since the last save can be monitored: its insertion is not reported, its
    /// later updates are.
    ///
    /// - Parameter object: An object of this context.
    /// - Returns: A monitor of `object`.
    /// - Throws: ``ObjectGraphError`` with code `notInContext` for an object not in a context,
    ///   `wrongContext` for one in another context.
    public func monitor<T: Entity>(_ object: T) throws(ObjectGraphError) -> ObjectMonitor<T> {
        guard let table = object._backing.managedTable, let id = object.objectID else {
            throw ObjectGraphError(
                .notInContext, "a \(T.entityDescription.name) object that is not in a context cannot be monitored",
                entity: T.entityDescription.name)
        }
        guard table.context === self else {
            throw ObjectGraphError(.wrongContext, "\(id) belongs to another context", entity: T.entityDescription.name)
        }
        let monitor = ObjectMonitor<T>(objectID: id, context: self)
        let o = ensureObservers()
        monitor.register(with: o, id: o.addMonitor(monitor, for: id))
        return monitor
    }

    // MARK: Save hooks (called by save())

    func ensureObservers() -> ContextObservers {
        if let observers { return observers }
        let o = ContextObservers()
        observers = o
        return o
    }

    /// What observers will receive for the pending changes, or `nil` when nobody observes.
    /// Called by `save()` once the save can no longer fail, before the tables commit.
    func changesForObservers(_ pending: [PendingRows]) -> ContextChanges? {
        guard let observers, observers.isObserved else { return nil }
        return ContextChanges(pendingChangesOf: tables, pending)
    }

    /// Delivers a committed save's changes. Called by `save()` after the commit.
    func deliverToObservers(_ changes: ContextChanges?) {
        guard let changes, !changes.isEmpty, let observers else { return }
        observers.deliver(changes, context: self)
    }
}

/// A registration made by ``ModelContext/observe(_:)``. Observation lasts until ``cancel()``
/// or until the token is deinitialized, whichever comes first.
public final class ObservationToken {
    private weak var observers: ContextObservers?
    private let id: UInt64

    init(observers: ContextObservers, id: UInt64) {
        self.observers = observers
        self.id = id
    }

    deinit { observers?.removeCallback(id) }

    /// Stops the observation. Safe to call more than once, also from inside the callback.
    public func cancel() {
        observers?.removeCallback(id)
        observers = nil
    }
}
