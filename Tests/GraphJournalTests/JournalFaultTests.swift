import Foundation
import Glibc
import Synchronization
import Testing

@testable import GraphJournal

/// Failures injected through the I/O layer.
@Suite struct JournalFaultTests {
    @Test func failedWriteLeavesJournalValidAndNextAppendSucceeds() throws {
        for fault in [JournalIO.Fault.error(ENOSPC), .error(EIO), .shortWrite] {
            let directory = temporaryJournalPath()
            defer { removeDirectory(directory) }
            let plan = JournalIO.FaultPlan()
            let journal = try Journal.open(
                directory: directory, options: JournalOptions(durability: .always, io: .faulty(plan)))
            try journal.append(payload(1, count: 300))
            plan.arm(fault, atCall: 1, of: [.pwrite])
            #expect(throws: JournalError.self, "\(fault)") {
                try journal.append(payload(2, count: 5000, compressible: false))
            }
            #expect(plan.hasFired)
            let sequence = try journal.append(payload(3, count: 300))
            #expect(sequence == 2, "\(fault): the failed append took no sequence number")
            try journal.close()
            #expect(try Journal.inspect(directory: directory).verdict == .clean, "\(fault)")
            #expect(
                try recordsAfterReopen(directory).transactions == [payload(1, count: 300), payload(3, count: 300)],
                "\(fault)")
        }
    }

    /// A streamed chunked record is written with several `pwrite`s (headers and chunk table,
    /// then one per chunk): a failure or a crash at any of them must leave the journal as it
    /// was before the append.
    @Test(arguments: [false, true])
    func failedWriteAtAnyPieceOfAStreamedRecordLeavesTheJournalAsItWas(crash: Bool) throws {
        let large = payload(2, count: JournalFormat.chunkedThreshold + 3 * JournalFormat.chunkSize / 2)
        var call = 1
        while true {
            let directory = temporaryJournalPath()
            defer { removeDirectory(directory) }
            let plan = JournalIO.FaultPlan()
            let journal = try Journal.open(
                directory: directory, options: JournalOptions(durability: .always, io: .faulty(plan)))
            try journal.append(payload(1, count: 300))
            var stream = PayloadStream()
            stream.bytes = large
            stream.cutIfFull()
            let fault: JournalIO.Fault = crash ? .crash : call % 2 == 0 ? .shortWrite : .error(ENOSPC)
            plan.arm(fault, atCall: call, of: [.pwrite])
            var failed = false
            do { try journal.append(stream) } catch { failed = true }
            if !failed {
                #expect(!plan.hasFired)
                try journal.close()
                #expect(try recordsAfterReopen(directory).transactions == [payload(1, count: 300), large])
                break
            }
            #expect(plan.hasFired, "pwrite \(call)")
            if crash {
                // The process is gone: the next open finds the torn record and drops it.
                try? journal.close()
                plan.disarm()
                #expect(try recordsAfterReopen(directory).transactions == [payload(1, count: 300)], "pwrite \(call)")
            } else {
                plan.disarm()
                #expect(
                    try journal.append(payload(3, count: 300)) == 2,
                    "pwrite \(call): the failed append took no sequence number")
                try journal.close()
                #expect(try Journal.inspect(directory: directory).verdict == .clean, "pwrite \(call)")
                #expect(
                    try recordsAfterReopen(directory).transactions == [payload(1, count: 300), payload(3, count: 300)],
                    "pwrite \(call)")
            }
            call += 1
        }
        #expect(call > 5, "the streamed record took \(call - 1) pwrites")
    }

    @Test func failedFsyncThrowsAndNothingIsAcknowledged() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let plan = JournalIO.FaultPlan()
        let journal = try Journal.open(
            directory: directory, options: JournalOptions(durability: .always, io: .faulty(plan)))
        try journal.append([1])
        plan.arm(.error(EIO), atCall: 1, of: [.fdatasync])
        #expect {
            try journal.append([2])
        } throws: { error in
            guard let error = error as? JournalError, case .io(let errno, _) = error.code else { return false }
            return errno == EIO
        }
        // The unacknowledged record was cut off: the file is as before the failed append.
        #expect(try journal.records().transactions == [[1]])
        #expect(try Journal.inspect(directory: directory).entries.count == 1)
        #expect(try journal.append([3]) == 2)
        try journal.close()
        #expect(try recordsAfterReopen(directory).transactions == [[1], [3]])
    }

    @Test func failedFsyncInBatchedModeRequiresReopen() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let plan = JournalIO.FaultPlan()
        let journal = try Journal.open(
            directory: directory, options: JournalOptions(durability: .batched(milliseconds: 1000), io: .faulty(plan)))
        try journal.append([1])
        plan.arm(.error(EIO), atCall: 1, of: [.fdatasync])
        #expect(throws: JournalError.self) { try journal.sync() }
        #expect {
            try journal.append([2])
        } throws: { error in
            (error as? JournalError)?.code == .needsReopen
        }
        try? journal.close()
        #expect(try recordsAfterReopen(directory).transactions == [[1]])
    }

    @Test func crashDuringCompactionAtEveryStepLosesNothing() throws {
        let old = (0..<30).map { payload($0, count: 120) }
        let base = (0..<5).map { payload(500 + $0, count: 400) }
        var step = 1
        var outcomes = (kept: 0, replaced: 0)
        while true {
            let directory = temporaryJournalPath()
            defer { removeDirectory(directory) }
            let plan = JournalIO.FaultPlan()
            let journal = try Journal.open(
                directory: directory, options: JournalOptions(durability: .none, io: .faulty(plan)))
            for bytes in old { try journal.append(bytes, schema: [1]) }
            plan.arm(.crash, atCall: step)
            var finished = false
            do {
                try journal.compact(base: base, schema: [2])
                finished = !plan.hasFired
            } catch {
                #expect(plan.hasFired, "step \(step): \(error)")
            }
            try? journal.close()
            plan.disarm()

            let records = try recordsAfterReopen(directory)
            let kept = records.transactions == old && records.filter { $0.kind == .base }.isEmpty
            let replaced = records.filter { $0.kind == .base }.map(\.payload) == base && records.transactions.isEmpty
            #expect(kept || replaced, "step \(step) (\(plan.injected)): \(records.count) records")
            if kept { outcomes.kept += 1 }
            if replaced { outcomes.replaced += 1 }
            #expect(try Journal.inspect(directory: directory).verdict == .clean, "step \(step)")
            if finished { break }
            step += 1
        }
        #expect(step > 10)
        #expect(outcomes.kept > 0 && outcomes.replaced > 1)  // crashes after the MANIFEST switch too
    }

    @Test func crashWhileRollingToANewSegmentAtEveryStepLosesNothing() throws {
        var step = 1
        while true {
            let directory = temporaryJournalPath()
            defer { removeDirectory(directory) }
            let plan = JournalIO.FaultPlan()
            let options = JournalOptions(durability: .always, segmentSize: 600, io: .faulty(plan))
            let journal = try Journal.open(directory: directory, options: options)
            var acknowledged: [[UInt8]] = []
            for index in 0..<4 {
                acknowledged.append(payload(index, count: 100, compressible: false))
                try journal.append(acknowledged.last!)
            }
            #expect(journal.stats.segments == 1)
            plan.arm(.crash, atCall: step)
            let next = payload(99, count: 200, compressible: false)
            var finished = false
            do {
                try journal.append(next)  // rolls: 4 x 124 + 48 + 224 > 600
                acknowledged.append(next)
                finished = !plan.hasFired
            } catch {}
            try? journal.close()
            plan.disarm()
            let records = try recordsAfterReopen(directory).transactions
            #expect(records == acknowledged || records == acknowledged + [next], "step \(step)")
            #expect(try Journal.inspect(directory: directory).verdict != .corrupt, "step \(step)")
            if finished { break }
            step += 1
        }
        #expect(step > 5)
    }
}

@Suite struct JournalDurabilityTests {
    @Test func batchedDurabilitySyncsAQuietJournalWithinTheInterval() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let plan = JournalIO.FaultPlan()
        plan.arm(.error(EIO), atCall: .max, of: [.fdatasync])  // counts fdatasync calls, never fails
        let journal = try Journal.open(
            directory: directory, options: JournalOptions(durability: .batched(milliseconds: 300), io: .faulty(plan)))
        defer { try? journal.close() }
        let opened = plan.callCount
        try journal.append([1, 2, 3])
        #expect(plan.callCount == opened)  // within the interval: the append did not sync
        Thread.sleep(forTimeInterval: 1.0)
        #expect(plan.callCount == opened + 1)  // the flusher synced once, and not again while clean
    }

    @Test func alwaysDurabilitySyncsBeforeAppendReturns() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let plan = JournalIO.FaultPlan()
        let journal = try Journal.open(
            directory: directory, options: JournalOptions(durability: .always, io: .faulty(plan)))
        defer { try? journal.close() }
        plan.arm(.error(EIO), atCall: .max, of: [.fdatasync])
        for index in 1...5 {
            try journal.append([UInt8(index)])
            #expect(plan.callCount == index)
        }
    }

    @Test func failedGroupFsyncFailsEveryWaiterItCoveredAndKeepsEveryAcknowledgedRecord() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let plan = JournalIO.FaultPlan()
        let journal = try Journal.open(
            directory: directory, options: JournalOptions(durability: .always, io: .faulty(plan)))
        plan.arm(.error(EIO), atCall: 5, of: [.fdatasync])
        let threads = 8, perThread = 20
        let acknowledged = Mutex<Set<[UInt8]>>([])
        let failures = Mutex(0)
        let group = DispatchGroup()
        for thread in 0..<threads {
            group.enter()
            Thread {
                for index in 0..<perThread {
                    let bytes = Array("thread \(thread) record \(index)".utf8)
                    do {
                        try journal.append(bytes)
                        acknowledged.withLock { _ = $0.insert(bytes) }
                    } catch {
                        failures.withLock { $0 += 1 }
                    }
                }
                group.leave()
            }.start()
        }
        group.wait()
        try journal.close()
        #expect(plan.hasFired)
        #expect(failures.withLock { $0 } >= 1)
        let records = try recordsAfterReopen(directory)
        #expect(Set(records.transactions) == acknowledged.withLock { $0 })  // no loss, no ghost
        #expect(records.count == acknowledged.withLock { $0.count })
        #expect(records.map(\.sequence) == Array(1...UInt64(records.count)))
    }

    @Test func appendAfterCloseThrowsClosed() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let journal = try Journal.open(directory: directory)
        try journal.close()
        try journal.close()  // twice is fine
        #expect { try journal.append([1]) } throws: { ($0 as? JournalError)?.code == .closed }
    }
}
