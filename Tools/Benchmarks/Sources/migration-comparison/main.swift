// migration-comparison: what a migration costs on a 1M-object store, against a bulk import of
// the same objects at the new version, each in a fresh process, alternating, medians.
//
//   swift run -c release migration-comparison [count] [runs]      (writes Results/migration.md)
//   migration-comparison worker PHASE COUNT DIR                    (one measurement; prints RESULT lines)
//
// Phases: `write-v1` (bulk import at version 1), `migrate` (open with the plan: a custom stage
// that rewrites every object), `reopen` (open the migrated store: its resident memory),
// `import-v2` (bulk import of the same objects at version 2, the reference), `open-v1` and
// `open-lightweight` (open a version 1 store as it is, and through a lightweight stage).

import Foundation
import ObjectGraph

// MARK: The model's versions

/// Version 1: a person's name in one attribute, the age a number.
enum PeopleV1: VersionedSchema {
    static let versionIdentifier = "1"
    static var models: [any Entity.Type] { [Member.self] }

    @Entity final class Member {
        @Attribute(.unique) var id: Int64 = 0
        var name: String = ""
        var email: String = ""
        var age: Int = 0
        var city: String = ""
        var score: Double = 0
    }
}

/// Version 1 with one attribute added (with its default): a lightweight change.
enum PeopleV1Plus: VersionedSchema {
    static let versionIdentifier = "1.1"
    static var models: [any Entity.Type] { [Member.self] }

    @Entity final class Member {
        @Attribute(.unique) var id: Int64 = 0
        var name: String = ""
        var email: String = ""
        var age: Int = 0
        var city: String = ""
        var score: Double = 0
        var active: Bool = true
    }
}

/// Version 2: the name split in two, the age a string with its unit. Every object changes.
enum PeopleV2: VersionedSchema {
    static let versionIdentifier = "2"
    static var models: [any Entity.Type] { [Member.self] }

    @Entity final class Member {
        @Attribute(.unique) var id: Int64 = 0
        var firstName: String = ""
        var lastName: String = ""
        var email: String = ""
        var age: String = ""
        var city: String = ""
        var score: Double = 0
    }
}

enum PeoplePlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [PeopleV1.self, PeopleV2.self] }
    static var stages: [MigrationStage] {
        [
            .custom(fromVersion: PeopleV1.self, toVersion: PeopleV2.self) { migration in
                for old in try migration.old.objects(of: PeopleV1.Member.self) {
                    guard let new = try migration.counterpart(of: old, as: PeopleV2.Member.self) else { continue }
                    let name = old.name
                    if let space = name.firstIndex(of: " ") {
                        new.firstName = String(name[..<space])
                        new.lastName = String(name[name.index(after: space)...])
                    } else {
                        new.firstName = name
                    }
                    new.age = "\(old.age) years"
                }
            }
        ]
    }
}

enum LightweightPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [PeopleV1.self, PeopleV1Plus.self] }
    static var stages: [MigrationStage] { [] }
}

// MARK: Sources

struct MemberV1Source {
    var id: Int64, name: String, email: String, age: Int, city: String, score: Double
    init(_ i: Int) {
        id = Int64(i)
        name = "Person \(i)"
        email = "p\(i)@example.com"
        age = 20 + i % 60
        city = "City \(i % 1000)"
        score = Double(i) * 0.5
    }
}

/// The version 2 record of person `i`: what the migration produces from version 1's.
struct MemberV2Source {
    var id: Int64, firstName: String, lastName: String, email: String, age: String, city: String, score: Double
    init(_ i: Int) {
        id = Int64(i)
        firstName = "Person"
        lastName = "\(i)"
        email = "p\(i)@example.com"
        age = "\(20 + i % 60) years"
        city = "City \(i % 1000)"
        score = Double(i) * 0.5
    }
}

extension PeopleV1.Member: ImportableUniqueObject {
    typealias ImportSource = MemberV1Source
    static var uniqueIDKeyPath: ReferenceWritableKeyPath<PeopleV1.Member, Int64> { \.id }
    static func uniqueID(from source: MemberV1Source, in context: ModelContext) throws -> Int64? { source.id }
    func update(from s: MemberV1Source, in context: ModelContext) throws {
        name = s.name
        email = s.email
        age = s.age
        city = s.city
        score = s.score
    }
}

extension PeopleV2.Member: ImportableUniqueObject {
    typealias ImportSource = MemberV2Source
    static var uniqueIDKeyPath: ReferenceWritableKeyPath<PeopleV2.Member, Int64> { \.id }
    static func uniqueID(from source: MemberV2Source, in context: ModelContext) throws -> Int64? { source.id }
    func update(from s: MemberV2Source, in context: ModelContext) throws {
        firstName = s.firstName
        lastName = s.lastName
        email = s.email
        age = s.age
        city = s.city
        score = s.score
    }
}

// MARK: Measuring

func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    let (s, a) = (ContinuousClock.now - start).components
    return Double(s) + Double(a) / 1e18
}

/// A field of /proc/self/status in KiB (VmRSS, VmHWM).
func status(_ field: String) -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }
    return 0
}

func directorySize(_ dir: String) -> Int64 {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
    return names.reduce(0) {
        $0 + ((try? FileManager.default.attributesOfItem(atPath: dir + "/" + $1)[.size] as? Int64) ?? 0)
    }
}

func worker(_ phase: String, _ count: Int, _ dir: String) throws {
    let url = URL(fileURLWithPath: dir)
    switch phase {
    case "write-v1":
        try? FileManager.default.removeItem(at: url)
        let store = try ObjectStore.open(at: url, schema: try Schema(versioned: PeopleV1.self))
        let t = try seconds {
            _ = try store.context.importUniqueObjects(
                PeopleV1.Member.self, sourceArray: (0..<count).map(MemberV1Source.init))
            try store.context.save()
        }
        try store.close()
        print("RESULT seconds=\(t)")
    case "import-v2":
        try? FileManager.default.removeItem(at: url)
        let sources = (0..<count).map(MemberV2Source.init)
        let store = try ObjectStore.open(at: url, schema: try Schema(versioned: PeopleV2.self))
        let t = try seconds {
            _ = try store.context.importUniqueObjects(PeopleV2.Member.self, sourceArray: sources)
            try store.context.save()
        }
        try store.close()
        print("RESULT seconds=\(t) peakKiB=\(status("VmHWM"))")
    case "migrate":
        var store: ObjectStore?
        let t = try seconds { store = try ObjectStore.open(at: url, migrationPlan: PeoplePlan.self) }
        let peak = status("VmHWM")
        guard let store, try store.context.count(of: PeopleV2.Member.self) == count else {
            throw Failure("the migrated store does not hold \(count) members")
        }
        try store.close()
        print("RESULT seconds=\(t) peakKiB=\(peak)")
    case "reopen":
        var store: ObjectStore?
        let t = try seconds { store = try ObjectStore.open(at: url, migrationPlan: PeoplePlan.self) }
        let rss = status("VmRSS")
        try store?.close()
        print("RESULT seconds=\(t) rssKiB=\(rss)")
    case "open-v1":
        var store: ObjectStore?
        let before = directorySize(dir)
        let t = try seconds { store = try ObjectStore.open(at: url, schema: try Schema(versioned: PeopleV1.self)) }
        try store?.close()
        print("RESULT seconds=\(t) bytesBefore=\(before) bytesAfter=\(directorySize(dir))")
    case "open-lightweight":
        var store: ObjectStore?
        let before = directorySize(dir)
        let t = try seconds { store = try ObjectStore.open(at: url, migrationPlan: LightweightPlan.self) }
        guard let store, try store.context.objects(of: PeopleV1Plus.Member.self).allSatisfy(\.active) else {
            throw Failure("the lightweight stage did not give the added attribute its default")
        }
        try store.close()
        print("RESULT seconds=\(t) bytesBefore=\(before) bytesAfter=\(directorySize(dir))")
    default:
        throw Failure("unknown phase \(phase)")
    }
}

struct Failure: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

// MARK: Driver

/// Runs one phase in a fresh process and returns its RESULT values.
func measure(_ phase: String, _ count: Int, _ dir: String) throws -> [String: Double] {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    process.arguments = ["worker", phase, "\(count)", dir]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw Failure("worker \(phase) exited with \(process.terminationStatus)")
    }
    var values: [String: Double] = [:]
    for line in String(decoding: data, as: UTF8.self).split(separator: "\n") where line.hasPrefix("RESULT ") {
        for pair in line.dropFirst(7).split(separator: " ") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            if kv.count == 2, let v = Double(kv[1]) { values[String(kv[0])] = v }
        }
    }
    return values
}

func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    return s.isEmpty ? .nan : s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

func loadAverage() -> String {
    (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(
        separator: " ")
        ?? "?"
}

func drive(count: Int, runs: Int) throws {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("migration-comparison-\(getpid())").path
    defer { try? FileManager.default.removeItem(atPath: root) }
    let a = root + "/a", b = root + "/b", c = root + "/c"
    var migrate: [Double] = [], importV2: [Double] = [], ratio: [Double] = []
    var migratePeak: [Double] = [], reopenRSS: [Double] = [], memoryRatio: [Double] = [], importPeak: [Double] = []
    var openV1: [Double] = [], openLight: [Double] = [], rewritten: [Double] = []
    let loadBefore = loadAverage()
    for run in 0..<runs {
        _ = try measure("write-v1", count, a)
        // Alternating which goes first.
        var m: [String: Double] = [:], i: [String: Double] = [:]
        if run % 2 == 0 {
            m = try measure("migrate", count, a)
            i = try measure("import-v2", count, b)
        } else {
            i = try measure("import-v2", count, b)
            m = try measure("migrate", count, a)
        }
        let r = try measure("reopen", count, a)
        migrate.append(m["seconds"] ?? .nan)
        importV2.append(i["seconds"] ?? .nan)
        ratio.append((m["seconds"] ?? .nan) / (i["seconds"] ?? .nan))
        migratePeak.append(m["peakKiB"] ?? .nan)
        importPeak.append(i["peakKiB"] ?? .nan)
        reopenRSS.append(r["rssKiB"] ?? .nan)
        memoryRatio.append((m["peakKiB"] ?? .nan) / (r["rssKiB"] ?? .nan))
        // Lightweight: the same version 1 store opened as it is and through a lightweight stage.
        _ = try measure("write-v1", count, c)
        let plain = try measure("open-v1", count, c)
        let light = try measure("open-lightweight", count, c)
        openV1.append(plain["seconds"] ?? .nan)
        openLight.append(light["seconds"] ?? .nan)
        rewritten.append((light["bytesAfter"] ?? .nan) - (light["bytesBefore"] ?? .nan))
        FileHandle.standardError.write(
            Data(
                String(
                    format:
                        "run %d: migrate %.3f s, import %.3f s (ratio %.2f), peak %.0f MiB vs reopened %.0f MiB; open %.3f s, lightweight %.3f s\n",
                    run + 1, migrate.last!, importV2.last!, ratio.last!, migratePeak.last! / 1024,
                    reopenRSS.last! / 1024,
                    openV1.last!, openLight.last!
                ).utf8))
    }
    let loadAfter = loadAverage()
    var report = """
        # Migrations: a custom stage over every object, against a bulk import

        `swift run -c release migration-comparison \(count) \(runs)` (`make bench-migration`), medians of \(runs) runs,
        each phase in a fresh process, migrate and import alternating which goes first. Load average before: \(loadBefore),
        after: \(loadAfter).

        - **migrate**: open a store of \(count) version 1 members with the plan; the custom stage splits every name in two
          and turns every age into a string (Int → String): replay at version 1, the copy at version 2, the stage, its
          save, the new base (LZ4, write, `fdatasync`, MANIFEST switch), and the open at version 2.
        - **import**: `importUniqueObjects` of the same \(count) members at version 2 into a new store, then a durable save:
          what the issue calls a bulk import of the new model.
        - **reopened**: resident memory right after opening the migrated store.

        | | median | target |
        |---|---|---|
        | migrate | \(String(format: "%.3f s", median(migrate))) | |
        | import at version 2 | \(String(format: "%.3f s", median(importV2))) | |
        | migrate / import (paired) | \(String(format: "%.2f", median(ratio))) | ≤ 2 |
        | peak memory of the migration | \(String(format: "%.0f MiB", median(migratePeak) / 1024)) | |
        | resident memory after a reopen | \(String(format: "%.0f MiB", median(reopenRSS) / 1024)) | |
        | migration peak / reopened (paired) | \(String(format: "%.2f", median(memoryRatio))) | ≤ 1.5 |
        | peak memory of the import | \(String(format: "%.0f MiB", median(importPeak) / 1024)) | |
        | open at version 1 | \(String(format: "%.3f s", median(openV1))) | |
        | open through a lightweight stage | \(String(format: "%.3f s", median(openLight))) | ≈ open |
        | bytes written by the lightweight open | \(String(format: "%.0f", median(rewritten))) | 0 |

        """
    report += "\nEvery run: migrate s, import s, ratio, migration peak MiB, reopened MiB\n\n"
    for k in 0..<runs {
        report += String(
            format: "- %.3f, %.3f, %.2f, %.0f, %.0f\n", migrate[k], importV2[k], ratio[k], migratePeak[k] / 1024,
            reopenRSS[k] / 1024)
    }
    try FileManager.default.createDirectory(atPath: "Results", withIntermediateDirectories: true)
    try report.write(toFile: "Results/migration.md", atomically: true, encoding: .utf8)
    print(report)
}

let arguments = Array(CommandLine.arguments.dropFirst())
do {
    if arguments.first == "worker", arguments.count == 4, let count = Int(arguments[2]) {
        try worker(arguments[1], count, arguments[3])
    } else {
        try drive(
            count: arguments.first.flatMap(Int.init) ?? 1_000_000,
            runs: arguments.dropFirst().first.flatMap(Int.init) ?? 5)
    }
} catch {
    FileHandle.standardError.write(Data("migration-comparison: \(error)\n".utf8))
    exit(1)
}
