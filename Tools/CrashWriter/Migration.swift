// The `migrate` mode of objectgraph-crash-writer: opens a store written at version 1 of the
// parcels model with the plan to version 2, whose custom stage turns an Int into a String and
// fills a new attribute from old values, then prints "migrated". The migration crash tests
// kill it at random moments and check that the store is wholly at version 1 or wholly at 2.
//
//   objectgraph-crash-writer migrate DIR
//
// It prints "opening" just before the open, "stage N" as each stage ends, "base" when the new
// base is about to be written (every stage done), "migrated" once the open returned, and
// "closed" after closing. The tests' copy of this model is Tests/ObjectGraphTests/MigrationCrashTests.swift.

import Foundation
import ObjectGraph

enum ParcelsV1: VersionedSchema {
    static let versionIdentifier = "1"
    static var models: [any Entity.Type] { [Parcel.self] }

    @Entity final class Parcel {
        var key: Int64 = 0
        var weight: Int = 0
        var label: String = ""
    }
}

enum ParcelsV2: VersionedSchema {
    static let versionIdentifier = "2"
    static var models: [any Entity.Type] { [Parcel.self] }

    @Entity final class Parcel {
        var key: Int64 = 0
        /// An Int of grams in version 1.
        var weight: String = ""
        var label: String = ""
        /// New: the label and the old weight.
        var code: String = ""
    }
}

enum ParcelsPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ParcelsV1.self, ParcelsV2.self] }
    static var stages: [MigrationStage] {
        [
            .custom(fromVersion: ParcelsV1.self, toVersion: ParcelsV2.self) { migration in
                for old in try migration.old.fetch(FetchDescriptor<ParcelsV1.Parcel>()) {
                    guard let new = try migration.counterpart(of: old, as: ParcelsV2.Parcel.self) else { continue }
                    new.weight = "\(old.weight) g"
                    new.code = "\(old.label)-\(old.weight)"
                }
            }
        ]
    }
}

/// Runs the `migrate` mode; never returns.
func runMigration(directory: String) -> Never {
    @Sendable func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }  // unbuffered
    var options = StoreOptions()
    options.progress = { progress in
        guard progress.operation == .migration, progress.completed > 0, let total = progress.total else { return }
        say("stage \(progress.completed)")
        if progress.completed == total - 1 { say("base") }
    }
    do {
        say("opening")
        let store = try ObjectStore.open(
            at: URL(fileURLWithPath: directory), migrationPlan: ParcelsPlan.self, options: options)
        say("migrated")
        try store.close()
        say("closed")
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("objectgraph-crash-writer: \(error)\n".utf8))
        exit(1)
    }
}
