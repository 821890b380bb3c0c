import Foundation
import ObjectGraph
import Testing

@testable import GraphJournal

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
    static func killWriter(
        arguments: [String], environment: [String: String] = [:], using rng: inout SystemRandomNumberGenerator
    ) throws -> Int64 {
        let process = Process()
        process.executableURL = writerURL
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
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

    /// An encrypted writer killed while it saves and while it rotates its key (a compaction
    /// under a new current key, every round the other of two keys): nothing acknowledged is
    /// lost, and no nonce is ever used for two different sealed payloads. Every sealed record
    /// found in any file of the directory after any kill (live, torn-off, compaction leftovers)
    /// is keyed by what its nonce is unique for (key, journal, writer run, counter): the same
    /// key must always carry the same bytes.
    @Test func anEncryptedWriterKilledMidSaveAndMidRotationLosesNothingAndNeverReusesANonce() throws {
        let dir = temporaryStoreDirectory("crash-encrypted")
        defer { try? FileManager.default.removeItem(at: dir) }
        let k1 = "k1 " + String(repeating: "1f", count: 32)
        let k2 = "k2 " + String(repeating: "2e", count: 32)
        var rng = SystemRandomNumberGenerator()
        var acknowledged: Int64 = -1
        var next: Int64 = 0
        var nonces: [String: [UInt8]] = [:]
        var reused: [String] = []
        print("encrypted crash test: \(crashRounds) rounds, store \(dir.path)")
        for round in 0..<crashRounds {
            let keys = round % 2 == 0 ? k1 + "\n" + k2 : k2 + "\n" + k1
            acknowledged = max(
                acknowledged,
                try Self.killWriter(
                    arguments: [dir.path, String(next), "always"],
                    environment: ["OBJECTGRAPH_CRASH_KEYS": keys, "OBJECTGRAPH_CRASH_ROTATE": "1"], using: &rng))
            for (nonce, sealed) in try Self.sealedRecords(in: dir) {
                if let known = nonces[nonce], known != sealed { reused.append(nonce) }
                nonces[nonce] = sealed
            }
            var options = StoreOptions()
            options.encryption = try JournalEncryption(keyFile: keys)
            let store = try ObjectStore.open(at: dir, schema: try crashSchema(), options: options)
            let records = try store.context.objects(of: CrashRecord.self)
            var halves: [Int64: Set<Int8>] = [:]
            for r in records { halves[r.seq, default: []].insert(r.half) }
            let highest = halves.keys.max() ?? -1
            #expect(highest >= acknowledged, "round \(round): acknowledged \(acknowledged), found up to \(highest)")
            #expect(halves.values.allSatisfy { $0 == [0, 1] }, "round \(round): a save is half there")
            #expect(Set(halves.keys) == (highest < 0 ? [] : Set(0...highest)), "round \(round): gap in saves")
            try store.close()
            next = highest + 1
            acknowledged = highest
        }
        #expect(reused.isEmpty, "nonces used for two different payloads: \(reused)")
        #expect(nonces.count > crashRounds, "too few sealed records were seen to check anything")
        print("encrypted crash test: \(nonces.count) sealed records checked, \(acknowledged + 1) saves")
    }

    /// Every sealed record that passes its checksum in any segment file of `dir` (`.tmp` ones
    /// included), keyed by key, journal, writer run and counter, with its sealed bytes.
    static func sealedRecords(in dir: URL) throws -> [(String, [UInt8])] {
        var found: [(String, [UInt8])] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: dir.path)
        where name.contains(".log") || name.contains(".base") {
            let path = dir.path + "/" + name
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            for entry in try Journal.salvageableRecords(inSegment: path, from: 0) {
                let start = Int(entry.offset)
                guard bytes[start + JournalFormat.RecordHeaderField.flags] & JournalFormat.flagSealed != 0 else {
                    continue
                }
                let payload = Array(
                    bytes[
                        (start + JournalFormat.recordHeaderSize)..<(start + JournalFormat.recordHeaderSize
                            + entry.storedLength)])
                let header = try payload.withUnsafeBytes { SealHeader.parse($0) }.get()
                let nonce = "\(header.keyID)/\(header.journalID)/\(header.salt)/\(header.counter)"
                found.append((nonce, Array(payload[header.size...])))
            }
        }
        return found
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
