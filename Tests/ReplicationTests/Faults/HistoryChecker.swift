import Foundation
import GraphJournal
import NATSJetStream
import ObjectGraphReplication

/// What the history checker found in a stream's messages.
struct HistoryReport: Sendable {
    var logMessages = 0
    var baseMessages = 0
    var batches = 0
    var bases = 0
    /// Every record of the history, in stream order.
    var recordSequences: [UInt64] = []
    /// The transaction records' sequences (each is one save of a writer).
    var transactionSequences: [UInt64] = []
    /// The `OG-Epoch` values met, each once, in stream order (empty: no message carries one).
    var epochs: [UInt64] = []
    /// How many messages carry each epoch.
    var messagesPerEpoch: [UInt64: Int] = [:]
    /// Batches whose first parts were published but never their last (a writer killed or
    /// fenced mid-batch); readers drop them, and so does the history.
    var abandonedBatches = 0
    /// What breaks the history: each one a failure.
    var problems: [String] = []

    var lastSequence: UInt64 { recordSequences.last ?? 0 }
}

/// The checks of the fault checker on a stream's messages, apart from the processes and
/// servers that made them, so that tests feed it doctored histories.
enum HistoryChecker {
    static let epochHeader = "OG-Epoch"

    /// Every message of `target`'s stream (both subjects), in stream order.
    static func readStream(_ target: ReplicationTarget) throws -> [StoredMessage] {
        let client = try JetStreamClient(servers: target.servers, name: "fault-checker", timeout: .seconds(5))
        defer { client.close() }
        let last = try client.streamState(target.stream).lastSequence
        guard last > 0 else { return [] }
        let reader = try client.reader(stream: target.stream, from: 1)
        defer { reader.close() }
        var messages: [StoredMessage] = []
        var empty = 0
        while (messages.last?.sequence ?? 0) < last {
            let batch = try reader.next(max: 512, timeout: .seconds(2))
            if batch.isEmpty {
                // The stream holds them: an empty fetch is a slow server. A few in a row are not.
                empty += 1
                if empty > 30 {
                    throw ReplicationError(
                        .server, "stream \(target.stream): no message after \(messages.last?.sequence ?? 0) of \(last)")
                }
                continue
            }
            empty = 0
            messages += batch
        }
        return messages
    }

    /// Checks that `messages` (a stream's, in order) hold one linear history: `OG-Epoch` never
    /// decreases; each batch's parts come together and in order; every record decodes and
    /// checks; each writer sequence appears once and sequences only grow; each batch's
    /// `OG-Prev` is the record before it in the stream, or the covers of a base that stands
    /// between them.
    static func check(_ messages: [StoredMessage], logSubject: String, baseSubject: String) -> HistoryReport {
        var report = HistoryReport()
        var lastEpoch: UInt64?
        var seen: Set<UInt64> = []
        var lastRecord: UInt64 = 0
        // Where a base completed since the last log batch: its covers may be the next OG-Prev.
        var basesSinceBatch: [UInt64] = []
        var batch: (first: UInt64, last: UInt64, count: Int, previous: UInt64, parts: Int, next: Int, at: UInt64)?
        var batchBytes: [UInt8] = []
        var base: (parts: Int, next: Int)?
        var baseBytes: [UInt8] = []
        var previousStreamSequence: UInt64 = 0

        func problem(_ text: String) { report.problems.append(text) }

        for message in messages {
            let at = message.sequence
            if at <= previousStreamSequence { problem("stream message \(at) comes after \(previousStreamSequence)") }
            previousStreamSequence = at
            let h = message.headers
            if let epochText = h[epochHeader] {
                if let epoch = UInt64(epochText) {
                    if let lastEpoch, epoch < lastEpoch {
                        problem("stream message \(at) carries epoch \(epoch) after epoch \(lastEpoch)")
                    }
                    if report.epochs.last != epoch { report.epochs.append(epoch) }
                    report.messagesPerEpoch[epoch, default: 0] += 1
                    lastEpoch = max(lastEpoch ?? 0, epoch)
                } else {
                    problem("stream message \(at): \(epochHeader) \(epochText) is not a number")
                }
            }
            if message.subject == logSubject {
                report.logMessages += 1
                guard let first = h["OG-First"].flatMap(UInt64.init), let last = h["OG-Seq"].flatMap(UInt64.init),
                    let count = h["OG-Count"].flatMap(Int.init), let previous = h["OG-Prev"].flatMap(UInt64.init),
                    let part = h["OG-Part"].flatMap(Int.init), let parts = h["OG-Parts"].flatMap(Int.init),
                    parts >= 1, part >= 0, part < parts, count >= 1, first <= last
                else {
                    problem("stream message \(at) on \(logSubject) lacks the OG- headers")
                    continue
                }
                if part == 0 {
                    if batch != nil { report.abandonedBatches += 1 }
                    batch = (first, last, count, previous, parts, 0, at)
                    batchBytes = []
                }
                guard let current = batch, current.first == first, current.last == last, current.next == part,
                    current.parts == parts
                else {
                    problem(
                        "stream message \(at) is part \(part) of records \(first)...\(last), which no batch in progress expects (parts of two batches interleaved)"
                    )
                    batch = nil
                    continue
                }
                batchBytes += message.payload
                batch?.next = part + 1
                guard part == parts - 1 else { continue }
                batch = nil
                report.batches += 1
                let records: [ShippedRecord]
                do { records = try decode(batchBytes) } catch {
                    problem("records \(first)...\(last) ending at stream message \(at) do not decode: \(error)")
                    continue
                }
                if records.count != count || records.first?.sequence != first || records.last?.sequence != last {
                    problem("stream message \(at): its batch does not hold records \(first)...\(last) (\(count))")
                }
                if previous != lastRecord && !basesSinceBatch.contains(previous) {
                    problem(
                        "records \(first)...\(last) (stream message \(current.at)) follow record \(previous) (OG-Prev), but the history's last record is \(lastRecord)\(basesSinceBatch.isEmpty ? "" : " and the bases since cover \(basesSinceBatch)")"
                    )
                }
                basesSinceBatch = []
                for record in records {
                    if !seen.insert(record.sequence).inserted {
                        problem("record \(record.sequence) appears again at stream message \(at)")
                    } else if record.sequence <= lastRecord {
                        problem("record \(record.sequence) at stream message \(at) comes after record \(lastRecord)")
                    }
                    lastRecord = max(lastRecord, record.sequence)
                    report.recordSequences.append(record.sequence)
                    if record.kind == .transaction { report.transactionSequences.append(record.sequence) }
                }
            } else if message.subject == baseSubject {
                report.baseMessages += 1
                guard let part = h["OG-Part"].flatMap(Int.init), let parts = h["OG-Parts"].flatMap(Int.init),
                    let covers = h["OG-Covers"].flatMap(UInt64.init), parts >= 1, part < parts
                else {
                    problem("stream message \(at) on \(baseSubject) lacks the OG- headers of a base")
                    continue
                }
                if part == 0 {
                    base = (parts, 0)
                    baseBytes = []
                }
                guard let current = base, current.next == part, current.parts == parts else {
                    problem("stream message \(at) is part \(part) of a base no base in progress expects")
                    base = nil
                    continue
                }
                baseBytes += message.payload
                base?.next = part + 1
                guard part == parts - 1 else { continue }
                base = nil
                report.bases += 1
                do { _ = try decode(baseBytes) } catch {
                    problem("the base ending at stream message \(at) does not decode: \(error)")
                }
                if covers < lastRecord {
                    problem("the base ending at stream message \(at) covers \(covers), behind record \(lastRecord)")
                }
                basesSinceBatch.append(covers)
                lastRecord = max(lastRecord, covers)
            } else {
                problem("stream message \(at) is on \(message.subject), neither subject of the store")
            }
        }
        if batch != nil { report.abandonedBatches += 1 }
        return report
    }

    /// The records of a blob (each its wire form after its length, u32 little-endian), checked.
    static func decode(_ blob: [UInt8]) throws -> [ShippedRecord] {
        var offset = 0
        var records: [ShippedRecord] = []
        while offset < blob.count {
            guard blob.count - offset >= 4 else { throw NATSServerError(description: "a truncated length") }
            let n = (0..<4).reduce(0) { $0 | Int(blob[offset + $1]) << (8 * $1) }
            offset += 4
            guard n <= blob.count - offset else { throw NATSServerError(description: "a record runs past the end") }
            records.append(try ShippedRecord(wire: Array(blob[offset..<offset + n])))
            offset += n
        }
        return records
    }

    /// An acknowledged save as a writer logged it.
    struct Acknowledged: Sendable, Hashable {
        var key: String
        var sequence: UInt64
        /// CLOCK_MONOTONIC when save() returned.
        var nanoseconds: UInt64
    }

    /// The complete lines of a key log ("KEY SEQUENCE NANOSECONDS"); a last line without its
    /// newline was cut by a kill and is not counted.
    static func readKeyLog(_ url: URL) -> [Acknowledged] {
        guard let data = FileManager.default.contents(atPath: url.path) else { return [] }
        var lines = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        lines.removeLast()  // after the last newline: empty, or a line cut by a kill
        return lines.compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 3, let sequence = UInt64(fields[1]), let ns = UInt64(fields[2]) else { return nil }
            return Acknowledged(key: String(fields[0]), sequence: sequence, nanoseconds: ns)
        }
    }

    /// The acknowledged saves a state lacks, or holds under another sequence: `state` maps each
    /// key to the sequence of the record that inserted it (the object's size).
    static func lost(_ acknowledged: [Acknowledged], in state: [String: Int]) -> [String] {
        acknowledged.compactMap { ack in
            guard let sequence = state[ack.key] else { return "\(ack.key) (record \(ack.sequence)) is missing" }
            return sequence == Int(ack.sequence)
                ? nil : "\(ack.key) was acknowledged as record \(ack.sequence) but the state has it as \(sequence)"
        }
    }
}
