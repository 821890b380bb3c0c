// Redis as a peer: a redis-server process on 127.0.0.1 and a free port, append-only file on, and
// a minimal RESP client over a TCP socket (Glibc), enough for pipelined HSETs, PING and INFO.

import Foundation
import PeopleWorkload

#if canImport(Glibc)
    import Glibc
#endif

struct RedisError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// One RESP reply.
enum RedisReply {
    case simple(String)
    case error(String)
    case integer(Int)
    case bulk([UInt8]?)
    case array([RedisReply]?)

    var text: String {
        switch self {
        case .simple(let s), .error(let s): return s
        case .integer(let i): return String(i)
        case .bulk(let b): return b.map { String(decoding: $0, as: UTF8.self) } ?? "(nil)"
        case .array(let a): return "[" + (a ?? []).map(\.text).joined(separator: ", ") + "]"
        }
    }
}

/// A blocking RESP connection to 127.0.0.1:`port`.
final class RedisConnection {
    private let fd: Int32
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)
    private var start = 0
    private var end = 0

    /// Connects, or returns nil when nothing listens yet (connection refused).
    init?(port: UInt16) {
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard s >= 0 else { return nil }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard rc == 0 else {
            Glibc.close(s)
            return nil
        }
        var one: Int32 = 1
        setsockopt(s, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        fd = s
    }

    deinit { Glibc.close(fd) }

    /// Appends the RESP encoding of the command `args` to `out`.
    static func encode(_ args: [String], into out: inout [UInt8]) {
        out.append(UInt8(ascii: "*"))
        out.append(contentsOf: String(args.count).utf8)
        out.append(contentsOf: [13, 10])
        for a in args {
            out.append(UInt8(ascii: "$"))
            out.append(contentsOf: String(a.utf8.count).utf8)
            out.append(contentsOf: [13, 10])
            out.append(contentsOf: a.utf8)
            out.append(contentsOf: [13, 10])
        }
    }

    func send(_ bytes: [UInt8]) throws {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + done, $0.count - done, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw RedisError("send: errno \(errno)")
            }
            done += n
        }
    }

    /// Sends one command and reads its reply.
    func command(_ args: String...) throws -> RedisReply {
        var out: [UInt8] = []
        Self.encode(args, into: &out)
        try send(out)
        return try readReply()
    }

    private func fill() throws {
        if start == end { start = 0; end = 0 }
        if end == buffer.count {
            if start > 0 {
                buffer.replaceSubrange(0..<(end - start), with: buffer[start..<end])
                end -= start
                start = 0
            } else {
                buffer.append(contentsOf: [UInt8](repeating: 0, count: buffer.count))
            }
        }
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + end, $0.count - end, 0) }
        if n < 0 {
            if errno == EINTR { return }
            throw RedisError("recv: errno \(errno)")
        }
        if n == 0 { throw RedisError("connection closed by redis-server") }
        end += n
    }

    private func readLine() throws -> [UInt8] {
        var scanned = start
        while true {
            while scanned + 1 < end {
                if buffer[scanned] == 13 && buffer[scanned + 1] == 10 {
                    let line = Array(buffer[start..<scanned])
                    start = scanned + 2
                    return line
                }
                scanned += 1
            }
            let offset = scanned - start
            try fill()
            scanned = start + offset
        }
    }

    private func readExactly(_ count: Int) throws -> [UInt8] {
        while end - start < count + 2 { try fill() }
        let bytes = Array(buffer[start..<(start + count)])
        start += count + 2
        return bytes
    }

    func readReply() throws -> RedisReply {
        let line = try readLine()
        guard let kind = line.first else { throw RedisError("empty reply line") }
        let rest = String(decoding: line.dropFirst(), as: UTF8.self)
        switch kind {
        case UInt8(ascii: "+"): return .simple(rest)
        case UInt8(ascii: "-"): return .error(rest)
        case UInt8(ascii: ":"): return .integer(Int(rest) ?? 0)
        case UInt8(ascii: "$"):
            let n = Int(rest) ?? -1
            return n < 0 ? .bulk(nil) : .bulk(try readExactly(n))
        case UInt8(ascii: "*"):
            let n = Int(rest) ?? -1
            if n < 0 { return .array(nil) }
            var items: [RedisReply] = []
            for _ in 0..<n { items.append(try readReply()) }
            return .array(items)
        default:
            throw RedisError("unexpected reply byte \(kind)")
        }
    }
}

/// A free TCP port on 127.0.0.1 (bind to port 0, read it back, close).
func freeLoopbackPort() throws -> UInt16 {
    let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard s >= 0 else { throw RedisError("socket: errno \(errno)") }
    defer { Glibc.close(s) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = 0
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let rc = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { p in
            bind(s, p, len) == 0 ? getsockname(s, p, &len) : -1
        }
    }
    guard rc == 0 else { throw RedisError("bind/getsockname: errno \(errno)") }
    return UInt16(bigEndian: addr.sin_port)
}

/// How the harness configures redis-server's persistence. Both: `appendonly yes`, no RDB
/// snapshots (`save ""`), the AOF in `appendonlydir` (Redis 7's multi-part AOF).
enum RedisPersistence: String, CaseIterable {
    /// `auto-aof-rewrite-percentage 0` (never rewritten): the AOF is every command as written,
    /// and a start replays all of them.
    case rawAOF
    /// Redis's defaults otherwise: `aof-use-rdb-preamble yes` and automatic rewrite (100 %,
    /// 64 MB) as they come; the harness issues one `BGREWRITEAOF` after the bulk load, so that
    /// the AOF is an RDB base file (plus an increment), as a running server's soon is.
    case defaultPersistence

    var arguments: [String] {
        switch self {
        case .rawAOF: return ["--auto-aof-rewrite-percentage", "0"]
        case .defaultPersistence: return []
        }
    }
}

/// A redis-server that this process started, with its AOF in `directory`.
final class RedisServer {
    let process = Process()
    let port: UInt16
    let directory: URL
    /// Seconds from starting the process to the first PONG (the AOF loaded).
    private(set) var secondsToPong = 0.0
    private(set) var connection: RedisConnection!

    /// Starts redis-server on 127.0.0.1 and a free port with `appendonly yes`,
    /// `appendfsync` = `fsync` ("always", "everysec" or "no"), no RDB snapshots and the AOF
    /// options of `persistence`; waits (at most 300 s) until it answers PING with PONG.
    init(directory: URL, fsync: String, persistence: RedisPersistence) throws {
        self.directory = directory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        port = try freeLoopbackPort()
        process.executableURL = URL(fileURLWithPath: redisServerPath())
        process.arguments =
            [
                "--port", String(port), "--bind", "127.0.0.1", "--protected-mode", "yes",
                "--dir", directory.path, "--appendonly", "yes", "--appendfsync", fsync,
                "--appenddirname", "appendonlydir", "--save", "",
                "--daemonize", "no", "--logfile", directory.appendingPathComponent("redis.log").path,
                "--databases", "1",
            ] + persistence.arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        let start = ContinuousClock.now
        try process.run()
        let deadline = start.advanced(by: .seconds(300))
        var connection: RedisConnection?
        while ContinuousClock.now < deadline {
            guard process.isRunning else {
                throw RedisError(
                    "redis-server exited (status \(process.terminationStatus)); see \(directory.path)/redis.log")
            }
            if connection == nil { connection = RedisConnection(port: port) }
            if let c = connection {
                let reply = try c.command("PING")
                if case .simple("PONG") = reply {
                    secondsToPong = seconds(since: start)
                    self.connection = c
                    return
                }
                // -LOADING: the AOF is still being replayed.
            }
            usleep(500)
        }
        stop()
        throw RedisError("redis-server did not answer PING within 300 s")
    }

    /// The `field:value` lines of `INFO <section>`.
    func info(_ section: String) throws -> [String: String] {
        var fields: [String: String] = [:]
        for line in try connection.command("INFO", section).text.split(whereSeparator: \.isNewline) {
            let kv = line.split(separator: ":", maxSplits: 1)
            if kv.count == 2 { fields[String(kv[0])] = String(kv[1]) }
        }
        return fields
    }

    /// `used_memory` of INFO memory, in bytes.
    func usedMemory() throws -> Int { Int(try info("memory")["used_memory"] ?? "") ?? 0 }

    /// `used_memory_peak` of INFO memory: the most the allocator held since the start, in bytes.
    func usedMemoryPeak() throws -> Int { Int(try info("memory")["used_memory_peak"] ?? "") ?? 0 }

    /// The server process's VmRSS in bytes (/proc/<pid>/status).
    func residentBytes() -> Int { statusKilobytes("VmRSS:", pid: process.processIdentifier) * 1024 }

    /// The server process's VmHWM (peak resident memory since its start) in bytes. A forked
    /// child (an AOF rewrite) is a process of its own and not counted.
    func peakResidentBytes() -> Int { statusKilobytes("VmHWM:", pid: process.processIdentifier) * 1024 }

    /// `CONFIG GET <name>`'s value.
    func config(_ name: String) throws -> String {
        guard case .array(let items?) = try connection.command("CONFIG", "GET", name), items.count == 2 else {
            return "?"
        }
        return items[1].text
    }

    /// `BGREWRITEAOF`, then polls `INFO persistence` every 10 ms until no rewrite is in progress
    /// or scheduled and `aof_last_bgrewrite_status` is `ok` (at most 600 s). When the automatic
    /// trigger has already started a rewrite (an AOF over 64 MB that doubled), that one is
    /// waited for instead: it forked after the load's EXEC, so it covers every record. Returns
    /// whether the rewrite was that automatic one.
    @discardableResult
    func rewriteAOF() throws -> Bool {
        let deadline = ContinuousClock.now.advanced(by: .seconds(600))
        func waitForRewrite() throws {
            while true {
                let p = try info("persistence")
                if p["aof_rewrite_in_progress"] == "0" && p["aof_rewrite_scheduled"] == "0" {
                    guard p["aof_last_bgrewrite_status"] == "ok" else {
                        throw RedisError(
                            "BGREWRITEAOF: aof_last_bgrewrite_status \(p["aof_last_bgrewrite_status"] ?? "?")")
                    }
                    return
                }
                guard ContinuousClock.now < deadline else {
                    throw RedisError("BGREWRITEAOF did not finish within 600 s")
                }
                usleep(10_000)
            }
        }
        let reply = try connection.command("BGREWRITEAOF")
        var automatic = false
        if case .error(let e) = reply {
            guard e.contains("already in progress") else { throw RedisError("BGREWRITEAOF: \(e)") }
            automatic = true
        }
        try waitForRewrite()
        return automatic
    }

    /// HSET of records `0..<count` (the people workload, one hash `person:<id>` each: an upsert
    /// by key) inside one MULTI … EXEC: one transaction, written to the AOF (and, with
    /// appendfsync always, fsynced) at EXEC, like the peers' one commit. Commands are pipelined
    /// in batches of 1,000 (each answered +QUEUED); returns when EXEC's reply has arrived.
    func bulkLoad(_ count: Int) throws {
        var out: [UInt8] = []
        out.reserveCapacity(1 << 17)
        guard case .simple("OK") = try connection.command("MULTI") else { throw RedisError("MULTI failed") }
        var i = 0
        while i < count {
            let batch = min(1_000, count - i)
            out.removeAll(keepingCapacity: true)
            for j in i..<(i + batch) {
                RedisConnection.encode(
                    [
                        "HSET", "person:\(j)", "id", String(j), "name", "Person \(j)", "email", "p\(j)@example.com",
                        "age", String(20 + j % 60), "city", "City \(j % 1000)", "score", String(Double(j) * 0.5),
                    ], into: &out)
            }
            try connection.send(out)
            for _ in 0..<batch {
                if case .error(let e) = try connection.readReply() { throw RedisError("HSET: \(e)") }
            }
            i += batch
        }
        let reply = try connection.command("EXEC")
        guard case .array(let items?) = reply, items.count == count else {
            throw RedisError("EXEC: \(reply.text.prefix(200))")
        }
    }

    /// `count` round trips of one HSET each (`score` of person `k % 1000`).
    func smallTransactions(_ count: Int) throws {
        for k in 0..<count {
            if case .error(let e) = try connection.command("HSET", "person:\(k % 1000)", "score", String(Double(k))) {
                throw RedisError("HSET: \(e)")
            }
        }
    }

    /// Stops the server (SIGTERM: it fsyncs the AOF and exits) and waits for it; SIGKILL after 60 s.
    func stop() {
        connection = nil
        guard process.isRunning else { return }
        process.terminate()
        let deadline = ContinuousClock.now.advanced(by: .seconds(60))
        while process.isRunning && ContinuousClock.now < deadline { usleep(2_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    deinit { stop() }
}

func redisServerPath() -> String {
    for p in ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]
    where FileManager.default.isExecutableFile(atPath: p) {
        return p
    }
    return "redis-server"
}
