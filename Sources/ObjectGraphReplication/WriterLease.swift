import Foundation
import NATSJetStream

/// The writer lease of a stream: who may write to it, held in a JetStream key-value bucket
/// whose entries expire after ``ttl`` unless renewed (Docs/Replication.md, "Failover").
///
/// A writer opened with a lease (``ReplicationTarget/lease``) acquires it at open and renews it
/// every third of its time to live; a standby (``Follower/start(at:schema:source:options:standby:)``)
/// takes it over once it lapses and continues the stream under a new **epoch**: the key's
/// revision at acquisition, which only grows. The lease decides who should write; the stream's
/// expected-last-sequence check makes sure no one else can.
///
/// ```swift
/// var target = ReplicationTarget(servers: urls, stream: "PKGD", replicas: 3, policy: .synchronous(timeout: .seconds(5)))
/// target.lease = WriterLease(ttl: .seconds(3))
/// let writer = try ReplicatedStore.open(at: directory, schema: schema, target: target)
/// ```
public struct WriterLease: Sendable, Hashable {
    /// Who holds it, as other processes see it (``defaultHolder``: the host name and process ID).
    /// A writer whose holder names the lease's current holder takes it over at once instead of
    /// waiting for it to lapse: give two processes the same holder only when they are the same
    /// writer restarted.
    public var holder: String
    /// How long the lease lives without renewal: the longest a dead writer keeps the stream
    /// from its standby. The bucket keeps the time to live it was created with.
    public var ttl: Duration
    /// The key-value bucket holding the leases, one key per stream.
    public var bucket: String

    /// A lease held as `holder`, expiring `ttl` after its last renewal, in `bucket`.
    public init(
        holder: String = WriterLease.defaultHolder, ttl: Duration = .seconds(3), bucket: String = "OBJECTGRAPH_LEASES"
    ) {
        self.holder = holder
        self.ttl = ttl
        self.bucket = bucket
    }

    /// The host name and process ID, as `host:pid`.
    public static var defaultHolder: String {
        "\(ProcessInfo.processInfo.hostName):\(ProcessInfo.processInfo.processIdentifier)"
    }

    /// The bucket key of `stream`'s lease (characters a key may not hold become `_`).
    package static func key(_ stream: String) -> String {
        String(stream.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" ? $0 : "_" })
    }
}

/// The value stored under a stream's lease key.
struct LeaseValue: Codable, Hashable {
    var holder: String
    var epoch: UInt64
    /// Set by a writer that closed: the next one need not wait for the lease to lapse.
    var released: Bool?

    var bytes: [UInt8] { (try? Array(JSONEncoder().encode(self))) ?? [] }

    init(holder: String, epoch: UInt64, released: Bool? = nil) {
        self.holder = holder
        self.epoch = epoch
        self.released = released
    }

    init?(_ bytes: [UInt8]) {
        guard let v = try? JSONDecoder().decode(LeaseValue.self, from: Data(bytes)) else { return nil }
        self = v
    }
}

/// Acquires, renews and releases one stream's writer lease on a thread of its own, and says at
/// any moment whether the lease is surely still held (``isHeld``) or was lost to another
/// holder (``lost``).
final class LeaseKeeper: @unchecked Sendable {
    // Every var is read and written with `condition` locked.
    private let condition = NSCondition()
    private let kv: JetStreamKeyValue
    /// The servers' client, to read the epoch of the stream's last message.
    private let client: JetStreamClient
    private let key: String
    let lease: WriterLease
    let stream: String
    /// The bucket's time to live (the lease's, unless the bucket was made with another).
    let ttl: Duration
    private var revision: UInt64 = 0
    private(set) var epochValue: UInt64 = 0
    /// When the last successful write of the lease was sent: the server keeps the entry at
    /// least `ttl` after that.
    private var confirmedAt: ContinuousClock.Instant?
    private var lostReason: String?
    private var stopping = false
    private var threadRunning = false
    /// Set by tests: renewals stop as if the process were paused.
    private var suspended = false
    /// Called once, on the renewing thread, when the lease is found lost to another holder.
    var onLost: (@Sendable (String) -> Void)? {
        get {
            condition.lock()
            defer { condition.unlock() }
            return lostHandler
        }
        set {
            condition.lock()
            lostHandler = newValue
            condition.unlock()
        }
    }
    private var lostHandler: (@Sendable (String) -> Void)?

    /// Binds the lease bucket of `target` (creating it with the target's replicas).
    init(client: JetStreamClient, target: ReplicationTarget, lease: WriterLease) throws(ReplicationError) {
        do {
            kv = try client.keyValue(bucket: lease.bucket, ttl: lease.ttl, replicas: target.replicas)
        } catch {
            throw ReplicationError(error, while: "opening the lease bucket \(lease.bucket)")
        }
        self.client = client
        self.lease = lease
        self.stream = target.stream
        self.key = WriterLease.key(target.stream)
        self.ttl = kv.ttl
    }

    /// Who holds the lease now, and at which epoch; nil when no one does (never taken, lapsed,
    /// or released).
    func currentHolder() throws(ReplicationError) -> LeaseValue? {
        let entry: KeyValueEntry?
        do { entry = try kv.get(key) } catch { throw ReplicationError(error, while: "reading the lease of \(stream)") }
        guard let entry, !entry.isDeleted, let value = LeaseValue(entry.value), value.released != true else {
            return nil
        }
        return value
    }

    /// The epoch of the stream's last message (nil when it has none, or none with an epoch).
    func streamEpoch() throws(ReplicationError) -> UInt64? {
        do {
            let state = try client.streamState(stream)
            guard state.lastSequence > 0, let last = try client.message(stream: stream, sequence: state.lastSequence)
            else { return nil }
            return last.headers[Header.epoch].flatMap(UInt64.init)
        } catch {
            throw ReplicationError(error, while: "reading stream \(stream)")
        }
    }

    /// Takes the lease if no one else holds it; returns the new epoch, which is above
    /// `minimumEpoch`.
    ///
    /// - Throws: ``ReplicationError`` code `leaseHeld` when another holder's lease is live;
    ///   `server`.
    @discardableResult
    func acquire(minimumEpoch: UInt64 = 0) throws(ReplicationError) -> UInt64 {
        let sentAt = ContinuousClock.now
        do {
            let entry = try kv.get(key)
            let current = entry.flatMap { $0.isDeleted ? nil : LeaseValue($0.value) }
            var rev: UInt64
            if let current, current.released != true, current.holder != lease.holder {
                throw ReplicationError(
                    .leaseHeld,
                    "the writer lease of stream \(stream) is held by \(current.holder) (epoch \(current.epoch)); it lapses \(ttl) after its holder stops renewing it"
                )
            } else if let entry {
                rev = try kv.update(key, LeaseValue(holder: lease.holder, epoch: 0).bytes, last: entry.revision)
            } else {
                rev = try kv.create(key, LeaseValue(holder: lease.holder, epoch: 0).bytes)
            }
            // The epoch is the revision that took the lease (it only grows), stored with it.
            let epoch = max(rev, minimumEpoch + 1)
            rev = try kv.update(key, LeaseValue(holder: lease.holder, epoch: epoch).bytes, last: rev)
            condition.lock()
            revision = rev
            epochValue = epoch
            confirmedAt = sentAt
            lostReason = nil
            condition.unlock()
            return epoch
        } catch let error as ReplicationError {
            throw error
        } catch let error as JetStreamError where error.code == .wrongLastSequence {
            throw ReplicationError(
                .leaseHeld, "another process took the writer lease of stream \(stream) at the same moment")
        } catch let error as JetStreamError {
            throw ReplicationError(error, while: "acquiring the writer lease of stream \(stream)")
        } catch {
            throw ReplicationError(.server, "acquiring the writer lease of stream \(stream): \(error)")
        }
    }

    /// Starts renewing the lease every third of its time to live.
    func startRenewing() {
        condition.lock()
        defer { condition.unlock() }
        guard !threadRunning else { return }
        threadRunning = true
        stopping = false
        let thread = Thread { [self] in self.renewLoop() }
        thread.name = "ObjectGraph lease"
        thread.start()
    }

    /// The epoch this keeper holds the lease at (0 before it acquired it).
    var epoch: UInt64 {
        condition.lock()
        defer { condition.unlock() }
        return epochValue
    }

    /// Whether the lease is surely held now: acquired or renewed less than its time to live ago,
    /// and not lost.
    var isHeld: Bool {
        condition.lock()
        defer { condition.unlock() }
        guard lostReason == nil, let confirmedAt else { return false }
        return ContinuousClock.now < confirmedAt + ttl
    }

    /// Why the lease was lost to another holder, once it was.
    var lost: String? {
        condition.lock()
        defer { condition.unlock() }
        return lostReason
    }

    /// Marks the lease lost (the stream showed a newer epoch).
    func markLost(_ reason: String) {
        condition.lock()
        if lostReason == nil { lostReason = reason }
        condition.broadcast()
        condition.unlock()
    }

    /// Stops renewing (tests: as a paused process would) or resumes.
    func suspendRenewals(_ flag: Bool) {
        condition.lock()
        suspended = flag
        condition.broadcast()
        condition.unlock()
    }

    /// Stops renewing; with `release`, marks the lease released so that a standby takes over at
    /// once instead of waiting for it to lapse.
    func stop(release: Bool) {
        condition.lock()
        stopping = true
        condition.broadcast()
        while threadRunning { condition.wait() }
        let (rev, epoch, lost) = (revision, epochValue, lostReason)
        condition.unlock()
        if release, lost == nil, rev > 0 {
            _ = try? kv.update(key, LeaseValue(holder: lease.holder, epoch: epoch, released: true).bytes, last: rev)
        }
    }

    private func renewLoop() {
        let interval = max(0.02, seconds(ttl) / 3)
        condition.lock()
        defer {
            threadRunning = false
            condition.broadcast()
            condition.unlock()
        }
        while !stopping {
            _ = condition.wait(until: Date().addingTimeInterval(interval))
            if stopping { return }
            if suspended || lostReason != nil { continue }
            let (rev, epoch) = (revision, epochValue)
            condition.unlock()
            let sentAt = ContinuousClock.now
            var newRevision: UInt64?
            var lostTo: String?
            do {
                newRevision = try kv.update(key, LeaseValue(holder: lease.holder, epoch: epoch).bytes, last: rev)
            } catch  where error.code == .wrongLastSequence {
                // Written since by someone else, or lapsed: lost if another holder has it now.
                do {
                    if let current = try currentHolder() {
                        if current.holder != lease.holder || current.epoch != epoch {
                            lostTo = "\(current.holder) (epoch \(current.epoch))"
                        }
                    } else if let newer = try streamEpoch(), newer > epoch {
                        // It lapsed, but a writer of a newer epoch wrote to the stream meanwhile
                        // (a standby took it over, then lost it in turn, say while its server was
                        // cut off): that writer's history is the stream's, and taking the lease
                        // again would only fence it too. Lost, as to a live holder.
                        lostTo = "the writer of epoch \(newer), which wrote to the stream since"
                    } else {
                        // It lapsed (the servers were away longer than its time to live) and no
                        // one took it: taken again under a new epoch. The stream's fence still
                        // refuses this writer if another one wrote meanwhile.
                        try acquire(minimumEpoch: epoch)
                        condition.lock()
                        continue
                    }
                } catch  where error.code == .leaseHeld {
                    lostTo = "another holder"
                } catch {
                    // The servers are away again: try at the next renewal.
                }
            } catch {
                // The servers are away: the lease is held until its time to live passes.
            }
            condition.lock()
            if let newRevision {
                revision = newRevision
                confirmedAt = sentAt
            } else if let lostTo, lostReason == nil {
                let reason =
                    "this writer (\(lease.holder), epoch \(epoch)) lost the writer lease of stream \(stream) to \(lostTo)"
                lostReason = reason
                if let handler = lostHandler {
                    condition.unlock()
                    handler(reason)
                    condition.lock()
                }
            }
            condition.broadcast()
        }
    }
}
