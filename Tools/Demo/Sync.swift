import Foundation
import ObjectGraph

// The demo's second part: a daemon mirroring the package index with syncs.
//
// Two snapshots of the slice, derived from the fixture so that the demo needs no network:
// - the older one lists every package except every 97th (by name), which are "new" later;
// - the newer one lists them all, with the largest maintainer team's packages at a new version
//   ("+deb12u1"), without the obsolete packages (section oldlibs, or a -dbg name), which the
//   sweep must remove, and with five packages of section "games" sent as tombstones
//   (`{"name": …, "removed": true}`).

/// The package records as JSON objects, as an API would send them.
func jsonArray(_ objects: [Data]) -> Data {
    var out = Data("[".utf8)
    for (i, o) in objects.enumerated() {
        if i > 0 { out.append(contentsOf: Array(",".utf8)) }
        out.append(o)
    }
    out.append(contentsOf: Array("]".utf8))
    return out
}

func runSync(records: [DebianPackageRecord], storeURL: URL) throws {
    print("")
    print("Sync: mirroring two snapshots of the index (syncs, entity mapping)")
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    let sorted = records.sorted { $0.name < $1.name }
    let heldBack = Set(sorted.enumerated().filter { $0.offset % 97 == 96 }.map(\.element.name))
    let teams = Dictionary(grouping: sorted, by: \.maintainer)
    guard let team = teams.max(by: { ($0.value.count, $1.key) < ($1.value.count, $0.key) }) else {
        throw DemoFailure(description: "the fixture holds no packages")
    }
    let teamNames = Set(team.value.map(\.name))
    let obsolete = Set(sorted.filter { $0.section == "oldlibs" || $0.name.hasSuffix("-dbg") }.map(\.name))
    let tombstoned = Set(
        sorted.filter { $0.section == "games" && !obsolete.contains($0.name) && !heldBack.contains($0.name) }.prefix(5)
            .map(\.name))

    let older = jsonArray(try sorted.filter { !heldBack.contains($0.name) }.map { try encoder.encode($0) })
    var newerObjects: [Data] = []
    for r in sorted where !obsolete.contains(r.name) && !tombstoned.contains(r.name) {
        var r = r
        if teamNames.contains(r.name) { r.version += "+deb12u1" }
        newerObjects.append(try encoder.encode(r))
    }
    for name in tombstoned.sorted() { newerObjects.append(Data(#"{"name": "\#(name)", "removed": true}"#.utf8)) }
    let newer = jsonArray(newerObjects)
    // Both snapshots list a package's dependencies as the fixture does.
    let dependsByName = Dictionary(sorted.map { ($0.name, $0.depends) }, uniquingKeysWith: { first, _ in first })
    print(
        "           older snapshot: \(sorted.count - heldBack.count) packages, \(older.count / 1024) KiB of JSON; newer: "
            + "\(newerObjects.count - tombstoned.count) packages (\(heldBack.subtracting(obsolete).count) new, "
            + "\(teamNames.subtracting(obsolete).count) at a new version, \(obsolete.subtracting(heldBack).count) gone) "
            + "and \(tombstoned.count) tombstones")

    var maintainers = EntityMapping(DebianMaintainer.self)
    try maintainers.map("maintainer", to: "name")
    try maintainers.identify(by: "name")
    var packages = EntityMapping(DebianPackage.self)
    try packages.map(
        "name", "version", "architecture", "section", "priority", "installedSize", "size", "maintainer",
        "homepage", "sha256")
    try packages.map(["description": "summary", "removed": "isRemoved", "depends": "dependsNames"])
    try packages.identify(by: "name")
    try packages.useModificationAttribute("version")  // unchanged versions are skipped
    try packages.connect("maintainedBy", by: ["maintainer": "name"])
    packages.deletionPredicate = #Predicate { $0.isRemoved }

    try? FileManager.default.removeItem(at: storeURL)
    let schema = try Schema(DebianPackage.self, DebianMaintainer.self)
    var store = try ObjectStore.open(at: storeURL, schema: schema)
    for (label, document) in [("older", older), ("newer", newer)] {
        let (result, time) = try measure {
            try store.context.sync([DebianPackage.self, DebianMaintainer.self]) { sync in
                try sync.map(document, with: maintainers)
                try sync.map(document, with: packages)
                // The API names dependencies; a mapping connects a to-many by one attribute's
                // value, not by an array of names, so the names become links here, inside the
                // sync: the sweep that follows drops the links of what it removes, and the sync's
                // one journal record holds them all.
                for p in try store.context.objects(of: DebianPackage.self) {
                    try p.linkDepends(to: dependsByName[p.name] ?? [], in: store.context)
                }
            }
        }
        print("\(ms(time))  synced the \(label) snapshot (parse, map, mark, sweep, durable save):")
        for entity in ["DebianPackage", "DebianMaintainer"] {
            let c = result.counts[entity] ?? SyncCounts()
            print(
                "             \(entity): inserted \(c.inserted), updated \(c.updated), unchanged \(c.unchanged), "
                    + "tombstoned \(c.tombstoned), swept \(c.swept)")
        }
    }
    let expected = sorted.count - obsolete.count - tombstoned.count
    let stats = store.stats
    try store.close()

    let (reopened, reopenTime) = try measure { try ObjectStore.open(at: storeURL, schema: schema) }
    store = reopened
    let mirrored = try store.context.objects(of: DebianPackage.self)
    let original = Dictionary(uniqueKeysWithValues: sorted.map { ($0.name, $0.version) })
    let asListed = mirrored.filter { p in
        p.version == (original[p.name] ?? "") + (teamNames.contains(p.name) ? "+deb12u1" : "")
    }.count
    let connected = mirrored.allSatisfy { $0.maintainedBy?.name == $0.maintainer }
    let present = Set(mirrored.map(\.name))
    let linked = mirrored.allSatisfy { p in
        Set(p.depends.map(\.name)) == Set((dependsByName[p.name] ?? []).filter(present.contains))
    }
    let links = mirrored.reduce(0) { $0 + $1.depends.count }
    print(
        "\(ms(reopenTime))  reopened: \(mirrored.count) packages (expected \(expected)), \(asListed) at the newer snapshot's version, "
            + "every one connected to its maintainer: \(connected)")
    print(
        "           \(links) Depends links, every package linked to the packages it names that the mirror holds: \(linked)"
    )
    print(
        "           journal: \(stats.records) records (the schema, then one per sync), \(bytes(stats.bytesOnDisk)) on disk"
    )
    guard mirrored.count == expected, asListed == expected, connected, linked else {
        throw DemoFailure(description: "the mirror differs from the newer snapshot")
    }
    try store.close()
    print("           the mirror is in \(storeURL.path)/ (try: graph-journal stats \(storeURL.lastPathComponent))")
}
