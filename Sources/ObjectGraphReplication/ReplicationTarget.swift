import Foundation
import NATSJetStream

/// Where a store ships its journal, and where followers and restores read it: a JetStream
/// stream on a set of NATS servers.
///
/// One stream per store. Its subjects are `<subjectPrefix>.log` (one message per journal
/// record, or per part of a record larger than a message may be) and `<subjectPrefix>.base`
/// (the bases compaction writes, split the same way). `Docs/Replication.md` describes the
/// messages.
///
/// ```swift
/// let target = ReplicationTarget(servers: ["nats://10.0.0.1:4222", "nats://10.0.0.2:4222"],
///                                stream: "PKGD", replicas: 3, policy: .synchronous(timeout: .seconds(2)))
/// ```
public struct ReplicationTarget: Sendable {
    /// The NATS servers' URLs (`nats://host:port`); the client fails over between them.
    public var servers: [String]
    /// The JetStream stream's name; created on first use.
    public var stream: String
    /// The prefix of the stream's two subjects. Default: the stream's name, lowercased.
    public var subjectPrefix: String
    /// How many servers keep each message (the stream's replicas): the stream is created with
    /// them, and an existing stream that keeps fewer has them raised (a cluster with enough
    /// servers accepts it) or is refused with ``ReplicationError`` code `tooFewReplicas`. A
    /// stream that keeps more is left as it is: a follower may ask for fewer than its writer.
    public var replicas: Int
    /// When `save()` returns: see ``ShippingPolicy``.
    public var policy: ShippingPolicy
    /// The largest message sent: records above it go in several parts. Default 1 MiB (the
    /// servers' default `max_payload`; the server's own limit, learned at connect, wins if lower).
    public var maxMessageBytes: Int
    /// How long a call to the servers may take before it counts as failed. Default 2 s.
    public var timeout: Duration
    /// Under the asynchronous policy, how long the first record waiting to ship waits for
    /// others to share its message (unless they fill one first). Records that queue up while a
    /// publish is on its way share the next message whatever this is. Default 2 ms: a message
    /// costs the writer's machine far more CPU than a record (the client's work and the
    /// server's), so saves that come faster than one per round trip ship several at a time.
    public var batchDelay: Duration

    /// Records held in memory while the servers are away, in bytes; past it they are dropped
    /// from memory and read again from the journal once the servers answer. Default 64 MiB.
    public var maxBacklogBytes: Int
    /// How long a graceful shutdown waits for the backlog to ship before it stops the shipper
    /// and reports what is left (``JournalShipper/drain(timeout:)``). Default 10 seconds.
    public var drainTimeout: Duration = .seconds(10)
    /// The writer lease (Docs/Replication.md, "Failover"): with one, a writer acquires it at
    /// open and renews it, a standby takes the stream over once it lapses, and each writer
    /// ships under its own epoch. Nil (the default): no lease; one writer per stream is
    /// enforced by the stream's fence alone.
    public var lease: WriterLease?
    /// Whether ``ReplicatedStore/open(at:schema:options:target:)`` fails when no server
    /// answers. False (the default): the store opens and saves go on locally; the shipper
    /// compares the stream with the journal and ships once the servers answer. True: open throws
    /// ``ReplicationError`` code `server` instead. A writer with a ``lease`` always needs the
    /// servers at open: it may not write before it holds the lease.
    public var requireServersAtOpen = false

    /// Creates a target.
    public init(
        servers: [String], stream: String, subjectPrefix: String? = nil, replicas: Int = 1,
        policy: ShippingPolicy = .asynchronous, maxMessageBytes: Int = 1 << 20, timeout: Duration = .seconds(2),
        maxBacklogBytes: Int = 64 << 20, batchDelay: Duration = .milliseconds(2)
    ) {
        self.servers = servers
        self.stream = stream
        self.subjectPrefix = subjectPrefix ?? stream.lowercased()
        self.replicas = replicas
        self.policy = policy
        self.maxMessageBytes = maxMessageBytes
        self.timeout = timeout
        self.maxBacklogBytes = maxBacklogBytes
        self.batchDelay = batchDelay
    }

    /// The subject of the journal's records.
    public var logSubject: String { subjectPrefix + ".log" }
    /// The subject of the bases.
    public var baseSubject: String { subjectPrefix + ".base" }

    /// The stream as it is created when missing.
    var streamConfiguration: StreamConfiguration {
        StreamConfiguration(name: stream, subjects: [logSubject, baseSubject], replicas: replicas)
    }
}

/// When a save on a shipping store returns.
public enum ShippingPolicy: Sendable, Hashable {
    /// Once the record is durable locally (`fdatasync`). A background thread ships it; while the
    /// servers are away saves go on and the backlog ships when they return. A crash of the
    /// writer's machine loses from the stream only what had not shipped yet (its disk still
    /// has it); losing that disk too loses the backlog. Like a Redis replica.
    case asynchronous
    /// Once the record is durable locally and the stream acknowledged it (stored by a quorum of
    /// the stream's replicas). When no acknowledgement comes within `timeout`, `save()` throws
    /// ``ReplicationError`` with code `notAcknowledged`: the save stands locally and ships
    /// when the servers return. Like a semi-synchronous replica.
    case synchronous(timeout: Duration)
}

/// A replication failure.
public struct ReplicationError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public enum Code: Sendable, Hashable {
        /// A save committed locally but the stream did not acknowledge it in time (synchronous
        /// policy). The save stands; it ships when the servers answer.
        case notAcknowledged
        /// The stream's history is not this store's: it holds records this store does not (the
        /// store was restored from an older copy, or another writer ships to the stream). The
        /// shipper stopped rather than fork the history.
        case diverged
        /// The servers could not be reached, or answered with an error.
        case server
        /// A message in the stream is not what a shipper writes (damaged, or from elsewhere).
        case badMessage
        /// What a restore was asked for is not in the stream (no base at or before it, or the
        /// records after the base were trimmed).
        case unavailable
        /// The local store failed (its ``StoreError`` is in the message).
        case store
        /// This writer lost the stream to a newer epoch: its lease was taken over by a standby,
        /// or the stream refused its publish after another writer's. It ships nothing more; what
        /// it saved and never shipped stays in its directory (``FencedReport``).
        case fenced
        /// Another holder's writer lease on the stream is live: this writer may not start (or a
        /// standby may not take over yet).
        case leaseHeld
        /// The stream keeps fewer copies than the target's `replicas` and they could not be
        /// raised (a single server, or too few servers available in the cluster). Nothing was
        /// shipped.
        case tooFewReplicas
    }

    /// The kind of failure.
    public let code: Code
    /// What happened, with the stream, subject and sequences concerned.
    public let message: String

    /// Creates an error.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The message.
    public var description: String { message }
}
