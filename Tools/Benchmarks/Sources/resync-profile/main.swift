// What a no-op resync of an API mirror costs, on the shape a Debian index mirror has: packages
// identified by name and skipped by their version (a modification attribute), maintainers mapped
// from the packages' own fields and connected by e-mail, dependencies connected by a list of
// names (some naming nothing). A first sync fills a durable store; then the same document is
// synced again, which changes nothing, and each of those resyncs is timed.
//
//     swift run -c release resync-profile [packages] [resyncs]
//
// OBJECTGRAPH_PATH=/a/checkout measures another checkout of the library with the same code.

import Foundation
import ObjectGraph

@Entity final class ResyncPackage {
    @Attribute(.unique) var name: String = ""
    var version: String = ""
    var section: String = ""
    var summary: String = ""
    var maintainer: String?
    var dependsNames: [String] = []
    @Relationship(inverse: "packages") var maintainedBy: ResyncMaintainer?
    @Relationship(inverse: "dependents") var depends: [ResyncPackage]
    @Relationship(inverse: "depends") var dependents: [ResyncPackage]
}

@Entity final class ResyncMaintainer {
    @Attribute(.unique) var email: String = ""
    @Relationship(inverse: "maintainedBy") var packages: [ResyncPackage]
}

let arguments = CommandLine.arguments.dropFirst()
let count = arguments.first.flatMap(Int.init) ?? 60_000
let resyncs = arguments.dropFirst().first.flatMap(Int.init) ?? 7

/// A deterministic generator (SplitMix64), so that every run maps the same document.
struct Generator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

func document(_ count: Int) throws -> Data {
    var g = Generator(state: 42)
    var records: [[String: Any]] = []
    records.reserveCapacity(count)
    let sections = ["libs", "utils", "net", "devel", "python", "admin", "web", "doc"]
    for i in 0..<count {
        var depends: [String] = []
        // Like the index: an eighth of the packages depend on nothing, the others on up to six.
        if g.next() % 8 != 0 {
            for _ in 0..<Int(g.next() % 6) + 1 {
                // One dependency in twenty names a package the index does not have.
                depends.append(g.next() % 20 == 0 ? "virtual-\(g.next() % 500)" : "pkg-\(g.next() % UInt64(count))")
            }
        }
        records.append([
            "name": "pkg-\(i)", "version": "1.\(i % 97)-\(i % 13)", "section": sections[i % sections.count],
            "summary": "package number \(i), a summary of the usual length in an index",
            "maintainer": "team-\(g.next() % UInt64(max(count / 8, 1)))@lists.example.org", "depends": depends,
        ])
    }
    return try JSONSerialization.data(withJSONObject: records)
}

func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }

let json = try document(count)
var maintainers = EntityMapping(ResyncMaintainer.self)
try maintainers.map("maintainer", to: "email")
try maintainers.identify(by: "email")
var packages = EntityMapping(ResyncPackage.self)
try packages.map("name", "version", "section", "summary", "maintainer")
try packages.map(["depends": "dependsNames"])
try packages.identify(by: "name")
try packages.useModificationAttribute("version")
try packages.connect("maintainedBy", by: ["maintainer": "email"])
try packages.connect("depends", by: ["dependsNames": "name"])

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("resync-profile-\(UUID().uuidString)")
defer { try? FileManager.default.removeItem(at: directory) }
let store = try ObjectStore.open(at: directory, schema: try Schema(ResyncPackage.self, ResyncMaintainer.self))
let clock = ContinuousClock()
let first = try clock.measure {
    try store.context.sync([ResyncPackage.self, ResyncMaintainer.self]) { sync in
        try sync.map(json, with: maintainers)
        try sync.map(json, with: packages)
    }
}
var times: [Double] = []
var last = SyncResult?.none
for _ in 0..<resyncs {
    let t = try clock.measure {
        last = try store.context.sync([ResyncPackage.self, ResyncMaintainer.self]) { sync in
            try sync.map(json, with: maintainers)
            try sync.map(json, with: packages)
        }
    }
    times.append(seconds(t))
}
try store.close()
times.sort()
let counts = last?.counts["ResyncPackage"].map { "\($0)" } ?? "-"
print("packages \(count), JSON \(json.count / 1024) KiB; first sync \(String(format: "%.3f", seconds(first))) s")
print(
    "no-op resync, median of \(resyncs): \(String(format: "%.1f", times[times.count / 2] * 1000)) ms "
        + "(min \(String(format: "%.1f", times[0] * 1000)), max \(String(format: "%.1f", times[times.count - 1] * 1000))); \(counts)"
)
