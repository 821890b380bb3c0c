import CNATS
import Foundation
import Synchronization

/// The libnats connection and JetStream context of one client.
///
/// `@unchecked Sendable`: libnats's `natsConnection` and `jsCtx` may be used from many threads at
/// once; the two pointers never change after init, and they are destroyed only in deinit, when
/// no call can be running, since every call (and every reader) holds a reference to this object.
final class NATSHandles: @unchecked Sendable {
    let connection: OpaquePointer
    let context: OpaquePointer
    /// Set once by `close()`.
    let closed = Atomic<Bool>(false)

    init(connection: OpaquePointer, context: OpaquePointer) {
        self.connection = connection
        self.context = context
    }

    deinit {
        jsCtx_Destroy(context)
        natsConnection_Destroy(connection)
    }
}

/// A connection to a NATS server or cluster and its JetStream API: streams, publishing with
/// deduplication and expected-last-sequence checks, direct gets, purges and ordered readers.
///
/// Thread safe; every call blocks until the server answers or the timeout passes. While the
/// connection is down, libnats reconnects in the background, forever, and calls fail at once
/// with `connectionFailed` instead of being buffered. A publish that fails with `timeout` or
/// `connectionFailed` may still have been stored: publish again with the same `messageID`
/// (deduplicated within the stream's window) or with `expectedLastSequence`.
public final class JetStreamClient: Sendable {
    let handles: NATSHandles
    /// The wait for JetStream API answers, in milliseconds.
    let timeoutMilliseconds: Int64

    /// Connects to the first reachable server of `servers` (e.g. `["nats://127.0.0.1:4222"]`);
    /// throws `connectionFailed` when none is. `timeout` bounds each JetStream call and the
    /// connect to each server; `name` is how the connection appears in the server's monitoring.
    ///
    /// With `waitingForServers`, a client whose servers are all away is made anyway: it goes on
    /// trying to connect in the background, and its calls fail with `connectionFailed` until it
    /// is connected (``isConnected``).
    public init(
        servers: [String], name: String = "objectgraph", timeout: Duration = .seconds(2),
        waitingForServers: Bool = false
    ) throws(JetStreamError) {
        guard !servers.isEmpty else { throw JetStreamError(.invalidArgument, "connect: no server URL given") }
        let action = "connect to \(servers.joined(separator: ","))"
        guard natsLibraryStatus == NATS_OK else { throw JetStreamError(status: natsLibraryStatus, action: "nats_Open") }
        let wait = timeout.milliseconds()

        var optionsPointer: OpaquePointer? = nil
        var status = natsOptions_Create(&optionsPointer)
        guard status == NATS_OK, let options = optionsPointer else {
            throw JetStreamError(status: status, action: "\(action): natsOptions_Create")
        }
        defer { natsOptions_Destroy(options) }
        status = withCStringArray(servers) { natsOptions_SetServers(options, $0, $1) } ?? NATS_NO_MEMORY
        if status == NATS_OK { status = natsOptions_SetName(options, name) }
        if status == NATS_OK { status = natsOptions_SetTimeout(options, wait) }
        // Reconnect forever, trying again a quarter second after every server of the list failed.
        if status == NATS_OK { status = natsOptions_SetMaxReconnect(options, -1) }
        if status == NATS_OK { status = natsOptions_SetReconnectWait(options, 250) }
        if status == NATS_OK { status = natsOptions_SetReconnectJitter(options, 50, 50) }
        // Requests waiting for an answer fail as soon as the connection drops, instead of at
        // their timeout.
        if status == NATS_OK { status = natsOptions_SetFailRequestsOnDisconnect(options, true) }
        // libnats buffers publishes made while reconnecting and sends them once reconnected; it
        // refuses a publish once the buffer holds at least this many bytes. Every call checks the
        // connection first, so only a call racing a disconnect can be buffered, and at most one.
        if status == NATS_OK { status = natsOptions_SetReconnectBufSize(options, 1) }
        // A server that stops answering without closing the socket is noticed within ~6 s.
        if status == NATS_OK { status = natsOptions_SetPingInterval(options, 2000) }
        if status == NATS_OK { status = natsOptions_SetMaxPingsOut(options, 3) }
        if status == NATS_OK, waitingForServers {
            // With a callback (here one that does nothing), the connect returns at once and
            // goes on in the background; without one, libnats would block until connected.
            status = natsOptions_SetRetryOnFailedConnect(options, true, { _, _ in }, nil)
        }
        guard status == NATS_OK else { throw JetStreamError(status: status, action: "\(action): setting options") }

        var connectionPointer: OpaquePointer? = nil
        status = natsConnection_Connect(&connectionPointer, options)
        // Waiting for the servers, libnats hands back the connection it keeps trying.
        if waitingForServers, status == NATS_NOT_YET_CONNECTED, connectionPointer != nil { status = NATS_OK }
        guard status == NATS_OK, let connection = connectionPointer else {
            if let connectionPointer { natsConnection_Destroy(connectionPointer) }
            throw JetStreamError(status: status, action: action)
        }
        var contextOptions = jsOptions()
        jsOptions_Init(&contextOptions)
        contextOptions.Wait = wait
        var contextPointer: OpaquePointer? = nil
        status = natsConnection_JetStream(&contextPointer, connection, &contextOptions)
        guard status == NATS_OK, let context = contextPointer else {
            natsConnection_Destroy(connection)
            throw JetStreamError(status: status, action: "\(action): natsConnection_JetStream")
        }
        handles = NATSHandles(connection: connection, context: context)
        timeoutMilliseconds = wait
    }

    deinit { close() }

    /// Closes the connection; calls made afterwards, and readers made from this client, throw
    /// `connectionFailed`. Calling it again does nothing.
    public func close() {
        if !handles.closed.exchange(true, ordering: .acquiringAndReleasing) {
            natsConnection_Close(handles.connection)
        }
    }

    /// True while connected to a server (false while reconnecting and after `close()`).
    public var isConnected: Bool {
        !handles.closed.load(ordering: .acquiring)
            && natsConnection_Status(handles.connection) == NATS_CONN_STATUS_CONNECTED
    }

    /// The largest payload the connected server accepts (its `max_payload`, 1 MiB by default), in
    /// bytes; 0 when not connected.
    public var maxPayload: Int {
        Int(natsConnection_GetMaxPayload(handles.connection))
    }

    /// Throws `connectionFailed` unless the client is open and connected: nothing is buffered
    /// for a connection that is down.
    func requireConnection(_ action: @autoclosure () -> String) throws(JetStreamError) {
        if handles.closed.load(ordering: .acquiring) {
            throw JetStreamError(.connectionFailed, "\(action()): the client is closed")
        }
        let status = natsConnection_Status(handles.connection)
        if status != NATS_CONN_STATUS_CONNECTED {
            let state =
                status == NATS_CONN_STATUS_RECONNECTING ? "reconnecting" : "not connected (status \(status.rawValue))"
            throw JetStreamError(.connectionFailed, "\(action()): \(state)")
        }
    }

    // MARK: Streams

    /// Creates the stream, or returns the state of the existing stream of that name, whose
    /// subjects and other settings are left as they are.
    ///
    /// An existing stream that keeps fewer copies than `configuration.replicas` gets its replicas
    /// raised (a stream update, which a cluster with enough servers accepts: the new replicas
    /// copy the stream's messages in the background); one that keeps more is left as it is, so
    /// that a reader asking for fewer replicas than the writer uses changes nothing.
    ///
    /// - Throws: `tooFewReplicas` when the stream cannot keep `configuration.replicas` copies:
    ///   the server runs alone (a single server keeps one copy whatever a stream's configuration
    ///   says), or the cluster has fewer servers available than replicas; nothing was changed.
    ///   `jetStreamNotEnabled` when the server does not run JetStream.
    @discardableResult
    public func ensureStream(_ configuration: StreamConfiguration) throws(JetStreamError) -> StreamState {
        let action = "create stream \(configuration.name) on \(configuration.subjects)"
        guard !configuration.name.isEmpty, configuration.replicas >= 1 else {
            throw JetStreamError(.invalidArgument, "\(action): an empty name or fewer than 1 replica")
        }
        try requireConnection(action)
        // A request the servers drop (one that reached a meta leader as it lost its leadership)
        // is never answered. Creating a stream is idempotent, so a create not answered within a
        // part of the timeout is sent again, until the whole timeout passed.
        let attemptWait = min(timeoutMilliseconds, max(2000, timeoutMilliseconds / 3))
        let deadline = ContinuousClock.now + .milliseconds(timeoutMilliseconds)
        var (status, info, jsCode) = addStream(configuration, wait: attemptWait)
        while status == NATS_TIMEOUT, jsCode.rawValue == 0, ContinuousClock.now + .milliseconds(attemptWait) <= deadline
        {
            if let info { jsStreamInfo_Destroy(info) }
            try requireConnection(action)
            (status, info, jsCode) = addStream(configuration, wait: attemptWait)
        }
        defer { if let info { jsStreamInfo_Destroy(info) } }
        if status == NATS_OK, let info { return try ensureReplicas(info, configuration) }
        switch jsCode {
        // The server answers "stream name already in use" when a stream of that name exists with
        // another configuration; the same configuration is simply accepted.
        case JSStreamNameExistErr:
            let existing = try streamInfo(configuration.name)
            defer { jsStreamInfo_Destroy(existing) }
            return try ensureReplicas(existing, configuration)
        // A single server refuses more than one replica before it looks for an existing stream.
        case JSStreamReplicasNotSupportedErr:
            if let existing = try? streamInfo(configuration.name) {
                defer { jsStreamInfo_Destroy(existing) }
                return try ensureReplicas(existing, configuration)
            }
            throw JetStreamError(
                .tooFewReplicas,
                "\(action): \(configuration.replicas) replicas requested, but the server at \(connectedURL) is not part of a cluster: a single server keeps one copy (run a cluster of at least \(configuration.replicas) servers, or ask for 1 replica) [jsErrCode \(jsCode.rawValue)]"
            )
        case JSClusterNoPeersErr where configuration.replicas > 1:
            throw JetStreamError(
                .tooFewReplicas,
                "\(action): \(configuration.replicas) replicas requested, but the cluster has fewer servers available [jsErrCode \(jsCode.rawValue)]"
            )
        default:
            throw JetStreamError(status: status, jsCode: jsCode, call: .api, action: action)
        }
    }

    /// One stream-create request, answered within `wait` milliseconds; the caller destroys the
    /// information returned.
    private func addStream(
        _ configuration: StreamConfiguration, wait: Int64
    ) -> (natsStatus, UnsafeMutablePointer<jsStreamInfo>?, jsErrCode) {
        var info: UnsafeMutablePointer<jsStreamInfo>? = nil
        var jsCode = jsErrCode(rawValue: 0)
        var options = jsOptions()
        jsOptions_Init(&options)
        options.Wait = wait
        let status: natsStatus = configuration.name.withCString { name in
            withCStringArray(configuration.subjects) { subjects, count in
                var config = jsStreamConfig()
                jsStreamConfig_Init(&config)
                config.Name = name
                config.Subjects = subjects
                config.SubjectsLen = count
                config.Replicas = Int64(configuration.replicas)
                config.Storage = js_FileStorage
                config.Duplicates = configuration.duplicateWindow.nanoseconds
                if let maxMessageSize = configuration.maxMessageSize { config.MaxMsgSize = maxMessageSize }
                return js_AddStream(&info, handles.context, &config, &options, &jsCode)
            } ?? NATS_NO_MEMORY
        }
        return (status, info, jsCode)
    }

    /// How many copies of its messages the stream of `info` keeps: its configured replicas in a
    /// cluster; 1 on a server that runs alone, whose stream configuration may say more (a stream
    /// update raising the replicas is accepted there, and changes nothing).
    static func replicasHeld(_ info: jsStreamInfo) -> Int {
        guard info.Cluster != nil, let config = info.Config else { return 1 }
        return max(1, Int(config.pointee.Replicas))
    }

    /// The state of the stream of `info` once it keeps at least `configuration.replicas` copies:
    /// raises its replicas when it keeps fewer, or throws `tooFewReplicas`.
    private func ensureReplicas(
        _ info: UnsafeMutablePointer<jsStreamInfo>, _ configuration: StreamConfiguration
    ) throws(JetStreamError) -> StreamState {
        let requested = configuration.replicas
        let held = Self.replicasHeld(info.pointee)
        if held >= requested { return makeStreamState(info.pointee.State) }
        let what =
            "stream \(configuration.name) keeps \(held) cop\(held == 1 ? "y" : "ies") of its messages, \(requested) replicas requested"
        guard info.pointee.Cluster != nil, var config = info.pointee.Config?.pointee else {
            throw JetStreamError(
                .tooFewReplicas,
                "\(what): the server at \(connectedURL) is not part of a cluster, and a single server keeps one copy (run a cluster of at least \(requested) servers, or ask for \(held))"
            )
        }
        // The stream's own configuration, only its replicas changed: an update may change nothing
        // else without being refused.
        config.Replicas = Int64(requested)
        var updated: UnsafeMutablePointer<jsStreamInfo>? = nil
        var jsCode = jsErrCode(rawValue: 0)
        let status = js_UpdateStream(&updated, handles.context, &config, nil, &jsCode)
        defer { if let updated { jsStreamInfo_Destroy(updated) } }
        let action = "raise the replicas of stream \(configuration.name) from \(held) to \(requested)"
        guard status == NATS_OK, let updated else {
            let error = JetStreamError(status: status, jsCode: jsCode, call: .api, action: action)
            // A refusal by the servers is final; a timeout or a lost connection is not.
            guard jsCode.rawValue != 0 else { throw error }
            throw JetStreamError(.tooFewReplicas, "\(what), and the servers refused to raise them: \(error.message)")
        }
        let raised = Self.replicasHeld(updated.pointee)
        guard raised >= requested else {
            throw JetStreamError(
                .tooFewReplicas, "\(what); the servers accepted to raise them but keep \(raised) (\(action))")
        }
        waitUntilCurrent(configuration.name, replicas: requested)
        return makeStreamState(updated.pointee.State)
    }

    /// Waits until the stream has a leader and `replicas - 1` other replicas that are current
    /// (caught up with it), or for ten times the client's timeout: a stream whose replicas were
    /// just raised elects its leader again and copies its messages to the new replicas, and
    /// answers nothing meanwhile.
    private func waitUntilCurrent(_ stream: String, replicas: Int) {
        let deadline = ContinuousClock.now + .milliseconds(timeoutMilliseconds * 10)
        while ContinuousClock.now < deadline {
            if let current = try? currentReplicas(of: stream), current >= replicas { return }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    /// How many copies of the stream are current: its leader and the replicas caught up with it
    /// (0 while it has no leader; 1 on a server that runs alone). A replica that restarted, or
    /// that a raise of the replicas added, counts once it caught up; until then, the stream
    /// survives the loss of fewer servers than its replicas say. Throws `notFound` when the
    /// stream does not exist.
    public func currentReplicas(of stream: String) throws(JetStreamError) -> Int {
        let info = try streamInfo(stream)
        defer { jsStreamInfo_Destroy(info) }
        guard let cluster = info.pointee.Cluster?.pointee else { return 1 }
        guard cluster.Leader != nil else { return 0 }
        guard let peers = cluster.Replicas else { return 1 }
        return 1
            + (0..<Int(cluster.ReplicasLen)).filter { index in
                peers[index].map { $0.pointee.Current && !$0.pointee.Offline } ?? false
            }.count
    }

    /// The stream's information, which the caller destroys; throws `notFound` when it does not
    /// exist.
    private func streamInfo(_ stream: String) throws(JetStreamError) -> UnsafeMutablePointer<jsStreamInfo> {
        let action = "stream info of \(stream)"
        try requireConnection(action)
        var info: UnsafeMutablePointer<jsStreamInfo>? = nil
        var jsCode = jsErrCode(rawValue: 0)
        let status = js_GetStreamInfo(&info, handles.context, stream, nil, &jsCode)
        guard status == NATS_OK, let info else {
            if let info { jsStreamInfo_Destroy(info) }
            throw JetStreamError(status: status, jsCode: jsCode, call: .api, action: action)
        }
        return info
    }

    /// How many copies of its messages a stream keeps (1 on a server that runs alone, whatever
    /// its configuration says); throws `notFound` when it does not exist.
    public func replicas(of stream: String) throws(JetStreamError) -> Int {
        let info = try streamInfo(stream)
        defer { jsStreamInfo_Destroy(info) }
        return Self.replicasHeld(info.pointee)
    }

    /// The URL of the server the client is connected to, or "(not connected)".
    var connectedURL: String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard natsConnection_GetConnectedUrl(handles.connection, &buffer, buffer.count) == NATS_OK else {
            return "(not connected)"
        }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The state of a stream; throws `notFound` when it does not exist.
    public func streamState(_ stream: String) throws(JetStreamError) -> StreamState {
        let info = try streamInfo(stream)
        defer { jsStreamInfo_Destroy(info) }
        return makeStreamState(info.pointee.State)
    }

    /// Deletes a stream and its messages; throws `notFound` when it does not exist.
    public func deleteStream(_ stream: String) throws(JetStreamError) {
        let action = "delete stream \(stream)"
        try requireConnection(action)
        var jsCode = jsErrCode(rawValue: 0)
        let status = js_DeleteStream(handles.context, stream, nil, &jsCode)
        guard status == NATS_OK else {
            throw JetStreamError(status: status, jsCode: jsCode, call: .api, action: action)
        }
    }

    /// Removes the messages below `sequence` (all subjects, or only `subject`'s, wildcards
    /// allowed); below 1 removes nothing.
    public func purge(stream: String, subject: String? = nil, below sequence: UInt64) throws(JetStreamError) {
        let action = "purge \(stream)\(subject.map { " subject \($0)" } ?? "") below sequence \(sequence)"
        // Sequence 0 would mean "no bound", purging everything.
        guard sequence > 1 else { return }
        try requireConnection(action)
        var jsCode = jsErrCode(rawValue: 0)
        let status = withOptionalCString(subject) { subjectPointer in
            var options = jsOptions()
            jsOptions_Init(&options)
            options.Stream.Purge.Sequence = sequence
            options.Stream.Purge.Subject = subjectPointer
            return js_PurgeStream(handles.context, stream, &options, &jsCode)
        }
        guard status == NATS_OK else {
            throw JetStreamError(status: status, jsCode: jsCode, call: .api, action: action)
        }
    }

    // MARK: Publishing

    /// Stores a message in the stream that listens on `subject` and returns the server's
    /// acknowledgment; one round trip.
    ///
    /// - Parameters:
    ///   - headers: sent as message headers and stored with the message; names without ':',
    ///     spaces or control characters, values not empty, without line breaks and without
    ///     spaces at either end (libnats would not read them back as given): `invalidArgument`
    ///     otherwise.
    ///   - messageID: the `Nats-Msg-Id` header: within the stream's duplicate window, a second
    ///     message with the same ID is not stored and is acknowledged with the first one's
    ///     sequence and `duplicate == true`.
    ///   - expectedLastSequence: the `Nats-Expected-Last-Sequence` header: the server stores the
    ///     message only if the stream's last sequence is this one, and throws
    ///     `wrongLastSequence` otherwise; 0 means "the stream has never stored a message".
    ///     (libnats's `jsPubOptions.ExpectLastSeq` cannot express 0, so the header is set here.)
    ///   - expectedStream: the `Nats-Expected-Stream` header: the message is refused unless this
    ///     stream is the one listening on `subject`.
    ///   - timeout: how long to wait for the acknowledgment; the client's timeout when nil.
    public func publish(
        subject: String, payload: [UInt8], headers: [String: String] = [:], messageID: String? = nil,
        expectedLastSequence: UInt64? = nil, expectedStream: String? = nil, timeout: Duration? = nil
    ) throws(JetStreamError) -> PublishAck {
        let action =
            "publish \(payload.count) bytes to \(subject)"
            + (expectedLastSequence.map { " expecting last sequence \($0)" } ?? "")
            + (messageID.map { " with message ID \($0)" } ?? "")
        guard !subject.isEmpty else { throw JetStreamError(.invalidArgument, "\(action): empty subject") }
        guard payload.count <= Int(Int32.max) else {
            throw JetStreamError(.invalidArgument, "\(action): payload too large")
        }
        try requireConnection(action)

        var messagePointer: OpaquePointer? = nil
        var status = payload.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { bytes in
                natsMsg_Create(&messagePointer, subject, nil, bytes.baseAddress, Int32(bytes.count))
            }
        }
        guard status == NATS_OK, let message = messagePointer else {
            throw JetStreamError(status: status, action: "\(action): natsMsg_Create")
        }
        defer { natsMsg_Destroy(message) }

        for (name, value) in headers {
            if let problem = Self.headerProblem(name: name, value: value) {
                throw JetStreamError(.invalidArgument, "\(action): header \(name): \(problem)")
            }
        }
        var allHeaders = headers
        if let messageID { allHeaders["Nats-Msg-Id"] = messageID }
        if let expectedLastSequence { allHeaders["Nats-Expected-Last-Sequence"] = String(expectedLastSequence) }
        if let expectedStream { allHeaders["Nats-Expected-Stream"] = expectedStream }
        for (name, value) in allHeaders where status == NATS_OK {
            status = natsMsgHeader_Set(message, name, value)
        }
        guard status == NATS_OK else { throw JetStreamError(status: status, action: "\(action): setting headers") }

        var options = jsPubOptions()
        jsPubOptions_Init(&options)
        options.MaxWait = timeout?.milliseconds() ?? timeoutMilliseconds
        var ackPointer: UnsafeMutablePointer<jsPubAck>? = nil
        var jsCode = jsErrCode(rawValue: 0)
        status = js_PublishMsg(&ackPointer, handles.context, message, &options, &jsCode)
        defer { if let ackPointer { jsPubAck_Destroy(ackPointer) } }
        guard status == NATS_OK, let ack = ackPointer?.pointee else {
            throw JetStreamError(status: status, jsCode: jsCode, call: .publish, action: action)
        }
        return PublishAck(
            stream: ack.Stream.map { String(cString: $0) } ?? "", sequence: ack.Sequence, duplicate: ack.Duplicate)
    }

    /// Why a header would not be stored and read back as given, or nil when it would. libnats
    /// 3.4.1 trims the spaces around a value when reading it, and reads an empty value as the
    /// next header line; line breaks would end the header.
    static func headerProblem(name: String, value: String) -> String? {
        if name.isEmpty { return "empty name" }
        if name.unicodeScalars.contains(where: { $0 == ":" || $0.value <= 32 || $0.value == 127 }) {
            return "a name must not contain ':', spaces or control characters"
        }
        if value.isEmpty { return "empty value (libnats would read the next header line as its value)" }
        if value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" }) { return "line break in the value" }
        if value.first?.isWhitespace == true || value.last?.isWhitespace == true {
            return "spaces around the value (libnats trims them when reading)"
        }
        return nil
    }

    // MARK: Reading

    /// The message stored at `sequence`; nil when the stream holds none there (never stored,
    /// deleted or purged). Throws `notFound` when the stream does not exist.
    public func message(stream: String, sequence: UInt64) throws(JetStreamError) -> StoredMessage? {
        let action = "get message \(sequence) of \(stream)"
        try requireConnection(action)
        var messagePointer: OpaquePointer? = nil
        var jsCode = jsErrCode(rawValue: 0)
        let status = js_GetMsg(&messagePointer, handles.context, stream, sequence, nil, &jsCode)
        return try storedMessage(messagePointer, status: status, jsCode: jsCode, action: action)
    }

    /// The last message stored on `subject` (no wildcards); nil when there is none.
    public func lastMessage(stream: String, subject: String) throws(JetStreamError) -> StoredMessage? {
        let action = "get last message of \(stream) on \(subject)"
        try requireConnection(action)
        var messagePointer: OpaquePointer? = nil
        var jsCode = jsErrCode(rawValue: 0)
        let status = js_GetLastMsg(&messagePointer, handles.context, stream, subject, nil, &jsCode)
        return try storedMessage(messagePointer, status: status, jsCode: jsCode, action: action)
    }

    private func storedMessage(
        _ messagePointer: OpaquePointer?, status: natsStatus, jsCode: jsErrCode, action: String
    ) throws(JetStreamError) -> StoredMessage? {
        defer { if let messagePointer { natsMsg_Destroy(messagePointer) } }
        if status == NATS_OK, let message = messagePointer {
            return directGetMessage(message)
        }
        // A missing stream is an error; a missing message in an existing stream is nil.
        if jsCode == JSStreamNotFoundErr {
            throw JetStreamError(status: status, jsCode: jsCode, call: .api, action: action)
        }
        if status == NATS_NOT_FOUND || jsCode == JSNoMessageFoundErr { return nil }
        throw JetStreamError(status: status, jsCode: jsCode, call: .api, action: action)
    }

    /// A reader of `stream` from `sequence` on (1 or 0: from the first message held), only of
    /// the subjects matching `filter` when given. See `JetStreamReader`.
    public func reader(
        stream: String, subject filter: String? = nil, from sequence: UInt64
    ) throws(JetStreamError) -> JetStreamReader {
        try JetStreamReader(client: self, stream: stream, filter: filter, start: max(1, sequence))
    }
}

/// A stored message from a direct get, whose sequence and time libnats parsed from its headers.
private func directGetMessage(_ message: OpaquePointer) -> StoredMessage {
    storedMessage(from: message, sequence: natsMsg_GetSequence(message), timeNanoseconds: natsMsg_GetTime(message))
}

/// Calls `body` with a C copy of `string`, or with nil when `string` is nil.
func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}
