// Converting structs into objects one call at a time, identified by an attribute that no
// unique constraint covers (a bookmark's URL): each call's lookup goes through the identity
// index the context keeps, so the time per struct must not grow with the number of objects.
//
//     cd Tools/Benchmarks && OBJECTGRAPH_MACRO_PLUGIN=$PWD/../../.build/debug/ObjectGraphMacros-tool \
//         swift run -c release struct-conversion [sizes…]
//
// (`make bench-struct-conversion` from the repository root.) For each size n (default 10000,
// 50000, 100000), in a fresh context: n `upsert(structValue:as:identifiedBy:)` calls with
// distinct URLs (each inserts), then n more with the same URLs (each finds its pending object
// and updates it), then n `insert(structValue:as:)` calls for comparison. Prints the time per
// struct of each pass, the best of three rounds, and the load average.

import Foundation
import ObjectGraph

@Entity final class BenchBookmark {
    var url: URL?
    var title: String = ""
    var visits: Int = 0
}

struct BookmarkRecord {
    var url: URL
    var title: String
    var visits: Int
}

func records(_ n: Int, title: String) -> [BookmarkRecord] {
    (0..<n).map { BookmarkRecord(url: URL(fileURLWithPath: "/bookmarks/\($0)"), title: title, visits: $0) }
}

func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    let d = ContinuousClock.now - start
    return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
}

func loadAverage() -> String {
    (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(
        separator: " ") ?? "unknown"
}

struct CountMismatch: Error {
    var expected: Int
}

struct Pass {
    var insertsByURL = Double.infinity
    var updatesByURL = Double.infinity
    var plainInserts = Double.infinity
}

func measure(_ n: Int) throws -> Pass {
    let first = records(n, title: "first"), second = records(n, title: "second")
    var best = Pass()
    for _ in 0..<3 {
        let context = ModelContext(schema: try Schema(BenchBookmark.self))
        let byURL = ValueIdentity.attribute("url")
        let inserts = try seconds {
            for r in first { try context.upsert(structValue: r, as: BenchBookmark.self, identifiedBy: byURL) }
        }
        let updates = try seconds {
            for r in second { try context.upsert(structValue: r, as: BenchBookmark.self, identifiedBy: byURL) }
        }
        guard try context.count(of: BenchBookmark.self) == n else {
            throw CountMismatch(expected: n)
        }
        let plain = ModelContext(schema: try Schema(BenchBookmark.self))
        let plainInserts = try seconds {
            for r in first { try plain.insert(structValue: r, as: BenchBookmark.self) }
        }
        best.insertsByURL = min(best.insertsByURL, inserts)
        best.updatesByURL = min(best.updatesByURL, updates)
        best.plainInserts = min(best.plainInserts, plainInserts)
    }
    return best
}

let sizes = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let ns = sizes.isEmpty ? [10_000, 50_000, 100_000] : sizes
_ = try measure(1_000)  // warm-up
print("struct-conversion: one upsert(structValue:as:identifiedBy: .attribute(\"url\")) per struct, best of 3")
print("load average before: \(loadAverage())")
print(
    "| structs | upsert, inserting (µs/struct) | upsert, updating (µs/struct) | insert(structValue:as:) (µs/struct) |")
print("|---:|---:|---:|---:|")
for n in ns {
    let p = try measure(n)
    func us(_ s: Double) -> String { String(format: "%.2f", s / Double(n) * 1e6) }
    print("| \(n) | \(us(p.insertsByURL)) | \(us(p.updatesByURL)) | \(us(p.plainInserts)) |")
}
print("load average after: \(loadAverage())")
