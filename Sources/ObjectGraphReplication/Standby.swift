public import Foundation
import GraphJournal
import NATSJetStream
public import ObjectGraph

/// A follower that takes the stream over when its writer's lease lapses (Docs/Replication.md,
/// "Failover"): it serves reads as a ``Follower`` does, watches the lease, and once no one
/// holds it, acquires it, applies everything the stream holds, renumbers its journal after the
/// stream's last record, and goes on as the stream's writer under a new epoch. Other
/// followers keep following without a restart; the old writer, should it come back, is fenced.
///
/// ```swift
/// var target = ReplicationTarget(servers: urls, stream: "PKGD", replicas: 3)
/// target.lease = WriterLease(ttl: .seconds(3))
/// let standby = try await ObjectStore.standby(at: replicaDirectory, schema: schema, source: target)
/// // Reads while standing by: standby.follower?.store.snapshot
/// let writer = try await standby.promoted()   // returns once this process is the writer
/// try writer.context.insert(Package.self).name = "zlib1g"
/// try writer.context.save()
/// ```
public final class Standby: Sendable {
    /// What a standby is doing.
    public enum Phase: Sendable, Hashable {
        /// Following; the lease is held by another writer.
        case following
        /// The lease lapsed and this standby took it: applying the rest of the stream, then
        /// renumbering and publishing its first base under its epoch.
        case promoting(epoch: UInt64)
        /// The stream's writer, at this epoch (``promoted()`` returns the store).
        case promoted(epoch: UInt64)
        /// Stopped, by ``stop()`` or a failure (``Status/lastError``).
        case stopped
    }

    /// The standby's phase and what went wrong last.
    public struct Status: Sendable, Hashable {
        /// The phase.
        public var phase: Phase
        /// The last error (a failed attempt to take over, which is tried again; or the
        /// failure that stopped the standby).
        public var lastError: String?
        /// Attempts to take over that another writer's publish cut short.
        public var abandonedPromotions: Int
    }

    private let directory: URL
    private let schema: Schema?
    private let target: ReplicationTarget
    private let followerOptions: StoreOptions
    private let writerOptions: StoreOptions
    private let client: JetStreamClient
    private let keeper: LeaseKeeper
    private let box = Box()

    private final class Box: @unchecked Sendable {
        // Every field is read and written with `condition` locked.
        let condition = NSCondition()
        var follower: Follower?
        var writer: ReplicatedStore?
        var failure: (any Error)?
        var stopping = false
        var done = false
        var status = Status(phase: .following, lastError: nil, abandonedPromotions: 0)

        func locked<R>(_ body: (Box) throws -> R) rethrows -> R {
            condition.lock()
            defer { condition.unlock() }
            return try body(self)
        }
    }

    /// Opens (creating if needed) the replica in `directory`, follows `source`, and takes the
    /// stream over when the writer's lease lapses.
    ///
    /// - Parameters:
    ///   - schema: the application's model; nil to follow without model code (the schema from
    ///     the stream, objects as ``DynamicObject``: `graph-journal follow --standby`).
    ///   - source: the stream; its ``ReplicationTarget/lease`` must be set (the lease this
    ///     standby watches and takes).
    ///   - options: the replica's store options while following (``Follower/defaultOptions``);
    ///     its `journal.encryption` holds the writer's keys when the writer encrypts its store
    ///     (the records travel sealed).
    ///   - writerOptions: the store options once promoted (the durability the writer needs).
    ///     Without a `journal.encryption` of its own, it takes `options`' one: the replica's
    ///     journal is sealed, and the promoted writer goes on sealing under the same keys.
    /// - Throws: ``ReplicationError`` (`server`; `leaseHeld` is never thrown: a held lease is
    ///   what a standby waits on), as ``Follower/start(at:schema:source:options:)``.
    public static func start(
        at directory: URL, schema: Schema?, source: ReplicationTarget, options: StoreOptions = Follower.defaultOptions,
        writerOptions: StoreOptions = StoreOptions()
    ) async throws -> Standby {
        guard let lease = source.lease else {
            throw ReplicationError(.unavailable, "a standby needs the target's writer lease (ReplicationTarget.lease)")
        }
        let client: JetStreamClient
        do {
            client = try JetStreamClient(servers: source.servers, name: "objectgraph-standby", timeout: source.timeout)
        } catch {
            throw ReplicationError(
                error, while: "connecting to \(source.servers.joined(separator: ",")) for stream \(source.stream)")
        }
        let keeper = try LeaseKeeper(client: client, target: source, lease: lease)
        let follower = try await Self.follow(directory, schema: schema, source: source, options: options)
        let standby = Standby(
            directory: directory, schema: schema, target: source, followerOptions: options,
            writerOptions: writerOptions, client: client, keeper: keeper)
        standby.box.follower = follower
        Task { await standby.watch() }
        return standby
    }

    private init(
        directory: URL, schema: Schema?, target: ReplicationTarget, followerOptions: StoreOptions,
        writerOptions: StoreOptions, client: JetStreamClient, keeper: LeaseKeeper
    ) {
        self.directory = directory
        self.schema = schema
        self.target = target
        self.followerOptions = followerOptions
        var writerOptions = writerOptions
        if writerOptions.journal.encryption == nil {
            writerOptions.journal.encryption = followerOptions.journal.encryption
        }
        self.writerOptions = writerOptions
        self.client = client
        self.keeper = keeper
    }

    private static func follow(
        _ directory: URL, schema: Schema?, source: ReplicationTarget, options: StoreOptions
    ) async throws -> Follower {
        if let schema {
            return try await Follower.start(at: directory, schema: schema, source: source, options: options)
        }
        return try await Follower.start(at: directory, source: source, options: options)
    }

    /// The replica to read from while standing by; nil once promoted or stopped.
    public var follower: Follower? { box.locked { $0.follower } }

    /// The phase, and what went wrong last.
    public var status: Status { box.locked { $0.status } }

    /// Waits until this standby is the stream's writer and returns the store to write to (the
    /// same one on every call).
    ///
    /// - Throws: the failure that stopped the standby (a follower that failed, a store that
    ///   would not open); ``ReplicationError`` code `unavailable` after ``stop()``.
    public func promoted() async throws -> ReplicatedStore {
        while true {
            let (writer, failure, done) = box.locked { ($0.writer, $0.failure, $0.done) }
            if let writer { return writer }
            if let failure { throw failure }
            if done { throw ReplicationError(.unavailable, "the standby was stopped before it was promoted") }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Stops standing by: the follower stops and closes its replica (it resumes from there when
    /// started again). Once promoted, it does nothing: close the writer instead.
    ///
    /// - Throws: ``StoreError`` from closing the replica.
    public func stop() async throws {
        box.locked { $0.stopping = true }
        while !box.locked({ $0.done }) { try? await Task.sleep(for: .milliseconds(5)) }
        if box.locked({ $0.writer == nil }) { keeper.stop(release: false) }
    }

    // MARK: Watching the lease

    private func watch() async {
        // Often enough to notice a release or a lapse well within the lease's time to live.
        let interval = Duration.milliseconds(min(250, max(20, Int64(seconds(keeper.ttl) * 1000 / 4))))
        defer {
            box.locked { b in
                b.done = true
                if b.writer == nil { b.status.phase = .stopped }
                b.condition.broadcast()
            }
        }
        while !box.locked({ $0.stopping }) {
            if let follower = box.locked({ $0.follower }), let failed = follower.status.failed {
                try? await follower.stop()
                fail(ReplicationError(.unavailable, "the standby's follower stopped: \(failed)"))
                return
            }
            if box.locked({ $0.follower == nil }) {
                // A promotion given up stopped the follower, and the servers did not let it start
                // again then (a cluster electing a leader): started again once they answer.
                do {
                    let follower = try await Self.follow(
                        directory, schema: schema, source: target, options: followerOptions)
                    box.locked { $0.follower = follower }
                } catch let error as ReplicationError where Self.serversAway(error) {
                    box.locked { $0.status.lastError = "\(error)" }
                    try? await Task.sleep(for: interval)
                    continue
                } catch {
                    fail(error)
                    return
                }
            }
            do {
                if try keeper.currentHolder() == nil, try await takeOver() { return }
            } catch let error as ReplicationError where error.code == .leaseHeld {
                // Another standby was faster.
            } catch {
                box.locked { $0.status.lastError = "\(error)" }
                if box.locked({ $0.follower == nil }) {
                    // The follower could not be started again after a promotion was given up:
                    // the lease goes back. While the servers are away, the loop starts the
                    // follower once they answer; any other error leaves no replica to follow with.
                    keeper.stop(release: true)
                    if (error as? ReplicationError).map(Self.serversAway) != true {
                        fail(error)
                        return
                    }
                }
            }
            try? await Task.sleep(for: interval)
        }
        if let follower = box.locked({ $0.follower }) {
            try? await follower.stop()
            box.locked { $0.follower = nil }
        }
    }

    private func fail(_ error: any Error) {
        box.locked { b in
            b.failure = error
            b.status.lastError = "\(error)"
            b.follower = nil
        }
    }

    /// Takes the lease, catches up, and becomes the writer; false when another writer took the
    /// stream first (the standby follows again). An old writer that published after this
    /// standby read the stream (it had not yet noticed its lease was gone) makes the attempt
    /// start over, the lease still held: the standby applies those records too, then tries
    /// again.
    private func takeOver() async throws -> Bool {
        let epoch = try keeper.acquire(minimumEpoch: keeper.streamEpoch() ?? 0)
        keeper.startRenewing()
        box.locked { $0.status.phase = .promoting(epoch: epoch) }
        while true {
            do {
                let writer = try await promote()
                box.locked { b in
                    b.writer = writer
                    b.follower = nil
                    b.status.phase = .promoted(epoch: epoch)
                    b.status.lastError = nil
                    b.condition.broadcast()
                }
                return true
            } catch let error as ReplicationError where error.code == .diverged || error.code == .fenced {
                try await abandonPromotion(error)
                if error.code == .fenced || keeper.lost != nil {
                    // A writer of a newer epoch has the stream: follow it.
                    keeper.stop(release: false)
                    box.locked { $0.status.phase = .following }
                    return false
                }
                if box.locked({ $0.stopping }) { return false }
            } catch let error as ReplicationError where Self.serversAway(error) {
                // The servers went away, or the cluster is electing a leader, in the middle of the
                // promotion (connecting the shipper, creating the stream): the lease goes back and
                // this standby follows again, to take the stream over once the lease is free and
                // the servers answer. Stopping here left the stream with no one to take it over.
                keeper.stop(release: true)
                try await abandonPromotion(error)
                box.locked { $0.status.phase = .following }
                return false
            } catch {
                // The replica could not become the writer (its store would not open, say): the
                // lease goes back, for another standby to take, and this one stops.
                keeper.stop(release: true)
                fail(error)
                return true
            }
        }
    }

    /// Whether `error` says only that the servers did not answer or could not serve (away, or
    /// a cluster electing a leader): waited out, where any other error stops the standby.
    private static func serversAway(_ error: ReplicationError) -> Bool {
        error.code == .server || error.code == .tooFewReplicas
    }

    /// Counts a promotion given up for `error` and has a follower again (the promotion stops
    /// the one it had once caught up).
    private func abandonPromotion(_ error: ReplicationError) async throws {
        box.locked { b in
            b.status.abandonedPromotions += 1
            b.status.lastError = error.message
        }
        if box.locked({ $0.follower == nil }) {
            let follower = try await Self.follow(directory, schema: schema, source: target, options: followerOptions)
            box.locked { $0.follower = follower }
        }
    }

    /// With the lease held: waits until the follower applied every complete batch of the
    /// stream, stops it, renumbers the replica's journal after the highest record the stream
    /// names, opens it as the writer and ships its base, the first message of the new epoch.
    private func promote() async throws -> ReplicatedStore {
        guard let follower = box.locked({ $0.follower }) else {
            throw ReplicationError(.unavailable, "the standby has no follower")
        }
        var streamLast: UInt64 = 0
        var highest: UInt64 = 0
        while true {
            if let failed = follower.status.failed {
                throw ReplicationError(.unavailable, "the standby's follower stopped: \(failed)")
            }
            guard let found = try positionWhileServersAnswer(follower) else {
                try await Task.sleep(for: .milliseconds(50))
                continue
            }
            let (last, record, caughtUp) = found
            if caughtUp {
                streamLast = last
                highest = record
                break
            }
            try await Task.sleep(for: .milliseconds(2))
        }
        try await follower.stop()
        box.locked { $0.follower = nil }
        // The writer: the replica's journal renumbered after every record the stream names,
        // its first base (the state the stream's history reached) shipped under the new epoch.
        let resolved =
            try schema
            ?? Follower.dynamicSchema(
                for: directory, source: target, keys: ReplicaKeys(writerOptions.journal.encryption))
        let shipper = try JournalShipper(target: target, keeper: keeper)
        var options = writerOptions
        shipper.prepare(&options)
        let store = try ObjectStore.open(at: directory, schema: resolved, options: options)
        do {
            try store.compact(numberingFrom: highest + 1)
            try shipper.attach(
                store.shippingSource,
                takingOver: JournalShipper.TakeOver(streamRecordSequence: highest, streamLastSequence: streamLast))
            try waitForBase(shipper, through: store.stats.lastSequence)
        } catch {
            shipper.stop()
            try? store.close()
            throw error
        }
        return ReplicatedStore(store: store, shipper: shipper)
    }

    /// Waits until the stream stored the promoted journal's base. The servers being away is
    /// waited out for as long as the lease is held.
    private func waitForBase(_ shipper: JournalShipper, through sequence: UInt64) throws {
        while true {
            do {
                try shipper.waitShipped(through: sequence, timeout: target.timeout)
                return
            } catch  where error.code == .notAcknowledged {
                if let lost = keeper.lost { throw ReplicationError(.fenced, lost) }
            }
        }
    }

    /// ``position(_:)``, or nil while the servers are away or the cluster elects a leader:
    /// waited out for as long as the lease is held, as the base's shipping is (failing there
    /// ended the standby for good over a moment's election).
    private func positionWhileServersAnswer(_ follower: Follower) throws(ReplicationError) -> (UInt64, UInt64, Bool)? {
        do {
            return try position(follower)
        } catch  where Self.serversAway(error) {
            if let lost = keeper.lost { throw ReplicationError(.fenced, lost) }
            return nil
        }
    }

    /// The stream's last sequence, the highest writer sequence its messages name, and whether
    /// the follower applied every complete batch.
    private func position(_ follower: Follower) throws(ReplicationError) -> (UInt64, UInt64, Bool) {
        do {
            let state = try client.streamState(target.stream)
            let applied = follower.status.appliedSequence
            var highest = applied
            var caughtUp = true
            if let log = try client.lastMessage(stream: target.stream, subject: target.logSubject) {
                let info = try LogMessageInfo(log)
                highest = max(highest, info.sequence)
                // A batch its writer did not finish publishing (cut short by a crash) was never
                // acknowledged: the records before it are what must be applied.
                caughtUp = applied >= (info.isLastPart ? info.sequence : info.previous)
            }
            if let last = try client.message(stream: target.stream, sequence: state.lastSequence),
                let covers = last.headers[Header.covers].flatMap(UInt64.init)
            {
                highest = max(highest, covers)
            }
            return (state.lastSequence, highest, caughtUp)
        } catch let error as ReplicationError {
            throw error
        } catch let error as JetStreamError {
            throw ReplicationError(error, while: "reading stream \(target.stream)")
        } catch {
            throw ReplicationError(.server, "reading stream \(target.stream): \(error)")
        }
    }
}

extension ObjectStore {
    /// Opens (creating if needed) a replica in `directory` that follows `source` and takes the
    /// stream over when its writer's lease lapses (``Standby``).
    ///
    /// - Throws: as ``Standby/start(at:schema:source:options:writerOptions:)``.
    public static func standby(
        at directory: URL, schema: Schema, source: ReplicationTarget, options: StoreOptions = Follower.defaultOptions,
        writerOptions: StoreOptions = StoreOptions()
    ) async throws -> Standby {
        try await Standby.start(
            at: directory, schema: schema, source: source, options: options, writerOptions: writerOptions)
    }
}
