import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One nats-server process with JetStream on 127.0.0.1, started by a test and stopped by it: its
/// configuration, JetStream store and log in a temporary directory of its own, removed at
/// ``stop()``.
final class NATSTestServer: @unchecked Sendable {
    /// The nats-server executable: on PATH, or in Debian's /usr/sbin, which PATH may lack.
    static let executable: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let directories = path.split(separator: ":").map(String.init) + ["/usr/sbin", "/usr/local/sbin", "/usr/bin"]
        return directories.map { "\($0)/nats-server" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    let port: Int
    let monitorPort: Int
    let directory: URL
    private let process: Process
    var url: String { "nats://127.0.0.1:\(port)" }

    private init(port: Int, monitorPort: Int, directory: URL, process: Process) {
        self.port = port
        self.monitorPort = monitorPort
        self.directory = directory
        self.process = process
    }

    /// Starts a server on free ports and waits until its monitoring endpoint reports JetStream
    /// healthy (`/healthz?js-enabled-only=true`, then `/healthz`), up to `bound`.
    static func start(bound: Duration = .seconds(120)) async throws -> NATSTestServer {
        guard let executable else { throw TestFailure("nats-server is not installed (Tools/install-deps.sh)") }
        let directory = try temporaryDirectory()
        let ports = try freePorts(2)
        let config = """
            listen: "127.0.0.1:\(ports[0])"
            http: "127.0.0.1:\(ports[1])"
            jetstream {
              store_dir: "\(directory.appendingPathComponent("jetstream").path)"
              max_memory_store: 64MB
              max_file_store: 1GB
            }

            """
        let configURL = directory.appendingPathComponent("nats.conf")
        try config.write(to: configURL, atomically: true, encoding: .utf8)
        let logURL = directory.appendingPathComponent("nats.log")
        guard FileManager.default.createFile(atPath: logURL.path, contents: nil) else {
            throw TestFailure("cannot create \(logURL.path)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["-c", configURL.path]
        let log = try FileHandle(forWritingTo: logURL)
        process.standardOutput = log
        process.standardError = log
        try process.run()
        try? log.close()
        let server = NATSTestServer(port: ports[0], monitorPort: ports[1], directory: directory, process: process)
        let deadline = ContinuousClock.now + bound
        while ContinuousClock.now < deadline {
            if !process.isRunning {
                let text = (try? String(contentsOf: logURL, encoding: .utf8)) ?? ""
                server.stop()
                throw TestFailure("nats-server exited with status \(process.terminationStatus):\n\(text)")
            }
            if await server.isHealthy() { return server }
            try await Task.sleep(for: .milliseconds(50))
        }
        server.stop()
        throw TestFailure("nats-server did not report JetStream healthy within \(bound)")
    }

    /// Whether `/healthz` answers 200 (the server is up and JetStream is current).
    private func isHealthy() async -> Bool {
        guard let url = URL(string: "http://127.0.0.1:\(monitorPort)/healthz") else { return false }
        guard let (_, response) = try? await URLSession.shared.data(from: url) else { return false }
        return (response as? HTTPURLResponse)?.statusCode == 200
    }

    /// SIGTERM, waits for the process to end (SIGKILL after 10 s), removes its directory.
    func stop() {
        if process.isRunning {
            process.terminate()
            let deadline = Date().addingTimeInterval(10)
            while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Ports that were free on 127.0.0.1 a moment ago: bound to port 0 together, read back, released.
    static func freePorts(_ count: Int) throws -> [Int] {
        var sockets: [Int32] = []
        defer { for socket in sockets { close(socket) } }
        var ports: [Int] = []
        for _ in 0..<count {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw TestFailure("socket() failed: errno \(errno)") }
            sockets.append(fd)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = 0
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else { throw TestFailure("bind() failed: errno \(errno)") }
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let named = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            guard named == 0 else { throw TestFailure("getsockname() failed: errno \(errno)") }
            ports.append(Int(UInt16(bigEndian: address.sin_port)))
        }
        return ports
    }
}
