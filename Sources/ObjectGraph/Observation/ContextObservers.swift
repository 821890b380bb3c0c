import Synchronization

/// The observers of one context's saves: callbacks, async streams and object monitors. The
/// context creates it on the first registration (``ModelContext/observers``).
final class ContextObservers {
    typealias Callback = (ContextChanges) -> Void

    private var callbacks: [UInt64: Callback] = [:]
    private var monitors: [ObjectID: [WeakMonitor]] = [:]
    let streams = StreamHub()
    /// The subscribers of an ``AsyncStore``'s ``AsyncStore/changes``, if the context is one's.
    var changeHub: ChangeHub?
    private var nextID: UInt64 = 0
    /// Saves waiting to be delivered: a save made by an observer is delivered after the one
    /// being delivered, so every observer sees saves in commit order.
    private var queue: [ContextChanges] = []
    private var isDelivering = false

    deinit { streams.finishAll() }

    /// Whether anybody listens: when not, a save captures nothing.
    var isObserved: Bool {
        !callbacks.isEmpty || !monitors.isEmpty || streams.hasStreams || changeHub?.hasSubscribers == true
    }

    private func makeID() -> UInt64 {
        nextID += 1
        return nextID
    }

    func addCallback(_ body: @escaping Callback) -> UInt64 {
        let id = makeID()
        callbacks[id] = body
        return id
    }

    func removeCallback(_ id: UInt64) { callbacks[id] = nil }

    func addMonitor(_ monitor: any MonitorDelivery, for objectID: ObjectID) -> UInt64 {
        let id = makeID()
        monitors[objectID, default: []].append(WeakMonitor(id: id, monitor: monitor))
        return id
    }

    func removeMonitor(_ id: UInt64, for objectID: ObjectID) {
        guard var list = monitors[objectID] else { return }
        list.removeAll { $0.id == id || $0.monitor == nil }
        monitors[objectID] = list.isEmpty ? nil : list
    }

    /// Sends `changes` to every observer: callbacks in registration order, then monitors, then
    /// streams. Re-entrant saves are queued behind the current delivery.
    func deliver(_ changes: ContextChanges, context: ModelContext) {
        queue.append(changes)
        guard !isDelivering else { return }
        isDelivering = true
        defer { isDelivering = false }
        while !queue.isEmpty {
            let c = queue.removeFirst()
            for id in callbacks.keys.sorted() {
                callbacks[id]?(c)  // skipped if cancelled by an earlier callback
            }
            if !monitors.isEmpty {
                for u in c.updated {
                    for m in monitors[u.objectID] ?? [] { m.monitor?.deliverUpdate(u.changedKeys, context: context) }
                }
                for id in c.deleted {
                    guard let list = monitors.removeValue(forKey: id) else { continue }
                    for m in list { m.monitor?.deliverDeletion() }
                }
            }
            streams.yield(c)
            if let changeHub {
                // Under group commit the door holds them until the save is durable.
                if let door = context.door { door.deliver(c, to: changeHub) } else { changeHub.deliver(c) }
            }
        }
    }
}

/// A monitor as the registry sees it.
protocol MonitorDelivery: AnyObject {
    func deliverUpdate(_ keys: Set<String>, context: ModelContext)
    func deliverDeletion()
}

struct WeakMonitor {
    let id: UInt64
    weak var monitor: (any MonitorDelivery)?
}

/// The continuations of the context's ``ModelContext/changes`` streams. Thread-safe: a stream
/// ends (and unregisters) from whatever thread cancels its consumer.
final class StreamHub: Sendable {
    private struct State {
        var nextID: UInt64 = 0
        var continuations: [UInt64: AsyncStream<ContextChanges>.Continuation] = [:]
    }

    private let state = Mutex(State())

    var hasStreams: Bool { state.withLock { !$0.continuations.isEmpty } }

    func add(_ continuation: AsyncStream<ContextChanges>.Continuation) -> UInt64 {
        state.withLock {
            $0.nextID += 1
            $0.continuations[$0.nextID] = continuation
            return $0.nextID
        }
    }

    func remove(_ id: UInt64) {
        _ = state.withLock { $0.continuations.removeValue(forKey: id) }
    }

    func yield(_ changes: ContextChanges) {
        let targets = state.withLock { s in s.continuations.sorted { $0.key < $1.key }.map(\.value) }
        for c in targets { c.yield(changes) }
    }

    func finishAll() {
        let targets = state.withLock { s in
            defer { s.continuations.removeAll() }
            return Array(s.continuations.values)
        }
        for c in targets { c.finish() }
    }
}
