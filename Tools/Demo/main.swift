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

func bytes(_ n: Int64) -> String {
    n >= 1 << 20 ? String(format: "%.2f MiB", Double(n) / 1048576) : String(format: "%.1f KiB", Double(n) / 1024)
}

/// A digest of every object's values, to show that replay gives back the same graph.
func fingerprint(_ packages: [DebianPackage]) -> String {
    var hasher = Hasher()
    for p in packages.sorted(by: { $0.name < $1.name }) {
        hasher.combine(p.name); hasher.combine(p.version); hasher.combine(p.section); hasher.combine(p.installedSize)
        hasher.combine(p.homepage); hasher.combine(p.depends); hasher.combine(p.sha256)
        hasher.combine(p.maintainedBy?.name)
    }
    return String(UInt64(bitPattern: Int64(hasher.finalize())), radix: 16)
}

func run() throws {
    let arguments = CommandLine.arguments.dropFirst()
    let path = arguments.first ?? "Fixtures/debian-packages.jsonl.lz4"
    let storeURL = URL(fileURLWithPath: arguments.dropFirst().first ?? "demo-store")

    print("ObjectGraph demo — Debian package index slice")
    print("fixture: \(path)")

    let (records, loadTime) = try measure { try DebianPackageRecord.loadFixture(at: URL(fileURLWithPath: path)) }
    print("\(ms(loadTime))  decompressed and decoded \(records.count) package records")

    try? FileManager.default.removeItem(at: storeURL)
    let schema = try Schema(DebianPackage.self, DebianMaintainer.self)
    var store = try ObjectStore.open(at: storeURL, schema: schema)
    var context = store.context

    let (imported, insertTime) = try measure { try context.importUniqueObjects(DebianPackage.self, sourceArray: records) }
    print("\(ms(insertTime))  imported \(imported.count) packages by unique name (importUniqueObjects)")

    // Relationships: one maintainer object per distinct field, found or created by its unique
    // name; setting each package's to-one fills the maintainer's to-many.
    let (maintainerCount, linkTime) = try measure {
        for p in imported {
            p.maintainedBy = try context.upsert(DebianMaintainer.self, where: \.name, equals: p.maintainer) { _ in }
        }
        return try context.count(of: DebianMaintainer.self)
    }
    print("\(ms(linkTime))  linked the packages to \(maintainerCount) maintainers (to-one set, to-many derived)")

    let (_, saveTime) = try measure { try context.save() }
    let stats = store.stats
    print("\(ms(saveTime))  saved to \(storeURL.lastPathComponent)/ (fdatasync included): \(bytes(stats.bytesOnDisk)) on disk, "
        + String(format: "LZ4 ratio %.2f", Double(stats.rawPayloadBytes) / Double(max(stats.storedPayloadBytes, 1))))

    var packages = try context.objects(of: DebianPackage.self)
    let totalInstalled = packages.reduce(Int64(0)) { $0 + ($1.installedSize ?? 0) }
    let bySection = Dictionary(grouping: packages, by: \.section).mapValues(\.count)
    let topSections = bySection.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.prefix(5)
    print("           \(bySection.count) sections, largest: "
        + topSections.map { "\($0.key) (\($0.value))" }.joined(separator: ", "))
    print("           installed size of all: \(totalInstalled / 1024) MiB")

    // Change tracking: a security update bumps every package of the largest maintainer team,
    // reached through its to-many relationship.
    let teams = try context.objects(of: DebianMaintainer.self).map { ($0, $0.packages) }
    guard let (maintainer, teamPackages) = teams.max(by: { ($0.1.count, $1.0.name) < ($1.1.count, $0.0.name) }) else {
        throw DemoFailure(description: "the fixture holds no packages")
    }
    let team = (key: maintainer.name, value: teamPackages)
    let (_, updateTime) = measure {
        for p in team.value { p.version += "+deb12u1" }
    }
    // Setting a value equal to the current one changes nothing (Docs/Semantics.md, rule 2).
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

    // Deleting the maintainer is refused by its deny rule when the save validates.
    context.delete(maintainer)
    do {
        try context.save()
        throw DemoFailure(description: "the deny rule did not stop the save")
    } catch let error as ValidationError {
        print("           deleting \(maintainer.name.prefix(24))…: save refused, \(error.failures.first.map { $0.reason } ?? "")")
    }

    let (_, rollbackTime) = measure { context.rollback() }
    print("\(ms(rollbackTime))  rollback: updated \(context.updatedObjects.count), deleted \(context.deletedObjects.count), "
        + "hasChanges \(context.hasChanges), objects \(try context.count(of: DebianPackage.self))")
    if let sample = team.value.first { print("           \(sample.name) is back to \(String(reflecting: sample.version))") }

    // Importing the same index again finds every package by name in O(1) and changes nothing.
    let (again, reimportTime) = try measure { try context.importUniqueObjects(DebianPackage.self, sourceArray: records) }
    print("\(ms(reimportTime))  re-imported \(again.count) records: \(try context.count(of: DebianPackage.self)) objects, "
        + "hasChanges \(context.hasChanges) (equal values change nothing)")

    // Dependencies resolved through the graph, by name.
    let resolvable = try packages.reduce(0) { count, p in
        try count + p.depends.filter { try context.object(DebianPackage.self, where: \.name, equals: $0) != nil }.count
    }
    let edges = packages.reduce(0) { $0 + $1.depends.count }
    print("           \(edges) Depends edges, \(resolvable) resolve inside the slice (unique-index lookups)")

    // A second save: the security update for real, and a homepage for packages without one.
    let (_, secondSaveTime) = try measure {
        for p in team.value { p.version += "+deb12u1" }
        for p in packages where p.homepage == nil { p.homepage = URL(string: "https://packages.debian.org/bookworm/\(p.name)") }
        try context.save()
    }
    print("\(ms(secondSaveTime))  bumped \(team.value.count) versions, set missing homepages, saved: \(bytes(store.stats.bytesOnDisk)) on disk")
    let before = fingerprint(packages)
    try store.close()

    // Reopen: the journal is replayed into a ready context.
    let (reopened, reopenTime) = try measure { try ObjectStore.open(at: storeURL, schema: schema) }
    store = reopened
    context = store.context
    packages = try context.objects(of: DebianPackage.self)
    let same = fingerprint(packages) == before
    print("\(ms(reopenTime))  reopened: replayed \(store.stats.records) records into \(packages.count) objects; "
        + "values \(same ? "identical" : "DIFFERENT") to before close")
    guard same else { throw DemoFailure(description: "replay did not restore the saved graph") }

    // Compact: the live objects become the new base.
    let bytesBefore = store.stats.bytesOnDisk
    let (_, compactTime) = try measure { try store.compact() }
    print("\(ms(compactTime))  compacted: \(bytes(bytesBefore)) -> \(bytes(store.stats.bytesOnDisk)) in \(store.stats.segments) segment(s)")
    try store.close()
    print("           the store is in \(storeURL.path)/")

    try runSync(records: records, storeURL: storeURL.deletingLastPathComponent().appendingPathComponent(storeURL.lastPathComponent + "-sync"))
}

do {
    try run()
} catch {
    FileHandle.standardError.write(Data("objectgraph-demo: \(error)\n".utf8))
    exit(1)
}
