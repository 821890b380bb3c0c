import Foundation
import Glibc
import Testing
@testable import GraphJournal

/// Timings, run only with GRAPHJOURNAL_BENCH=1 in a release build. Temporary.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["GRAPHJOURNAL_BENCH"] == "1"), .serialized)
struct JournalBenchmarkTests {
    func seconds(_ body: () throws -> Void) rethrows -> Double {
        let start = ContinuousClock.now
        try body()
        let d = ContinuousClock.now - start
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    func people(_ i: Int) -> [UInt8] {
        // ~100 bytes, like one "people" upsert: id, name, email, age, city, score.
        var bytes: [UInt8] = []
        bytes.appendLittleEndian(Int64(i))
        bytes += Array("Person \(i)".utf8) + [0]
        bytes += Array("p\(i)@example.com".utf8) + [0]
        bytes.appendLittleEndian(UInt8(i % 90))
        bytes += Array("City \(i % 1000)".utf8) + [0]
        bytes.appendLittleEndian((Double(i) * 1.5).bitPattern)
        while bytes.count < 100 { bytes.append(UInt8(bytes.count)) }
        return bytes
    }

    @Test func crc32cThroughput() {
        let data = [UInt8](repeating: 0x5A, count: 100 << 20)
        var crc: UInt32 = 0
        let t = seconds { crc = data.withUnsafeBytes { CRC32C.checksum($0) } }
        print("BENCH crc32c: 100 MiB in \(t) s = \(100 / t) MiB/s (crc \(crc))")
    }

    @Test func appendThroughputNoneAndReadVerify() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let payloads = (0..<100_000).map(people)
        let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
        let t = try seconds { for p in payloads { try journal.append(p) } }
        let stats = journal.stats
        try journal.close()
        print("BENCH append .none: 100k x 100 B in \(t) s = \(Double(100_000) / t) appends/s; raw \(stats.rawPayloadBytes) stored \(stats.storedPayloadBytes) on disk \(stats.bytesOnDisk)")

        // Grow to ~100 MB (1M records) for the read side.
        let big = try Journal.open(directory: directory, options: JournalOptions(durability: .none, segmentSize: 64 << 20))
        for i in 100_000..<1_000_000 { try big.append(people(i)) }
        let bytes = big.stats.bytesOnDisk
        try big.close()
        var count = 0
        let open = try seconds {
            let j = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
            try j.close()
        }
        let reader = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
        let read = try seconds { try reader.forEachRecord { r in count += r.payload.count > 0 ? 1 : 0 } }
        try reader.close()
        print("BENCH open (scan + CRC) of \(bytes) B, 1M records: \(open) s = \(Double(bytes) / open / 1e6) MB/s")
        print("BENCH forEachRecord (read + CRC + decompress) \(count) records: \(read) s = \(Double(bytes) / read / 1e6) MB/s on disk, \(Double(count) * 100 / read / 1e6) MB/s payload")
    }

    @Test func fdatasyncRateVersusAlwaysAppends() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let fd = Glibc.open(directory + "/raw", O_RDWR | O_CREAT, 0o600)
        let block = [UInt8](repeating: 1, count: 4096)
        let n = 2000
        let raw = seconds {
            for i in 0..<n {
                _ = block.withUnsafeBytes { Glibc.pwrite(fd, $0.baseAddress, 4096, off_t(i * 4096)) }
                _ = fdatasync(fd)
            }
        }
        Glibc.close(fd)
        print("BENCH raw 4 KiB pwrite+fdatasync: \(Double(n) / raw) /s (\(raw / Double(n) * 1e6) us each)")

        let plan = JournalIO.FaultPlan()
        let journal = try Journal.open(directory: directory + "/j", options: JournalOptions(durability: .always, io: .faulty(plan)))
        plan.arm(.error(EIO), atCall: .max, of: [.fdatasync])
        let single = try seconds { for i in 0..<n { try journal.append(people(i)) } }
        print("BENCH .always 1 thread: \(Double(n) / single) appends/s")
        for threads in [4, 16] {
            let perThread = 1000
            let syncsBefore = plan.callCount
            let t = seconds {
                let group = DispatchGroup()
                for k in 0..<threads {
                    group.enter()
                    let thread = Thread {
                        for i in 0..<perThread { try! journal.append(people(k * perThread + i)) }
                        group.leave()
                    }
                    thread.start()
                }
                group.wait()
            }
            let syncs = plan.callCount - syncsBefore
            print("BENCH .always \(threads) threads (group commit): \(Double(threads * perThread) / t) appends/s, \(syncs) fdatasyncs for \(threads * perThread) appends")
        }
        try journal.close()
    }
}

@Suite(.enabled(if: ProcessInfo.processInfo.environment["GRAPHJOURNAL_EXAMPLE"] != nil))
struct JournalExampleWriter {
    @Test func writeExample() throws {
        let directory = ProcessInfo.processInfo.environment["GRAPHJOURNAL_EXAMPLE"]!
        let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
        try journal.append(Array("hello".utf8), schema: Array("S1".utf8))
        try journal.append(Array(String(repeating: "abcd", count: 20).utf8))
        try journal.close()
    }
}
