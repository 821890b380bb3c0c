// The model of the Debian mirror evolves through three versions, as a daemon's does when the
// API it mirrors changes: each version kept in code in its own namespace, a migration plan, a
// custom stage per change the lightweight rules cannot make.

import Foundation
import ObjectGraph

/// An installed size with its unit, where version 1 stored a bare number of kilobytes.
struct PackageSize: Codable, Hashable, Sendable {
    var value: Double
    var unit: String

    /// Debian's `Installed-Size` field counts kibibytes.
    init(kibibytes: Int64) {
        value = Double(kibibytes) * 1024
        unit = "B"
    }

    var megabytes: Double { unit == "B" ? value / 1_048_576 : value }
}

/// Version 1: the fields as the index spells them.
enum DebianV1: VersionedSchema {
    static let versionIdentifier = "1"
    static var models: [any Entity.Type] { [DebianPackage.self] }

    @Entity final class DebianPackage {
        @Attribute(.unique) var name: String = ""
        var version: String = ""
        /// Kibibytes, as `Installed-Size` says.
        var installedSize: Int64 = 0
        /// The `Maintainer:` field.
        var maintainer: String = ""
        /// The names of the packages it depends on, comma-separated.
        var depends: String = ""
    }
}

/// Version 2: the size with its unit; the maintainer an object of its own.
enum DebianV2: VersionedSchema {
    static let versionIdentifier = "2"
    static var models: [any Entity.Type] { [DebianPackage.self, DebianMaintainer.self] }

    @Entity final class DebianPackage {
        @Attribute(.unique) var name: String = ""
        var version: String = ""
        var installedSize: PackageSize = PackageSize(kibibytes: 0)
        @Relationship(inverse: "packages") var maintainer: DebianMaintainer?
        var depends: String = ""
    }

    @Entity final class DebianMaintainer {
        @Attribute(.unique) var name: String = ""
        @Relationship(inverse: "maintainer") var packages: [DebianPackage]
    }
}

/// Version 3: `depends` a many-to-many of packages with themselves.
enum DebianV3: VersionedSchema {
    static let versionIdentifier = "3"
    static var models: [any Entity.Type] { [DebianPackage.self, DebianMaintainer.self] }

    @Entity final class DebianPackage {
        @Attribute(.unique) var name: String = ""
        var version: String = ""
        var installedSize: PackageSize = PackageSize(kibibytes: 0)
        @Relationship(inverse: "packages") var maintainer: DebianMaintainer?
        @Relationship(inverse: "dependents") var depends: [DebianPackage]
        @Relationship(inverse: "depends") var dependents: [DebianPackage]
    }

    @Entity final class DebianMaintainer {
        @Attribute(.unique) var name: String = ""
        @Relationship(inverse: "maintainer") var packages: [DebianPackage]
    }
}

enum DebianMigrationPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [DebianV1.self, DebianV2.self, DebianV3.self] }

    static var stages: [MigrationStage] {
        [
            // An Int of kibibytes becomes a Codable value with a unit; a string becomes a
            // relationship to one maintainer object per distinct field.
            .custom(fromVersion: DebianV1.self, toVersion: DebianV2.self) { migration in
                var maintainers: [String: DebianV2.DebianMaintainer] = [:]
                for old in try migration.old.fetch(FetchDescriptor<DebianV1.DebianPackage>()) {
                    guard let new = try migration.counterpart(of: old, as: DebianV2.DebianPackage.self) else {
                        continue
                    }
                    new.installedSize = PackageSize(kibibytes: old.installedSize)
                    if let known = maintainers[old.maintainer] {
                        new.maintainer = known
                    } else {
                        let maintainer = try migration.new.insert(DebianV2.DebianMaintainer.self)
                        maintainer.name = old.maintainer
                        maintainers[old.maintainer] = maintainer
                        new.maintainer = maintainer
                    }
                }
            },
            // A string of names becomes links to the packages they name, found through the
            // unique index on `name`; names of virtual packages or packages outside the slice
            // have no object and are dropped.
            .custom(fromVersion: DebianV2.self, toVersion: DebianV3.self) { migration in
                for old in try migration.old.fetch(FetchDescriptor<DebianV2.DebianPackage>()) {
                    guard let new = try migration.counterpart(of: old, as: DebianV3.DebianPackage.self) else {
                        continue
                    }
                    var targets: [DebianV3.DebianPackage] = []
                    for name in old.depends.split(separator: ",") {
                        if let target = try migration.new.object(
                            DebianV3.DebianPackage.self, where: \.name, equals: String(name))
                        {
                            targets.append(target)
                        }
                    }
                    new.depends = targets
                }
            },
        ]
    }
}

/// Writes the slice with version 1, then opens the store with the plan at version 2, then at
/// version 3, printing what each migration did and what it cost.
func runEvolution(records: [DebianPackageRecord], storeURL: URL) throws {
    print("")
    print("Model evolution — the same slice through three versions of the model")
    try? FileManager.default.removeItem(at: storeURL)
    let (_, writeTime) = try measure {
        let store = try ObjectStore.open(at: storeURL, schema: try Schema(versioned: DebianV1.self))
        for record in records {
            let p = try store.context.insert(DebianV1.DebianPackage.self)
            p.name = record.name
            p.version = record.version
            p.installedSize = record.installedSize ?? 0
            p.maintainer = record.maintainer
            p.depends = record.depends.joined(separator: ",")
        }
        try store.context.save()
        try store.close()
    }
    print(
        "\(ms(writeTime))  version 1: \(records.count) packages; installedSize an Int of KiB, maintainer and depends strings"
    )

    // Version 2 through a plan that stops there, as the daemon's previous release would.
    let (v2, v2Time) = try measure {
        try ObjectStore.open(at: storeURL, migrationPlan: DebianPlanToTwo.self)
    }
    let v2Packages = try v2.context.fetch(FetchDescriptor<DebianV2.DebianPackage>())
    let total = v2Packages.reduce(0.0) { $0 + $1.installedSize.megabytes }
    print(
        "\(ms(v2Time))  migrated 1 → 2 at open: installedSize now a PackageSize (\(String(format: "%.0f", total)) MB in all), "
            + "\(try v2.context.count(of: DebianV2.DebianMaintainer.self)) maintainers as objects; one new base written"
    )
    try v2.close()

    let (v3, v3Time) = try measure { try ObjectStore.open(at: storeURL, migrationPlan: DebianMigrationPlan.self) }
    let v3Packages = try v3.context.fetch(FetchDescriptor<DebianV3.DebianPackage>())
    let links = v3Packages.reduce(0) { $0 + $1.depends.count }
    let libc = v3Packages.first { $0.name == "libc6" }
    print(
        "\(ms(v3Time))  migrated 2 → 3 at open: depends now \(links) links between packages"
            + (libc.map { "; libc6 has \($0.dependents.count) dependents" } ?? ""))
    guard v3Packages.count == records.count else {
        throw DemoFailure(description: "the migrated store holds \(v3Packages.count) packages, not \(records.count)")
    }
    try v3.close()

    let (reopened, reopenTime) = try measure {
        try ObjectStore.open(at: storeURL, migrationPlan: DebianMigrationPlan.self)
    }
    print(
        "\(ms(reopenTime))  reopened at version 3: nothing to migrate, \(reopened.stats.records) records, "
            + "versions \(reopened.schemaVersions.joined(separator: " → "))")
    try reopened.close()
}

/// The plan as the release before version 3 shipped it.
enum DebianPlanToTwo: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [DebianV1.self, DebianV2.self] }
    static var stages: [MigrationStage] { [DebianMigrationPlan.stages[0]] }
}
