internal import CoreMetrics
import DequeModule
import Foundation
import GraphJournal
import NATSJetStream
public import ObjectGraph
internal import Tracing

/// Ships a store's journal to a JetStream stream: every schema and transaction record once
/// it is durable locally, in order, each message carrying the records `OG-First...OG-Seq`
/// (one record when saves come one at a time; the records that queued up meanwhile, or within
/// ``ReplicationTarget/batchDelay``, when they come faster; a record larger than a message in
/// several parts), with their sequences as message ID (a retried publish is stored once) and
/// the stream's expected last sequence (a second writer, or a writer restored from an older
/// copy, is refused instead of forking the history). Bases that compaction writes ship on the
/// base subject (``ReplicatedStore/compact(timeout:progress:)``).
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
        /// Set when this writer lost the stream to a newer epoch (its lease taken over, or its
        /// publish refused after another writer's): it ships nothing more, and saves under the
        /// synchronous policy throw ``ReplicationError/Code/fenced``. ``diverged`` is set too.
        public var fenced: String?
        /// The epoch this writer ships under (its lease's), 0 without a lease.
        public var epoch: UInt64
    }

    let target: ReplicationTarget
    let client: JetStreamClient
    /// The writer lease, with ``ReplicationTarget/lease``.
    let lease: LeaseKeeper?
    private let box: Box

    /// The shipper's state, guarded by its condition.
    private final class Box: @unchecked Sendable {
        // Every field is read and written with `condition` locked (NSCondition is a mutex).
        let condition = NSCondition()
        /// Durable records not yet shipped, in sequence order.
        var queue = Deque<ShippedRecord>()
        var queueBytes = 0
        /// When the oldest queued record arrived (for the batch delay).
        var firstQueuedAt: ContinuousClock.Instant?
        var status = Status(
            shippedSequence: 0, streamSequence: 0, backlogRecords: 0, backlogBytes: 0, catchingUp: false,
            lastError: nil,
            diverged: nil, messagesPublished: 0, fenced: nil, epoch: 0)
        var source: ShippingSource?
        var running = false
        var stopping = false
        /// A batch cut short in the stream by a crash: its records and the next part to publish.
        var resume: Resume?
        var baseRequested = false
        var threadDone = true
        /// The shipper waits with nothing to do (no deadline): a new record must wake it. While
        /// it waits out a batch delay, records need not (a wake-up per group commit costs more
        /// CPU than shipping the records).
        var idle = false
        /// The last record durable locally (the newest `onDurable` delivered, or the journal's
        /// last at attach).
        var durableSequence: UInt64 = 0
        /// When records became durable: per delivery, its last sequence and the instant (at most
        /// ``maxArrivals``; past that the newest entry absorbs the next deliveries, which makes
        /// the lag in seconds read high, never low).
        var arrivals = Deque<(sequence: UInt64, at: ContinuousClock.Instant)>()
        static let maxArrivals = 4096
        /// The store's figures, once attached.
        var metrics: ShipperMetrics?

        /// Notes records that became durable, up to `sequence`.
        func arrived(through sequence: UInt64) {
            guard sequence > durableSequence else { return }
            durableSequence = sequence
            if arrivals.count < Self.maxArrivals {
                arrivals.append((sequence, .now))
            } else {
                arrivals[arrivals.count - 1].sequence = sequence
            }
        }

        /// Records the shipping lag: records durable and not acknowledged, and how long the
        /// oldest of them has waited.
        func reportLag() {
            let shipped = status.shippedSequence
            while let a = arrivals.first, a.sequence <= shipped { arrivals.removeFirst() }
            guard let metrics else { return }
            metrics.lagRecords.record(Int64(durableSequence > shipped ? durableSequence - shipped : 0))
            metrics.lagSeconds.record(arrivals.first.map { seconds(ContinuousClock.now - $0.at) } ?? 0)
        }

        /// Runs `body` with the condition locked.
        func locked<R>(_ body: (Box) throws -> R) rethrows -> R {
            condition.lock()
            defer { condition.unlock() }
            return try body(self)
        }

        /// The newest epoch written to the `EPOCH` file.
        var writtenEpoch: UInt64 = 0
        /// Set by the first ``fence(_:stream:holder:)``.
        var fencing = false
        /// The report a fenced writer left, kept up to date as it goes on saving locally.
        var fencedReport: FencedReport?
        /// Attached while the servers were away: the stream is compared with the journal before
        /// anything ships.
        var examinationPending = false

        /// Takes what the comparison found: the shipping starts after the stream's last record.
        func take(_ examined: Examined, lastSequence: UInt64) {
            status.shippedSequence = examined.shipped
            status.streamSequence = examined.streamSequence
            resume = examined.resume
            examinationPending = false
            dropShipped()
            // Whatever the journal holds past the stream's last record is read from the files
            // first.
            status.catchingUp = status.catchingUp || lastSequence > examined.shipped
        }

        /// Writes `epoch` to the `EPOCH` file unless it is there already: before the first
        /// publish under it, so that a restarted writer knows the stream's last epoch is its own.
        func recordEpoch(_ epoch: UInt64, stream: String, holder: String, directory: String) throws(ReplicationError) {
            guard locked({ $0.writtenEpoch }) < epoch else { return }
            do {
                try WriterFiles.writeEpoch(.init(stream: stream, epoch: epoch, holder: holder), in: directory)
            } catch {
                throw ReplicationError(.store, "writing \(directory)/\(WriterFiles.epoch): \(error)")
            }
            locked { b in
                b.writtenEpoch = max(b.writtenEpoch, epoch)
                b.status.epoch = epoch
                b.metrics?.epoch.record(Int64(epoch))
            }
        }

        /// Stops the shipper for good: this writer lost the stream. Leaves the `FENCED` report
        /// beside the journal (once).
        func fence(_ reason: String, stream: String, holder: String) {
            condition.lock()
            guard !fencing else {
                while status.fenced == nil { condition.wait() }
                condition.unlock()
                return
            }
            fencing = true
            let report = FencedReport(
                stream: stream, holder: holder, epoch: max(writtenEpoch, status.epoch), reason: reason,
                shippedSequence: status.shippedSequence, lastSequence: max(durableSequence, status.shippedSequence),
                at: Date())
            let directory = source?.directory
            condition.unlock()
            // The report is on disk before any save learns it was fenced.
            if let directory { try? WriterFiles.writeFenced(report, in: directory) }
            condition.lock()
            fencedReport = report
            status.fenced = reason
            status.diverged = reason
            metrics?.fenced.record(1)
            condition.broadcast()
            condition.unlock()
        }

        /// Drops the queued records at or below the shipped sequence (they are in order). The
        /// records left (they arrived while the dropped ones were on their way) start a new
        /// batch delay.
        func dropShipped() {
            var dropped = false
            while let head = queue.first, head.sequence <= status.shippedSequence {
                queueBytes -= head.byteCount
                queue.removeFirst()
                dropped = true
            }
            if queue.isEmpty {
                firstQueuedAt = nil
            } else if dropped {
                firstQueuedAt = .now
            }
        }
    }

    /// Connects to the target's servers and makes sure the stream exists. While no server
    /// answers, the shipper is made anyway and connects in the background, unless the target
    /// has a lease or ``ReplicationTarget/requireServersAtOpen``.
    ///
    /// - Throws: ``ReplicationError`` with code `server` when no server answers and the target
    ///   requires them.
    public init(target: ReplicationTarget) throws(ReplicationError) {
        self.target = target
        self.box = Box()
        let client = try Self.connect(target)
        self.client = client
        self.lease = try target.lease.map { (l) throws(ReplicationError) in
            try LeaseKeeper(client: client, target: target, lease: l)
        }
        watchLease()
    }

    /// A shipper for a standby that took the lease with `keeper` (``Follower/promoted()``).
    init(target: ReplicationTarget, keeper: LeaseKeeper) throws(ReplicationError) {
        self.target = target
        self.box = Box()
        self.client = try Self.connect(target)
        self.lease = keeper
        watchLease()
    }

    /// Fences the shipper off when its lease keeper finds the lease taken by another holder.
    private func watchLease() {
        if let lease {
            let box = self.box
            let stream = target.stream
            lease.onLost = { reason in box.fence(reason, stream: stream, holder: lease.lease.holder) }
        }
    }

    /// Refuses to ship under a lease when the stream's last message is of an epoch this store
    /// never wrote under (another writer took the stream over since), leaving the `FENCED`
    /// report; otherwise records the epoch this writer now ships under (`EPOCH`) before its
    /// first publish.
    private func checkEpoch(
        of last: StoredMessage?, state: StreamState, source: ShippingSource, takingOver takeOver: TakeOver?
    ) throws(ReplicationError) {
        guard let lease else { return }
        let lastMessage: StoredMessage?
        do {
            lastMessage =
                state.lastSequence == 0 || state.lastSequence == last?.sequence
                ? last : try client.message(stream: target.stream, sequence: state.lastSequence)
        } catch {
            throw ReplicationError(error, while: "reading stream \(target.stream)")
        }
        let streamEpoch = lastMessage?.headers[Header.epoch].flatMap(UInt64.init) ?? 0
        let written = WriterFiles.readEpoch(source.directory)?.epoch ?? 0
        if takeOver == nil, streamEpoch > written {
            let reason =
                "stream \(target.stream) was taken over by epoch \(streamEpoch) after this store last wrote to it (epoch \(written))"
            // Taken at attach, given back: the stream's writer is another one.
            lease.stop(release: true)
            lease.markLost(reason)
            box.locked { $0.source = source }
            box.fence(reason, stream: target.stream, holder: lease.lease.holder)
            throw ReplicationError(.fenced, reason)
        }
        try box.recordEpoch(lease.epoch, stream: target.stream, holder: lease.lease.holder, directory: source.directory)
        lease.startRenewing()
    }

    private static func connect(_ target: ReplicationTarget) throws(ReplicationError) -> JetStreamClient {
        let waiting = target.lease == nil && !target.requireServersAtOpen
        do {
            let client = try JetStreamClient(
                servers: target.servers, name: "objectgraph-shipper", timeout: target.timeout,
                waitingForServers: waiting)
            do {
                try client.ensureStream(target.streamConfiguration)
            } catch  where waiting && (error.code == .connectionFailed || error.code == .timeout) {
                // Made when the servers answer (``attach(_:)``'s comparison, on the thread).
            }
            return client
        } catch {
            throw ReplicationError(
                error, while: "connecting to \(target.servers.joined(separator: ",")) for stream \(target.stream)")
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
        let fullBatch = maxPart
        options.journal.onDurable = { records in
            box.condition.lock()
            if var report = box.fencedReport, let last = records.last, let directory = box.source?.directory {
                // A fenced writer's later saves are kept aside too: the report says so.
                report.lastSequence = max(report.lastSequence, last.sequence)
                box.fencedReport = report
                box.condition.unlock()
                try? WriterFiles.writeFenced(report, in: directory)
                return
            }
            defer { box.condition.unlock() }
            guard box.status.diverged == nil else { return }
            if let last = records.last { box.arrived(through: last.sequence) }
            if box.queue.isEmpty { box.firstQueuedAt = .now }
            for r in records where r.sequence > box.status.shippedSequence || !box.running {
                box.queue.append(r)
                box.queueBytes += r.byteCount
            }
            if box.queueBytes > maxBacklog {
                // Read again from the journal once the servers answer.
                box.queue.removeAll()
                box.queueBytes = 0
                box.firstQueuedAt = nil
                box.status.catchingUp = true
            }
            if box.idle || box.queueBytes >= fullBatch || box.status.catchingUp { box.condition.broadcast() }
            box.reportLag()
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
        try attach(source, takingOver: nil)
    }

    /// A standby promoted to writer (``Follower/promoted()``): its journal starts with a base
    /// numbered after every record the stream holds; the stream's history up to its last message
    /// is taken as shipped (the standby applied all of it), and the base ships first.
    struct TakeOver {
        /// The highest writer sequence any message of the stream names.
        var streamRecordSequence: UInt64
        /// The stream's last sequence, which the standby applied through.
        var streamLastSequence: UInt64
    }

    func attach(_ source: ShippingSource, takingOver takeOver: TakeOver?) throws(ReplicationError) {
        if let report = FencedReport.read(from: URL(fileURLWithPath: source.directory)) {
            throw ReplicationError(.fenced, "this store was fenced off stream \(report.stream): \(report)")
        }
        if let lease, takeOver == nil {
            let file = WriterFiles.readEpoch(source.directory)
            try lease.acquire(minimumEpoch: file?.epoch ?? 0)
        }
        // Without a lease, the servers may be away: the stream is compared with the journal on
        // the shipper's thread once they answer, and saves go on meanwhile.
        let examined: Examined?
        do {
            examined = try examine(source, takingOver: takeOver)
        } catch  where error.code == .server && lease == nil && takeOver == nil && !target.requireServersAtOpen {
            examined = nil
            box.locked { $0.status.lastError = error.message }
        }
        box.condition.lock()
        box.source = source
        box.metrics = ShipperMetrics(source.instruments)
        box.status.epoch = lease?.epoch ?? 0
        box.metrics?.fenced.record(0)
        if let lease { box.metrics?.epoch.record(Int64(lease.epoch)) }
        box.arrived(through: source.lastSequence)
        if let examined {
            box.take(examined, lastSequence: source.lastSequence)
        } else {
            box.examinationPending = true
        }
        box.running = true
        box.stopping = false
        box.threadDone = false
        box.reportLag()
        box.condition.unlock()
        let thread = Thread { [self] in self.shipLoop() }
        thread.name = "ObjectGraph shipper"
        thread.start()
    }

    /// What the comparison of the stream with the journal found: the last record shipped, a
    /// batch to resume, the stream's last sequence.
    struct Examined {
        var shipped: UInt64
        var resume: Resume?
        var streamSequence: UInt64
    }

    /// Compares the stream with the journal (the stream made first, when missing): the fence
    /// of ``attach(_:)``.
    private func examine(_ source: ShippingSource, takingOver takeOver: TakeOver?) throws(ReplicationError) -> Examined
    {
        let state: StreamState
        let last: StoredMessage?
        do {
            try client.ensureStream(target.streamConfiguration)
            state = try client.streamState(target.stream)
            last = try client.lastMessage(stream: target.stream, subject: target.logSubject)
        } catch {
            throw ReplicationError(error, while: "reading stream \(target.stream)")
        }
        var shipped: UInt64 = 0
        var resume: Resume?
        if let takeOver {
            guard state.lastSequence == takeOver.streamLastSequence else {
                throw ReplicationError(
                    .diverged,
                    "stream \(target.stream) moved to message \(state.lastSequence) while this standby took over at \(takeOver.streamLastSequence)"
                )
            }
            shipped = takeOver.streamRecordSequence
        } else if let last {
            let info = try LogMessageInfo(last)
            shipped = info.isLastPart ? info.sequence : info.previous
            // A part before the last is full: its size is the one the batch was cut with.
            if !info.isLastPart {
                resume = Resume(
                    first: info.first, last: info.sequence, nextPart: info.part + 1, partSize: last.payload.count)
            }
            let local = source.lastSequence
            guard info.sequence <= local else {
                throw ReplicationError(
                    .diverged,
                    "stream \(target.stream) holds record \(info.sequence) but this store's journal ends at \(local): the store was restored from an older copy, or another writer ships to this stream; refusing to fork its history"
                )
            }
            // The stream's last record must be this journal's record of that sequence.
            let localCRC: UInt32?
            do {
                localCRC = try Self.firstRecords(of: source, after: info.sequence - 1, count: 1).first
                    .flatMap { $0.sequence == info.sequence ? wireCRC($0.wire) : nil }
            } catch {
                throw ReplicationError(.store, "reading the local journal: \(error)")
            }
            if let localCRC, let expected = info.crc, localCRC != expected {
                throw ReplicationError(
                    .diverged,
                    "stream \(target.stream) holds a record \(info.sequence) that differs from this store's (checksum \(String(expected, radix: 16)) against \(String(localCRC, radix: 16))): another writer ships to this stream; refusing to fork its history"
                )
            }
        }
        try checkEpoch(of: last, state: state, source: source, takingOver: takeOver)
        return Examined(shipped: shipped, resume: resume, streamSequence: state.lastSequence)
    }

    /// Waits up to `timeout` for every record durable locally to ship, and says what did not:
    /// what a shutdown calls before it stops the shipper (``ReplicatedStore/close(timeout:)``,
    /// and the shipper's `Service` conformance). Blocks the calling thread.
    public func drain(timeout: Duration) -> ShippingReport {
        let (source, durable) = box.locked { ($0.source, $0.durableSequence) }
        let last = max(source?.lastSequence ?? 0, durable)
        var reason: String?
        do throws(ReplicationError) {
            try waitShipped(through: last, timeout: timeout)
        } catch {
            reason = error.message
        }
        let s = status
        return ShippingReport(
            lastSequence: last, shippedSequence: min(s.shippedSequence, last), stream: target.stream,
            reason: s.shippedSequence >= last ? nil : reason ?? s.lastError)
    }

    /// Stops the thread, and the renewal of the writer lease (left to lapse); what is not
    /// shipped stays in the journal for the next attach.
    public func stop() {
        stop(releasingLease: false)
    }

    /// ``stop()``; with `releasingLease`, the lease is marked released so that a standby takes
    /// the stream over at once (a writer that shut down with everything shipped).
    func stop(releasingLease: Bool) {
        box.condition.lock()
        box.stopping = true
        box.condition.broadcast()
        while !box.threadDone { box.condition.wait() }
        box.running = false
        let fenced = box.status.fenced != nil
        box.condition.unlock()
        lease?.stop(release: releasingLease && !fenced)
    }

    /// Stops renewing the lease without stopping the shipper, as a paused process would; `false`
    /// resumes. For tests of fencing.
    package func suspendLeaseRenewals(_ suspended: Bool) {
        lease?.suspendRenewals(suspended)
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
        let deadline = Date().addingTimeInterval(seconds(timeout))
        box.condition.lock()
        defer { box.condition.unlock() }
        while box.status.shippedSequence < sequence {
            if let fenced = box.status.fenced { throw ReplicationError(.fenced, fenced) }
            if let diverged = box.status.diverged { throw ReplicationError(.diverged, diverged) }
            if !box.condition.wait(until: deadline) {
                if box.status.shippedSequence >= sequence { return }
                throw ReplicationError(
                    .notAcknowledged,
                    "record \(sequence) is saved and durable locally, but stream \(target.stream) did not acknowledge it within \(timeout) (\(box.status.lastError ?? "no answer yet")); it ships when the servers answer"
                )
            }
        }
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
        let deadline = Date().addingTimeInterval(seconds(timeout))
        box.condition.lock()
        defer { box.condition.unlock() }
        box.baseRequested = true
        box.condition.broadcast()
        while box.baseRequested {
            if let fenced = box.status.fenced { throw ReplicationError(.fenced, fenced) }
            if let diverged = box.status.diverged { throw ReplicationError(.diverged, diverged) }
            if !box.condition.wait(until: deadline), box.baseRequested {
                throw ReplicationError(
                    .notAcknowledged,
                    "the base did not ship within \(timeout) (\(box.status.lastError ?? "no answer")); it ships when the servers answer"
                )
            }
        }
    }

    /// Removes from the stream everything older than the `keepingBases`-th newest base: the
    /// log records and bases before it. Followers and restores then start from a kept base;
    /// restores to points before it are no longer possible (``ReplicationError`` code
    /// `unavailable`), and a follower the stream was trimmed past is rebuilt from the newest
    /// base when it starts again.
    ///
    /// ```swift
    /// try replicated.compact()                          // a new base in the stream
    /// try replicated.shipper.trim(keepingBases: 2)      // keep the last two bases and what follows
    /// ```
    ///
    /// - Returns: the first stream sequence kept, or nil when the stream holds fewer bases
    ///   (nothing was removed).
    /// - Throws: ``ReplicationError`` with code `server`.
    @discardableResult
    public func trim(keepingBases count: Int = 1) throws(ReplicationError) -> UInt64? {
        let bases = try client.allBases(target)
        guard count >= 1, bases.count >= count else { return nil }
        let kept = bases[bases.count - count]
        do {
            try client.purge(stream: target.stream, below: kept.firstStreamSequence)
        } catch {
            throw ReplicationError(
                error, while: "trimming stream \(target.stream) below message \(kept.firstStreamSequence)")
        }
        return kept.firstStreamSequence
    }

    // MARK: The thread

    fileprivate struct StopWalk: Error {}

    /// A batch a crash cut short in the stream: its records, the next part to publish, and the
    /// part size it was cut with (the same parts again, whatever the target says now).
    struct Resume {
        var first: UInt64
        var last: UInt64
        var nextPart: Int
        var partSize: Int
    }

    private enum Work {
        case examine
        case base
        case catchUp
        case batch([ShippedRecord])
    }

    private func shipLoop() {
        var backoff = 0.05
        // A batch taken from the queue stays in hand until it is published: a retry publishes
        // the same records, under the same message IDs.
        var inHand: [ShippedRecord] = []
        while true {
            guard let work = nextWork(holding: &inHand) else { return }
            do {
                switch work {
                case .examine:
                    if let source = box.locked({ $0.source }) {
                        let examined = try examine(source, takingOver: nil)
                        box.locked { b in
                            b.take(examined, lastSequence: source.lastSequence)
                            b.status.lastError = nil
                            b.condition.broadcast()
                        }
                    }
                case .base:
                    if let source = box.locked({ $0.source }) { try shipCurrentBase(source) }
                    box.locked { b in
                        b.baseRequested = false
                        b.condition.broadcast()
                    }
                case .catchUp:
                    if let source = box.locked({ $0.source }) { try catchUp(source) }
                case .batch(let records):
                    if try publishLog(records) { inHand = [] } else { inHand = [] }
                }
                backoff = 0.05
            } catch let error as ReplicationError where error.code == .fenced {
                box.fence(error.message, stream: target.stream, holder: lease?.lease.holder ?? "")
            } catch let error as ReplicationError where error.code == .diverged {
                box.locked { b in
                    b.status.diverged = error.message
                    b.condition.broadcast()
                }
            } catch {
                box.locked { b in
                    b.status.lastError = "\(error)"
                    b.metrics?.failures.increment()
                    b.reportLag()
                }
                Thread.sleep(forTimeInterval: backoff)
                backoff = min(backoff * 2, 1)
            }
        }
    }

    /// Waits for work; nil when the shipper stops. Under the asynchronous policy a batch waits
    /// up to the batch delay for more records, unless it already fills a message.
    private func nextWork(holding inHand: inout [ShippedRecord]) -> Work? {
        let delay: Duration = if case .asynchronous = target.policy { target.batchDelay } else { .zero }
        let maxBatch = maxPart
        box.condition.lock()
        defer { box.condition.unlock() }
        while true {
            if box.stopping || box.status.diverged != nil {
                box.threadDone = true
                box.condition.broadcast()
                return nil
            }
            if box.examinationPending { inHand = []; return .examine }
            if box.baseRequested { return .base }
            if box.status.catchingUp { inHand = []; return .catchUp }
            if !inHand.isEmpty { return .batch(inHand) }
            box.dropShipped()
            if let since = box.firstQueuedAt, !box.queue.isEmpty {
                let due = since + delay
                if box.queueBytes < maxBatch, ContinuousClock.now < due {
                    _ = box.condition.wait(until: Date().addingTimeInterval(seconds(due - ContinuousClock.now)))
                    continue
                }
                // The records at the head that fit in one message (at least one).
                var bytes = 0
                var taken: [ShippedRecord] = []
                for r in box.queue {
                    if !taken.isEmpty, bytes + 4 + r.byteCount > maxBatch { break }
                    taken.append(r)
                    bytes += 4 + r.byteCount
                }
                inHand = taken
                return .batch(taken)
            }
            box.idle = true
            box.condition.wait()
            box.idle = false
        }
    }

    /// Publishes a batch of log records that follow the last shipped one. Records at or below
    /// it are left out; a gap before the first (records compacted into a base before they
    /// shipped) switches to catching up from the journal instead.
    ///
    /// - Returns: whether the batch was handled (published, or found shipped already).
    @discardableResult
    fileprivate func publishLog(_ batch: [ShippedRecord], startPart: Int = 0, partSize: Int? = nil) throws -> Bool {
        let (shipped, streamLast) = box.locked { ($0.status.shippedSequence, $0.status.streamSequence) }
        let records = batch.filter { $0.sequence > shipped }
        guard let first = records.first else { return true }
        if first.sequence > shipped + 1, startPart == 0 {
            box.locked { b in
                b.status.catchingUp = true
                b.condition.broadcast()
            }
            return true
        }
        let outgoing = OutgoingBatch(records, previous: shipped, maxPart: partSize ?? maxPart, epoch: try leaseEpoch())
        let span = box.locked { $0.metrics?.instruments.span("objectgraph.ship", kind: .producer) }
        defer { span?.end() }
        span?.attributes["objectgraph.records"] = records.count
        span?.attributes["objectgraph.first_sequence"] = Int(first.sequence)
        span?.attributes["objectgraph.last_sequence"] = Int(outgoing.last)
        span?.attributes["objectgraph.bytes"] = records.reduce(0) { $0 + $1.byteCount }
        span?.attributes["objectgraph.messages"] = outgoing.parts.count - startPart
        var last = streamLast
        for part in startPart..<outgoing.parts.count {
            let published: Published
            do {
                published = try publish(
                    subject: target.logSubject, payload: Array(outgoing.parts[part]),
                    headers: outgoing.headers(part: part), id: outgoing.messageID(part: part), after: last,
                    crcOf: { sequence in records.first { $0.sequence == sequence }.map { wireCRC($0.wire) } })
            } catch {
                span?.fail(error)
                throw error
            }
            switch published {
            case .stored(let sequence):
                last = sequence
            case .shippedThrough(let record, let sequence):
                // An earlier attempt of these records (a lost acknowledgement) is in the stream.
                box.locked { b in
                    b.status.shippedSequence = record
                    b.status.streamSequence = sequence
                    b.dropShipped()
                    b.reportLag()
                    b.condition.broadcast()
                }
                return true
            }
        }
        box.locked { b in
            b.status.shippedSequence = outgoing.last
            b.status.streamSequence = last
            b.status.lastError = nil
            b.resume = nil
            b.dropShipped()
            b.metrics?.shippedRecords.increment(by: records.count)
            b.metrics?.messages.increment(by: outgoing.parts.count - startPart)
            b.reportLag()
            b.condition.broadcast()
        }
        return true
    }

    /// Ships what the journal holds past the last shipped record: its base first when the
    /// records right after the last shipped one were compacted into it; a batch a crash cut
    /// short in the stream is completed first, part by part.
    private func catchUp(_ source: ShippingSource) throws {
        let (shipped, resume) = box.locked { ($0.status.shippedSequence, $0.resume) }
        let walk = CatchUpWalk(shipped: shipped, resume: resume, maxBatch: maxPart)
        try source.forEachRecord(after: shipped) { r in try walk.take(r, shipper: self) }
        try walk.finish(shipper: self)
        box.locked { b in
            b.dropShipped()
            b.status.catchingUp = false
            b.condition.broadcast()
        }
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

    /// The catch-up's walk over the journal: a base the journal starts with ships as a base;
    /// the rest as log batches, the one a crash cut short first, exactly as it was.
    private final class CatchUpWalk {
        let shipped: UInt64
        let resume: Resume?
        let maxBatch: Int
        var pendingBase: [ShippedRecord] = []
        var batch: [ShippedRecord] = []
        var bytes = 0
        var first = true

        init(shipped: UInt64, resume: Resume?, maxBatch: Int) {
            self.shipped = shipped
            self.resume = resume
            self.maxBatch = maxBatch
        }

        func take(_ r: ShippedRecord, shipper: JournalShipper) throws {
            // A journal that starts with a base: its schema record, then base records. The
            // schema record may directly follow the last shipped record (everything was shipped
            // before the compaction, or a migration, wrote the base), so a schema record first
            // is held until the next record tells whether a base follows it.
            if first,
                pendingBase.isEmpty
                    ? (r.sequence > shipped + 1 || r.kind == .base || r.kind == .schema) : r.kind == .base
            {
                pendingBase.append(r)
                return
            }
            try releaseHeld(shipper: shipper)
            first = false
            if let resume, r.sequence <= resume.last {
                batch.append(r)
                if r.sequence == resume.last {
                    try shipper.publishLog(batch, startPart: resume.nextPart, partSize: resume.partSize)
                    batch = []
                }
                return
            }
            if !batch.isEmpty, bytes + 4 + r.byteCount > maxBatch { try flush(shipper) }
            batch.append(r)
            bytes += 4 + r.byteCount
        }

        func finish(shipper: JournalShipper) throws {
            try releaseHeld(shipper: shipper)
            try flush(shipper)
        }

        /// Ships the records held at the start of the catch-up: as a base when a base record is
        /// among them, else (a log segment's schema record) with the log.
        private func releaseHeld(shipper: JournalShipper) throws {
            guard !pendingBase.isEmpty else { return }
            let held = pendingBase
            pendingBase = []
            first = false
            if held.contains(where: { $0.kind == .base }) {
                try shipper.publishBase(held)
            } else {
                for h in held { try take(h, shipper: shipper) }
            }
        }

        private func flush(_ shipper: JournalShipper) throws {
            guard !batch.isEmpty else { return }
            try shipper.publishLog(batch)
            batch = []
            bytes = 0
        }
    }

    /// Publishes a base (its schema record and base records) on the base subject.
    fileprivate func publishBase(_ records: [ShippedRecord]) throws {
        guard let covers = records.last?.sequence else { return }
        let parts = split(RecordBlob.encode(records), maxPart: maxPart)
        var last = box.locked { $0.status.streamSequence }
        for (i, part) in parts.enumerated() {
            var headers = [Header.covers: String(covers), Header.part: String(i), Header.parts: String(parts.count)]
            if let epoch = try leaseEpoch() { headers[Header.epoch] = String(epoch) }
            switch try publish(
                subject: target.baseSubject, payload: Array(part), headers: headers,
                id: "base.\(covers).\(i).\(headers[Header.epoch] ?? "0")",
                after: last)
            {
            case .stored(let sequence): last = sequence
            case .shippedThrough:
                throw ReplicationError(.diverged, "stream \(target.stream) moved while a base was being published")
            }
        }
        box.locked { b in
            b.status.streamSequence = last
            if b.status.shippedSequence < covers { b.status.shippedSequence = covers }
            b.dropShipped()
            b.condition.broadcast()
        }
    }

    /// The epoch to publish under, or nil without a lease. Refuses while the lease is not
    /// surely held: `fenced` once lost to another holder; otherwise a passing error (the
    /// servers are away, or a renewal is late), retried.
    private func leaseEpoch() throws -> UInt64? {
        guard let lease else { return nil }
        if let lost = lease.lost { throw ReplicationError(.fenced, lost) }
        guard lease.isHeld else {
            throw ReplicationError(
                .notAcknowledged, "the writer lease of stream \(target.stream) is not confirmed; waiting to renew it")
        }
        let epoch = lease.epoch
        if let directory = box.locked({ $0.source?.directory }) {
            try box.recordEpoch(epoch, stream: target.stream, holder: lease.lease.holder, directory: directory)
        }
        return epoch
    }

    private var maxPart: Int { max(4096, min(target.maxMessageBytes, client.maxPayload) - 4096) }

    private enum Published {
        /// Stored at this stream sequence.
        case stored(UInt64)
        /// The stream already holds a message with these records up to the first value, at the
        /// stream sequence of the second.
        case shippedThrough(UInt64, UInt64)
    }

    /// One publish with the expected-last-sequence fence. A refusal by the fence is checked:
    /// if the stream's last message is this very one, or an earlier attempt at the same
    /// records (an acknowledgement lost on the way), it counts as published; otherwise another
    /// writer wrote, and the history has diverged.
    ///
    /// `crcOf` gives the checksum of a record of the batch being published, by sequence: a
    /// message in the stream is an earlier attempt of this batch only if its last record is one
    /// of this batch's, with the same checksum (a copy of this store that went on writing
    /// publishes other records under the same sequences).
    private func publish(
        subject: String, payload: [UInt8], headers: [String: String], id: String, after streamLast: UInt64,
        crcOf: (UInt64) -> UInt32? = { _ in nil }
    ) throws -> Published {
        let ack: PublishAck
        do {
            ack = try client.publish(
                subject: subject, payload: payload, headers: headers, messageID: id, expectedLastSequence: streamLast,
                timeout: target.timeout)
        } catch {
            guard error.code == .wrongLastSequence else { throw error }
            return try resolveFence(subject: subject, headers: headers, after: streamLast, crcOf: crcOf)
        }
        box.locked { $0.status.messagesPublished += 1 }
        return .stored(ack.duplicate ? max(ack.sequence, streamLast) : ack.sequence)
    }

    private func resolveFence(
        subject: String, headers: [String: String], after streamLast: UInt64, crcOf: (UInt64) -> UInt32?
    ) throws -> Published {
        let state = try client.streamState(target.stream)
        let last =
            state.lastSequence > streamLast
            ? try client.message(stream: target.stream, sequence: state.lastSequence) : nil
        if let lease, let last, let theirs = last.headers[Header.epoch].flatMap(UInt64.init), theirs > lease.epoch {
            let reason =
                "stream \(target.stream) was taken over by epoch \(theirs) (this writer's is \(lease.epoch)); it refused this writer's publish after message \(streamLast)"
            lease.markLost(reason)
            throw ReplicationError(.fenced, reason)
        }
        if let last, last.subject == subject {
            // The epoch aside: a retry may go out under a lease taken again meanwhile.
            let ours = last.headers.filter { $0.key.hasPrefix("OG-") && $0.key != Header.epoch }
            if ours == headers.filter({ $0.key != Header.epoch }) { return .stored(state.lastSequence) }
            if subject == target.logSubject, let info = try? LogMessageInfo(last), info.isLastPart,
                String(info.first) == headers[Header.first], headers[Header.part] == "0", info.parts == 1,
                let crc = info.crc, crcOf(info.sequence) == crc
            {
                return .shippedThrough(info.sequence, state.lastSequence)
            }
        }
        throw ReplicationError(
            .diverged,
            "stream \(target.stream) moved to sequence \(state.lastSequence) while this writer expected \(streamLast): another writer ships to it; stopped shipping to keep one history"
        )
    }
}

/// A duration in seconds, as `Date` arithmetic takes it.
func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }

/// A shipper's metrics (Docs/Observability.md): its store's `store` dimension and factory.
struct ShipperMetrics {
    let instruments: StoreInstruments
    /// `objectgraph_shipping_lag_records`: records durable locally, not acknowledged.
    let lagRecords: Gauge
    /// `objectgraph_shipping_lag_seconds`: how long the oldest of them has waited.
    let lagSeconds: Gauge
    /// `objectgraph_shipped_records_total`.
    let shippedRecords: Counter
    /// `objectgraph_shipped_messages_total`, counting parts.
    let messages: Counter
    /// `objectgraph_shipping_failures_total`: publishes that failed and will be retried.
    let failures: Counter
    /// `objectgraph_writer_epoch`: the epoch a writer with a lease ships under.
    let epoch: Gauge
    /// `objectgraph_writer_fenced`: 1 once the writer lost its stream.
    let fenced: Gauge

    init(_ instruments: StoreInstruments) {
        self.instruments = instruments
        lagRecords = instruments.gauge("objectgraph_shipping_lag_records")
        lagSeconds = instruments.gauge("objectgraph_shipping_lag_seconds")
        shippedRecords = instruments.counter("objectgraph_shipped_records_total")
        messages = instruments.counter("objectgraph_shipped_messages_total")
        failures = instruments.counter("objectgraph_shipping_failures_total")
        epoch = instruments.gauge("objectgraph_writer_epoch")
        fenced = instruments.gauge("objectgraph_writer_fenced")
    }
}

/// What a shipper left unshipped when it was drained (``JournalShipper/drain(timeout:)``): a
/// shutdown reports it rather than dropping it silently. The records are safe in the local
/// journal (durable per the store's policy) and ship when the store is opened again with the
/// same target; until then they exist on this machine only.
public struct ShippingReport: Sendable, Hashable, CustomStringConvertible {
    /// The local journal's last record.
    public var lastSequence: UInt64
    /// The last record the stream acknowledged.
    public var shippedSequence: UInt64
    /// The stream.
    public var stream: String
    /// Why the rest did not ship (the servers' last error, or the timeout), when some did not.
    public var reason: String?

    /// Records saved locally that the stream has not acknowledged.
    public var unshippedRecords: UInt64 { lastSequence > shippedSequence ? lastSequence - shippedSequence : 0 }

    /// Whether every record shipped.
    public var isComplete: Bool { unshippedRecords == 0 }

    public var description: String {
        isComplete
            ? "every record through \(lastSequence) shipped to stream \(stream)"
            : "\(unshippedRecords) record\(unshippedRecords == 1 ? "" : "s") (\(shippedSequence + 1)...\(lastSequence)) are saved locally but not shipped to stream \(stream) (\(reason ?? "no answer")); they ship when the store is opened again with this target"
    }
}
