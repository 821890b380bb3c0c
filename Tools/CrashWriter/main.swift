// objectgraph-crash-writer: the child process of the crash tests. Saves in a loop and prints
// "ack N" after each save returns, until it is killed.
//
//   objectgraph-crash-writer DIR FIRST [always|batched|none] [sync]
//
// Each save N inserts two CrashRecord objects with seq N and sets the Counter to N, so a
// reader can check that every save is all there or not there at all.
//
// With `sync`, each round N is a sync instead: a JSON payload lists the CrashItem IDs
// N..<N+20, each with round N; the sync updates and inserts them and sweeps the rest, so
// after a complete round N the store holds exactly those 20 items, all of round N.
//
// With OBJECTGRAPH_CRASH_KEYS set to the text of a key file (`id hex` lines, the current key
// first), the store is encrypted with those keys; with OBJECTGRAPH_CRASH_ROTATE=1 as well, the
// writer compacts at its start and after every 25 saves (a rotation, when the current key
// changed since the store was written).
//
//   objectgraph-crash-writer migrate DIR
//
// migrates a store of the parcels model from version 1 to 2 (Migration.swift).
//
//   objectgraph-crash-writer service DIR
//
// runs an `AsyncStore` and four writing tasks in a `ServiceGroup` that shuts down gracefully on
// SIGTERM, printing "ack N" after each transaction N returns, and "closed" once the group
// finished (Service.swift).

import Foundation
import GraphJournal
import ObjectGraph

@Entity final class CrashRecord {
    var seq: Int64 = 0
    var half: Int8 = 0
    var payload: String = ""
}

@Entity final class Counter {
    var value: Int64 = 0
}

@Entity final class CrashItem {
    @Attribute(.unique) var id: Int64 = 0
    var round: Int64 = 0
}

let arguments = CommandLine.arguments
if arguments.count == 3 && arguments[1] == "migrate" { runMigration(directory: arguments[2]) }
if arguments.count == 3 && arguments[1] == "service" {
    await runService(directory: arguments[2], schema: try Schema(CrashRecord.self, Counter.self, CrashItem.self))
}
guard arguments.count >= 3, let first = Int64(arguments[2]) else {
    FileHandle.standardError.write(Data("usage: objectgraph-crash-writer DIR FIRST [always|batched|none]\n".utf8))
    exit(64)
}
var options = StoreOptions()
switch arguments.count > 3 ? arguments[3] : "always" {
case "batched": options.durability = .batched(milliseconds: 5)
case "none": options.durability = .none
default: options.durability = .always
}
options.autoCompactionRatio = 3
options.autoCompactionMinimumBytes = 256 << 10
let environment = ProcessInfo.processInfo.environment
let rotates = environment["OBJECTGRAPH_CRASH_ROTATE"] == "1"

do {
    if let keys = environment["OBJECTGRAPH_CRASH_KEYS"] { options.encryption = try JournalEncryption(keyFile: keys) }
    let store = try ObjectStore.open(
        at: URL(fileURLWithPath: arguments[1]), schema: try Schema(CrashRecord.self, Counter.self, CrashItem.self),
        options: options)
    let context = store.context
    if arguments.count > 4 && arguments[4] == "sync" {
        var items = EntityMapping(CrashItem.self)
        try items.map("id", "round")
        var round = first
        while true {
            let payload = (round..<round + 20).map { #"{"id": \#($0), "round": \#(round)}"# }.joined(separator: ",")
            try context.sync([CrashItem.self]) { sync in
                try sync.map(Data(("[" + payload + "]").utf8), with: items)
            }
            FileHandle.standardOutput.write(Data("ack \(round)\n".utf8))
            round += 1
        }
    }
    let counter = try context.objects(of: Counter.self).first ?? context.insert(Counter.self)
    var seq = first
    if rotates { try store.compact() }
    while true {
        if rotates && seq % 25 == 0 { try store.compact() }
        for half in Int8(0)...1 {
            let r = try context.insert(CrashRecord.self)
            r.seq = seq
            r.half = half
            r.payload = "save \(seq) half \(half) " + String(repeating: "x", count: Int(seq % 200))
        }
        counter.value = seq
        try context.save()
        FileHandle.standardOutput.write(Data("ack \(seq)\n".utf8))  // unbuffered: the parent sees it at once
        seq += 1
    }
} catch {
    FileHandle.standardError.write(Data("objectgraph-crash-writer: \(error)\n".utf8))
    exit(1)
}
