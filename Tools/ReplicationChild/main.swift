// objectgraph-replication-child: the child process of the replication kill tests.
//
//   objectgraph-replication-child write DIR SERVERS STREAM MAX-MESSAGE-BYTES
//       opens DIR as a store shipping to STREAM (comma-separated SERVERS), then saves forever:
//       each save N inserts one Pkg with a 20 KB value (several messages at a small
//       MAX-MESSAGE-BYTES, so that a kill lands mid-record), prints "saved N SEQ", and
//       pauses 2 ms.
//   objectgraph-replication-child follow DIR SERVERS STREAM
//       follows STREAM into DIR and prints "applied SEQ" as it goes, until killed.
//
// The model is the replication tests' Pkg (same entity name and attributes).

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

let arguments = CommandLine.arguments
guard arguments.count >= 5 else {
    FileHandle.standardError.write(
        Data("usage: objectgraph-replication-child write|follow DIR SERVERS STREAM [MAX-MESSAGE-BYTES]\n".utf8))
    exit(64)
}
let directory = URL(fileURLWithPath: arguments[2])
var target = ReplicationTarget(servers: arguments[3].split(separator: ",").map(String.init), stream: arguments[4])

do {
    let schema = try Schema(Pkg.self)
    switch arguments[1] {
    case "write":
        if arguments.count > 5, let bytes = Int(arguments[5]) { target.maxMessageBytes = bytes }
        let store = try ReplicatedStore.open(at: directory, schema: schema, target: target)
        var n = try store.context.fetchCount(FetchDescriptor<Pkg>())
        let filler = String(repeating: "x", count: 20_000)
        while true {
            let p = try store.context.insert(Pkg.self)
            p.name = "pkg-\(n)"
            p.version = filler + String(n)
            p.size = n
            try store.context.save()
            say("saved \(n) \(store.store.stats.lastSequence)")
            n += 1
            // A pace a test can follow on a loaded machine: a few hundred saves a second.
            usleep(2_000)
        }
    case "follow":
        let follower = try await ObjectStore.follow(at: directory, schema: schema, source: target)
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
            try await Task.sleep(for: .milliseconds(2))
        }
    default:
        FileHandle.standardError.write(Data("unknown mode \(arguments[1])\n".utf8))
        exit(64)
    }
} catch {
    FileHandle.standardError.write(Data("objectgraph-replication-child: \(error)\n".utf8))
    exit(1)
}
