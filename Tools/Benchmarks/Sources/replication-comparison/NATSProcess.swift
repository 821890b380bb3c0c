import Foundation
import ObjectGraphReplication

#if canImport(Glibc)
    import Glibc
#endif

/// One nats-server with JetStream on a free loopback port, its store in a temporary directory:
/// `nats-server -a 127.0.0.1 -p <port> -js -sd <dir>`. Stopped (SIGTERM) by ``stop()``; started
/// through `setpriv --pdeathsig KILL` where that exists, from a thread that lives as long as the
/// server, so that the server dies with the benchmark however the benchmark ends.
final class NATSProcess: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Debian's nats-server (in /usr/sbin, which PATH may lack), or the first on PATH.
    static let executable: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let directories = ["/usr/sbin"] + path.split(separator: ":").map(String.init) + ["/usr/local/sbin", "/usr/bin"]
        return directories.map { "\($0)/nats-server" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    let port: Int
    let directory: URL
    private let process: Process
    var url: String { "nats://127.0.0.1:\(port)" }
    var logPath: String { directory.appendingPathComponent("server.log").path }

    /// The server's version line (`nats-server --version`).
    static var version: String {
        guard let executable else { return "?" }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = ["--version"]
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return "?" }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Starts a server and waits until a stream can be created on it.
    static func start() throws -> NATSProcess {
        var last: (any Error)?
        for _ in 0..<3 {
            do {
                let server = try NATSProcess(port: try freePort())
                do {
                    try server.waitUntilReady()
                    return server
                } catch {
                    server.stop()
                    throw error
                }
            } catch {
                last = error  // most likely the port was taken between choosing and binding it
            }
        }
        throw last ?? Failure(description: "nats-server did not start")
    }

    private init(port: Int) throws {
        guard let executable = Self.executable else {
            throw Failure(description: "nats-server is not installed (Tools/install-deps.sh installs Debian's)")
        }
        self.port = port
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "objectgraph-bench-nats-\(getpid())-\(port)")
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let arguments = [
            "-a", "127.0.0.1", "-p", "\(port)", "-js", "-sd", directory.appendingPathComponent("store").path, "-l",
            directory.appendingPathComponent("server.log").path,
        ]
        let process = Process()
        if let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].first(where: {
            FileManager.default.isExecutableFile(atPath: $0)
        }) {
            process.executableURL = URL(fileURLWithPath: setpriv)
            process.arguments = ["--pdeathsig", "KILL", "--", executable] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
        }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        self.process = process
        // The spawning thread waits for the server's exit: the death signal fires when it ends.
        let launch = Launch()
        let thread = Thread {
            do { try process.run() } catch { launch.failure = error }
            launch.started.signal()
            if launch.failure == nil { process.waitUntilExit() }
        }
        thread.name = "nats-server"
        thread.start()
        launch.started.wait()
        if let failure = launch.failure { throw failure }
    }

    private final class Launch: @unchecked Sendable {
        let started = DispatchSemaphore(value: 0)
        var failure: (any Error)?  // written before `started` is signalled, read after
    }

    /// Waits until the port accepts connections, then until JetStream creates a stream.
    private func waitUntilReady() throws {
        let deadline = Date().addingTimeInterval(15)
        while !Self.acceptsConnections(port: port) {
            guard process.isRunning else {
                throw Failure(description: "nats-server exited with status \(process.terminationStatus)\n\(logTail())")
            }
            guard Date() < deadline else {
                throw Failure(description: "nats-server does not accept connections on \(port)\n\(logTail())")
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
        var last: (any Error)?
        while Date() < deadline {
            do {
                _ = try JournalShipper(target: ReplicationTarget(servers: [url], stream: "BENCH_PROBE"))
                return
            } catch {
                last = error
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
        throw Failure(description: "JetStream not ready on \(url): \(last.map { "\($0)" } ?? "")\n\(logTail())")
    }

    /// SIGTERM, then SIGKILL after 10 s; removes the server's directory.
    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// The server's CPU seconds so far (user + system).
    var cpuSeconds: Double { replication_comparison.cpuSeconds(stat: "/proc/\(process.processIdentifier)/stat") }

    /// Bytes under the server's store directory.
    var storeBytes: Int64 {
        guard
            let e = FileManager.default.enumerator(
                at: directory.appendingPathComponent("store"), includingPropertiesForKeys: [.fileSizeKey])
        else { return 0 }
        var total: Int64 = 0
        for case let url as URL in e {
            total += Int64((try? url.resourceValues(forKeys: [.fileSizeKey]))?.fileSize ?? 0)
        }
        return total
    }

    func logTail() -> String {
        guard let text = try? String(contentsOfFile: logPath, encoding: .utf8) else { return "(no log)" }
        return text.split(separator: "\n").suffix(20).joined(separator: "\n")
    }

    /// A port that was free on 127.0.0.1 a moment ago.
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket() failed: errno \(errno)") }
        defer { close(fd) }
        var address = loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { throw Failure(description: "bind() failed: errno \(errno)") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw Failure(description: "getsockname() failed: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func acceptsConnections(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        } == 0
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }
}
