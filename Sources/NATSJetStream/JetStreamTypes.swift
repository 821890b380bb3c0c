public import Foundation

/// The settings of a stream that `JetStreamClient.ensureStream` creates: file storage, limits
/// retention, no limits on count, size or age.
public struct StreamConfiguration: Sendable {
    /// The stream's name (no spaces, dots, `*` or `>`).
    public var name: String
    /// The subjects the stream stores, wildcards allowed.
    public var subjects: [String]
    /// How many servers hold a copy (1, 3 or 5 in a cluster).
    public var replicas: Int = 1
    /// The largest payload the stream accepts, in bytes; nil leaves the server's limit.
    public var maxMessageSize: Int32? = nil
    /// How long the server remembers message IDs for deduplication.
    public var duplicateWindow: Duration = .seconds(120)

    /// A configuration with a name, subjects and a replica count; the other settings keep their
    /// defaults.
    public init(name: String, subjects: [String], replicas: Int = 1) {
        self.name = name
        self.subjects = subjects
        self.replicas = replicas
    }
}

/// What a stream holds.
public struct StreamState: Sendable, Hashable {
    /// How many messages the stream holds.
    public var messages: UInt64
    /// The sequence of the oldest message held (the next sequence to be used when empty).
    public var firstSequence: UInt64
    /// The sequence of the newest message ever stored, even if purged since (0 when none was).
    public var lastSequence: UInt64
    /// When the newest message was stored; nil when none was.
    public var lastTime: Date?

    /// Creates a state from its fields.
    public init(messages: UInt64, firstSequence: UInt64, lastSequence: UInt64, lastTime: Date?) {
        self.messages = messages
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.lastTime = lastTime
    }
}

/// The server's answer to a publish.
public struct PublishAck: Sendable, Hashable {
    /// The stream that stored the message.
    public var stream: String
    /// The stream sequence the message was stored at (for a duplicate: the original's).
    public var sequence: UInt64
    /// True when the message ID was seen within the duplicate window and nothing new was stored.
    public var duplicate: Bool

    /// Creates an acknowledgment from its fields.
    public init(stream: String, sequence: UInt64, duplicate: Bool) {
        self.stream = stream
        self.sequence = sequence
        self.duplicate = duplicate
    }
}

/// A message as the stream stored it.
public struct StoredMessage: Sendable {
    /// The subject it was published to.
    public var subject: String
    /// Its stream sequence.
    public var sequence: UInt64
    /// When the server stored it.
    public var time: Date
    /// Its headers as stored, one value per name, JetStream's own included (`Nats-Msg-Id`,
    /// `Nats-Expected-Last-Sequence`, …).
    public var headers: [String: String]
    /// Its payload.
    public var payload: [UInt8]

    /// Creates a message from its fields.
    public init(subject: String, sequence: UInt64, time: Date, headers: [String: String], payload: [UInt8]) {
        self.subject = subject
        self.sequence = sequence
        self.time = time
        self.headers = headers
        self.payload = payload
    }
}
