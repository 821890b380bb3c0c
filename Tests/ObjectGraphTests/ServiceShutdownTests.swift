import Foundation
import ObjectGraph
import Testing

/// Reads a child's standard output line by line as it comes.
private final class LineReader: @unchecked Sendable {
    private let lock = NSCondition()
    private var buffer = Data()
    private var lines: [String] = []
    private var ended = false

    init(_ handle: FileHandle) {
        handle.readabilityHandler = { [self] h in
            let data = h.availableData
            lock.lock()
            defer { lock.unlock() }
            if data.isEmpty {
                ended = true
                h.readabilityHandler = nil
            } else {
                buffer.append(data)
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    lines.append(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                    buffer.removeSubrange(buffer.startIndex...newline)
                }
            }
            lock.broadcast()
        }
    }

    /// Waits until `predicate` holds for the lines so far, or the output ended, or `bound` passed
    /// (a generous outer bound, never the expected time).
    func wait(bound: TimeInterval, until predicate: ([String]) -> Bool) -> [String] {
        let deadline = Date().addingTimeInterval(bound)
        lock.lock()
        defer { lock.unlock() }
        while !predicate(lines), !ended, lock.wait(until: deadline) {}
        return lines
    }

    /// Waits for the end of the output (bounded), then returns every line.
    func all(bound: TimeInterval) -> [String] { wait(bound: bound) { _ in false } }
}

@Suite("Services: SIGTERM in the middle of a write load", .serialized)
struct ServiceShutdownTests {
    /// The child (`objectgraph-crash-writer service DIR`) runs an `AsyncStore` and four writing
    /// tasks in a `ServiceGroup`; a SIGTERM while they write must close the store with every
    /// transaction it acknowledged in the journal, and exit 0.
    @Test(arguments: 0..<3)
    func sigtermDuringWritesLosesNoAcknowledgedSave(round: Int) throws {
        let dir = temporaryStoreDirectory("service-sigterm-\(round)")
        let process = Process()
        process.executableURL = CrashTests.writerURL
        process.arguments = ["service", dir.path]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        let reader = LineReader(out.fileHandleForReading)
        try process.run()
        // Under load: some hundreds of acknowledged transactions (more each round).
        let wanted = 200 * (round + 1)
        let before = reader.wait(bound: 300) { $0.count >= wanted }
        #expect(before.count >= wanted, "the child acknowledged \(before.count) transactions before the bound")
        kill(process.processIdentifier, SIGTERM)
        let lines = reader.all(bound: 300)
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 0)
        #expect(lines.last == "closed")
        let acknowledged = Set(lines.compactMap { $0.hasPrefix("ack ") ? Int64($0.dropFirst(4)) : nil })
        #expect(acknowledged.count >= before.count)
        // The lock was released and the journal holds every acknowledged transaction.
        let store = try ObjectStore.open(at: dir, schema: try Schema(CrashRecord.self, Counter.self, CrashItem.self))
        let stored = Set(try store.context.objects(of: CrashRecord.self).map(\.seq))
        let missing = acknowledged.subtracting(stored)
        #expect(missing.isEmpty, "acknowledged but missing after reopen: \(missing.sorted().prefix(10))")
        print("service SIGTERM round \(round): \(acknowledged.count) acknowledged, \(stored.count) stored")
        try store.close()
    }
}
