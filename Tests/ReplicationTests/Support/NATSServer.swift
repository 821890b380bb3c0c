import Foundation
import NATSJetStream
import ObjectGraphTestSupport

/// Why a nats-server could not be had.
struct NATSServerError: Error, CustomStringConvertible {
    let description: String
}

/// One nats-server process on 127.0.0.1, with JetStream by default, its configuration, store and
/// log in a temporary directory of its own. Killed when released, its directory removed.
final class NATSServer: @unchecked Sendable {
    /// The nats-server executable: on PATH, or in Debian's /usr/sbin, which PATH may lack.
    static let executable: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let directories = path.split(separator: ":").map(String.init) + ["/usr/sbin", "/usr/local/sbin", "/usr/bin"]
        return directories.map { "\($0)/nats-server" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    /// The installed version as "2.9", or "(unknown version)".
    static var versionText: String { version.map { "\($0.major).\($0.minor)" } ?? "(unknown version)" }

    /// Why the tests that need a server cannot run here, or nil when they can.
    static var unavailableReason: String? {
        executable == nil ? "nats-server is not installed (Tools/install-deps.sh installs Debian's nats-server)" : nil
    }

    /// The installed nats-server's version as (major, minor), from `nats-server --version`; nil
    /// when it cannot be read.
    static let version: (major: Int, minor: Int)? = {
        guard let executable else { return nil }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--version"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return nil }
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        // "nats-server: v2.9.10"
        guard let v = output.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines).dropFirst()
        else { return nil }
        let parts = v.split(separator: ".").compactMap { Int($0) }
        return parts.count >= 2 ? (parts[0], parts[1]) : nil
    }()

    /// The safest fsync setting of the installed nats-server, for its `jetstream {}` block:
    /// `sync_interval: always` (fsync each message before acknowledging it) from 2.10 on. 2.9
    /// has no setting and refuses the field ("unknown field"): its file store fsyncs a stream's
    /// messages every 2 minutes and a stream's Raft log every 5, hard-coded
    /// (Docs/Replication.md, "Durability of the servers").
    static var safestSyncSetting: String? {
        guard let version, version.major > 2 || (version.major == 2 && version.minor >= 10) else { return nil }
        return "sync_interval: always"
    }

    let name: String
    let port: Int
    let directory: URL
    /// For a cluster member: the replicas of the probe stream that shows it ready.
    let probeReplicas: Int
    let jetStream: Bool
    var url: String { "nats://127.0.0.1:\(port)" }
    var logURL: URL { directory.appendingPathComponent("server.log") }

    // The running process; guarded by `lock`.
    private let lock = NSLock()
    private var process: Process?

    /// Starts a single server on a free port and waits until it accepts connections and, with
    /// JetStream, until a stream can be created.
    static func start(jetStream: Bool = true) throws -> NATSServer {
        var lastError: (any Error)?
        for _ in 0..<3 {
            let server = try NATSServer(name: "og-single", port: try freePorts(1)[0], jetStream: jetStream)
            do {
                try server.launch()
                try server.waitUntilReady(probeURLs: [server.url], deadline: .now + eventBound)
                return server
            } catch {
                // Most likely the port was taken between choosing and binding it.
                lastError = error
            }
        }
        throw lastError ?? NATSServerError(description: "nats-server did not start")
    }

    /// Writes the configuration of a server; `cluster` makes it a member of a JetStream cluster.
    init(
        name: String, port: Int, jetStream: Bool = true,
        cluster: (name: String, port: Int, routes: [Int])? = nil, probeReplicas: Int = 1
    ) throws {
        if let reason = Self.unavailableReason { throw NATSServerError(description: reason) }
        self.name = name
        self.port = port
        self.jetStream = jetStream
        self.probeReplicas = probeReplicas
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("objectgraph-nats-\(name)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var config = """
            server_name: "\(name)"
            listen: "127.0.0.1:\(port)"

            """
        if jetStream {
            config += """
                jetstream {
                  store_dir: "\(directory.appendingPathComponent("store").path)"
                  max_memory_store: 256MB
                  max_file_store: 2GB
                  \(Self.safestSyncSetting ?? "# no fsync setting in nats-server \(Self.versionText): every 2 minutes")
                }

                """
        }
        if let cluster {
            let routes = cluster.routes.map { "\"nats-route://127.0.0.1:\($0)\"" }.joined(separator: ", ")
            config += """
                cluster {
                  name: "\(cluster.name)"
                  listen: "127.0.0.1:\(cluster.port)"
                  routes: [\(routes)]
                }

                """
        }
        try config.write(to: directory.appendingPathComponent("server.conf"), atomically: true, encoding: .utf8)
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Starts the process and waits until its client port accepts connections.
    func launch() throws {
        guard let executable = Self.executable else { throw NATSServerError(description: Self.unavailableReason ?? "") }
        if !FileManager.default.fileExists(atPath: logURL.path) {
            guard FileManager.default.createFile(atPath: logURL.path, contents: nil) else {
                throw NATSServerError(description: "cannot create \(logURL.path)")
            }
        }
        let log = try FileHandle(forWritingTo: logURL)
        defer { try? log.close() }
        try log.seekToEnd()
        let configPath = directory.appendingPathComponent("server.conf").path
        let started = try ChildProcessSpawner.shared.spawn(
            executable: executable, arguments: ["-c", configPath], log: log)
        lock.withLock { process = started }
        let deadline = ContinuousClock.now + eventBound
        while !Self.acceptsConnections(port: port) {
            if !started.isRunning {
                throw NATSServerError(
                    description: "nats-server \(name) exited with status \(started.terminationStatus)\n\(logTail())")
            }
            if ContinuousClock.now > deadline {
                throw NATSServerError(
                    description: "nats-server \(name) does not accept connections on \(port)\n\(logTail())")
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
    }

    /// Waits until a stream with `probeReplicas` replicas can be created through `probeURLs`.
    func waitUntilReady(probeURLs: [String], deadline: ContinuousClock.Instant) throws {
        guard jetStream else { return }
        try Self.waitForJetStream(
            urls: probeURLs, replicas: probeReplicas, deadline: deadline, what: "nats-server \(name)"
        ) {
            self.logTail()
        }
    }

    /// SIGKILL, then waits until the process is gone.
    func kill() { signal(SIGKILL) }

    /// SIGTERM (a clean shutdown), then waits; SIGKILL after 10 s.
    func stop() { signal(SIGTERM) }

    /// Starts the server again on the same port with the same store, and waits until it accepts
    /// connections and JetStream is ready (for a cluster member: a stream of all members'
    /// replicas can be created through it).
    func restart() throws {
        stop()
        try launch()
        try waitUntilReady(probeURLs: [url], deadline: .now + eventBound)
    }

    var isRunning: Bool { lock.withLock { process?.isRunning ?? false } }

    private func signal(_ number: Int32) {
        guard
            let running = lock.withLock({ () -> Process? in
                defer { process = nil }
                return process
            })
        else { return }
        if running.isRunning { Foundation.kill(running.processIdentifier, number) }
        let deadline = Date().addingTimeInterval(10)
        while running.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        if running.isRunning {
            Foundation.kill(running.processIdentifier, SIGKILL)
            running.waitUntilExit()
        }
    }

    /// The last lines of the server's log.
    func logTail(lines: Int = 30) -> String {
        guard let text = try? String(contentsOf: logURL, encoding: .utf8) else { return "(no log at \(logURL.path))" }
        return "--- last lines of \(logURL.path) ---\n"
            + text.split(separator: "\n").suffix(lines).joined(separator: "\n")
    }

    // MARK: Helpers

    /// Ports that were free on 127.0.0.1 a moment ago: each is bound to port 0 at the same time
    /// (so they differ), read back, and released.
    static func freePorts(_ count: Int) throws -> [Int] {
        var sockets: [Int32] = []
        defer { for socket in sockets { close(socket) } }
        var ports: [Int] = []
        for _ in 0..<count {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw NATSServerError(description: "socket() failed: errno \(errno)") }
            sockets.append(fd)
            var address = loopback(port: 0)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else { throw NATSServerError(description: "bind() failed: errno \(errno)") }
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let named = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            guard named == 0 else { throw NATSServerError(description: "getsockname() failed: errno \(errno)") }
            ports.append(Int(UInt16(bigEndian: address.sin_port)))
        }
        return ports
    }

    /// True when a TCP connection to 127.0.0.1:`port` succeeds.
    static func acceptsConnections(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return connected == 0
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }

    /// Polls until a probe stream with `replicas` replicas can be created (and is deleted again)
    /// through a client of `urls`.
    static func waitForJetStream(
        urls: [String], replicas: Int, deadline: ContinuousClock.Instant, what: String, log: () -> String
    ) throws {
        let probe = "HARNESS_PROBE_\(UUID().uuidString.prefix(8))"
        var lastError: JetStreamError?
        var client: JetStreamClient?
        while ContinuousClock.now < deadline {
            do throws(JetStreamError) {
                let connected: JetStreamClient
                if let client {
                    connected = client
                } else {
                    connected = try JetStreamClient(servers: urls, name: "harness-probe", timeout: .seconds(2))
                    client = connected
                }
                var configuration = StreamConfiguration(
                    name: probe, subjects: ["harness.probe.\(probe)"], replicas: replicas)
                configuration.duplicateWindow = .seconds(1)
                try connected.ensureStream(configuration)
                try connected.deleteStream(probe)
                connected.close()
                return
            } catch {
                lastError = error
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
        client?.close()
        throw NATSServerError(
            description:
                "\(what): JetStream not ready (a stream of \(replicas) replicas could not be created): \(lastError.map { "\($0)" } ?? "no attempt")\n\(log())"
        )
    }
}
