import CNATS

/// A failed JetStream call: what kind of failure (`code`) and a sentence for the logs (`message`).
public struct JetStreamError: Error, Sendable, CustomStringConvertible {
    /// The kinds of failure a caller can act on.
    public enum Code: Sendable, Hashable {
        /// No server is reachable, the connection is reconnecting, or the client was closed.
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
    }

    /// The kind of failure.
    public let code: Code
    /// What was attempted, on which stream or subject, libnats's status text, its last error
    /// text when it belongs to this failure, and the JetStream error code when there is one.
    public let message: String

    /// `code` and `message` in one line.
    public var description: String { "JetStreamError.\(code): \(message)" }

    /// Creates an error with a code and a message.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The error for a failed libnats call: `action` says what was attempted.
    init(status: natsStatus, jsCode: jsErrCode = jsErrCode(rawValue: 0), action: String) {
        let jsValue = Int(jsCode.rawValue)
        code = Self.classify(status: status, jsCode: jsValue)
        var text = "\(action): \(String(cString: natsStatus_GetText(status)))"
        // libnats keeps the last error per thread and does not clear it on success, so its text
        // is only quoted when it was recorded with this call's status.
        var lastStatus = NATS_OK
        if let last = nats_GetLastError(&lastStatus), lastStatus == status {
            let detail = String(cString: last)
            if !detail.isEmpty { text += " (\(detail))" }
        }
        if jsValue != 0 { text += " [jsErrCode \(jsValue)]" }
        message = text
    }

    static func classify(status: natsStatus, jsCode: Int) -> Code {
        switch jsCode {
        case Int(JSStreamWrongLastSequenceErr.rawValue): return .wrongLastSequence
        case Int(JSStreamNotFoundErr.rawValue), Int(JSNoMessageFoundErr.rawValue), Int(JSConsumerNotFoundErr.rawValue):
            return .notFound
        default: break
        }
        switch status {
        // "No responders": no stream leader listens on the subject, which a cluster without
        // quorum and a subject without stream cannot be told apart by; both are waited out.
        case NATS_TIMEOUT, NATS_NO_RESPONDERS:
            return .timeout
        case NATS_CONNECTION_CLOSED, NATS_NO_SERVER, NATS_CONNECTION_DISCONNECTED, NATS_NOT_YET_CONNECTED,
            NATS_IO_ERROR, NATS_STALE_CONNECTION, NATS_INSUFFICIENT_BUFFER, NATS_SYS_ERROR,
            NATS_CONNECTION_AUTH_FAILED, NATS_SECURE_CONNECTION_REQUIRED:
            return .connectionFailed
        case NATS_NOT_FOUND:
            return .notFound
        case NATS_INVALID_ARG, NATS_INVALID_SUBJECT, NATS_INVALID_TIMEOUT, NATS_MAX_PAYLOAD:
            return .invalidArgument
        default:
            return .server
        }
    }
}
