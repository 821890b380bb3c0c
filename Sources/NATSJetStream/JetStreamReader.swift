import CNATS
import Foundation
import Synchronization

/// Reads a stream in sequence order from a start sequence: the messages already stored, then
/// those stored afterwards, without gaps other than messages the stream no longer holds.
///
/// It is an ephemeral pull consumer (deliver by start sequence, no acknowledgments, its state in
/// the server's memory) that `next` fetches from in batches. A pull consumer rather than an
/// ordered push consumer: the server sends only what `next` asks for, so a reader that falls
/// behind holds no unread backlog in the client's memory, and one request brings a whole batch.
/// Every delivery carries the consumer's own sequence, which counts up by one; a jump means
/// deliveries were lost on the way (a reconnect), and the reader then makes a new consumer
/// starting after the last message it returned.
///
/// The server deletes the consumer after two minutes without a `next` call, or when the server
/// that holds it stops; `next` then throws and the caller makes a new reader from its last
/// sequence + 1. Calls on one reader are serialized (a `close` waits for a running `next`).
public final class JetStreamReader: Sendable {
    private let client: JetStreamClient
    private let stream: String
    private let filter: String?
    private let state: Mutex<ReaderState>

    /// How long the server keeps the consumer of a reader that stopped calling `next`.
    static let inactiveThreshold: Duration = .seconds(120)

    private struct ReaderState {
        var subscription: OpaquePointer?
        var consumer: String
        /// The stream sequence of the last message returned (start - 1 before the first).
        var lastStreamSequence: UInt64
        /// The consumer sequence of the last delivery (0 for a new consumer).
        var lastConsumerSequence: UInt64 = 0
    }

    init(client: JetStreamClient, stream: String, filter: String?, start: UInt64) throws(JetStreamError) {
        self.client = client
        self.stream = stream
        self.filter = filter
        let (subscription, consumer) = try Self.subscribe(client: client, stream: stream, filter: filter, start: start)
        state = Mutex(ReaderState(subscription: subscription, consumer: consumer, lastStreamSequence: start - 1))
    }

    deinit { close() }

    /// Up to `max` next messages in stream order, waiting at most `timeout` for the first; `[]`
    /// when none came in time (not an error). Throws when the connection is down or closed, or
    /// the consumer was deleted: the caller then makes a new reader from its last sequence + 1.
    public func next(max: Int, timeout: Duration) throws(JetStreamError) -> [StoredMessage] {
        guard max > 0 else {
            throw JetStreamError(.invalidArgument, "read \(stream): max must be positive, not \(max)")
        }
        let batch = Int32(clamping: max)
        let wait = timeout.milliseconds()
        return try state.withLock { (state: inout ReaderState) throws(JetStreamError) -> [StoredMessage] in
            let action = "read \(stream) after sequence \(state.lastStreamSequence)"
            guard let subscription = state.subscription else {
                throw JetStreamError(.connectionFailed, "\(action): the reader is closed")
            }
            try client.requireConnection(action)
            var messages: [StoredMessage] = []
            var gap = false
            // What is already stored comes at once with a request that does not wait. Otherwise,
            // a request for one message waits for the next to be stored (a request for many
            // would wait for all of them or the timeout), then whatever else is there follows.
            try Self.fetch(
                subscription, batch: batch, noWait: true, wait: wait, into: &messages, gap: &gap, state: &state,
                action: action)
            if messages.isEmpty && !gap {
                try Self.fetch(
                    subscription, batch: 1, noWait: false, wait: wait, into: &messages, gap: &gap, state: &state,
                    action: action)
                if !messages.isEmpty && batch > 1 && !gap {
                    // A failure here leaves the messages already received to be returned.
                    try? Self.fetch(
                        subscription, batch: batch - 1, noWait: true, wait: wait, into: &messages, gap: &gap,
                        state: &state, action: action)
                }
            }
            if gap { try resubscribe(&state) }
            // The server drops pull requests for a consumer it no longer has (deleted after
            // inactivity, or gone with a restart of the server that held it in memory) without
            // an answer, so that nothing came can also mean that: asked once nothing came.
            if messages.isEmpty && !gap {
                try Self.requireConsumer(state.consumer, stream: stream, client: client, action: action)
            }
            return messages
        }
    }

    /// Deletes the consumer (when the server can be reached) and releases the subscription;
    /// `next` then throws `connectionFailed`. Calling it again does nothing.
    public func close() {
        state.withLock { state in
            guard let subscription = state.subscription else { return }
            state.subscription = nil
            Self.release(subscription, consumer: state.consumer, stream: stream, client: client)
        }
    }

    /// Replaces the consumer with one starting after the last message returned.
    private func resubscribe(_ state: inout ReaderState) throws(JetStreamError) {
        if let subscription = state.subscription {
            state.subscription = nil
            Self.release(subscription, consumer: state.consumer, stream: stream, client: client)
        }
        let (subscription, consumer) = try Self.subscribe(
            client: client, stream: stream, filter: filter, start: state.lastStreamSequence + 1)
        state.subscription = subscription
        state.consumer = consumer
        state.lastConsumerSequence = 0
    }

    private static func release(
        _ subscription: OpaquePointer, consumer: String, stream: String, client: JetStreamClient
    ) {
        natsSubscription_Unsubscribe(subscription)
        natsSubscription_Destroy(subscription)
        if client.isConnected {
            var jsCode = jsErrCode(rawValue: 0)
            _ = js_DeleteConsumer(client.handles.context, stream, consumer, nil, &jsCode)
        }
    }

    /// Throws `notFound` when the consumer does not exist any more, or the error of asking.
    private static func requireConsumer(
        _ consumer: String, stream: String, client: JetStreamClient, action: String
    ) throws(JetStreamError) {
        var infoPointer: UnsafeMutablePointer<jsConsumerInfo>? = nil
        var jsCode = jsErrCode(rawValue: 0)
        let status = js_GetConsumerInfo(&infoPointer, client.handles.context, stream, consumer, nil, &jsCode)
        defer { if let infoPointer { jsConsumerInfo_Destroy(infoPointer) } }
        if status == NATS_OK { return }
        if status == NATS_NOT_FOUND || jsCode == JSConsumerNotFoundErr {
            throw JetStreamError(
                .notFound,
                "\(action): the consumer \(consumer) no longer exists (deleted after inactivity, or gone with the server that held it); make a new reader"
            )
        }
        throw JetStreamError(
            status: status, jsCode: jsCode, call: .api, action: "\(action): consumer info of \(consumer)")
    }

    /// Creates the consumer and a pull subscription bound to it.
    private static func subscribe(
        client: JetStreamClient, stream: String, filter: String?, start: UInt64
    ) throws(JetStreamError) -> (OpaquePointer, String) {
        let action = "create a reader of \(stream)\(filter.map { " on \($0)" } ?? "") from sequence \(start)"
        try client.requireConnection(action)
        var infoPointer: UnsafeMutablePointer<jsConsumerInfo>? = nil
        var jsCode = jsErrCode(rawValue: 0)
        var status = withOptionalCString(filter) { filterPointer in
            var config = jsConsumerConfig()
            jsConsumerConfig_Init(&config)
            config.DeliverPolicy = js_DeliverByStartSequence
            config.OptStartSeq = start
            config.AckPolicy = js_AckNone
            config.FilterSubject = filterPointer
            config.InactiveThreshold = inactiveThreshold.nanoseconds
            config.MemoryStorage = true
            return js_AddConsumer(&infoPointer, client.handles.context, stream, &config, nil, &jsCode)
        }
        defer { if let infoPointer { jsConsumerInfo_Destroy(infoPointer) } }
        guard status == NATS_OK, let namePointer = infoPointer?.pointee.Name else {
            throw JetStreamError(status: status, jsCode: jsCode, call: .api, action: action)
        }
        let consumer = String(cString: namePointer)
        var subscriptionPointer: OpaquePointer? = nil
        status = stream.withCString { streamPointer in
            var options = jsSubOptions()
            jsSubOptions_Init(&options)
            options.Stream = streamPointer
            options.Consumer = UnsafePointer(namePointer)
            // libnats compares these settings with the consumer's before binding to it.
            options.Config.MemoryStorage = true
            return js_PullSubscribe(&subscriptionPointer, client.handles.context, nil, nil, nil, &options, &jsCode)
        }
        guard status == NATS_OK, let subscription = subscriptionPointer else {
            let error = JetStreamError(
                status: status, jsCode: jsCode, call: .api, action: "\(action): subscribe to consumer \(consumer)")
            if let subscriptionPointer { natsSubscription_Destroy(subscriptionPointer) }
            _ = js_DeleteConsumer(client.handles.context, stream, consumer, nil, &jsCode)
            throw error
        }
        return (subscription, consumer)
    }

    /// One pull request: appends the user messages delivered in consumer order to `messages`;
    /// sets `gap` (and keeps the messages before it) when a consumer sequence was skipped.
    private static func fetch(
        _ subscription: OpaquePointer, batch: Int32, noWait: Bool, wait: Int64,
        into messages: inout [StoredMessage], gap: inout Bool, state: inout ReaderState, action: String
    ) throws(JetStreamError) {
        var request = jsFetchRequest()
        jsFetchRequest_Init(&request)
        request.Batch = batch
        request.NoWait = noWait
        request.Expires = wait.multipliedReportingOverflow(by: 1_000_000).overflow ? Int64.max : wait * 1_000_000
        var list = natsMsgList()
        let status = natsSubscription_FetchRequest(&list, subscription, &request)
        defer { natsMsgList_Destroy(&list) }
        // 404 (nothing stored for a no-wait request) and 408 (the request expired) mean no message.
        if status == NATS_TIMEOUT || status == NATS_NOT_FOUND { return }
        if status == NATS_NO_RESPONDERS {
            throw JetStreamError(
                .notFound,
                "\(action): the consumer \(state.consumer) no longer exists (deleted after inactivity, or gone with the server that held it); make a new reader"
            )
        }
        guard status == NATS_OK else { throw JetStreamError(status: status, action: action) }
        messages.reserveCapacity(messages.count + Int(list.Count))
        for index in 0..<Int(list.Count) {
            guard let message = list.Msgs[index] else { continue }
            var metadataPointer: UnsafeMutablePointer<jsMsgMetaData>? = nil
            let parsed = natsMsg_GetMetaData(&metadataPointer, message)
            defer { if let metadataPointer { jsMsgMetaData_Destroy(metadataPointer) } }
            guard parsed == NATS_OK, let metadata = metadataPointer?.pointee else {
                throw JetStreamError(status: parsed, action: "\(action): reading a delivery's metadata")
            }
            if metadata.Sequence.Consumer != state.lastConsumerSequence + 1 {
                gap = true
                return
            }
            state.lastConsumerSequence = metadata.Sequence.Consumer
            state.lastStreamSequence = metadata.Sequence.Stream
            messages.append(
                storedMessage(from: message, sequence: metadata.Sequence.Stream, timeNanoseconds: metadata.Timestamp))
        }
    }
}
