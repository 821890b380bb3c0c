import CNATS

/// A failed JetStream call: what kind of failure (`code`) and a sentence for the logs (`message`).
public struct JetStreamError: Error, Sendable, CustomStringConvertible {
    /// The kinds of failure a caller can act on.
    public enum Code: Sendable, Hashable {
        /// No server is reachable, the connection is down or being re-established, the server
        /// wants TLS that the client does not speak (or the reverse), or the client was closed.
        case connectionFailed
        /// No answer in time, or nobody to answer: the server is down, a clustered stream has no
        /// leader or quorum (the server then answers "no responders" at once), or no stream
        /// listens on the subject published to. A publish that timed out may still have been
        /// stored.
        case timeout
        /// The stream's last sequence was not the expected one (JetStream error 10071); nothing
        /// was stored.
        case wrongLastSequence
        /// The stream, the consumer or the message does not exist.
        case notFound
        /// Any other error the JetStream API returned; `message` carries its code.
        case server
        /// An argument libnats or the server refused as malformed.
        case invalidArgument
        /// The server does not run JetStream: nothing answers the JetStream API (a nats-server
        /// started without `-js` and without a `jetstream {}` block, as Debian's default
        /// configuration is), or JetStream is not enabled for the account.
        case jetStreamNotEnabled
        /// The stream keeps fewer copies than were asked for, and they cannot be raised: a single
        /// server keeps one copy whatever the stream's configuration says, and a cluster needs as
        /// many servers available as replicas.
        case tooFewReplicas
        /// The server refused the credentials, or the account may not use this subject.
        case notPermitted
        /// The message is larger than the server's `max_payload` or the stream's largest message.
        case messageTooLarge
        /// The server or the account is out of storage, memory, streams or consumers.
        case insufficientResources
        /// libnats itself failed: out of memory, not initialized, or in an unexpected state.
        case clientFailure
    }

    /// The kind of failure.
    public let code: Code
    /// What was attempted, on which stream or subject, what went wrong in a sentence, then
    /// libnats's own status text (and its last error text when it belongs to this failure) and
    /// the JetStream error code when there is one.
    public let message: String

    /// `code` and `message` in one line.
    public var description: String { "JetStreamError.\(code): \(message)" }

    /// Creates an error with a code and a message.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// What kind of call failed: "no responders" means something else for each.
    enum Call {
        /// A request to the JetStream API (`$JS.API.…`), which every server with JetStream
        /// answers: without responders, the server has no JetStream.
        case api
        /// A publish to a stream's subject, answered by the stream's leader only.
        case publish
        /// Anything else (connecting, creating messages, reading deliveries).
        case other
    }

    /// The error for a failed libnats call: `action` says what was attempted.
    init(status: natsStatus, jsCode: jsErrCode = jsErrCode(rawValue: 0), call: Call = .other, action: String) {
        let jsValue = Int(jsCode.rawValue)
        // libnats keeps the last error per thread and does not clear it on success, so its text
        // is only quoted when it was recorded with this call's status.
        var lastStatus = NATS_OK
        var detail: String?
        if let last = nats_GetLastError(&lastStatus), lastStatus == status {
            let text = String(cString: last)
            if !text.isEmpty { detail = text }
        }
        let libnatsText = String(cString: natsStatus_GetText(status))
        self.init(status: status, jsCode: jsValue, call: call, action: action, libnatsText: libnatsText, detail: detail)
    }

    /// The error for a failed call, from libnats's status, the JetStream error code (0: none),
    /// libnats's status text and its last error text.
    init(status: natsStatus, jsCode: Int, call: Call, action: String, libnatsText: String, detail: String?) {
        code = Self.classify(status: status, jsCode: jsCode, call: call)
        let explanation = Self.explain(status: status, jsCode: jsCode, call: call)
        var libnats = libnatsText
        // libnats's last error text is often only where it was raised, in parentheses.
        if var detail, detail != libnatsText {
            if detail.hasPrefix("(") && detail.hasSuffix(")") { detail = String(detail.dropFirst().dropLast()) }
            libnats += ", \(detail)"
        }
        var text = "\(action): \(explanation) (libnats: \(libnats))"
        if Self.serverCode(status: status, jsCode: jsCode) != 0 { text += " [jsErrCode \(jsCode)]" }
        message = text
    }

    /// The kind of failure of a libnats status and JetStream error code (0: none).
    static func classify(status: natsStatus, jsCode: Int, call: Call = .other) -> Code {
        switch Self.serverCode(status: status, jsCode: jsCode) {
        case Int(JSStreamWrongLastSequenceErr.rawValue): return .wrongLastSequence
        case Int(JSStreamNotFoundErr.rawValue), Int(JSNoMessageFoundErr.rawValue), Int(JSConsumerNotFoundErr.rawValue):
            return .notFound
        case Int(JSNotEnabledErr.rawValue), Int(JSNotEnabledForAccountErr.rawValue): return .jetStreamNotEnabled
        case Int(JSStreamReplicasNotSupportedErr.rawValue): return .tooFewReplicas
        case Int(JSStreamMessageExceedsMaximumErr.rawValue): return .messageTooLarge
        case Int(JSInsufficientResourcesErr.rawValue), Int(JSStorageResourcesExceededErr.rawValue),
            Int(JSMemoryResourcesExceededErr.rawValue), Int(JSAccountResourcesExceededErr.rawValue),
            Int(JSMaximumStreamsLimitErr.rawValue), Int(JSMaximumConsumersLimitErr.rawValue):
            return .insufficientResources
        case 0: break
        default: return .server
        }
        switch status {
        // Every server with JetStream answers its API; a request nobody answers at once went to
        // a server without JetStream.
        case NATS_NO_RESPONDERS where call == .api:
            return .jetStreamNotEnabled
        // A publish without responders: no stream leader listens on the subject, which a cluster
        // without quorum and a subject without stream cannot be told apart by; both are waited out.
        case NATS_TIMEOUT, NATS_NO_RESPONDERS:
            return .timeout
        case NATS_CONNECTION_CLOSED, NATS_NO_SERVER, NATS_CONNECTION_DISCONNECTED, NATS_NOT_YET_CONNECTED,
            NATS_IO_ERROR, NATS_STALE_CONNECTION, NATS_INSUFFICIENT_BUFFER, NATS_SYS_ERROR,
            NATS_SECURE_CONNECTION_REQUIRED, NATS_SECURE_CONNECTION_WANTED, NATS_SSL_ERROR, NATS_DRAINING,
            NATS_ADDRESS_MISSING, NATS_PROTOCOL_ERROR, NATS_LINE_TOO_LONG, NATS_MISSED_HEARTBEAT:
            return .connectionFailed
        case NATS_CONNECTION_AUTH_FAILED, NATS_NOT_PERMITTED:
            return .notPermitted
        case NATS_NOT_FOUND:
            return .notFound
        case NATS_MAX_PAYLOAD:
            return .messageTooLarge
        case NATS_INVALID_ARG, NATS_INVALID_SUBJECT, NATS_INVALID_TIMEOUT, NATS_INVALID_QUEUE_NAME, NATS_MISMATCH:
            return .invalidArgument
        case NATS_NO_MEMORY, NATS_FAILED_TO_INITIALIZE, NATS_NOT_INITIALIZED, NATS_ILLEGAL_STATE,
            NATS_INVALID_SUBSCRIPTION, NATS_ERR, NATS_SLOW_CONSUMER, NATS_MAX_DELIVERED_MSGS:
            return .clientFailure
        default:
            return .server
        }
    }

    /// The JetStream error code the server answered with, 0 for none. libnats 3.4.1 gives a
    /// request nobody answered the code 10076 ("JetStream not enabled") of its own, whatever
    /// the request: what "no responders" means depends on the call instead.
    static func serverCode(status: natsStatus, jsCode: Int) -> Int {
        status == NATS_NO_RESPONDERS ? 0 : jsCode
    }

    /// What a libnats status and JetStream error code (0: none) mean, in a sentence.
    static func explain(status: natsStatus, jsCode: Int, call: Call = .other) -> String {
        switch Self.serverCode(status: status, jsCode: jsCode) {
        case 0: break
        case Int(JSStreamWrongLastSequenceErr.rawValue):
            return
                "the stream's last sequence is not the expected one (another writer, or a retried publish); nothing was stored"
        case Int(JSStreamNotFoundErr.rawValue): return "no such stream"
        case Int(JSNoMessageFoundErr.rawValue): return "no such message"
        case Int(JSConsumerNotFoundErr.rawValue): return "no such consumer"
        case Int(JSNotEnabledErr.rawValue):
            return "JetStream is not enabled on the server (start nats-server with -js or a jetstream {} block)"
        case Int(JSNotEnabledForAccountErr.rawValue): return "JetStream is not enabled for this account"
        case Int(JSStreamReplicasNotSupportedErr.rawValue):
            return "more than one replica needs a JetStream cluster; this server runs alone and keeps one copy"
        case Int(JSClusterNoPeersErr.rawValue):
            return "the cluster has not enough servers available to place the stream's replicas"
        case Int(JSClusterNotAvailErr.rawValue), Int(JSClusterNotLeaderErr.rawValue):
            return "the JetStream cluster has no leader at the moment (an election, or too few servers up)"
        case Int(JSStreamMessageExceedsMaximumErr.rawValue): return "the message is larger than the stream accepts"
        case Int(JSInsufficientResourcesErr.rawValue), Int(JSStorageResourcesExceededErr.rawValue),
            Int(JSMemoryResourcesExceededErr.rawValue), Int(JSAccountResourcesExceededErr.rawValue):
            return
                "the server is out of JetStream storage or memory (its max_file_store or max_memory_store, or the disk)"
        case Int(JSMaximumStreamsLimitErr.rawValue): return "the account may not create more streams"
        case Int(JSMaximumConsumersLimitErr.rawValue): return "the account or the stream may not have more consumers"
        case Int(JSStreamSubjectOverlapErr.rawValue): return "another stream already stores these subjects"
        case Int(JSStreamNameExistErr.rawValue): return "a stream of that name exists with another configuration"
        default: return "the JetStream API refused the request"
        }
        switch status {
        case NATS_NO_RESPONDERS where call == .api:
            return
                "JetStream is not enabled on the server: nothing answers the JetStream API (start nats-server with -js or a jetstream {} block in its configuration; Debian's default /etc/nats-server.conf has none)"
        case NATS_NO_RESPONDERS:
            return
                "nothing listens on the subject: no stream stores it, or its stream has no leader at the moment (an election, or too few servers up)"
        case NATS_TIMEOUT: return "no answer in time"
        case NATS_NO_SERVER: return "no server could be reached"
        case NATS_CONNECTION_CLOSED: return "the connection is closed"
        case NATS_CONNECTION_DISCONNECTED, NATS_STALE_CONNECTION, NATS_IO_ERROR:
            return "the connection to the server was lost"
        case NATS_NOT_YET_CONNECTED: return "not connected yet"
        case NATS_INSUFFICIENT_BUFFER:
            return "the connection is down and being re-established; the message was not sent"
        case NATS_DRAINING: return "the connection is closing"
        case NATS_SYS_ERROR: return "a system call failed on the connection"
        case NATS_SECURE_CONNECTION_REQUIRED: return "the server requires TLS"
        case NATS_SECURE_CONNECTION_WANTED: return "TLS was asked for but the server does not offer it"
        case NATS_SSL_ERROR: return "the TLS handshake failed"
        case NATS_ADDRESS_MISSING: return "a server URL has no host"
        case NATS_PROTOCOL_ERROR, NATS_LINE_TOO_LONG: return "the server's answer could not be read"
        case NATS_CONNECTION_AUTH_FAILED: return "the server refused the credentials"
        case NATS_NOT_PERMITTED: return "the account may not do this (a permissions violation)"
        case NATS_NOT_FOUND: return "not found"
        case NATS_MAX_PAYLOAD: return "the message is larger than the server's max_payload"
        case NATS_INVALID_ARG, NATS_INVALID_SUBJECT, NATS_INVALID_TIMEOUT, NATS_INVALID_QUEUE_NAME:
            return "an argument was refused as malformed"
        case NATS_MISMATCH: return "the consumer's settings do not match the ones asked for"
        case NATS_NO_MEMORY: return "out of memory"
        case NATS_FAILED_TO_INITIALIZE, NATS_NOT_INITIALIZED: return "libnats could not initialize"
        case NATS_ILLEGAL_STATE, NATS_INVALID_SUBSCRIPTION, NATS_ERR: return "libnats failed unexpectedly"
        case NATS_SLOW_CONSUMER: return "the client fell behind and messages for it were dropped"
        case NATS_MAX_DELIVERED_MSGS: return "the subscription reached its limit of messages"
        case NATS_MISSED_HEARTBEAT: return "the server's heartbeats stopped coming"
        case NATS_NO_SERVER_SUPPORT:
            return "the server does not support this (an older nats-server, or message headers turned off)"
        default: return "the call failed"
        }
    }
}
