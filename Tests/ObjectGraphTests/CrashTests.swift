import Foundation
import ObjectGraph
import Testing

@Entity final class CrashRecord {
    var seq: Int64 = 0
    var half: Int8 = 0
    var payload: String = ""
}

@Entity final class Counter {
    var value: Int64 = 0
}

@Entity final class CrashItem {
    @Attribute(.unique) var id: Int64 = 0
    var round: Int64 = 0
}

/// The writer's schema (`Tools/CrashWriter`), all of it.
private func crashSchema() throws -> Schema { try Schema(CrashRecord.self, Counter.self, CrashItem.self) }

/// Rounds of the kill test: short in `make test`, long in `make soak` (OBJECTGRAPH_CRASH_ROUNDS).
let crashRounds = ProcessInfo.processInfo.environment["OBJECTGRAPH_CRASH_ROUNDS"].flatMap(Int.init) ?? 20

@Suite("Crash: SIGKILL a writer mid-save", .serialized)
struct CrashTests {
    static var writerURL: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(
            "objectgraph-crash-writer")
    }

    /// Starts the writer with `arguments`, SIGKILLs it after 20–150 ms, and returns the highest
    /// save it acknowledged (-1 for none).
    static func killWriter(arguments: [String], using rng: inout SystemRandomNumberGenerator) throws -> Int64 {
        let process = Process()
        process.executableURL = writerURL
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        usleep(UInt32.random(in: 20_000...150_000, using: &rng))
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        var acknowledged: Int64 = -1
        for line in output.split(separator: "\n") where line.hasPrefix("ack ") {
            if let n = Int64(line.dropFirst(4)) { acknowledged = max(acknowledged, n) }
        }
        return acknowledged
    }

    @Test(arguments: ["always", "none"])
    func killedWriterLosesNoAcknowledgedSaveAndLeavesNoPartialSave(durability: String) throws {
        let dir = temporaryStoreDirectory("crash-\(durability)")
        var rng = SystemRandomNumberGenerator()
        var acknowledged: Int64 = -1
        var next: Int64 = 0
        print("crash test: \(crashRounds) rounds, durability \(durability), store \(dir.path)")
        for round in 0..<crashRounds {
            acknowledged = max(
                acknowledged, try Self.killWriter(arguments: [dir.path, String(next), durability], using: &rng))

            let store = try ObjectStore.open(at: dir, schema: try crashSchema())
            let records = try store.context.objects(of: CrashRecord.self)
            var halves: [Int64: Set<Int8>] = [:]
            for r in records { halves[r.seq, default: []].insert(r.half) }
            let counter = try store.context.objects(of: Counter.self).first?.value ?? -1
            let highest = halves.keys.max() ?? -1
            // Every acknowledged save is there (a process crash loses nothing in either policy).
            #expect(highest >= acknowledged, "round \(round): acknowledged \(acknowledged), found up to \(highest)")
            // Saves are atomic: both halves and the counter, or nothing; and no gaps.
            #expect(halves.values.allSatisfy { $0 == [0, 1] }, "round \(round): a save is half there")
            #expect(Set(halves.keys) == (highest < 0 ? [] : Set(0...highest)), "round \(round): gap in saves")
            #expect(counter == highest, "round \(round): counter \(counter) vs highest save \(highest)")
            try store.close()
            next = highest + 1
            acknowledged = highest
        }
        try? FileManager.default.removeItem(at: dir)
    }

    @Test func aSyncOperationKilledDuringItsSaveIsAllThereOrNotThereAndSweepsNothingElse() throws {
        let dir = temporaryStoreDirectory("crash-sync")
        var rng = SystemRandomNumberGenerator()
        var acknowledged: Int64 = -1
        var next: Int64 = 0
        print("sync crash test: \(crashRounds) rounds, store \(dir.path)")
        for round in 0..<crashRounds {
            acknowledged = max(
                acknowledged, try Self.killWriter(arguments: [dir.path, String(next), "always", "sync"], using: &rng))

            let store = try ObjectStore.open(at: dir, schema: try crashSchema())
            let items = try store.context.objects(of: CrashItem.self)
            let rounds = Set(items.map(\.round))
            let last = rounds.max() ?? -1
            // A sync is one record: the store is exactly the state after some complete sync.
            #expect(rounds.count <= 1, "round \(round): items of rounds \(rounds.sorted()): a sync is partly there")
            if last >= 0 {
                #expect(
                    Set(items.map(\.id)) == Set(last..<last + 20),
                    "round \(round): the items of sync \(last) are not exactly its payload")
            }
            #expect(last >= acknowledged, "round \(round): acknowledged sync \(acknowledged), found \(last)")
            try store.close()
            next = last + 1
            acknowledged = last
        }
        try? FileManager.default.removeItem(at: dir)
    }
}
