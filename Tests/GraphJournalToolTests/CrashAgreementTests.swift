import Foundation
import ObjectGraph
import Testing

@testable import GraphJournal

/// A crash (every I/O call after the N-th fails, as after `kill -9`) at every step of a
/// compaction, of a segment roll (a MANIFEST rewrite) and of point-in-time recovery itself;
/// after each, the store must open with every acknowledged save, and verify, a default open,
/// `.pointInTime` and repair must agree on it.
@Suite("Crash at every step: one verdict afterwards", .serialized)
struct CrashAgreementTests {
    /// Runs `crashing` with a crash armed at every I/O call in turn, until it finishes
    /// without the crash firing; `check` looks at the directory after each.
    static func everyStep(
        _ label: String, prepare: (URL) throws -> Void, crashing: (URL, JournalIO) throws -> Void,
        check: (URL, Int) throws -> Void
    ) throws -> Int {
        var step = 1
        while true {
            let dir = Tool.temporaryURL("\(label)-\(step)")
            try prepare(dir)
            let plan = JournalIO.FaultPlan()
            plan.arm(.crash, atCall: step)
            do { try crashing(dir, .faulty(plan)) } catch {
                #expect(plan.hasFired, "\(label) step \(step): \(error)")
            }
            let finished = !plan.hasFired
            plan.disarm()
            try check(dir, step)
            if finished { return step }
            step += 1
        }
    }

    static func options(
        _ io: JournalIO = .system, segmentSize: Int = 64 << 20, recovery: JournalOptions.Recovery = .tolerateTornTail
    ) -> StoreOptions {
        var options = StoreOptions(durability: .always, recovery: recovery)
        options.autoCompactionRatio = nil
        options.journal.io = io
        options.journal.segmentSize = segmentSize
        return options
    }

    @Test func crashAtEveryStepOfCompactionLeavesAStoreEveryCommandAgreesOn() throws {
        var expected: [String: [UInt64: [String: AttributeValue?]]] = [:]
        let steps = try Self.everyStep(
            "compact",
            prepare: { dir in
                expected = try Self.objects(afterSaves: 10, in: dir)
            },
            crashing: { dir, io in
                let store = try ObjectStore.open(at: dir, schema: try Schema(Reading.self), options: Self.options(io))
                defer { try? store.close() }
                try store.compact()
            },
            check: { dir, step in
                let outcome = try Damage.expectAgreement(dir, verdict: 0, comment: "compaction, crash at call \(step)")
                #expect(outcome.defaultOpenObjects == expected, "compaction, crash at call \(step)")
            })
        #expect(steps > 10)
    }

    @Test func crashAtEveryStepOfASegmentRollLeavesAStoreEveryCommandAgreesOn() throws {
        var expected: [String: [UInt64: [String: AttributeValue?]]] = [:]
        var acknowledged = expected
        var inFlight = expected
        let steps = try Self.everyStep(
            "roll",
            prepare: { dir in
                expected = try Self.objects(afterSaves: 3, in: dir)
                acknowledged = expected
                inFlight = expected
            },
            crashing: { dir, io in
                // Saves until one rolls to a new segment (a MANIFEST rewrite); each save that
                // returned is acknowledged.
                let store = try ObjectStore.open(
                    at: dir, schema: try Schema(Reading.self), options: Self.options(io, segmentSize: 900))
                defer { try? store.close() }
                for i in 0..<12 {
                    let r = try store.context.insert(Reading.self)
                    r.sensor = "roll \(i) " + String(repeating: "r", count: 40)
                    inFlight = try Tool.objects(of: store.context)
                    try store.context.save()
                    acknowledged = inFlight
                }
            },
            check: { dir, step in
                let verify = try Tool.run(["verify", dir.path])
                #expect(verify.status == 0 || verify.status == 2, "roll, crash at call \(step): \(verify.stdout)")
                let outcome = try Damage.expectAgreement(
                    dir, verdict: verify.status, comment: "roll, crash at call \(step)")
                // Every acknowledged save is kept; the save in flight at the crash may be too (its
                // record was written, only the sync that would have acknowledged it failed).
                let kept = outcome.defaultOpenObjects == acknowledged || outcome.defaultOpenObjects == inFlight
                #expect(kept, "roll, crash at call \(step): every acknowledged save is kept")
            })
        #expect(steps > 10)
    }

    @Test func crashAtEveryStepOfPointInTimeRecoveryLosesNoByteAndKeepsThePrefix() throws {
        // A store with damage in its second log: recovery copies bytes aside, rewrites
        // MANIFEST, truncates and removes. A crash at any of those steps, then a clean
        // recovery, keeps what an uninterrupted recovery keeps.
        let template = try Damage.store("recover-template", saves: 20, segmentSize: 600)
        let files = try Journal.inspect(directory: template.path).files
        let damaged = files[files.count - 2]
        var bytes = [UInt8](try Data(contentsOf: template.appendingPathComponent(damaged)))
        bytes[bytes.count / 2] ^= 0x40
        try Data(bytes).write(to: template.appendingPathComponent(damaged))
        let reference = try Damage.copy(template)
        try ObjectStore.open(
            at: reference, schema: try Schema(Reading.self), options: Self.options(recovery: .pointInTime)
        ).close()
        let kept = try Damage.objects(reference)
        let original = try Tool.contents(of: template)

        let steps = try Self.everyStep(
            "recover",
            prepare: { dir in
                try FileManager.default.copyItem(at: template, to: dir)
            },
            crashing: { dir, io in
                try ObjectStore.open(
                    at: dir, schema: try Schema(Reading.self), options: Self.options(io, recovery: .pointInTime)
                ).close()
            },
            check: { dir, step in
                try ObjectStore.open(
                    at: dir, schema: try Schema(Reading.self), options: Self.options(recovery: .pointInTime)
                ).close()
                #expect(try Damage.objects(dir) == kept, "recovery, crash at call \(step)")
                #expect(try Tool.run(["verify", dir.path]).status == 0, "recovery, crash at call \(step)")
                let after = try Tool.contents(of: dir)
                let everything = after.values.reduce(into: Data()) { $0.append($1) }
                for (name, bytes) in original where name != "MANIFEST" && name != "LOCK" && !bytes.isEmpty {
                    let live = after[name] ?? Data()
                    let rest = bytes.starts(with: live) ? bytes.dropFirst(live.count) : bytes[...]
                    #expect(
                        rest.isEmpty || everything.range(of: Data(rest)) != nil,
                        "recovery, crash at call \(step): bytes of \(name) kept or aside")
                }
            })
        #expect(steps > 5)
    }

    /// Writes `saves` saves of three `Reading`s each; returns the objects.
    static func objects(afterSaves saves: Int, in dir: URL) throws -> [String: [UInt64: [String: AttributeValue?]]] {
        let store = try ObjectStore.open(at: dir, schema: try Schema(Reading.self), options: options())
        defer { try? store.close() }
        for save in 0..<saves {
            for i in 0..<3 {
                let r = try store.context.insert(Reading.self)
                r.sensor = "s\(save)-\(i)"
                r.count = Int64(save * 3 + i)
            }
            try store.context.save()
        }
        return try Tool.objects(of: store.context)
    }
}
