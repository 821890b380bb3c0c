import Foundation
import GraphJournal
import ObjectGraph
import ObjectGraphReplication
import ObjectGraphTestSupport
import Testing

/// Kill rounds: a few in `make test`, more in `make replication-test`
/// (OBJECTGRAPH_REPLICATION_KILL_ROUNDS).
let replicationKillRounds =
    ProcessInfo.processInfo.environment["OBJECTGRAPH_REPLICATION_KILL_ROUNDS"].flatMap(Int.init) ?? 4

/// How long a follower is given to catch up. Alone these tests converge in seconds. Under
/// `swift test` every suite runs at once on a cooperative pool as wide as the machine's cores,
/// and tests that block their thread hold off every other task, the follower's applying task
/// included (two tests blocking for 75 s held this one for 75 s on two cores). Twice in full
/// runs on two cores a follower applied its first 256 messages, then nothing for 60 s, with no
/// error; never alone. The wait ends as soon as the follower is there.
let followerCatchUpTimeout: Duration = eventBound

/// SIGKILL a shipping writer mid-publish and a follower mid-apply, at random points.
@Suite(
    .serialized,
    .disabled(if: NATSServer.executable == nil, "nats-server is not installed; Tools/install-deps.sh installs Debian's")
)
struct ReplicationKillTests {
    static var childURL: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(
            "objectgraph-replication-child")
    }

    /// Runs the child with `arguments`, SIGKILLs it after `milliseconds`, returns its output lines.
    static func runAndKill(_ arguments: [String], after milliseconds: ClosedRange<UInt32>) throws -> [Substring] {
        let process = Process()
        process.executableURL = childURL
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        usleep(UInt32.random(in: milliseconds) * 1000)
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return output.split(separator: "\n")
    }

    /// The number of transaction records in a journal directory.
    static func transactionCount(_ directory: URL) throws -> Int {
        try Journal.inspect(directory: directory.path).entries.filter { $0.kind == .transaction }.count
    }

    @Test func aWriterKilledMidPublishRestartsWithoutGapOrDuplicateAndFollowersConverge() async throws {
        let server = try NATSServer.start()
        let stream = freshStream()
        let target = ReplicationTarget(servers: [server.url], stream: stream, maxMessageBytes: 4096)
        let directory = replicationDirectory()
        var acknowledged = 0
        print("replication kill test: \(replicationKillRounds) writer rounds, stream \(stream)")
        for _ in 0..<replicationKillRounds {
            let lines = try Self.runAndKill(["write", directory.path, server.url, stream, "4096"], after: 300...900)
            acknowledged += lines.filter { $0.hasPrefix("saved ") }.count
        }
        print("replication kill test: the killed writers acknowledged \(acknowledged) saves")
        #expect(acknowledged > 0)
        // The writer comes back once more, in this process, and ships what the kills left.
        let writer = try ReplicatedStore.open(at: directory, schema: pkgSchema, target: target)
        try writer.shipper.waitShipped(through: writer.store.stats.lastSequence, timeout: eventBound)
        #expect(try writer.context.fetchCount(FetchDescriptor<Pkg>()) >= acknowledged)
        #expect(try checkLogChain(target) == Array(1...writer.store.stats.lastSequence))
        let follower = try await ObjectStore.follow(at: replicationDirectory(), schema: pkgSchema, source: target)
        #expect(
            await follower.waitUntilApplied(writer.store.stats.lastSequence, timeout: followerCatchUpTimeout),
            "\(follower.status)")
        #expect(try state(follower.store.snapshot) == state(writer.context))
        try await follower.stop()
        try writer.close()
    }

    @Test func aFollowerKilledAtRandomPointsResumesWithoutReplayingOrSkipping() async throws {
        let server = try NATSServer.start()
        let stream = freshStream()
        let target = ReplicationTarget(servers: [server.url], stream: stream)
        let writerDirectory = replicationDirectory()
        // A writer in another process saves all along, so the kills land while records arrive.
        let writerProcess = Process()
        writerProcess.executableURL = Self.childURL
        writerProcess.arguments = ["write", writerDirectory.path, server.url, stream, "1048576"]
        writerProcess.standardOutput = FileHandle.nullDevice
        try writerProcess.run()
        let replica = replicationDirectory()
        var killedAt: [String] = []
        for _ in 0..<replicationKillRounds {
            let lines = try Self.runAndKill(["follow", replica.path, server.url, stream], after: 150...600)
            killedAt.append(String(lines.last { $0.hasPrefix("applied ") }?.dropFirst(8) ?? "none"))
        }
        kill(writerProcess.processIdentifier, SIGKILL)
        writerProcess.waitUntilExit()
        let writer = try ReplicatedStore.open(at: writerDirectory, schema: pkgSchema, target: target)
        try writer.shipper.waitShipped(through: writer.store.stats.lastSequence, timeout: eventBound)
        print(
            "replication kill test: followers killed after applying \(killedAt.joined(separator: ", ")) of \(writer.store.stats.lastSequence)"
        )
        let follower = try await ObjectStore.follow(at: replica, schema: pkgSchema, source: target)
        #expect(
            await follower.waitUntilApplied(writer.store.stats.lastSequence, timeout: followerCatchUpTimeout),
            "\(follower.status)")
        #expect(try state(follower.store.snapshot) == state(writer.context))
        try await follower.stop()
        // Every transaction of the writer is in the replica's journal exactly once: a replayed
        // one would have failed to apply (an insert twice), a skipped one would differ above.
        #expect(try Self.transactionCount(replica) == Self.transactionCount(writerDirectory))
        try writer.close()
    }
}
