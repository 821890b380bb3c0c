import Foundation
import NATSJetStream
import ObjectGraph
import ObjectGraphReplication
import ObjectGraphTestSupport
import Testing

/// What the tool tests' writer stores: a named counter.
@Entity final class ToolCounter {
    @Attribute(.unique) var name: String = ""
    var count: Int = 0
}

/// What the writer's second model adds.
@Entity final class ToolTag {
    var label: String = ""
}

/// `graph-journal restore` and `graph-journal follow` against a real nats-server, on the
/// stream a ``ReplicatedStore`` of the test ships to.
@Suite(
    .serialized,
    .disabled(if: NATSServer.executable == nil, "nats-server is not installed; Tools/install-deps.sh installs Debian's")
)
struct ToolReplicationTests {
    // MARK: Running the tool

    /// `graph-journal`, built beside this test bundle (the test target depends on it).
    static let binary: URL = {
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 where !FileManager.default.fileExists(atPath: dir.appendingPathComponent("graph-journal").path) {
            dir = dir.deletingLastPathComponent()
        }
        return dir.appendingPathComponent("graph-journal")
    }()

    /// A run of the tool, its output going to two temporary files.
    final class Run: @unchecked Sendable {
        // Set up once in init; Process is thread-safe for the calls made here.
        let process = Process()
        let out: URL
        let err: URL
        /// When the process was started, and when it exited as Foundation's own monitor saw it
        /// (its termination handler runs on a Dispatch thread, not on the tasks' pool, which
        /// other suites' blocking tests can hold for seconds).
        private(set) var started = ContinuousClock.now
        private let exit = Locked<ContinuousClock.Instant?>(nil)

        init(_ arguments: [String]) throws {
            out = scratchDirectory("out")
            err = scratchDirectory("err")
            try FileManager.default.createDirectory(
                at: out.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data().write(to: out)
            try Data().write(to: err)
            process.executableURL = ToolReplicationTests.binary
            process.arguments = arguments
            process.standardOutput = try FileHandle(forWritingTo: out)
            process.standardError = try FileHandle(forWritingTo: err)
            process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
            process.terminationHandler = { [exit] _ in exit.withLock { $0 = .now } }
            started = .now
            try process.run()
        }

        /// How long the process ran, from its start to its exit (to now while it runs).
        var lifetime: Duration { (exit.withLock { $0 } ?? .now) - started }

        /// A run the test left behind (it failed before the exit) is killed.
        deinit {
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
        }

        var stdout: String { (try? String(contentsOf: out, encoding: .utf8)) ?? "" }
        var stderr: String { (try? String(contentsOf: err, encoding: .utf8)) ?? "" }

        /// Waits for the exit (polling, so that no thread of the pool blocks); past `limit` the
        /// process is killed and the test fails.
        func exitStatus(within limit: Duration = eventBound) async -> Int32 {
            let deadline = ContinuousClock.now + limit
            while process.isRunning {
                if ContinuousClock.now > deadline {
                    kill(process.processIdentifier, SIGKILL)
                    Issue.record(
                        "graph-journal \(process.arguments ?? []) still ran after \(limit); killed\nstdout: \(stdout)\nstderr: \(stderr)"
                    )
                    process.waitUntilExit()
                    break
                }
                try? await Task.sleep(for: .milliseconds(10))
            }
            return process.terminationStatus
        }

        /// Waits until standard output contains `text`.
        func waitForOutput(_ text: String, within limit: Duration = eventBound) async -> Bool {
            let deadline = ContinuousClock.now + limit
            while ContinuousClock.now < deadline {
                if stdout.contains(text) { return true }
                if !process.isRunning { return stdout.contains(text) }
                try? await Task.sleep(for: .milliseconds(10))
            }
            return false
        }
    }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
        /// The process's lifetime (``Run/lifetime``), not the test's wait for it.
        var seconds: Double
    }

    /// Runs the tool to its end.
    static func tool(_ arguments: [String]) async throws -> Result {
        let run = try Run(arguments)
        let status = await run.exitStatus()
        let elapsed = run.lifetime.components
        return Result(
            status: status, stdout: run.stdout, stderr: run.stderr,
            seconds: Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18)
    }

    // MARK: The writer and its states

    /// A shipping store whose saves return once the stream stored them.
    struct Writer {
        let store: ReplicatedStore
        let target: ReplicationTarget
        let directory = scratchDirectory("writer")
        /// The state after each save, and the writer's sequence of that save.
        var states: [(sequence: UInt64, objects: [String: Int])] = []

        init(server: NATSServer) throws {
            target = ReplicationTarget(
                servers: [server.url],
                stream: "TOOL" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12),
                policy: .synchronous(timeout: .seconds(60)))
            store = try ReplicatedStore.open(at: directory, schema: try Schema(ToolCounter.self), target: target)
        }

        /// One save: `new` counters inserted, the oldest one incremented, the second oldest
        /// deleted (from the third save on).
        mutating func save(new: Int = 3) throws {
            let round = states.count
            let context = store.context
            for i in 0..<new {
                let c = try context.insert(ToolCounter.self)
                c.name = "c\(round)-\(i)"
                c.count = round * 100 + i
            }
            if round > 0, let c = try context.object(ToolCounter.self, where: \.name, equals: "c\(round - 1)-0") {
                c.count += 1000
            }
            if round > 1, let c = try context.object(ToolCounter.self, where: \.name, equals: "c\(round - 2)-1") {
                context.delete(c)
            }
            try context.save()
            states.append((store.store.stats.lastSequence, try counters(in: context)))
        }

        /// The arguments that name the writer's stream.
        var sourceArguments: [String] {
            ["--servers", target.servers.joined(separator: ","), "--stream", target.stream]
        }
    }

    /// The counters of a context (typed or dynamic), by name.
    static func counters(in context: ModelContext) throws -> [String: Int] {
        var result: [String: Int] = [:]
        for object in try context.objects(ofEntityNamed: "ToolCounter") {
            guard case .string(let name)? = try object.attributeValue(forKey: "name"),
                case .int(let count)? = try object.attributeValue(forKey: "count")
            else {
                Issue.record("a counter without a name or a count")
                continue
            }
            result[name] = Int(count)
        }
        return result
    }

    /// The counters of a store directory, opened without model code, as the tool leaves it.
    static func counters(inStore directory: URL) throws -> [String: Int] {
        var options = StoreOptions()
        options.autoCompactionRatio = nil
        let store = try ObjectStore.openDynamic(at: directory, options: options)
        defer { try? store.close() }
        return try counters(in: store.context)
    }

    // MARK: restore

    @Test func restoreRebuildsTheStoreAtASequenceATimeOrTheLatestFromLogAndBase() async throws {
        let server = try NATSServer.start()
        var writer = try Writer(server: server)
        try writer.save()
        try writer.save()
        // Server and tests share the clock: a time between the second and the third save.
        try await Task.sleep(for: .milliseconds(300))
        let between = Date()
        try await Task.sleep(for: .milliseconds(300))
        try writer.save()
        // A base in the stream, then one more record after it.
        try writer.store.compact()
        try writer.save()
        try writer.store.close()
        let s = writer.states

        let first = scratchDirectory("restore-seq")
        let r1 = try await Self.tool(
            ["restore"] + writer.sourceArguments + ["--to-seq", "\(s[0].sequence)", first.path])
        #expect(r1.status == 0, "\(r1.stderr)")
        #expect(
            r1.stdout.hasPrefix(
                "restored \(first.path) from stream \(writer.target.stream): no base (log replayed from its start), 1 records applied, last sequence \(s[0].sequence), "
            ), "\(r1.stdout)")
        #expect(try Self.counters(inStore: first) == s[0].objects)

        let iso = ISO8601DateFormatter()
        iso.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let atTime = scratchDirectory("restore-time")
        let r2 = try await Self.tool(
            ["restore"] + writer.sourceArguments + ["--to-time", iso.string(from: between), atTime.path])
        #expect(r2.status == 0, "\(r2.stderr)")
        #expect(r2.stdout.contains("last sequence \(s[1].sequence), "), "\(r2.stdout)")
        #expect(try Self.counters(inStore: atTime) == s[1].objects)

        let third = scratchDirectory("restore-seq3")
        let r3 = try await Self.tool(
            ["restore"] + writer.sourceArguments + ["--to-seq", "\(s[2].sequence)", third.path])
        #expect(r3.status == 0, "\(r3.stderr)")
        #expect(r3.stdout.contains("last sequence \(s[2].sequence), "), "\(r3.stdout)")
        #expect(try Self.counters(inStore: third) == s[2].objects)

        let latest = scratchDirectory("restore-latest")
        let r4 = try await Self.tool(["restore"] + writer.sourceArguments + ["--latest", latest.path])
        #expect(r4.status == 0, "\(r4.stderr)")
        #expect(r4.stdout.contains(": base covers record "), "\(r4.stdout)")
        #expect(r4.stdout.contains(", 1 records applied, last sequence \(s[3].sequence), "), "\(r4.stdout)")
        #expect(try Self.counters(inStore: latest) == s[3].objects)
        // What `dump --objects` writes of it: one line per live counter.
        let dump = try await Self.tool(["dump", "--objects", latest.path])
        #expect(dump.status == 0)
        #expect(dump.stdout.split(separator: "\n").count == s[3].objects.count)
        #expect(
            dump.stdout.contains("\"name\":\"c3-0\",\"count\":300")
                || dump.stdout.contains("\"count\":300,\"name\":\"c3-0\""), "\(dump.stdout)")

        // Past the end of the stream: everything, with a note.
        let beyond = scratchDirectory("restore-beyond")
        let r5 = try await Self.tool(
            ["restore"] + writer.sourceArguments + ["--to-seq", "\(s[3].sequence + 100)", beyond.path])
        #expect(r5.status == 0, "\(r5.stderr)")
        #expect(r5.stderr.contains("note: the stream holds records only up to \(s[3].sequence)"), "\(r5.stderr)")
        #expect(try Self.counters(inStore: beyond) == s[3].objects)
    }

    @Test func restoreRefusesAnExistingDirectoryABadTimeAndUnreachableServers() async throws {
        let server = try NATSServer.start()
        var writer = try Writer(server: server)
        try writer.save()
        try writer.store.close()

        // An existing directory is left alone.
        let existing = scratchDirectory("existing")
        try FileManager.default.createDirectory(at: existing, withIntermediateDirectories: true)
        try Data("keep".utf8).write(to: existing.appendingPathComponent("file"))
        let refused = try await Self.tool(["restore"] + writer.sourceArguments + ["--latest", existing.path])
        #expect(refused.status == 1)
        #expect(
            refused.stderr.contains("graph-journal: \(existing.path) exists; restore writes a new store"),
            "\(refused.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: existing.path) == ["file"])

        // A time that is not ISO 8601: bad usage.
        let fresh = scratchDirectory("fresh")
        for bad in ["yesterday", "2026-11-24 05:00", "2026-11-24T05:00:00"] {
            let r = try await Self.tool(["restore"] + writer.sourceArguments + ["--to-time", bad, fresh.path])
            #expect(r.status == 64, "\(bad): \(r.stderr)")
            #expect(r.stderr.contains("--to-time '\(bad)' is not an ISO 8601 time"), "\(r.stderr)")
        }
        // No target, or two.
        let none = try await Self.tool(["restore"] + writer.sourceArguments + [fresh.path])
        #expect(none.status == 64 && none.stderr.contains("one of --to-seq N, --to-time T, --latest"), "\(none.stderr)")
        let two = try await Self.tool(["restore"] + writer.sourceArguments + ["--latest", "--to-seq", "1", fresh.path])
        #expect(two.status == 64 && two.stderr.contains("exclude each other"), "\(two.stderr)")

        // Nothing listens on the port: a clear error, at once.
        let port = try NATSServer.freePorts(1)[0]
        let unreachable = try await Self.tool([
            "restore", "--servers", "nats://127.0.0.1:\(port)", "--stream", "NONE", "--latest", fresh.path,
        ])
        #expect(unreachable.status == 1)
        #expect(
            unreachable.stderr.contains(
                "graph-journal: cannot restore from stream NONE: connecting to nats://127.0.0.1:\(port)"),
            "\(unreachable.stderr)")
        #expect(
            unreachable.seconds < Double(atOnceBound.components.seconds),
            "a refused connection is reported, not retried")
        // No such stream on a server that answers.
        let missing = try await Self.tool([
            "restore", "--servers", server.url, "--stream", "NOSUCHSTREAM", "--latest", fresh.path,
        ])
        #expect(missing.status == 1, "\(missing.stderr)")
        #expect(missing.stderr.contains("NOSUCHSTREAM"), "\(missing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: fresh.path))
    }

    // MARK: follow

    @Test func statsVerifyAndDumpOfAReplicaOrARestoreNameTheStreamAndTheWritersSequences() async throws {
        let server = try NATSServer.start()
        var writer = try Writer(server: server)
        for _ in 0..<3 { try writer.save() }
        try writer.store.close()
        let stream = writer.target.stream
        let sequences = writer.states.map(\.sequence)
        let last = try #require(sequences.last)
        let replica = scratchDirectory("replica")
        let follow = try await Self.tool(
            ["follow"] + writer.sourceArguments + [replica.path, "--until-seq", "\(last)"])
        #expect(follow.status == 0, "\(follow.stderr)")
        let restored = scratchDirectory("restored")
        let restore = try await Self.tool(["restore"] + writer.sourceArguments + ["--latest", restored.path])
        #expect(restore.status == 0, "\(restore.stderr)")

        for directory in [replica, restored] {
            let stats = try await Self.tool(["stats", directory.path])
            #expect(stats.status == 0, "\(stats.stderr)")
            // Each record from the stream comes after an origin record: the store's own numbers
            // run ahead of the writer's.
            #expect(stats.stdout.contains(", 3 origin)\n"), "\(stats.stdout)")
            #expect(stats.stdout.contains(" (this store's own numbering)\n"), "\(stats.stdout)")
            #expect(
                stats.stdout.contains(
                    "replica of        stream \(stream): origin records say where each record came from\n"),
                "\(stats.stdout)")
            #expect(
                stats.stdout.contains(
                    "writer sequence   \(last) (the writer's record applied last, from stream message "),
                "\(stats.stdout)")
            let json = try await Self.tool(["stats", "--json", directory.path])
            #expect(
                json.stdout.contains(
                    "\"originRecords\":3,\"origin\":{\"stream\":\"\(stream)\",\"writerSequence\":\(last),\"streamSequence\":"
                ),
                "\(json.stdout)")

            let verify = try await Self.tool(["verify", directory.path])
            #expect(verify.status == 0, "\(verify.stderr)")
            print("graph-journal stats and verify of \(directory.lastPathComponent):\n\(stats.stdout)\(verify.stdout)")
            #expect(verify.stdout.contains(" base, 3 origin, 0 skipped), last sequence "), "\(verify.stdout)")
            #expect(
                verify.stdout.contains(
                    "; a replica of stream \(stream), the writer's record \(last) applied last (stream message "),
                "\(verify.stdout)")

            let dump = try await Self.tool(["dump", directory.path])
            #expect(dump.status == 0, "\(dump.stderr)")
            let origins = dump.stdout.split(separator: "\n").filter { $0.contains("\"kind\":\"origin\"") }
            #expect(origins.count == 3, "\(dump.stdout)")
            for (line, sequence) in zip(origins, sequences) {
                #expect(line.contains(",\"stream\":\"\(stream)\",\"writerSeq\":\(sequence),\"streamSeq\":"), "\(line)")
            }
            #expect(!dump.stdout.contains("\"skipped\""), "\(dump.stdout)")
        }
    }

    @Test func followReplicatesANewStoreFromTheLogAndResumesWhileTheWriterSaves() async throws {
        let server = try NATSServer.start()
        var writer = try Writer(server: server)
        try writer.save()
        try writer.save()
        let replica = scratchDirectory("replica")
        // No base in the stream: the schema comes from the log's first schema record.
        let first = try await Self.tool(
            ["follow"] + writer.sourceArguments + [replica.path, "--until-seq", "\(writer.states[1].sequence)"])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(
            first.stdout.hasPrefix(
                "following stream \(writer.target.stream) on \(server.url) into \(replica.path) from record 0 (stream message 0)\n"
            ), "\(first.stdout)")
        #expect(first.stdout.contains("records applied, "), "\(first.stdout)")
        #expect(first.stdout.contains("; reached --until-seq \(writer.states[1].sequence)\n"), "\(first.stdout)")
        #expect(try Self.counters(inStore: replica) == writer.states[1].objects)

        // Started again, it resumes; the writer saves while it follows.
        let running = try Run(
            ["follow"] + writer.sourceArguments + [
                replica.path, "--until-seq", "\(writer.states[1].sequence + 2)", "--status-interval", "0.1",
            ])
        #expect(await running.waitForOutput("from record \(writer.states[1].sequence) "))
        try await Task.sleep(for: .milliseconds(250))
        try writer.save()
        try await Task.sleep(for: .milliseconds(250))
        try writer.save()
        #expect(await running.exitStatus() == 0, "\(running.stderr)")
        #expect(writer.states[3].sequence == writer.states[1].sequence + 2)
        #expect(running.stdout.contains("applied record \(writer.states[3].sequence) "), "\(running.stdout)")
        #expect(running.stdout.contains(", 2 records applied, "), "\(running.stdout)")
        // The status lines, one per line when standard error is not a terminal.
        let lines = running.stderr.split(separator: "\n")
        #expect(lines.count >= 2, "\(running.stderr)")
        #expect(
            lines.allSatisfy {
                $0.hasPrefix("follow \(writer.target.stream): applied record ") && $0.contains(" messages, ")
            }, "\(running.stderr)")
        #expect(try Self.counters(inStore: replica) == writer.states[3].objects)
        try writer.store.close()
    }

    @Test func followStandbyTakesTheStreamOverAndTheApplicationGoesOnAsTheSameHolder() async throws {
        let server = try NATSServer.start()
        var target = ReplicationTarget(
            servers: [server.url],
            stream: "TOOL" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12),
            policy: .synchronous(timeout: .seconds(60)))
        target.lease = WriterLease(holder: "app-a", ttl: .seconds(30))
        let schema = try Schema(ToolCounter.self)
        let old = try ReplicatedStore.open(at: scratchDirectory("writer"), schema: schema, target: target)
        for i in 0..<5 {
            let c = try old.context.insert(ToolCounter.self)
            c.name = "c\(i)"
            c.count = i
            try old.context.save()
        }
        let expected = try Self.counters(in: old.context)
        let replica = scratchDirectory("standby")
        let standby = try Run(
            [
                "follow", "--servers", server.url, "--stream", target.stream, replica.path, "--standby", "--holder",
                "app-b", "--status-interval", "0.1",
            ])
        #expect(await standby.waitForOutput("standing by for stream \(target.stream)"))
        // The writer shuts down with everything shipped: it releases the lease.
        #expect(try old.close().isComplete)
        #expect(await standby.exitStatus() == 0, "\(standby.stderr)")
        #expect(standby.stdout.contains("promoted: \(replica.path) is the writer of stream \(target.stream) at epoch "))
        #expect(try Self.counters(inStore: replica) == expected)

        // The application opens the promoted directory as the same holder: no wait for a lapse.
        var promoted = target
        promoted.lease?.holder = "app-b"
        let writer = try ReplicatedStore.open(at: replica, schema: schema, target: promoted)
        let c = try writer.context.insert(ToolCounter.self)
        c.name = "after"
        try writer.context.save()
        let after = try Self.counters(in: writer.context)
        #expect(try writer.close().isComplete)
        let restored = scratchDirectory("restored")
        try Restore.run(from: target, to: restored, at: .latest)
        #expect(try Self.counters(inStore: restored) == after)
    }

    @Test func followStartsFromTheNewestBaseAndStopsCleanlyOnSIGTERM() async throws {
        let server = try NATSServer.start()
        var writer = try Writer(server: server)
        try writer.save()
        try writer.save()
        try writer.store.compact()
        try writer.save()
        let replica = scratchDirectory("replica")
        let running = try Run(["follow"] + writer.sourceArguments + [replica.path, "--status-interval", "0.2"])
        #expect(await running.waitForOutput("following "))
        #expect(!running.stdout.contains("from record 0 "), "\(running.stdout)")
        try await Task.sleep(for: .milliseconds(300))
        try writer.save()
        let deadline = ContinuousClock.now + eventBound
        while !running.stderr.contains("applied record \(writer.states[3].sequence) ") && ContinuousClock.now < deadline
        {
            try await Task.sleep(for: .milliseconds(20))
        }
        kill(running.process.processIdentifier, SIGTERM)
        #expect(await running.exitStatus() == 0, "\(running.stderr)")
        #expect(running.stdout.contains("applied record \(writer.states[3].sequence) "), "\(running.stdout)")
        #expect(running.stdout.hasSuffix("; stopped by SIGTERM\n"), "\(running.stdout)")
        // Stopped cleanly: the lock is free and the replica holds the writer's objects.
        #expect(try Self.counters(inStore: replica) == writer.states[3].objects)
        try writer.store.close()
    }

    @Test func aNewReplicaOfALogTrimmedWithoutABaseIsRefused() async throws {
        let server = try NATSServer.start()
        var writer = try Writer(server: server)
        try writer.save()
        try writer.save()
        try writer.store.close()
        let client = try JetStreamClient(servers: [server.url])
        defer { client.close() }
        let firstKept = try client.streamState(writer.target.stream).lastSequence + 1
        // The writer comes back with a model that adds an entity: a new schema record, then
        // transactions that only insert.
        let schema = try Schema(ToolCounter.self, ToolTag.self)
        let reopened = try ReplicatedStore.open(at: writer.directory, schema: schema, target: writer.target)
        for i in 0..<3 {
            let tag = try reopened.context.insert(ToolTag.self)
            tag.label = "t\(i)"
            try reopened.context.save()
        }
        let expected = try Self.counters(in: reopened.context)
        let last = reopened.store.stats.lastSequence
        try reopened.close()
        // The stream loses the log records before that schema record, and holds no base.
        try client.purge(stream: writer.target.stream, subject: writer.target.logSubject, below: firstKept)

        let replica = scratchDirectory("replica")
        let refused = try await Self.tool(
            ["follow"] + writer.sourceArguments + [replica.path, "--until-seq", "\(last)"])
        #expect(refused.status == 1, "\(refused.stdout)")
        #expect(
            refused.stderr.contains(
                "holds no base, and its log starts at record \(writer.states[1].sequence + 1), not the writer's first"),
            "\(refused.stderr)")

        // A follower of the application fails at the first record it reads: its OG-Prev names a
        // record the replica never had.
        let library = scratchDirectory("library-replica")
        var refusedOrFailed = false
        var replicated: [String: Int] = [:]
        do {
            let follower = try await ObjectStore.follow(at: library, schema: schema, source: writer.target)
            _ = await follower.waitUntilApplied(last, timeout: eventBound)
            refusedOrFailed = follower.status.failed != nil
            replicated = Dictionary(
                uniqueKeysWithValues: try follower.store.snapshot.objects(of: ToolCounter.self).map {
                    ($0.name, $0.count)
                })
            try await follower.stop()
        } catch {
            refusedOrFailed = true
        }
        #expect(expected.count == 6)
        #expect(
            refusedOrFailed,
            "the replica holds \(replicated.count) of \(expected.count) counters and reports no failure")
    }

    @Test func followRefusesAMissingStreamAndUnreachableServers() async throws {
        let server = try NATSServer.start()
        let replica = scratchDirectory("replica")
        let missing = try await Self.tool(["follow", "--servers", server.url, "--stream", "NOSUCHSTREAM", replica.path])
        #expect(missing.status == 1)
        #expect(
            missing.stderr.contains("no stream NOSUCHSTREAM on \(server.url): nothing to follow"), "\(missing.stderr)")
        let port = try NATSServer.freePorts(1)[0]
        let unreachable = try await Self.tool([
            "follow", "--servers", "nats://127.0.0.1:\(port)", "--stream", "NONE", replica.path,
        ])
        #expect(unreachable.status == 1)
        #expect(
            unreachable.stderr.contains(
                "graph-journal: cannot follow stream NONE: connecting to nats://127.0.0.1:\(port)"),
            "\(unreachable.stderr)")
        #expect(
            unreachable.seconds < Double(atOnceBound.components.seconds),
            "a refused connection is reported, not retried")
        let interval = try await Self.tool([
            "follow", "--servers", server.url, "--stream", "S", replica.path, "--status-interval", "0",
        ])
        #expect(interval.status == 64)
        #expect(!FileManager.default.fileExists(atPath: replica.path))
    }
}

/// A path under this test process's scratch directory, unique to the call; nothing is there.
private func scratchDirectory(_ name: String) -> URL {
    scratchRoot.appendingPathComponent("\(name)-\(UUID().uuidString.prefix(8))")
}

/// The tool tests' stores and outputs, removed when the test process exits.
private let scratchRoot: URL = {
    atexit {
        try? FileManager.default.removeItem(
            at: FileManager.default.temporaryDirectory
                .appendingPathComponent("objectgraph-tool-replication-\(ProcessInfo.processInfo.processIdentifier)"))
    }
    return FileManager.default.temporaryDirectory
        .appendingPathComponent("objectgraph-tool-replication-\(ProcessInfo.processInfo.processIdentifier)")
}()
