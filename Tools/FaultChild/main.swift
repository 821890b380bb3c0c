// objectgraph-fault-child: the processes of the fault checker (Tests/ReplicationTests/Faults).
//
//   objectgraph-fault-child write DIR SERVERS STREAM KEYLOG HOLDER [LEASE-MS]
//       opens DIR as a store shipping to STREAM (comma-separated SERVERS, 3 replicas) under the
//       synchronous policy, holding the stream's writer lease as HOLDER (time to live LEASE-MS;
//       no lease when 0 or absent), then saves forever: each save inserts one Pkg whose name is
//       the unique key HOLDER-N and whose size is the journal sequence the save's record takes.
//       Only once save() returned (the stream acknowledged the record) is the key appended to
//       KEYLOG as "KEY SEQUENCE MONOTONIC-NS".
//   objectgraph-fault-child standby DIR SERVERS STREAM KEYLOG HOLDER LEASE-MS
//       follows STREAM into DIR as a standby; once the lease lapsed and it took the stream
//       over, prints "promoted MONOTONIC-NS" and saves as a writer does.
//   objectgraph-fault-child follow DIR SERVERS STREAM
//       follows STREAM into DIR and prints "applied SEQ" as it goes, until killed.
//
// Standard output gets one line per event: "opened", "standing-by", "promoted NS", "fenced",
// "diverged", "failed ...". Exit status 3: this writer was fenced off the stream (a standby took
// it over); 4: the stream refused its history.
//
// The model is the replication tests' Pkg (same entity name and attributes), so the checker
// opens the stores these processes write with its own schema.

import Foundation
import ObjectGraph
import ObjectGraphReplication

@Entity final class Pkg {
    @Attribute(.unique) var name: String = ""
    var version: String = ""
    var size: Int = 0
}

/// One line to standard output, unbuffered: the parent reads it after a SIGKILL.
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the machine, so the parent
/// compares it with its own readings (a kill, a pause).
func monotonicNanoseconds() -> UInt64 {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
}

/// Appends lines to the key log. Each line is one write(2) to a file opened with O_APPEND: a
/// SIGKILL cannot undo a write that returned (the page cache outlives the process), and the
/// fault runs never take the machine down, so no fsync is needed. A line written half (the
/// kill inside the call) has no newline, and the checker ignores it: a key that was
/// acknowledged but not logged is allowed, a logged key that was not acknowledged is not.
final class KeyLog {
    let fd: Int32

    init(path: String) throws {
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path]) }
    }

    func append(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if written != bytes.count {
            say("failed writing the key log")
            exit(1)
        }
    }
}

/// The replication code of an error, if it is one.
func replicationCode(_ error: any Error) -> ReplicationError.Code? { (error as? ReplicationError)?.code }

/// Runs `start` until it stops failing with one of `passing` (servers away, killed, partitioned
/// or electing a leader; a lease held by a writer that is going): the parent kills this process
/// if that never happens.
func retrying<T>(while passing: Set<ReplicationError.Code>, _ start: () async throws -> T) async throws -> T {
    while true {
        do {
            return try await start()
        } catch  where replicationCode(error).map(passing.contains) == true {
            try await Task.sleep(for: .milliseconds(200))
        }
    }
}

/// Saves forever on `store`, logging each acknowledged key.
func writeForever(_ store: ReplicatedStore, holder: String, log: KeyLog) throws -> Never {
    var n = 0
    var lastRefusal = ""
    let filler = String(repeating: "v", count: 100)
    while true {
        let key = "\(holder)-\(n)"
        // The record this save writes: the next sequence, after the schema record that a new
        // store's first save writes before it.
        let last = store.store.stats.lastSequence
        let sequence = last + (last == 0 ? 2 : 1)
        let p = try store.context.insert(Pkg.self)
        p.name = key
        p.version = filler
        p.size = Int(sequence)
        n += 1
        do {
            try store.context.save()
            // The sequence the record took, read back: the checker compares it with the object.
            log.append("\(key) \(store.store.stats.lastSequence) \(monotonicNanoseconds())")
        } catch {
            switch replicationCode(error) {
            case .notAcknowledged:
                // The save stands locally and ships later; it was not acknowledged, so it is
                // not logged. Said once per distinct reason, for the parent's diagnostics.
                let reason = "not-acknowledged \(store.shipper.status.lastError ?? "\(error)")"
                if reason != lastRefusal {
                    say(reason)
                    lastRefusal = reason
                }
                usleep(20_000)
            case .fenced:
                say("fenced \(error)")
                exit(3)
            case .diverged:
                say("diverged \(error)")
                exit(4)
            default:
                say("failed \(error)")
                exit(1)
            }
        }
        usleep(5_000)
    }
}

let arguments = CommandLine.arguments
guard arguments.count >= 5 else {
    FileHandle.standardError.write(
        Data("usage: objectgraph-fault-child write|standby|follow DIR SERVERS STREAM [KEYLOG HOLDER [LEASE-MS]]\n".utf8)
    )
    exit(64)
}
let directory = URL(fileURLWithPath: arguments[2])
var target = ReplicationTarget(
    servers: arguments[3].split(separator: ",").map(String.init), stream: arguments[4], replicas: 3,
    policy: .synchronous(timeout: .seconds(2)))
if arguments.count >= 8, let milliseconds = Int(arguments[7]), milliseconds > 0 {
    target.lease = WriterLease(holder: arguments[6], ttl: .milliseconds(milliseconds))
}

do {
    let schema = try Schema(Pkg.self)
    switch arguments[1] {
    case "write":
        guard arguments.count >= 7 else {
            say("failed write needs KEYLOG and HOLDER")
            exit(64)
        }
        let log = try KeyLog(path: arguments[5])
        let store = try await retrying(while: [.server, .leaseHeld]) {
            try ReplicatedStore.open(at: directory, schema: schema, target: target)
        }
        say("opened")
        try writeForever(store, holder: arguments[6], log: log)
    case "standby":
        guard arguments.count >= 8, target.lease != nil else {
            say("failed standby needs KEYLOG, HOLDER and LEASE-MS")
            exit(64)
        }
        let log = try KeyLog(path: arguments[5])
        let standby = try await retrying(while: [.server]) {
            try await Standby.start(at: directory, schema: schema, source: target)
        }
        say("standing-by")
        // Its phase and last error as they change, for the parent's diagnostics.
        let watcher = Task {
            var last = ""
            while !Task.isCancelled {
                let status = standby.status
                let line = "standby \(status.phase) \(status.lastError ?? "")"
                if line != last {
                    say(line)
                    last = line
                }
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        let writer = try await standby.promoted()
        watcher.cancel()
        say("promoted \(monotonicNanoseconds())")
        try writeForever(writer, holder: arguments[6], log: log)
    case "follow":
        let follower = try await retrying(while: [.server]) {
            try await Follower.start(at: directory, schema: schema, source: target)
        }
        say("opened")
        var last: UInt64 = 0
        while true {
            let applied = follower.status.appliedSequence
            if applied != last {
                say("applied \(applied)")
                last = applied
            }
            if let failed = follower.status.failed {
                say("failed \(failed)")
                exit(1)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    default:
        FileHandle.standardError.write(Data("unknown mode \(arguments[1])\n".utf8))
        exit(64)
    }
} catch {
    say("failed \(error)")
    exit(1)
}
