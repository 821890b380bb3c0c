// objectgraph-demo: loads a slice of Debian's package index into an object graph and shows
// change tracking, rollback and saves on real data, with timings.
//
//   swift run -c release objectgraph-demo [Fixtures/debian-packages.jsonl.lz4]

import Foundation
import ObjectGraph

struct DemoFailure: Error, CustomStringConvertible {
    let description: String
}

func measure<T>(_ body: () throws -> T) rethrows -> (T, Double) {
    let start = ContinuousClock.now
    let value = try body()
    let elapsed = ContinuousClock.now - start
    let (seconds, attoseconds) = elapsed.components
    return (value, (Double(seconds) + Double(attoseconds) / 1e18) * 1000)
}

func ms(_ v: Double) -> String { String(format: "%8.2f ms", v) }

func run() throws {
    let arguments = CommandLine.arguments.dropFirst()
    let path = arguments.first ?? "Fixtures/debian-packages.jsonl.lz4"

    print("ObjectGraph demo — Debian package index slice")
    print("fixture: \(path)")

    let (records, loadTime) = try measure { try DebianPackageRecord.loadFixture(at: URL(fileURLWithPath: path)) }
    print("\(ms(loadTime))  decompressed and decoded \(records.count) package records")

    let schema = try Schema(DebianPackage.self)
    let context = ModelContext(schema: schema)

    let (_, insertTime) = try measure {
        for record in records {
            let package = try context.insert(DebianPackage.self)
            package.update(from: record)
        }
    }
    print("\(ms(insertTime))  inserted \(context.insertedObjects.count) objects")

    let (_, saveTime) = try measure { try context.save() }
    print("\(ms(saveTime))  saved (committed state; the journal arrives with the store)")

    let packages = try context.objects(of: DebianPackage.self)
    let totalInstalled = packages.reduce(Int64(0)) { $0 + ($1.installedSize ?? 0) }
    let bySection = Dictionary(grouping: packages, by: \.section).mapValues(\.count)
    let topSections = bySection.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.prefix(5)
    print("           \(bySection.count) sections, largest: "
        + topSections.map { "\($0.key) (\($0.value))" }.joined(separator: ", "))
    print("           installed size of all: \(totalInstalled / 1024) MiB")

    // Change tracking: a security update bumps every package of one maintainer team.
    guard let team = Dictionary(grouping: packages, by: \.maintainer).max(by: { $0.value.count < $1.value.count }) else {
        throw DemoFailure(description: "the fixture holds no packages")
    }
    let (_, updateTime) = measure {
        for p in team.value { p.version += "+deb12u1" }
    }
    // Setting a value equal to the current one changes nothing (DESIGN rule 2).
    for p in packages.prefix(100) { p.section = p.section }
    print("\(ms(updateTime))  bumped the version of \(team.value.count) packages maintained by \(team.key)")
    print("           updatedObjects: \(context.updatedObjects.count), hasChanges: \(context.hasChanges)")
    if let sample = team.value.first {
        let committed = try sample.committedValues(forKeys: ["version"])["version"] ?? nil
        print("           \(sample.name): \(committed.map { "\($0)" } ?? "nil") -> \(String(reflecting: sample.version))")
    }

    // Deletions with the changes still pending.
    let obsolete = packages.filter { $0.section == "oldlibs" || $0.name.hasSuffix("-dbg") }
    for p in obsolete { context.delete(p) }
    print("           deleted \(obsolete.count) packages (section oldlibs or -dbg), pending: "
        + "\(context.updatedObjects.count) updated, \(context.deletedObjects.count) deleted")

    let (_, rollbackTime) = measure { context.rollback() }
    print("\(ms(rollbackTime))  rollback: updated \(context.updatedObjects.count), deleted \(context.deletedObjects.count), "
        + "hasChanges \(context.hasChanges), objects \(try context.count(of: DebianPackage.self))")
    if let sample = team.value.first { print("           \(sample.name) is back to \(String(reflecting: sample.version))") }

    // Dependencies resolved through the graph, by name.
    let byName = Dictionary(packages.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
    let resolvable = packages.reduce(0) { $0 + $1.depends.filter { byName[$0] != nil }.count }
    let edges = packages.reduce(0) { $0 + $1.depends.count }
    print("           \(edges) Depends edges, \(resolvable) resolve inside the slice")

    // A real save of a change: every package gets a new mirror homepage if it had none.
    let (_, secondSaveTime) = try measure {
        for p in packages where p.homepage == nil { p.homepage = URL(string: "https://packages.debian.org/bookworm/\(p.name)") }
        try context.save()
    }
    print("\(ms(secondSaveTime))  set a homepage on packages without one and saved; hasChanges \(context.hasChanges)")
}

do {
    try run()
} catch {
    FileHandle.standardError.write(Data("objectgraph-demo: \(error)\n".utf8))
    exit(1)
}
