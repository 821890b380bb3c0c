import Foundation
import ObjectGraphTestSupport

/// TCP connect to `host:port` (IPv4) succeeds.
func acceptsConnections(host: String, port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { return false }
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    return connected == 0
}

/// Sends `signal` to a child and, for SIGKILL, waits until it is gone.
func signalChild(_ process: Process, _ signal: Int32) {
    guard process.isRunning else { return }
    kill(process.processIdentifier, signal)
    if signal == SIGKILL { process.waitUntilExit() }
}

/// One member of the fault checker's cluster: a nats-server with JetStream, on 127.0.0.1 (its
/// own ports) or inside a namespace of a ``FaultNetwork`` (its own address).
final class FaultServer: @unchecked Sendable {
    let name: String
    let host: String
    let port: Int
    let node: FaultNetwork.Node?
    let directory: URL
    private let network: FaultNetwork?
    private let lock = NSLock()
    private var process: Process?

    var url: String { "nats://\(host):\(port)" }
    var logURL: URL { directory.appendingPathComponent("server.log") }

    init(
        name: String, host: String, port: Int, routePort: Int, routes: [String], clusterName: String,
        network: FaultNetwork?, node: FaultNetwork.Node?
    ) throws {
        self.name = name
        self.host = host
        self.port = port
        self.network = network
        self.node = node
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("objectgraph-faults-\(name)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let routeList = routes.map { "\"nats-route://\($0)\"" }.joined(separator: ", ")
        // Short pings so that a partitioned route or client is noticed within seconds.
        let config = """
            server_name: "\(name)"
            listen: "\(host):\(port)"
            ping_interval: "1s"
            ping_max: 3
            jetstream {
              store_dir: "\(directory.appendingPathComponent("store").path)"
              max_memory_store: 256MB
              max_file_store: 2GB
            }
            cluster {
              name: "\(clusterName)"
              listen: "\(host):\(routePort)"
              routes: [\(routeList)]
            }

            """
        try config.write(to: directory.appendingPathComponent("server.conf"), atomically: true, encoding: .utf8)
        _ = FileManager.default.createFile(atPath: logURL.path, contents: nil)
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Starts the process and waits until its client port accepts connections.
    func launch() throws {
        guard let executable = NATSServer.executable else {
            throw NATSServerError(description: NATSServer.unavailableReason ?? "")
        }
        let log = try FileHandle(forWritingTo: logURL)
        defer { try? log.close() }
        try log.seekToEnd()
        let arguments = ["-c", directory.appendingPathComponent("server.conf").path]
        let (command, commandArguments) =
            if let network, let node { network.command(in: node, executable, arguments) } else {
                (executable, arguments)
            }
        let started = try ChildProcessSpawner.shared.spawn(
            executable: command, arguments: commandArguments, log: log)
        lock.withLock { process = started }
        let deadline = ContinuousClock.now + eventBound
        while !acceptsConnections(host: host, port: port) {
            if !started.isRunning {
                throw NATSServerError(description: "nats-server \(name) exited\n\(logTail())")
            }
            if ContinuousClock.now > deadline {
                throw NATSServerError(description: "nats-server \(name) does not accept connections\n\(logTail())")
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
    }

    /// SIGKILL, then waits until the process is gone.
    func kill() {
        guard
            let running = lock.withLock({ () -> Process? in
                defer { process = nil }; return process
            })
        else { return }
        signalChild(running, SIGKILL)
    }

    var isRunning: Bool { lock.withLock { process?.isRunning ?? false } }

    func logTail(lines: Int = 20) -> String {
        guard let text = try? String(contentsOf: logURL, encoding: .utf8) else { return "(no log)" }
        return "--- \(name): \(logURL.path) ---\n" + text.split(separator: "\n").suffix(lines).joined(separator: "\n")
    }
}

/// Three (or `size`) nats-servers in one JetStream cluster, on loopback or each in a namespace
/// of a ``FaultNetwork``.
final class FaultCluster: @unchecked Sendable {
    let servers: [FaultServer]
    var urls: [String] { servers.map(\.url) }

    private init(servers: [FaultServer]) { self.servers = servers }

    static func start(size: Int = 3, network: FaultNetwork?) throws -> FaultCluster {
        let clusterName = "ogf-\(UUID().uuidString.prefix(6))"
        var servers: [FaultServer] = []
        if let network {
            let nodes = try (1...size).map { try network.addNode($0) }
            servers = try nodes.enumerated().map { index, node in
                try FaultServer(
                    name: "\(clusterName)-s\(index + 1)", host: node.address, port: 4222, routePort: 6222,
                    routes: nodes.filter { $0 != node }.map { "\($0.address):6222" }, clusterName: clusterName,
                    network: network, node: node)
            }
        } else {
            let ports = try NATSServer.freePorts(2 * size)
            servers = try (0..<size).map { index in
                try FaultServer(
                    name: "\(clusterName)-s\(index + 1)", host: "127.0.0.1", port: ports[index],
                    routePort: ports[size + index],
                    routes: (0..<size).filter { $0 != index }.map { "127.0.0.1:\(ports[size + $0])" },
                    clusterName: clusterName, network: nil, node: nil)
            }
        }
        let cluster = FaultCluster(servers: servers)
        for server in servers { try server.launch() }
        try cluster.waitUntilReady()
        return cluster
    }

    /// Waits until a stream with one replica per member can be created.
    func waitUntilReady() throws {
        try NATSServer.waitForJetStream(
            urls: urls, replicas: servers.count, deadline: .now + eventBound, what: "the fault cluster"
        ) { servers.map { $0.logTail(lines: 10) }.joined(separator: "\n") }
    }

    func stop() { for server in servers { server.kill() } }
}
