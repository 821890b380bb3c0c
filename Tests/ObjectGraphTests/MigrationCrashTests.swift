import Foundation
import GraphJournal
import ObjectGraph
import ObjectGraphTestSupport
import Testing

// The parcels model, as the child process defines it (Tools/CrashWriter/Migration.swift):
// version 2 turns an Int into a String and fills a new attribute from old values, a custom
// stage, so a migration rewrites the store as a new base.

enum ParcelsV1: VersionedSchema {
    static let versionIdentifier = "1"
    static var models: [any Entity.Type] { [Parcel.self] }

    @Entity final class Parcel {
        var key: Int64 = 0
        var weight: Int = 0
        var label: String = ""
    }
}

enum ParcelsV2: VersionedSchema {
    static let versionIdentifier = "2"
    static var models: [any Entity.Type] { [Parcel.self] }

    @Entity final class Parcel {
        var key: Int64 = 0
        var weight: String = ""
        var label: String = ""
        var code: String = ""
    }
}

enum ParcelsPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ParcelsV1.self, ParcelsV2.self] }
    static var stages: [MigrationStage] {
        [
            .custom(fromVersion: ParcelsV1.self, toVersion: ParcelsV2.self) { migration in
                for old in try migration.old.fetch(FetchDescriptor<ParcelsV1.Parcel>()) {
                    guard let new = try migration.counterpart(of: old, as: ParcelsV2.Parcel.self) else { continue }
                    new.weight = "\(old.weight) g"
                    new.code = "\(old.label)-\(old.weight)"
                }
            }
        ]
    }
}

/// Kills of the migrating child in `make test`; `make migration-soak` sets
/// OBJECTGRAPH_MIGRATION_KILLS to 50.
let migrationKills = ProcessInfo.processInfo.environment["OBJECTGRAPH_MIGRATION_KILLS"].flatMap(Int.init) ?? 3

/// A migration must leave the store wholly at the old version or wholly at the new one,
/// whatever fails or stops it: each I/O call of a migration failed or crashed in turn, and a
/// process migrating a 100,000-object store killed at random moments.
@Suite("MigrationCrash: a migration is all or nothing", .serialized)
struct MigrationCrashTests {
    /// The weight version 1 gives parcel `key`.
    static func weight(_ key: Int64) -> Int { Int(key &* 7919 % 100_000) }

    /// Writes `count` parcels at version 1, keys 0..<count, in saves of `perSave`.
    static func writeVersionOne(_ dir: URL, count: Int, perSave: Int) throws {
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        let store = try ObjectStore.open(at: dir, schema: try Schema(versioned: ParcelsV1.self), options: options)
        for key in 0..<Int64(count) {
            let parcel = try store.context.insert(ParcelsV1.Parcel.self)
            parcel.key = key
            parcel.weight = weight(key)
            parcel.label = "p\(key)"
            if (key + 1) % Int64(perSave) == 0 { try store.context.save() }
        }
        try store.context.save()
        try store.close()
    }

    /// The version identifiers the journal's last schema record lists.
    static func recordedVersions(_ dir: URL) throws -> [String] {
        var last: [UInt8]?
        _ = try Journal.readRecords(directory: dir.path) { record in
            if record.entry.kind == .schema { last = record.payload }
        }
        return try StoredSchema.decode(try #require(last)).versions
    }

    enum State: String {
        case old, new
    }

    /// Checks that `dir`, opened without faults, is wholly at version 1 as written (every
    /// parcel with its old values, history ["1"]) or wholly at version 2 as migrated (every
    /// parcel migrated, history ["1", "2"]); records an issue otherwise.
    static func state(of dir: URL, count: Int, _ what: String) throws -> State {
        do {
            let store = try ObjectStore.open(at: dir, schema: try Schema(versioned: ParcelsV1.self))
            defer { try? store.close() }
            let parcels = try store.context.fetch(FetchDescriptor<ParcelsV1.Parcel>())
            let wrong = parcels.filter { $0.weight != weight($0.key) || $0.label != "p\($0.key)" }
            #expect(parcels.count == count, "\(what): \(parcels.count) parcels at version 1")
            #expect(Set(parcels.map(\.key)) == Set(0..<Int64(count)), "\(what): keys at version 1")
            #expect(wrong.isEmpty, "\(what): \(wrong.count) parcels at version 1 with other values")
            #expect(try recordedVersions(dir) == ["1"], "\(what): history at version 1")
            return .old
        } catch let error as StoreError where error.code == .migration {
            // Not at version 1: it must be at version 2, and open so.
            #expect(error.storedVersion == "2", "\(what): \(error)")
            try checkMigrated(dir, count: count, what)
            return .new
        }
    }

    /// Opens `dir` with the plan (migrating it if it is at version 1) and checks every parcel.
    static func checkMigrated(_ dir: URL, count: Int, _ what: String) throws {
        let store = try ObjectStore.open(at: dir, migrationPlan: ParcelsPlan.self)
        defer { try? store.close() }
        let parcels = try store.context.fetch(FetchDescriptor<ParcelsV2.Parcel>())
        let wrong = parcels.filter {
            let w = weight($0.key)
            return $0.weight != "\(w) g" || $0.code != "p\($0.key)-\(w)" || $0.label != "p\($0.key)"
        }
        #expect(parcels.count == count, "\(what): \(parcels.count) parcels at version 2")
        #expect(Set(parcels.map(\.key)) == Set(0..<Int64(count)), "\(what): keys at version 2")
        #expect(wrong.isEmpty, "\(what): \(wrong.count) parcels at version 2 with other values")
        #expect(try recordedVersions(dir) == ["1", "2"], "\(what): history at version 2")
    }

    /// Copies `template` to a new store directory.
    static func copy(_ template: URL, _ name: String) throws -> URL {
        let dir = temporaryStoreDirectory(name)
        try FileManager.default.copyItem(at: template, to: dir)
        return dir
    }

    // MARK: every I/O step

    /// Fails (an `EIO`, a short write, or a crash: that call and every later one fail, as if
    /// the process died there) the k-th I/O call of a migration, for every k: the open throws
    /// a `StoreError` (or, for a call whose failure is harmless, succeeds), and the store
    /// reopens wholly at version 1 or wholly at version 2; then the plan completes it. A short
    /// write is injected at each `pwrite` in turn, the other faults at each call.
    ///
    /// "power cut" is a crash seen as the disk would keep it through a power loss: every file
    /// as of its last `fsync` or `fdatasync`, under the names the directory had at its last
    /// `fsync` (``PowerCutDisk``); what the page cache held after that is lost.
    @Test(arguments: ["crash", "power cut", "EIO", "short write"])
    func aFaultAtEveryIOStepOfAMigrationLeavesItWhollyOldOrWhollyNew(fault name: String) throws {
        let fault: JournalIO.Fault =
            switch name {
            case "crash", "power cut": .crash
            case "EIO": .error(5)
            default: .shortWrite
            }
        let count = 300
        let template = temporaryStoreDirectory("migration-faults-template")
        try Self.writeVersionOne(template, count: count, perSave: 100)
        defer { try? FileManager.default.removeItem(at: template) }
        var outcomes: [String] = []
        var step = 1
        while true {
            let dir = try Self.copy(template, "migration-fault")
            defer { try? FileManager.default.removeItem(at: dir) }
            let plan = JournalIO.FaultPlan()
            // A short write is a pwrite's fault: count those only.
            plan.arm(fault, atCall: step, of: fault == .shortWrite ? [.pwrite] : nil)
            var options = StoreOptions()
            options.journal.io = .faulty(plan)
            let disk = name == "power cut" ? try PowerCutDisk(directory: dir.path) : nil
            if let disk { options.journal.io = disk.tracking(options.journal.io) }
            var thrown: StoreError?
            var injected: [String] = []
            do throws(StoreError) {
                let store = try ObjectStore.open(at: dir, migrationPlan: ParcelsPlan.self, options: options)
                injected = plan.injected
                plan.disarm()
                try? store.close()
            } catch {
                thrown = error
                injected = plan.injected
            }
            plan.disarm()
            try disk?.cut()
            guard !injected.isEmpty else {
                // Step k is past the migration's last call: it ran to its end.
                #expect(thrown == nil, "no fault injected, yet the open threw \(String(describing: thrown))")
                try Self.checkMigrated(dir, count: count, "\(name) after the last step")
                break
            }
            let what = "\(name) at call \(step) (\(injected.joined(separator: ", ")))"
            let state: State
            do { state = try Self.state(of: dir, count: count, what) } catch {
                Issue.record("\(what): the store opens neither at version 1 nor at version 2: \(error)")
                outcomes.append("\(step) \(injected.first ?? ""): opens with neither")
                step += 1
                continue
            }
            if thrown == nil {
                // The open succeeded despite the fault: only where the failure is harmless, and
                // the store is then migrated.
                #expect(state == .new, "\(what): the open succeeded but the store is at version 1")
            }
            if state == .old { try Self.checkMigrated(dir, count: count, "\(what), then migrated") }
            outcomes.append(
                "\(step) \(injected.first ?? ""): \(thrown.map { "threw \($0.code)" } ?? "opened") → \(state.rawValue)")
            step += 1
        }
        print("migration faults (\(name)): \(step - 1) I/O calls; " + outcomes.joined(separator: "; "))
        // The base, the new log's header and MANIFEST: three writes at least.
        #expect(step > (fault == .shortWrite ? 3 : 20), "a migration makes more than a few I/O calls")
    }

    /// A stage that throws after changing every new object: the open throws naming the stage's
    /// error, and not one call that changes a file (a write, truncation, rename or removal) was
    /// made; the files are byte for byte as they were.
    @Test func aStageThatThrowsMakesNoCallThatChangesAFile() throws {
        let dir = temporaryStoreDirectory("migration-throwing-stage")
        try Self.writeVersionOne(dir, count: 300, perSave: 100)
        defer { try? FileManager.default.removeItem(at: dir) }
        func bytes() throws -> [String: Data] {
            var result: [String: Data] = [:]
            for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) {
                result[name] = try Data(contentsOf: dir.appendingPathComponent(name))
            }
            return result
        }
        let before = try bytes()
        let plan = JournalIO.FaultPlan()
        // (Not makeDirectory: each open of the journal calls it, and on an existing directory
        // it changes nothing.)
        plan.arm(.crash, atCall: Int.max, of: [.pwrite, .ftruncate, .rename, .unlink])
        var options = StoreOptions()
        options.journal.io = .faulty(plan)
        let error = try #require(throws: StoreError.self) {
            try ObjectStore.open(at: dir, migrationPlan: ParcelsPlanThrowing.self, options: options)
        }
        #expect(error.code == .migration && error.message.contains("the stage gave up"), "\(error)")
        #expect(plan.callCount == 0, "a failed migration made \(plan.callCount) calls that change files")
        #expect(try bytes() == before)
        #expect(try Self.state(of: dir, count: 300, "after a stage that threw") == .old)
    }

    // MARK: kills at random moments

    /// The lines a child printed, each with the time since it printed "opening".
    struct ChildRun {
        var lines: [(line: String, at: Duration)] = []
        var status: Int32 = 0
        var killed = false

        func time(of line: String) -> Duration? { lines.first { $0.line == line }?.at }
        var last: String { lines.last?.line ?? "(nothing)" }
    }

    /// Runs `objectgraph-crash-writer migrate dir`; with `delay`, SIGKILLs it that long after
    /// it printed "opening". Waits for events only (the line, the exit), each within
    /// ``eventBound``.
    static func runChild(_ dir: URL, killAfter delay: Duration?) throws -> ChildRun {
        let process = Process()
        process.executableURL = CrashTests.writerURL
        process.arguments = ["migrate", dir.path]
        let pipe = Pipe()
        process.standardOutput = pipe
        let lines = Locked<[(String, ContinuousClock.Instant)]>([])
        let opening = DispatchSemaphore(value: 0)
        let ended = DispatchSemaphore(value: 0)
        let output = pipe.fileHandleForReading
        try process.run()
        Thread.detachNewThread {
            var buffer = Data()
            while true {
                let data = output.availableData
                if data.isEmpty { break }
                buffer.append(data)
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                    buffer.removeSubrange(buffer.startIndex...newline)
                    lines.withLock { $0.append((line, .now)) }
                    if line == "opening" { opening.signal() }
                }
            }
            opening.signal()  // the child ended: nothing more will come
            ended.signal()
        }
        let bound = DispatchTime.now() + .seconds(Int(eventBound.components.seconds))
        guard opening.wait(timeout: bound) == .success, lines.withLock({ $0.contains { $0.0 == "opening" } }) else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            Issue.record("the migrating child did not print \"opening\" (within \(eventBound))")
            return ChildRun()
        }
        var run = ChildRun()
        if let delay {
            Thread.sleep(
                forTimeInterval: Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18)
            kill(process.processIdentifier, SIGKILL)
            run.killed = true
        }
        if ended.wait(timeout: DispatchTime.now() + .seconds(Int(eventBound.components.seconds))) != .success {
            kill(process.processIdentifier, SIGKILL)
            Issue.record("the migrating child did not end within \(eventBound)")
        }
        process.waitUntilExit()
        run.status = process.terminationStatus
        let seen = lines.withLock { $0 }
        let start = seen.first { $0.0 == "opening" }?.1 ?? .now
        run.lines = seen.map { ($0.0, $0.1 - start) }
        return run
    }

    /// Writes a 100,000-object store at version 1; runs the child's migration once to its end
    /// (which says how long its phases take on this machine now); then, for each kill, copies
    /// the store, starts the child and SIGKILLs it after a random delay (seeded: half the
    /// kills anywhere in the migration, half while the new base is written and switched to),
    /// and checks the store is wholly at version 1 or 2, and that the plan then completes it.
    @Test func killingAMigrationOfA100kObjectStoreAtRandomMomentsLeavesItWhollyOldOrWhollyNew() throws {
        let env = ProcessInfo.processInfo.environment
        let seed = env["OBJECTGRAPH_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 0...UInt64.max)
        print("migration kill test: seed \(seed) (OBJECTGRAPH_SEED=\(seed) replays it), \(migrationKills) kills")
        var rng = SeededGenerator(seed: seed)
        let count = 100_000
        let template = temporaryStoreDirectory("migration-kill-template")
        try Self.writeVersionOne(template, count: count, perSave: 25_000)
        defer { try? FileManager.default.removeItem(at: template) }

        // One migration to its end: the child's phases, timed from "opening".
        let fullDirectory = try Self.copy(template, "migration-kill-full")
        let full = try Self.runChild(fullDirectory, killAfter: nil)
        #expect(full.status == 0 && full.time(of: "closed") != nil, "the child's migration: \(full.lines)")
        try Self.checkMigrated(fullDirectory, count: count, "the child's migration run to its end")
        try? FileManager.default.removeItem(at: fullDirectory)
        let total = try #require(full.time(of: "migrated"))
        let base = full.time(of: "base") ?? .zero
        print("migration kill test: the child migrated in \(total), writing its base from \(base)")

        var outcomes: [State: Int] = [:]
        for round in 0..<migrationKills {
            let (low, high) = round % 2 == 0 ? (Duration.zero, total * 1.05) : (base, total)
            let delay = low + (high - low) * Double.random(in: 0...1, using: &rng)
            let dir = try Self.copy(template, "migration-kill")
            defer { try? FileManager.default.removeItem(at: dir) }
            let run = try Self.runChild(dir, killAfter: delay)
            let what = "kill \(round) after \(delay) (last line \"\(run.last)\", seed \(seed))"
            let state = try Self.state(of: dir, count: count, what)
            if state == .old { try Self.checkMigrated(dir, count: count, "\(what), then migrated") }
            outcomes[state, default: 0] += 1
            print("migration kill test: \(what): \(state == .old ? "wholly version 1" : "wholly version 2")")
        }
        print(
            "migration kill test: \(outcomes[.old] ?? 0) kills left version 1, \(outcomes[.new] ?? 0) version 2 (seed \(seed))"
        )
    }
}

enum ParcelsPlanThrowing: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ParcelsV1.self, ParcelsV2.self] }
    static var stages: [MigrationStage] {
        [
            .custom(fromVersion: ParcelsV1.self, toVersion: ParcelsV2.self) { migration in
                for parcel in try migration.new.fetch(FetchDescriptor<ParcelsV2.Parcel>()) { parcel.code = "x" }
                throw StageGaveUp()
            }
        ]
    }
}

/// The files of a store directory as a power loss would leave them, for a test that stops an
/// I/O layer at some call: each file's bytes as of its last `fsync` or `fdatasync`, under the
/// names the directory held at its last `fsync` (a rename, creation or removal not followed by
/// one is undone). ``tracking(_:)`` wraps a layer to follow its calls; ``cut()`` rewrites the
/// directory to that state. Files are followed by name and by descriptor, not by inode (an
/// inode number can be reused once a file is removed).
final class PowerCutDisk: @unchecked Sendable {
    private struct State {
        var next = 0
        /// Path → file, as the directory holds it now.
        var current: [String: Int] = [:]
        /// Path → file, as of the directory's last fsync.
        var durable: [String: Int] = [:]
        /// File → its bytes as of its last fsync.
        var contents: [Int: Data] = [:]
        var descriptors: [Int32: Int] = [:]
    }

    let directory: String
    private let state = Locked(State())

    /// Starts from `directory` as it is, all of it durable.
    init(directory: String) throws {
        self.directory = directory
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            let path = directory + "/" + name
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            state.withLock { s in
                s.next += 1
                s.current[path] = s.next
                s.durable[path] = s.next
                s.contents[s.next] = bytes
            }
        }
    }

    /// `base`, with its successful calls followed.
    func tracking(_ base: JournalIO) -> JournalIO {
        var io = base
        let state = self.state
        let directory = self.directory
        @Sendable func synced(_ fd: Int32) {
            var data = Data()
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            var offset: off_t = 0
            while true {
                let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, offset) }
                if n <= 0 { break }
                data.append(contentsOf: buffer[0..<n])
                offset += off_t(n)
            }
            state.withLock { s in
                if let file = s.descriptors[fd] { s.contents[file] = data }
            }
        }
        let open = base.open, close = base.close, fsync = base.fsync, fdatasync = base.fdatasync
        let rename = base.rename, unlink = base.unlink, syncDirectory = base.syncDirectory
        io.open = { (path, mode) throws(JournalIO.Failure) -> Int32 in
            let fd = try open(path, mode)
            state.withLock { s in
                if s.current[path] == nil {
                    s.next += 1
                    s.current[path] = s.next
                }
                s.descriptors[fd] = s.current[path]
            }
            return fd
        }
        io.close = { (fd) throws(JournalIO.Failure) in
            try close(fd)
            state.withLock { _ = $0.descriptors.removeValue(forKey: fd) }
        }
        io.fsync = { (fd) throws(JournalIO.Failure) in
            try fsync(fd)
            synced(fd)
        }
        io.fdatasync = { (fd) throws(JournalIO.Failure) in
            try fdatasync(fd)
            synced(fd)
        }
        io.rename = { (from, to) throws(JournalIO.Failure) in
            try rename(from, to)
            state.withLock { s in
                s.current[to] = s.current.removeValue(forKey: from)
            }
        }
        io.unlink = { (path) throws(JournalIO.Failure) in
            try unlink(path)
            state.withLock { _ = $0.current.removeValue(forKey: path) }
        }
        io.syncDirectory = { (path) throws(JournalIO.Failure) in
            try syncDirectory(path)
            guard path == directory else { return }
            state.withLock { $0.durable = $0.current }
        }
        return io
    }

    /// Rewrites the directory as the power loss leaves it.
    func cut() throws {
        let (durable, contents) = state.withLock { ($0.durable, $0.contents) }
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            try FileManager.default.removeItem(atPath: directory + "/" + name)
        }
        for (path, file) in durable {
            try (contents[file] ?? Data()).write(to: URL(fileURLWithPath: path))
        }
    }
}
