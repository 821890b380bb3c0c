import Foundation
import GraphJournal
public import ObjectGraph
import NATSJetStream

/// Ships a store's journal to a JetStream stream: every schema and transaction record once
/// it is durable locally, one message per record (or per part of a large one), in order, each
/// with its sequence as message ID (a retried publish is stored once) and the stream's
/// expected last sequence (a second writer, or a writer restored from an older copy, is
/// refused instead of forking the history). Bases that compaction writes ship on the base
/// subject (``ReplicatedStore/compact(timeout:progress:)``).
///
/// A shipper runs one background thread. Attach it to a store opened with the options it
/// prepared:
///
/// ```swift
/// let shipper = try JournalShipper(target: target)
/// var options = StoreOptions()
/// shipper.prepare(&options)
/// let store = try ObjectStore.open(at: directory, schema: schema, options: options)
/// try shipper.attach(store.shippingSource)
/// ```
///
/// ``ReplicatedStore`` does all of that.
public final class JournalShipper: Sendable {
    /// What a shipper has done, for monitoring.
    public struct Status: Sendable, Hashable {
        /// The last record the stream acknowledged (its sequence in the local journal).
        public var shippedSequence: UInt64
        /// The stream's last sequence as this shipper knows it.
        public var streamSequence: UInt64
        /// Records durable locally and not yet acknowledged, held in memory.
        public var backlogRecords: Int
        /// Their bytes.
        public var backlogBytes: Int
        /// Whether the backlog outgrew memory and is read again from the journal.
        public var catchingUp: Bool
        /// The last error from the servers, cleared by the next success.
        public var lastError: String?
        /// Set when the shipper stopped for good: the stream's history is not this store's.
        public var diverged: String?
        /// Messages published, counting parts.
        public var messagesPublished: Int
    }

    let target: ReplicationTarget
    let client: JetStreamClient
    private let box: Box

    /// The shipper's state, guarded by its condition.
    private final class Box: @unchecked Sendable {
        // Every field is read and written with `condition` locked (NSCondition is a mutex).
        let condition = NSCondition()
        var queue: [ShippedRecord] = []
        var queueBytes = 0
        var status = Status(
            shippedSequence: 0, streamSequence: 0, backlogRecords: 0, backlogBytes: 0, catchingUp: false, lastError: nil,
            diverged: nil, messagesPublished: 0)
        var source: ShippingSource?
        var running = false
        var stopping = false
        /// Parts of the record at `resumePart.sequence` already in the stream (a writer that died mid-record).
        var resumePart: (sequence: UInt64, next: Int)?
        var baseRequested = false
        var threadDone = true
    }

    /// Connects to the target's servers and makes sure the stream exists.
    ///
    /// - Throws: ``ReplicationError`` with code `server` when no server answers.
    public init(target: ReplicationTarget) throws(ReplicationError) {
        self.target = target
        self.box = Box()
        self.client = try Self.connect(target)
    }

    private static func connect(_ target: ReplicationTarget) throws(ReplicationError) -> JetStreamClient {
        do {
            let client = try JetStreamClient(servers: target.servers, name: "objectgraph-shipper", timeout: target.timeout)
            try client.ensureStream(target.streamConfiguration)
            return client
        } catch {
            throw ReplicationError(error, while: "connecting to \(target.servers.joined(separator: ",")) for stream \(target.stream)")
        }
    }

    deinit {
        stop()
        client.close()
    }

    /// Sets the options a shipping store needs: the durable-record feed, the save confirmation
    /// of the synchronous policy, and no automatic compaction (a base must ship with it:
    /// ``ReplicatedStore/compact(timeout:progress:)``).
    public func prepare(_ options: inout StoreOptions) {
        let box = self.box
        let maxBacklog = target.maxBacklogBytes
        options.journal.onDurable = { records in
            box.condition.lock()
            defer { box.condition.unlock() }
            guard box.status.diverged == nil else { return }
            for r in records where r.sequence > box.status.shippedSequence || !box.running {
                box.queue.append(r)
                box.queueBytes += r.wire.count
            }
            if box.queueBytes > maxBacklog {
                // Read again from the journal once the servers answer.
                box.queue.removeAll()
                box.queueBytes = 0
                box.status.catchingUp = true
            }
            box.condition.broadcast()
        }
        options.autoCompactionRatio = nil
        if case .synchronous(let timeout) = target.policy {
            options.saveConfirmation = { [self] sequence in try self.waitShipped(through: sequence, timeout: timeout) }
        }
    }

    /// Compares the stream with the store's journal, then starts shipping: the records the
    /// stream lacks first (read from the journal), then each new one as it becomes durable.
    ///
    /// - Throws: ``ReplicationError``: `diverged` when the stream holds records the journal
    ///   does not, or a record of the same sequence with another checksum; `server`.
    public func attach(_ source: ShippingSource) throws(ReplicationError) {
        let state: StreamState
        let last: StoredMessage?
        do {
            state = try client.streamState(target.stream)
            last = try client.lastMessage(stream: target.stream, subject: target.logSubject)
        } catch {
            throw ReplicationError(error, while: "reading stream \(target.stream)")
        }
        var shipped: UInt64 = 0
        var resume: (UInt64, Int)?
        var expectedCRC: UInt32?
        if let last {
            let info = try LogMessageInfo(last)
            shipped = info.isLastPart ? info.sequence : info.previous
            if !info.isLastPart { resume = (info.sequence, info.part + 1) }
            expectedCRC = info.crc
            let local = source.lastSequence
            guard info.sequence <= local else {
                throw ReplicationError(
                    .diverged,
                    "stream \(target.stream) holds record \(info.sequence) but this store's journal ends at \(local): the store was restored from an older copy, or another writer ships to this stream; refusing to fork its history")
            }
            // The stream's last record must be this journal's record of that sequence.
            let localCRC: UInt32?
            do {
                localCRC = try Self.firstRecords(of: source, after: info.sequence - 1, count: 1).first
                    .flatMap { $0.sequence == info.sequence ? wireCRC($0.wire) : nil }
            } catch {
                throw ReplicationError(.store, "reading the local journal: \(error)")
            }
            if let localCRC, let expectedCRC, localCRC != expectedCRC {
                throw ReplicationError(
                    .diverged,
                    "stream \(target.stream) holds a record \(info.sequence) that differs from this store's (checksum \(String(expectedCRC, radix: 16)) against \(String(localCRC, radix: 16))): another writer ships to this stream; refusing to fork its history")
            }
        }
        box.condition.lock()
        box.source = source
        box.status.shippedSequence = shipped
        box.status.streamSequence = state.lastSequence
        box.resumePart = resume
        box.queue.removeAll { $0.sequence <= shipped }
        box.queueBytes = box.queue.reduce(0) { $0 + $1.wire.count }
        // Whatever the journal holds past the stream's last record is read from the files first.
        box.status.catchingUp = source.lastSequence > shipped
        box.running = true
        box.stopping = false
        box.threadDone = false
        box.condition.unlock()
        let thread = Thread { [self] in self.run() }
        thread.name = "ObjectGraph shipper"
        thread.start()
    }

    /// Stops the thread; what is not shipped stays in the journal for the next attach.
    public func stop() {
        box.condition.lock()
        box.stopping = true
        box.condition.broadcast()
        while !box.threadDone { box.condition.wait() }
        box.running = false
        box.condition.unlock()
    }

    /// The shipper's figures.
    public var status: Status {
        box.condition.lock()
        defer { box.condition.unlock() }
        var s = box.status
        s.backlogRecords = box.queue.count
        s.backlogBytes = box.queueBytes
        return s
    }

    /// Waits until the stream acknowledged the record `sequence` (and those before it).
    ///
    /// - Throws: ``ReplicationError``: `notAcknowledged` after `timeout`, `diverged`.
    public func waitShipped(through sequence: UInt64, timeout: Duration) throws(ReplicationError) {
        let deadline = Date().addingTimeInterval(Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18)
        box.condition.lock()
        defer { box.condition.unlock() }
        while box.status.shippedSequence < sequence {
            if let diverged = box.status.diverged { throw ReplicationError(.diverged, diverged) }
            if !box.condition.wait(until: deadline) {
                if box.status.shippedSequence >= sequence { return }
                throw ReplicationError(
                    .notAcknowledged,
                    "record \(sequence) is saved and durable locally, but stream \(target.stream) did not acknowledge it within \(timeout) (\(box.status.lastError ?? "no answer yet")); it ships when the servers answer")
            }
        }
    }

    /// Waits until everything durable so far shipped (used before a compaction and a close).
    func drain(timeout: Duration, lastSequence: UInt64) throws(ReplicationError) {
        try waitShipped(through: lastSequence, timeout: timeout)
    }

    /// Ships the base the journal now starts with, after a compaction, and waits until the
    /// stream stored it. ``ReplicatedStore/compact(timeout:progress:)`` calls it; a daemon with an
    /// ``AsyncStore`` calls it after `waitShipped(through:)` and `compact()`:
    ///
    /// ```swift
    /// try shipper.waitShipped(through: store.stats.lastSequence, timeout: .seconds(30))
    /// try await store.compact()
    /// try shipper.shipBase(timeout: .seconds(30))
    /// ```
    ///
    /// - Throws: ``ReplicationError``: `notAcknowledged` when the base did not ship within
    ///   `timeout` (it ships when the servers answer), `diverged`.
    public func shipBase(timeout: Duration) throws(ReplicationError) {
        box.condition.lock()
        box.baseRequested = true
        box.condition.broadcast()
        let deadline = Date().addingTimeInterval(Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18)
        while box.baseRequested {
            if let diverged = box.status.diverged { box.condition.unlock(); throw ReplicationError(.diverged, diverged) }
            if !box.condition.wait(until: deadline) {
                box.condition.unlock()
                throw ReplicationError(.notAcknowledged, "the base did not ship within \(timeout) (\(status.lastError ?? "no answer")); it ships when the servers answer")
            }
        }
        box.condition.unlock()
    }

    // MARK: The thread

    fileprivate struct StopWalk: Error {}

    private func run() {
        var backoff = 0.05
        while true {
            box.condition.lock()
            while !box.stopping && box.status.diverged == nil && box.queue.isEmpty && !box.status.catchingUp && !box.baseRequested {
                box.condition.wait()
            }
            if box.stopping || box.status.diverged != nil {
                box.threadDone = true
                box.condition.broadcast()
                box.condition.unlock()
                return
            }
            let catchingUp = box.status.catchingUp
            let baseRequested = box.baseRequested
            let batch = catchingUp ? [] : box.queue
            let source = box.source
            box.condition.unlock()
            do {
                if baseRequested, let source {
                    try shipCurrentBase(source)
                    box.condition.lock()
                    box.baseRequested = false
                    box.condition.broadcast()
                    box.condition.unlock()
                } else if catchingUp, let source {
                    try catchUp(source)
                } else {
                    for r in batch { try ship(r) }
                }
                backoff = 0.05
            } catch let error as ReplicationError where error.code == .diverged {
                box.condition.lock()
                box.status.diverged = error.message
                box.condition.broadcast()
                box.condition.unlock()
            } catch {
                box.condition.lock()
                box.status.lastError = "\(error)"
                box.condition.unlock()
                Thread.sleep(forTimeInterval: backoff)
                backoff = min(backoff * 2, 1)
            }
        }
    }

    /// Publishes one log record (each part not yet in the stream) unless it already shipped.
    /// A gap (records compacted into a base before they shipped) switches to catching up.
    fileprivate func ship(_ record: ShippedRecord) throws {
        box.condition.lock()
        let shipped = box.status.shippedSequence
        var streamLast = box.status.streamSequence
        let resume = box.resumePart
        box.condition.unlock()
        guard record.sequence > shipped else { return dropShipped() }
        if record.sequence > shipped + 1, resume?.sequence != record.sequence {
            box.condition.lock()
            box.status.catchingUp = true
            box.condition.unlock()
            return
        }
        let outgoing = OutgoingRecord(record, previous: shipped, maxPart: maxPart)
        let first = resume?.sequence == record.sequence ? resume?.next ?? 0 : 0
        for part in first..<outgoing.parts.count {
            streamLast = try publish(
                subject: target.logSubject, payload: Array(outgoing.parts[part]), headers: outgoing.headers(part: part),
                id: outgoing.messageID(part: part), after: streamLast)
        }
        box.condition.lock()
        box.status.shippedSequence = record.sequence
        box.status.streamSequence = streamLast
        box.status.lastError = nil
        box.resumePart = nil
        box.queue.removeAll { $0.sequence <= record.sequence }
        box.queueBytes = box.queue.reduce(0) { $0 + $1.wire.count }
        box.condition.broadcast()
        box.condition.unlock()
    }

    private func dropShipped() {
        box.condition.lock()
        let shipped = box.status.shippedSequence
        box.queue.removeAll { $0.sequence <= shipped }
        box.queueBytes = box.queue.reduce(0) { $0 + $1.wire.count }
        box.condition.unlock()
    }

    /// Ships what the journal holds past the last shipped record: its base first when the
    /// records right after the last shipped one were compacted into it.
    private func catchUp(_ source: ShippingSource) throws {
        box.condition.lock()
        let shipped = box.status.shippedSequence
        box.condition.unlock()
        let walk = CatchUpWalk(shipped: shipped)
        try source.forEachRecord(after: shipped) { r in try walk.take(r, shipper: self) }
        if !walk.pendingBase.isEmpty { try publishBase(walk.pendingBase) }
        box.condition.lock()
        // Records delivered while the files were read are in the queue; older ones are dropped.
        let done = box.status.shippedSequence
        box.queue.removeAll { $0.sequence <= done }
        box.queueBytes = box.queue.reduce(0) { $0 + $1.wire.count }
        box.status.catchingUp = false
        box.condition.broadcast()
        box.condition.unlock()
    }

    /// Ships the base the journal starts with (after a compaction).
    private func shipCurrentBase(_ source: ShippingSource) throws {
        let records = try Self.firstRecords(of: source, after: 0) { $0.isEmpty || $1.kind == .base }
        guard records.count > 1, records.dropFirst().allSatisfy({ $0.kind == .base }) else { return }
        try publishBase(records)
    }

    /// The records after `sequence` for as long as `keep` says (given those taken so far).
    static func firstRecords(
        of source: ShippingSource, after sequence: UInt64, count: Int = .max,
        while keep: @escaping ([ShippedRecord], ShippedRecord) -> Bool = { _, _ in true }
    ) throws -> [ShippedRecord] {
        let taken = RecordList()
        do {
            try source.forEachRecord(after: sequence) { r in
                guard taken.records.count < count, keep(taken.records, r) else { throw StopWalk() }
                taken.records.append(r)
            }
        } catch is StopWalk {}
        return taken.records
    }

    /// Records collected by a walk (a class: the walk's closure appends to it).
    private final class RecordList { var records: [ShippedRecord] = [] }

    /// The catch-up's walk over the journal: a base the journal starts with ships as a base,
    /// then each record as a log record.
    private final class CatchUpWalk {
        let shipped: UInt64
        var pendingBase: [ShippedRecord] = []
        var first = true

        init(shipped: UInt64) { self.shipped = shipped }

        func take(_ r: ShippedRecord, shipper: JournalShipper) throws {
            if first, r.sequence > shipped + 1 || r.kind == .base || (!pendingBase.isEmpty && r.kind == .base) {
                pendingBase.append(r)
                if r.kind == .schema || r.kind == .base { return }
            }
            if !pendingBase.isEmpty {
                if r.kind == .base { pendingBase.append(r); return }
                try shipper.publishBase(pendingBase)
                pendingBase = []
            }
            first = false
            try shipper.ship(r)
        }
    }

    /// Publishes a base (its schema record and base records) on the base subject.
    fileprivate func publishBase(_ records: [ShippedRecord]) throws {
        guard let covers = records.last?.sequence else { return }
        let parts = split(BaseBlob.encode(records), maxPart: maxPart)
        box.condition.lock()
        var streamLast = box.status.streamSequence
        box.condition.unlock()
        for (i, part) in parts.enumerated() {
            streamLast = try publish(
                subject: target.baseSubject, payload: Array(part),
                headers: [Header.covers: String(covers), Header.part: String(i), Header.parts: String(parts.count)],
                id: "base.\(covers).\(i)", after: streamLast)
        }
        box.condition.lock()
        box.status.streamSequence = streamLast
        if box.status.shippedSequence < covers { box.status.shippedSequence = covers }
        box.condition.broadcast()
        box.condition.unlock()
    }

    private var maxPart: Int { max(4096, min(target.maxMessageBytes, client.maxPayload) - 4096) }

    /// One publish with the expected-last-sequence fence. A refusal by the fence is checked:
    /// if the stream's last message is this very one (an acknowledgement lost on the way), it
    /// counts as published; otherwise another writer wrote, and the history has diverged.
    private func publish(subject: String, payload: [UInt8], headers: [String: String], id: String, after streamLast: UInt64) throws -> UInt64 {
        let ack: PublishAck
        do {
            ack = try client.publish(
                subject: subject, payload: payload, headers: headers, messageID: id, expectedLastSequence: streamLast, timeout: target.timeout)
        } catch {
            guard error.code == .wrongLastSequence else { throw error }
            return try resolveFence(subject: subject, headers: headers, after: streamLast)
        }
        box.condition.lock()
        box.status.messagesPublished += 1
        box.condition.unlock()
        return ack.duplicate ? max(ack.sequence, streamLast) : ack.sequence
    }

    private func resolveFence(subject: String, headers: [String: String], after streamLast: UInt64) throws -> UInt64 {
        let state = try client.streamState(target.stream)
        if state.lastSequence > streamLast, let last = try client.message(stream: target.stream, sequence: state.lastSequence),
           last.subject == subject, last.headers.filter({ $0.key.hasPrefix("OG-") }) == headers {
            return state.lastSequence
        }
        throw ReplicationError(
                .diverged,
                "stream \(target.stream) moved to sequence \(state.lastSequence) while this writer expected \(streamLast): another writer ships to it; stopped shipping to keep one history")
    }
}
