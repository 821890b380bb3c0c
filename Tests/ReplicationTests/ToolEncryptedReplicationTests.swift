import Foundation
import GraphJournal
import ObjectGraph
import ObjectGraphReplication
import Testing

/// `graph-journal restore` and `follow` of a writer encrypted at rest: its records ship sealed,
/// and the tool is given the writer's keys with `--key-file`; without them, or with another
/// key, it says which key it needs and writes nothing.
@Suite(
    .serialized,
    .disabled(if: NATSServer.executable == nil, "nats-server is not installed; Tools/install-deps.sh installs Debian's")
)
struct ToolEncryptedReplicationTests {
    static let key = try! JournalKey(id: "ship-1", hex: String(repeating: "a5", count: 32))

    /// A new directory under the temporary directory; nothing is there.
    static func scratch(_ name: String) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent(
            "objectgraph-tool-encrypted-\(ProcessInfo.processInfo.processIdentifier)/\(name)-\(UUID().uuidString.prefix(8))"
        )
    }

    /// A key file holding ``key``.
    static func keyFile() throws -> URL {
        let file = scratch("keys")
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("\(key.id) \(key.hex)\n".utf8).write(to: file)
        return file
    }

    /// The counters of a store opened with ``key``.
    static func counters(inStore directory: URL) throws -> [String: Int] {
        var options = StoreOptions()
        options.autoCompactionRatio = nil
        options.journal.encryption = JournalEncryption(key: key)
        let store = try ObjectStore.openDynamic(at: directory, options: options)
        defer { try? store.close() }
        return try ToolReplicationTests.counters(in: store.context)
    }

    /// An encrypted writer shipping to a new stream, after `saves` saves (a compaction after the
    /// second); returns its stream's arguments, its last sequence and its counters.
    static func writer(
        _ server: NATSServer, saves: Int
    ) throws -> (arguments: [String], last: UInt64, counters: [String: Int]) {
        let target = ReplicationTarget(
            servers: [server.url], stream: "ENC" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12),
            policy: .synchronous(timeout: .seconds(60)))
        var options = StoreOptions()
        options.journal.encryption = JournalEncryption(key: key)
        let store = try ReplicatedStore.open(
            at: scratch("writer"), schema: try Schema(ToolCounter.self), options: options, target: target)
        for round in 0..<saves {
            let c = try store.context.insert(ToolCounter.self)
            c.name = "c\(round)"
            c.count = round
            try store.context.save()
            if round == 1 { try store.compact() }
        }
        let last = store.store.stats.lastSequence
        let counters = try ToolReplicationTests.counters(in: store.context)
        try store.close()
        return (["--servers", server.url, "--stream", target.stream], last, counters)
    }

    @Test func restoreOfAnEncryptedWriterKeepsItsRecordsSealedAndChecksTheKey() async throws {
        let server = try NATSServer.start()
        let writer = try Self.writer(server, saves: 4)
        let keys = try Self.keyFile()
        let restored = Self.scratch("restored")
        let run = try await ToolReplicationTests.tool(
            ["restore"] + writer.arguments + ["--latest", restored.path, "--key-file", keys.path])
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        #expect(run.stdout.contains("keys checked: every sealed record opens (keys ship-1)"), "\(run.stdout)")
        #expect(try Self.counters(inStore: restored) == writer.counters)
        let verify = try await ToolReplicationTests.tool(["verify", restored.path])
        #expect(verify.stdout.contains("contents not (no key given)"), "\(verify.stdout)")
    }

    @Test func followOfAnEncryptedWriterOpensTheReplicaWithTheKeys() async throws {
        let server = try NATSServer.start()
        let writer = try Self.writer(server, saves: 4)
        let keys = try Self.keyFile()
        let replica = Self.scratch("replica")
        let run = try await ToolReplicationTests.tool(
            ["follow"] + writer.arguments + [replica.path, "--until-seq", "\(writer.last)", "--key-file", keys.path])
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        #expect(try Self.counters(inStore: replica) == writer.counters)
    }

    @Test func restoreAndFollowWithoutTheKeyOrWithAnotherOneNameTheKeyAndWriteNothing() async throws {
        let server = try NATSServer.start()
        let writer = try Self.writer(server, saves: 4)
        let other = Self.scratch("other-keys")
        try FileManager.default.createDirectory(
            at: other.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("ship-1 \(String(repeating: "5a", count: 32))\n".utf8).write(to: other)
        for (keyArguments, says) in [([String](), "give the keys"), (["--key-file", other.path], "another key")] {
            let restored = Self.scratch("restored")
            let restore = try await ToolReplicationTests.tool(
                ["restore"] + writer.arguments + ["--latest", restored.path] + keyArguments)
            #expect(restore.status == 1, "\(restore.stdout)\(restore.stderr)")
            #expect(restore.stderr.contains("ship-1") && restore.stderr.contains(says), "\(restore.stderr)")
            #expect(!FileManager.default.fileExists(atPath: restored.path))
            let replica = Self.scratch("replica")
            let follow = try await ToolReplicationTests.tool(
                ["follow"] + writer.arguments + [replica.path, "--until-seq", "\(writer.last)"] + keyArguments)
            #expect(follow.status == 1, "\(follow.stdout)\(follow.stderr)")
            #expect(follow.stderr.contains("ship-1") && follow.stderr.contains(says), "\(follow.stderr)")
        }
    }
}
