// failover-comparison: how long a stream is without a writer when its writer dies.
//
// Three nats-servers with JetStream in one cluster on 127.0.0.1 (free ports, stores in a
// temporary directory), a stream of 3 replicas, a writer holding the stream's lease (default time
// to live) and saving under the synchronous policy, and a standby following it, each a process
// of its own (this executable, re-run as `child writer|standby ...`). Each round SIGKILLs the
// writer and measures, on CLOCK_MONOTONIC (one clock for every process of the machine), the time
// from the kill until the standby took the stream over and until its first save the stream
// acknowledged; then the standby is the writer and a new standby starts on a fresh directory.
// Prints a Markdown report; `make bench-failover` writes it to Results/failover.md.
//
//     swift run -c release failover-comparison [ROUNDS]

import Foundation
import ObjectGraph
import ObjectGraphReplication

@Entity final class Item {
    @Attribute(.unique) var key: String = ""
    var value: Int = 0
}

struct Failure: Error, CustomStringConvertible {
    let description: String
}

func monotonicNanoseconds() -> UInt64 {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
}

/// One line to standard output, unbuffered (the parent reads the file it goes to).
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

// MARK: The children

/// Saves forever, one object a save; prints "first-ack NS" after the first save the stream
/// acknowledged.
func saveForever(_ store: ReplicatedStore, holder: String) throws -> Never {
    var n = 0
    var first = true
    while true {
        let item = try store.context.insert(Item.self)
        item.key = "\(holder)-\(n)"
        item.value = n
        n += 1
        do {
            try store.context.save()
            if first {
                say("first-ack \(monotonicNanoseconds())")
                first = false
            }
        } catch let error as ReplicationError where error.code == .notAcknowledged {
            usleep(10_000)
        }
        usleep(2_000)
    }
}

func child(_ arguments: [String]) async throws -> Never {
    // child writer|standby DIR SERVERS STREAM HOLDER
    let directory = URL(fileURLWithPath: arguments[1])
    var target = ReplicationTarget(
        servers: arguments[2].split(separator: ",").map(String.init), stream: arguments[3], replicas: 3,
        policy: .synchronous(timeout: .seconds(5)))
    target.lease = WriterLease(holder: arguments[4])
    let schema = try Schema(Item.self)
    if arguments[0] == "writer" {
        while true {
            do {
                let store = try ReplicatedStore.open(at: directory, schema: schema, target: target)
                say("opened")
                try saveForever(store, holder: arguments[4])
            } catch let error as ReplicationError where error.code == .server || error.code == .leaseHeld {
                usleep(100_000)
            }
        }
    }
    let standby = try await Standby.start(at: directory, schema: schema, source: target)
    say("standing-by")
    let writer = try await standby.promoted()
    say("promoted \(monotonicNanoseconds())")
    try saveForever(writer, holder: arguments[4])
}

// MARK: Processes

let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].first { FileManager.default.isExecutableFile(atPath: $0) }

/// A process whose output goes to a file; killed with the benchmark (`setpriv --pdeathsig`).
final class Spawned: @unchecked Sendable {
    let process = Process()
    let output: URL

    init(_ executable: String, _ arguments: [String], output: URL) throws {
        self.output = output
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        if let setpriv {
            process.executableURL = URL(fileURLWithPath: setpriv)
            process.arguments = ["--pdeathsig", "KILL", "--", executable] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
        }
        let handle = try FileHandle(forWritingTo: output)
        defer { try? handle.close() }
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    func kill() {
        guard process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    var lines: [Substring] {
        String(decoding: FileManager.default.contents(atPath: output.path) ?? Data(), as: UTF8.self).split(
            separator: "\n")
    }

    /// The value after `prefix` on the first line that starts with it.
    func stamp(_ prefix: String) -> UInt64? {
        lines.first { $0.hasPrefix(prefix + " ") }.flatMap { UInt64($0.dropFirst(prefix.count + 1)) }
    }

    /// Waits until `condition` holds; fails if the process exits first or after `bound`.
    func wait(_ what: String, bound: Duration = .seconds(300), _ condition: () -> Bool) throws {
        let deadline = ContinuousClock.now + bound
        while !condition() {
            guard process.isRunning else {
                throw Failure(description: "\(what): the process exited: \(lines.suffix(5).joined(separator: " | "))")
            }
            guard ContinuousClock.now < deadline else { throw Failure(description: "\(what): nothing after \(bound)") }
            usleep(2_000)
        }
    }
}

/// Ports free on 127.0.0.1 a moment ago (bound to port 0 together, read back, released).
func freePorts(_ count: Int) throws -> [Int] {
    var sockets: [Int32] = []
    defer { for s in sockets { close(s) } }
    return try (0..<count).map { _ in
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        sockets.append(fd)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard ok else { throw Failure(description: "no free port: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// Three nats-servers in one JetStream cluster on 127.0.0.1.
func startCluster(in directory: URL) throws -> (servers: [Spawned], urls: [String]) {
    guard
        let executable = ["/usr/sbin/nats-server", "/usr/local/sbin/nats-server", "/usr/bin/nats-server"].first(where: {
            FileManager.default.isExecutableFile(atPath: $0)
        })
    else { throw Failure(description: "nats-server is not installed (Tools/install-deps.sh installs Debian's)") }
    let ports = try freePorts(6)
    var servers: [Spawned] = []
    for i in 0..<3 {
        let routes = (0..<3).filter { $0 != i }.map { "\"nats-route://127.0.0.1:\(ports[3 + $0])\"" }
        let store = directory.appendingPathComponent("server-\(i + 1)")
        try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
        let config = """
            server_name: "failover-\(i + 1)"
            listen: "127.0.0.1:\(ports[i])"
            jetstream { store_dir: "\(store.path)" }
            cluster { name: "failover", listen: "127.0.0.1:\(ports[3 + i])", routes: [\(routes.joined(separator: ", "))] }

            """
        let configURL = store.appendingPathComponent("server.conf")
        try config.write(to: configURL, atomically: true, encoding: .utf8)
        servers.append(
            try Spawned(executable, ["-c", configURL.path], output: store.appendingPathComponent("server.log")))
    }
    return (servers, (0..<3).map { "nats://127.0.0.1:\(ports[$0])" })
}

// MARK: The benchmark

func percentile(_ sorted: [Double], _ p: Double) -> Double {
    sorted[max(0, min(sorted.count - 1, Int((p * Double(sorted.count)).rounded(.up)) - 1))]
}

func run(rounds: Int) throws {
    let work = FileManager.default.temporaryDirectory.appendingPathComponent(
        "objectgraph-failover-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
    var children: [Spawned] = []
    let (servers, urls) = try startCluster(in: work)
    defer {
        for c in children { c.kill() }
        for s in servers { s.kill() }
        try? FileManager.default.removeItem(at: work)
    }
    let stream = "FAILOVER\(UInt32.random(in: 0...UInt32.max))"
    let me = CommandLine.arguments[0]
    var incarnation = 0
    func spawn(_ role: String) throws -> Spawned {
        incarnation += 1
        let name = "\(role)-\(incarnation)"
        let child = try Spawned(
            me,
            [
                "child", role, work.appendingPathComponent(name).path, urls.joined(separator: ","), stream, name,
            ], output: work.appendingPathComponent("\(name).out"))
        children.append(child)
        return child
    }
    let lease = WriterLease()
    // The writer retries until the cluster elected its leaders and created the stream.
    var writer = try spawn("writer")
    try writer.wait("the first writer's first acknowledged save") { writer.stamp("first-ack") != nil }
    var promotions: [Double] = []
    var firstSaves: [Double] = []
    for _ in 0..<rounds {
        let standby = try spawn("standby")
        try standby.wait("a standby following") { standby.lines.contains("standing-by") }
        // Caught up and following live saves before the kill.
        Thread.sleep(forTimeInterval: 1)
        let killed = monotonicNanoseconds()
        writer.kill()
        try standby.wait("the standby's first acknowledged save") { standby.stamp("first-ack") != nil }
        promotions.append(Double(standby.stamp("promoted")! - killed) / 1e6)
        firstSaves.append(Double(standby.stamp("first-ack")! - killed) / 1e6)
        writer = standby
    }

    let ttl = Double(lease.ttl.components.seconds) * 1000 + Double(lease.ttl.components.attoseconds) / 1e15
    func f(_ v: Double) -> String { String(format: "%.0f", v) }
    func row(_ name: String, _ values: [Double]) -> String {
        let s = values.sorted()
        let p50 = percentile(s, 0.5)
        let p99 = percentile(s, 0.99)
        return
            "| \(name) | \(f(p50)) | \(String(format: "%.2f", p50 / ttl)) | \(f(percentile(s, 0.9))) | \(f(p99)) | \(String(format: "%.2f", p99 / ttl)) | \(f(s.first!)) | \(f(s.last!)) |"
    }
    print("# Failover: a writer SIGKILLed, its standby takes the stream over")
    print()
    print(
        "3 nats-servers (\(urls.count)-member JetStream cluster on 127.0.0.1, stream of 3 replicas); the writer saves one object at a time under `.synchronous(timeout: 5 s)` with the stream's writer lease (`WriterLease()`: time to live \(f(ttl)) ms, renewed every third of it); the standby (`Standby.start`) follows it on a fresh directory; each a release-build process of its own. \(rounds) failovers: each SIGKILLs the writer once the standby has followed it for a second, and times, on CLOCK_MONOTONIC, the kill to the standby's promotion (`promoted()` returned) and to its first save the stream acknowledged; the standby is then the writer and a new standby starts."
    )
    print()
    print("| from the SIGKILL to | p50 ms | p50 / TTL | p90 ms | p99 ms | p99 / TTL | min ms | max ms |")
    print("|---|---|---|---|---|---|---|---|")
    print(row("the standby promoted", promotions))
    print(row("its first acknowledged save", firstSaves))
    print()
    print(
        "p99 of \(rounds) failovers is the nearest rank, that is the largest. Every failover, in ms to the first acknowledged save: \(firstSaves.map(f).joined(separator: ", "))."
    )
}

let arguments = Array(CommandLine.arguments.dropFirst())
do {
    if arguments.first == "child" {
        try await child(Array(arguments.dropFirst()))
    }
    try run(rounds: arguments.first.flatMap(Int.init) ?? 20)
} catch {
    FileHandle.standardError.write(Data("failover-comparison: \(error)\n".utf8))
    exit(1)
}
