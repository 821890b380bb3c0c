import Foundation
import NATSJetStream
import ObjectGraph
import ObjectGraphReplication
import ObjectGraphTestSupport
import Testing

/// A stream's replicas as `ensureStream` leaves them, and servers without JetStream, against
/// real nats-server processes: a single server, a 3-node cluster, a server started without `-js`.
@Suite(
    .serialized,
    .disabled(if: NATSServer.executable == nil, "nats-server is not installed; Tools/install-deps.sh installs Debian's")
)
struct StreamReplicasTests {
    /// Calls `body` until it returns or `duration` has passed, then rethrows its last error.
    private func retry<T>(for duration: Duration, _ body: () throws -> T) throws -> T {
        let deadline = ContinuousClock.now + duration
        while true {
            do { return try body() } catch {
                if ContinuousClock.now > deadline { throw error }
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
    }

    @Test func aClusterRaisesTheReplicasOfAStreamCreatedWithFewerAndKeepsItsMessages() throws {
        let cluster = try NATSCluster.start(size: 3)
        let client = try JetStreamClient(servers: cluster.urls, timeout: .seconds(5))
        defer { client.close() }
        let one = StreamConfiguration(name: "RAISED", subjects: ["raised.>"])
        try client.ensureStream(one)
        #expect(try client.replicas(of: "RAISED") == 1)
        for index in 1...3 { _ = try client.publish(subject: "raised.log", payload: [UInt8(index)]) }

        let state = try client.ensureStream(StreamConfiguration(name: "RAISED", subjects: ["raised.>"], replicas: 3))
        #expect(state.lastSequence == 3 && state.messages == 3)
        #expect(try client.replicas(of: "RAISED") == 3)
        #expect(try client.currentReplicas(of: "RAISED") == 3)
        // A reader asking for fewer replicas than the stream keeps changes nothing.
        #expect(try client.ensureStream(one).lastSequence == 3)
        #expect(try client.replicas(of: "RAISED") == 3)
        _ = try client.publish(subject: "raised.log", payload: [4], expectedLastSequence: 3)

        // The stream survives the loss of a member: the others hold every message, the three
        // published before the raise included, whichever member held the single copy.
        cluster.kill(0)
        let survivor = try JetStreamClient(servers: Array(cluster.urls.dropFirst()), timeout: .seconds(2))
        defer { survivor.close() }
        let payloads = try retry(for: eventBound) { () throws -> [[UInt8]] in
            let reader = try survivor.reader(stream: "RAISED", from: 1)
            defer { reader.close() }
            let messages = try reader.next(max: 10, timeout: .seconds(1))
            guard messages.count == 4 else { throw NATSServerError(description: "read \(messages.count) of 4") }
            return messages.map(\.payload)
        }
        #expect(payloads == [[1], [2], [3], [4]])
        // A restarted member of a stream whose replicas were raised does not always catch up
        // again with nats-server 2.9.10 (its copy stayed behind for 5 minutes in some runs):
        // reported, not required.
        try cluster.restart(0)
        let deadline = ContinuousClock.now + .seconds(30)
        var current = 0
        while ContinuousClock.now < deadline {
            current = (try? survivor.currentReplicas(of: "RAISED")) ?? 0
            if current == 3 { break }
            Thread.sleep(forTimeInterval: 0.2)
        }
        print("a raised stream, 30 s after a member's restart: \(current) current copies of 3")
    }

    @Test func aClusterRefusesMoreReplicasThanItHasServers() throws {
        let cluster = try NATSCluster.start(size: 3)
        let client = try JetStreamClient(servers: cluster.urls, timeout: .seconds(5))
        defer { client.close() }
        try client.ensureStream(StreamConfiguration(name: "THREE", subjects: ["three.>"], replicas: 3))
        let refused = #expect(throws: JetStreamError.self) {
            try client.ensureStream(StreamConfiguration(name: "THREE", subjects: ["three.>"], replicas: 5))
        }
        #expect(refused?.code == .tooFewReplicas)
        #expect(
            refused?.message.contains("stream THREE keeps 3 copies of its messages, 5 replicas requested") == true,
            "\(String(describing: refused))")
        #expect(try client.replicas(of: "THREE") == 3)
        let new = #expect(throws: JetStreamError.self) {
            try client.ensureStream(StreamConfiguration(name: "FIVE", subjects: ["five.>"], replicas: 5))
        }
        #expect(new?.code == .tooFewReplicas, "\(String(describing: new))")
    }

    @Test func aSingleServerRefusesMoreThanOneReplicaWhetherTheStreamExistsOrNot() throws {
        let server = try NATSServer.start()
        let client = try JetStreamClient(servers: [server.url], timeout: .seconds(2))
        defer { client.close() }
        let created = #expect(throws: JetStreamError.self) {
            try client.ensureStream(StreamConfiguration(name: "NEW", subjects: ["new.>"], replicas: 3))
        }
        #expect(created?.code == .tooFewReplicas)
        #expect(created?.message.contains("is not part of a cluster") == true, "\(String(describing: created))")

        try client.ensureStream(StreamConfiguration(name: "ONE", subjects: ["one.>"]))
        let raised = #expect(throws: JetStreamError.self) {
            try client.ensureStream(StreamConfiguration(name: "ONE", subjects: ["one.>"], replicas: 3))
        }
        #expect(raised?.code == .tooFewReplicas)
        #expect(
            raised?.message.contains("stream ONE keeps 1 copy of its messages, 3 replicas requested") == true,
            "\(String(describing: raised))")
        // The server would accept an update to 3 replicas and still keep one copy: none was made.
        #expect(try client.replicas(of: "ONE") == 1)
        print("a single server asked for 3 replicas: \(String(describing: raised))")
    }

    @Test func aWriterOpenedAfterAFollowerCreatedTheStreamGetsItsReplicas() async throws {
        let cluster = try NATSCluster.start(size: 3)
        let stream = freshStream()
        // A generous bound for the stream's creation: a cluster just started may still be
        // electing its meta leader, longer than the default 2 s on a busy machine.
        let readerTarget = ReplicationTarget(servers: cluster.urls, stream: stream, timeout: .seconds(30))
        let follower = try await ObjectStore.follow(at: replicationDirectory(), schema: pkgSchema, source: readerTarget)
        let client = try JetStreamClient(servers: cluster.urls, timeout: .seconds(5))
        defer { client.close() }
        #expect(try client.replicas(of: stream) == 1)

        let writerTarget = ReplicationTarget(
            servers: cluster.urls, stream: stream, replicas: 3, policy: .synchronous(timeout: .seconds(10)),
            timeout: .seconds(10))
        let writer = try ReplicatedStore.open(at: replicationDirectory(), schema: pkgSchema, target: writerTarget)
        #expect(try client.replicas(of: stream) == 3)
        try syncRound(writer.context, round: 0)
        cluster.kill(0)
        do {
            try syncRound(writer.context, round: 1)
        } catch let error as ReplicationError where error.code == .notAcknowledged {
            // A leader election can outlast the timeout; the save stands and ships later.
        }
        try writer.shipper.waitShipped(through: writer.store.stats.lastSequence, timeout: eventBound)
        #expect(await follower.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound))
        #expect(try state(follower.store.snapshot) == state(writer.context))
        try await follower.stop()
        try writer.close()
    }

    @Test func aWriterAskingAStandaloneServerForThreeReplicasIsRefused() async throws {
        let server = try NATSServer.start()
        let stream = freshStream()
        let follower = try await ObjectStore.follow(
            at: replicationDirectory(), schema: pkgSchema,
            source: ReplicationTarget(servers: [server.url], stream: stream))
        let refused = #expect(throws: ReplicationError.self) {
            try ReplicatedStore.open(
                at: replicationDirectory(), schema: pkgSchema,
                target: ReplicationTarget(servers: [server.url], stream: stream, replicas: 3))
        }
        #expect(refused?.code == .tooFewReplicas)
        #expect(refused?.message.contains("stream \(stream) keeps 1 copy") == true, "\(String(describing: refused))")
        try await follower.stop()
    }

    @Test func theTestServersUseTheSafestFsyncSettingTheInstalledServerAccepts() throws {
        let version = try #require(NATSServer.version, "nats-server --version could not be read")
        let executable = try #require(NATSServer.executable)
        // What the installed server says of `sync_interval: always`.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "objectgraph-sync-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = directory.appendingPathComponent("sync.conf")
        try """
        listen: "127.0.0.1:4222"
        jetstream {
          store_dir: "\(directory.path)"
          sync_interval: always
        }
        """.write(to: config, atomically: true, encoding: .utf8)
        let check = Process()
        check.executableURL = URL(fileURLWithPath: executable)
        check.arguments = ["-t", "-c", config.path]
        let output = Pipe()
        check.standardOutput = output
        check.standardError = output
        try check.run()
        let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        check.waitUntilExit()
        let server = try NATSServer.start()
        let written = try String(contentsOf: server.directory.appendingPathComponent("server.conf"), encoding: .utf8)
        print("nats-server \(NATSServer.versionText) on sync_interval: always: \(said)")
        if version.major == 2 && version.minor < 10 {
            #expect(check.terminationStatus != 0)
            #expect(said.contains("unknown field \"sync_interval\""), "\(said)")
            #expect(NATSServer.safestSyncSetting == nil)
            #expect(!written.contains("sync_interval: always"), "\(written)")
        } else {
            #expect(check.terminationStatus == 0, "\(said)")
            #expect(written.contains("  sync_interval: always\n"), "\(written)")
        }
    }

    @Test func aServerWithoutJetStreamIsNamedAsSuch() throws {
        let server = try NATSServer.start(jetStream: false)
        let client = try JetStreamClient(servers: [server.url], timeout: .seconds(2))
        defer { client.close() }
        let created = #expect(throws: JetStreamError.self) {
            try client.ensureStream(StreamConfiguration(name: "S", subjects: ["s.>"]))
        }
        #expect(created?.code == .jetStreamNotEnabled)
        #expect(created?.message.contains("JetStream is not enabled on the server") == true)
        print("a server without JetStream: \(String(describing: created))")
        #expect(throws: JetStreamError.self) { try client.streamState("S") }
        #expect((try? client.streamState("S")) == nil)
        do {
            _ = try client.streamState("S")
        } catch {
            #expect(error.code == .jetStreamNotEnabled)
        }

        let opened = #expect(throws: ReplicationError.self) {
            try ReplicatedStore.open(
                at: replicationDirectory(), schema: pkgSchema,
                target: ReplicationTarget(servers: [server.url], stream: freshStream()))
        }
        #expect(opened?.code == .server)
        #expect(opened?.message.contains("JetStream is not enabled on the server") == true)
    }
}
