// objectgraph-demo: loads a slice of Debian's package index into an object graph and shows
// change tracking, rollback, saves, and the Depends many-to-many (a query and a delete) on real
// data, with timings.
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
    n >= 1 << 20 ? String(format: "%.2f MiB", Double(n) / 1_048_576) : String(format: "%.1f KiB", Double(n) / 1024)
}

/// A digest of every object's values and relationships, to show that replay gives back the
/// same graph.
func fingerprint(_ packages: [DebianPackage]) -> String {
    var hasher = Hasher()
    for p in packages.sorted(by: { $0.name < $1.name }) {
        hasher.combine(p.name); hasher.combine(p.version); hasher.combine(p.section); hasher.combine(p.installedSize)
        hasher.combine(p.homepage); hasher.combine(p.dependsNames); hasher.combine(p.sha256)
        hasher.combine(p.maintainedBy?.name)
        hasher.combine(p.depends.map(\.name).sorted())
    }
    return String(UInt64(bitPattern: Int64(hasher.finalize())), radix: 16)
}

/// The number of `Depends` links between the context's packages.
func dependsLinks(_ context: ModelContext) throws -> Int {
    try context.objects(of: DebianPackage.self).reduce(0) { $0 + $1.depends.count }
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

    let (imported, insertTime) = try measure {
        try context.importUniqueObjects(DebianPackage.self, sourceArray: records)
    }
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

    // Dependencies: each package's `Depends` names become links to the packages of the slice,
    // found through the unique index on `name`; setting `depends` fills each target's
    // `dependents` (a many-to-many of packages with themselves).
    let names = records.reduce(0) { $0 + $1.depends.count }
    let dependsByName = Dictionary(records.map { ($0.name, $0.depends) }, uniquingKeysWith: { first, _ in first })
    let (unresolved, dependsTime) = try measure {
        try imported.reduce(0) { try $0 + $1.linkDepends(to: dependsByName[$1.name] ?? [], in: context) }
    }
    let links = try dependsLinks(context)
    print(
        "\(ms(dependsTime))  linked \(links) Depends between packages (many-to-many depends/dependents, unique-index lookups); "
            + "\(unresolved) of the \(names) names are virtual or outside the slice")

    let (_, saveTime) = try measure { try context.save() }
    let stats = store.stats
    print(
        "\(ms(saveTime))  saved to \(storeURL.lastPathComponent)/ (fdatasync included): \(bytes(stats.bytesOnDisk)) on disk, "
            + String(format: "LZ4 ratio %.2f", Double(stats.rawPayloadBytes) / Double(max(stats.storedPayloadBytes, 1)))
    )

    var packages = try context.objects(of: DebianPackage.self)
    let totalInstalled = packages.reduce(Int64(0)) { $0 + ($1.installedSize ?? 0) }
    let bySection = Dictionary(grouping: packages, by: \.section).mapValues(\.count)
    let topSections = bySection.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.prefix(5)
    print(
        "           \(bySection.count) sections, largest: "
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
        print(
            "           \(sample.name): \(committed.map { "\($0)" } ?? "nil") -> \(String(reflecting: sample.version))")
    }

    // Deletions with the changes still pending.
    let obsolete = packages.filter { $0.section == "oldlibs" || $0.name.hasSuffix("-dbg") }
    for p in obsolete { context.delete(p) }
    print(
        "           deleted \(obsolete.count) packages (section oldlibs or -dbg), pending: "
            + "\(context.updatedObjects.count) updated, \(context.deletedObjects.count) deleted; Depends links \(links) -> \(try dependsLinks(context))"
    )

    // Deleting the maintainer is refused by its deny rule when the save validates.
    context.delete(maintainer)
    do {
        try context.save()
        throw DemoFailure(description: "the deny rule did not stop the save")
    } catch let error as ValidationError {
        print(
            "           deleting \(maintainer.name.prefix(24))…: save refused, \(error.failures.first.map { $0.reason } ?? "")"
        )
    }

    let (_, rollbackTime) = measure { context.rollback() }
    print(
        "\(ms(rollbackTime))  rollback: updated \(context.updatedObjects.count), deleted \(context.deletedObjects.count), "
            + "hasChanges \(context.hasChanges), objects \(try context.count(of: DebianPackage.self)), Depends links \(try dependsLinks(context))"
    )
    if let sample = team.value.first {
        print("           \(sample.name) is back to \(String(reflecting: sample.version))")
    }

    // Importing the same index again finds every package by name in O(1) and changes nothing.
    let (again, reimportTime) = try measure {
        try context.importUniqueObjects(DebianPackage.self, sourceArray: records)
    }
    print(
        "\(ms(reimportTime))  re-imported \(again.count) records: \(try context.count(of: DebianPackage.self)) objects, "
            + "hasChanges \(context.hasChanges) (equal values change nothing)")
    // Linking the same names again finds the same sets: nothing changes either.
    let relinked = try measure {
        try packages.reduce(0) { try $0 + $1.linkDepends(to: dependsByName[$1.name] ?? [], in: context) }
    }.1
    print(
        "\(ms(relinked))  re-linked the Depends of \(packages.count) packages: hasChanges \(context.hasChanges) (the same sets change nothing)"
    )

    // A second save: the security update for real, and a homepage for packages without one.
    let (_, secondSaveTime) = try measure {
        for p in team.value { p.version += "+deb12u1" }
        for p in packages where p.homepage == nil {
            p.homepage = URL(string: "https://packages.debian.org/bookworm/\(p.name)")
        }
        try context.save()
    }
    print(
        "\(ms(secondSaveTime))  bumped \(team.value.count) versions, set missing homepages, saved: \(bytes(store.stats.bytesOnDisk)) on disk"
    )
    let before = fingerprint(packages)
    try store.close()

    // Reopen: the journal is replayed into a ready context.
    let (reopened, reopenTime) = try measure { try ObjectStore.open(at: storeURL, schema: schema) }
    store = reopened
    context = store.context
    packages = try context.objects(of: DebianPackage.self)
    let same = fingerprint(packages) == before
    print(
        "\(ms(reopenTime))  reopened: replayed \(store.stats.records) records into \(packages.count) objects and \(try dependsLinks(context)) Depends links; "
            + "values and links \(same ? "identical" : "DIFFERENT") to before close")
    guard same else { throw DemoFailure(description: "replay did not restore the saved graph") }

    // A query over the links: the packages most others depend on.
    let ((dependedOn, top), queryTime) = try measure {
        let found = try context.fetch(FetchDescriptor<DebianPackage>(predicate: #Predicate { !$0.dependents.isEmpty }))
        let counted = found.map { ($0, $0.dependents.count) }.sorted { ($0.1, $1.0.name) > ($1.1, $0.0.name) }
        return (found.count, Array(counted.prefix(10)))
    }
    print(
        "\(ms(queryTime))  \(dependedOn) packages have dependents (#Predicate { !$0.dependents.isEmpty }); the 10 most depended on:"
    )
    for row in stride(from: 0, to: top.count, by: 5) {
        print("           " + top[row..<min(row + 5, top.count)].map { "\($0.0.name) \($0.1)" }.joined(separator: ", "))
    }

    // Deleting a package: the delete rule (nullify) takes it out of every dependent's `depends`
    // at once, and the save frees the links. The package chosen is the one most depended on.
    guard let (removed, dependentCount) = top.first, let example = removed.dependents.min(by: { $0.name < $1.name })
    else {
        throw DemoFailure(description: "no package has dependents")
    }
    let removedName = removed.name
    let linksBefore = try dependsLinks(context)
    let exampleBefore = example.depends.count
    let (_, deleteTime) = measure { context.delete(removed) }
    let listing = try context.fetchCount(
        FetchDescriptor<DebianPackage>(predicate: #Predicate { $0.depends.contains { $0.name == removedName } }))
    print(
        "\(ms(deleteTime))  deleted \(removedName): \(dependentCount) packages listed it in depends, \(listing) do now; "
            + "Depends links \(linksBefore) -> \(try dependsLinks(context))")
    print("           e.g. \(example.name) depends on \(exampleBefore) -> \(example.depends.count) packages")
    let bytesBeforeDelete = store.stats.bytesOnDisk
    let (_, deleteSaveTime) = try measure { try context.save() }
    print(
        "\(ms(deleteSaveTime))  saved the deletion: one journal record of \(store.stats.bytesOnDisk - bytesBeforeDelete) bytes "
            + "(the links of a deleted object go with it)")
    let afterDelete = fingerprint(try context.objects(of: DebianPackage.self))

    // Compact: the live objects become the new base.
    let bytesBefore = store.stats.bytesOnDisk
    let (_, compactTime) = try measure { try store.compact() }
    print(
        "\(ms(compactTime))  compacted: \(bytes(bytesBefore)) -> \(bytes(store.stats.bytesOnDisk)) in \(store.stats.segments) segment(s)"
    )
    try store.close()

    // Reopen the compacted store: its base holds every link.
    let (compacted, compactedOpenTime) = try measure { try ObjectStore.open(at: storeURL, schema: schema) }
    store = compacted
    context = store.context
    let sameAfterCompaction = fingerprint(try context.objects(of: DebianPackage.self)) == afterDelete
    print(
        "\(ms(compactedOpenTime))  reopened the compacted store: \(try context.count(of: DebianPackage.self)) objects, "
            + "\(try dependsLinks(context)) Depends links, \(removedName) \(try context.object(DebianPackage.self, where: \.name, equals: removedName) == nil ? "gone" : "STILL THERE"); "
            + "values and links \(sameAfterCompaction ? "identical" : "DIFFERENT")")
    guard sameAfterCompaction else {
        throw DemoFailure(description: "the compacted store differs from the one before compaction")
    }
    try store.close()
    print("           the store is in \(storeURL.path)/")

    try runSync(
        records: records,
        storeURL: storeURL.deletingLastPathComponent().appendingPathComponent(storeURL.lastPathComponent + "-sync"))
    try runEvolution(
        records: records,
        storeURL: storeURL.deletingLastPathComponent().appendingPathComponent(storeURL.lastPathComponent + "-evolution")
    )
}

do {
    try run()
} catch {
    FileHandle.standardError.write(Data("objectgraph-demo: \(error)\n".utf8))
    exit(1)
}
