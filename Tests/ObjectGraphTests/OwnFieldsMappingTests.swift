import Foundation
import ObjectGraph
import Testing

// Models of the tests of relationships mapped from the parent's own fields: a Debian package
// record names its maintainer by two fields of its own, and the maintainer is an entity.

@Entity final class OwnPackage {
    @Attribute(.unique) var name: String = ""
    var version: String = ""
    var maintainerEmail: String?
    @Relationship(inverse: "packages") var maintainedBy: OwnMaintainer?
    @Relationship(inverse: "uploads") var uploaders: [OwnMaintainer]
}

@Entity final class OwnMaintainer {
    @Attribute(.unique) var email: String = ""
    var name: String = ""
    var teamSize: Int = 0
    @Relationship(inverse: "maintainedBy") var packages: [OwnPackage]
    @Relationship(inverse: "uploaders") var uploads: [OwnPackage]
}

private func ownContext() throws -> ModelContext {
    ModelContext(schema: try Schema(OwnPackage.self, OwnMaintainer.self))
}

private func maintainerMapping() throws -> EntityMapping<OwnMaintainer> {
    var m = EntityMapping(OwnMaintainer.self)
    try m.map(["maintainerEmail": "email", "maintainerName": "name", "maintainerTeamSize": "teamSize"])
    try m.identify(by: "email")
    return m
}

/// Packages with their maintainer mapped from the record's own fields: one parse, two entities.
private func onePassMapping(modification: Bool = false) throws -> EntityMapping<OwnPackage> {
    var m = EntityMapping(OwnPackage.self)
    try m.map("name", "version", "maintainerEmail")
    try m.identify(by: "name")
    if modification { try m.useModificationAttribute("version") }
    try m.map(to: "maintainedBy", with: try maintainerMapping())
    return m
}

/// The same job as two runs over the document: the maintainers, then the packages connected by e-mail.
private func twoPassMappings() throws -> (EntityMapping<OwnMaintainer>, EntityMapping<OwnPackage>) {
    var m = EntityMapping(OwnPackage.self)
    try m.map("name", "version", "maintainerEmail")
    try m.identify(by: "name")
    try m.connect("maintainedBy", by: ["maintainerEmail": "email"])
    return (try maintainerMapping(), m)
}

private func json(_ text: String) -> Data { Data(text.utf8) }

private func record(_ name: String, _ version: String = "1", email: String?, maintainer: String? = nil) -> String {
    var fields = [#""name": "\#(name)""#, #""version": "\#(version)""#]
    if let email {
        fields.append(#""maintainerEmail": "\#(email)""#)
        fields.append(#""maintainerName": "\#(maintainer ?? "Team " + email)""#)
    }
    return "{" + fields.joined(separator: ", ") + "}"
}

private func document(_ records: [String]) -> Data { json("[" + records.joined(separator: ",") + "]") }

/// The Debian shape: three packages, two maintainers.
private let debian = document([
    record("zlib1g", email: "zlib@debian.org", maintainer: "Mark"),
    record("libpng16-16", email: "png@debian.org", maintainer: "Gianfranco"),
    record("zlib1g-dev", email: "zlib@debian.org", maintainer: "Mark"),
])

/// Every package's name → its maintainer's e-mail, and every maintainer's e-mail → its name and
/// its packages' names (the inverse).
private func graph(_ context: ModelContext) throws -> ([String: String], [String: String], [String: [String]]) {
    var packages: [String: String] = [:]
    for p in try context.objects(of: OwnPackage.self) { packages[p.name] = p.maintainedBy?.email ?? "-" }
    var names: [String: String] = [:]
    var owned: [String: [String]] = [:]
    for m in try context.objects(of: OwnMaintainer.self) {
        names[m.email] = m.name
        owned[m.email] = m.packages.map(\.name).sorted()
    }
    return (packages, names, owned)
}

@Suite("Mapping: a relationship mapped from the parent's own fields (RestKit's nil key path)")
struct OwnFieldsMappingTests {
    @Test func oneRunMapsPackagesAndTheirSharedMaintainersWithTheInverseFilled() throws {
        let context = try ownContext()
        let result = try context.map(debian, with: try onePassMapping())
        #expect(result.counts.inserted == 3)
        #expect(result.countsByEntity["OwnMaintainer"]?.inserted == 2)
        #expect(result.countsByEntity["OwnMaintainer"]?.skippedWithoutIdentification == 0)
        let (packages, names, owned) = try graph(context)
        #expect(
            packages == ["zlib1g": "zlib@debian.org", "zlib1g-dev": "zlib@debian.org", "libpng16-16": "png@debian.org"])
        #expect(names == ["zlib@debian.org": "Mark", "png@debian.org": "Gianfranco"])
        #expect(owned == ["zlib@debian.org": ["zlib1g", "zlib1g-dev"], "png@debian.org": ["libpng16-16"]])
        let zlib = try #require(result.objects.first)
        #expect(zlib.maintainedBy === result.objects[2].maintainedBy, "one object for one e-mail")
    }

    @Test func theSameDocumentAgainChangesNothing() throws {
        let context = try ownContext()
        try context.map(debian, with: try onePassMapping())
        try context.save()
        let again = try context.map(debian, with: try onePassMapping())
        #expect(again.counts.updated == 0 && again.counts.unchanged == 3)
        let maintainers = try #require(again.countsByEntity["OwnMaintainer"])
        #expect(maintainers.inserted == 0 && maintainers.updated == 0 && maintainers.unchanged == 2)
        #expect(!context.hasChanges)
    }

    @Test func aMaintainerWhoseEmailChangesOnOnePackageBecomesANewMaintainerOfThatPackage() throws {
        let context = try ownContext()
        try context.map(debian, with: try onePassMapping())
        try context.save()
        let changed = document([
            record("zlib1g", email: "zlib@debian.org", maintainer: "Mark"),
            record("libpng16-16", email: "png@debian.org", maintainer: "Gianfranco"),
            record("zlib1g-dev", email: "mark@debian.org", maintainer: "Mark"),
        ])
        let result = try context.map(changed, with: try onePassMapping())
        #expect(result.counts.updated == 1 && result.counts.unchanged == 2)
        let maintainers = try #require(result.countsByEntity["OwnMaintainer"])
        #expect(maintainers.inserted == 1 && maintainers.unchanged == 2 && maintainers.updated == 0)
        let (packages, _, owned) = try graph(context)
        #expect(packages["zlib1g-dev"] == "mark@debian.org")
        #expect(owned["zlib@debian.org"] == ["zlib1g"] && owned["mark@debian.org"] == ["zlib1g-dev"])
    }

    @Test func aMissingFieldLeavesTheRelationshipANullOneClearsIt() throws {
        let context = try ownContext()
        try context.map(debian, with: try onePassMapping())
        try context.save()
        let result = try context.map(
            json(
                #"""
                [{"name": "zlib1g", "version": "1"},
                 {"name": "libpng16-16", "version": "1", "maintainerEmail": null, "maintainerName": "Gianfranco"},
                 {"name": "busybox", "version": "1"}]
                """#), with: try onePassMapping())
        let (packages, _, owned) = try graph(context)
        #expect(packages["zlib1g"] == "zlib@debian.org", "no maintainer fields: left as it was")
        #expect(packages["libpng16-16"] == "-", "a null e-mail: no maintainer")
        #expect(packages["busybox"] == "-", "a new package without maintainer fields has none")
        #expect(owned["png@debian.org"] == [])
        #expect(result.counts.updated == 1 && result.counts.unchanged == 1 && result.counts.inserted == 1)
        let maintainers = result.countsByEntity["OwnMaintainer"] ?? MappingCounts()
        #expect(
            maintainers.skippedWithoutIdentification == 0 && maintainers.inserted == 0,
            "a package without a maintainer is no maintainer source skipped")
    }

    @Test func aToManyFromTheParentsOwnFieldsGetsTheOneObject() throws {
        let context = try ownContext()
        var m = EntityMapping(OwnPackage.self)
        try m.map("name", "version")
        try m.identify(by: "name")
        try m.map(to: "uploaders", with: try maintainerMapping())
        try context.map(debian, with: m)
        let zlib = try #require(try context.objects(of: OwnPackage.self).first { $0.name == "zlib1g" })
        #expect(zlib.uploaders.map(\.email) == ["zlib@debian.org"])
        #expect(zlib.uploaders.first?.uploads.map(\.name).sorted() == ["zlib1g", "zlib1g-dev"])
        let r = try context.map(json(#"[{"name": "zlib1g", "maintainerEmail": null}]"#), with: m)
        #expect(r.counts.updated == 1)
        #expect(zlib.uploaders.isEmpty, "null clears a to-many too")
    }

    @Test func aSkippedUnmodifiedParentStillMapsItsMaintainer() throws {
        let context = try ownContext()
        try context.map(debian, with: try onePassMapping(modification: true))
        try context.save()
        // The same versions; the team renamed, and one package handed over.
        let result = try context.map(
            document([
                record("zlib1g", email: "zlib@debian.org", maintainer: "Mark Brown"),
                record("libpng16-16", email: "png@debian.org", maintainer: "Gianfranco"),
                record("zlib1g-dev", email: "png@debian.org", maintainer: "Gianfranco"),
            ]), with: try onePassMapping(modification: true))
        #expect(result.counts.skippedUnmodified == 2 && result.counts.updated == 1)
        let maintainers = try #require(result.countsByEntity["OwnMaintainer"])
        #expect(maintainers.updated == 1 && maintainers.unchanged == 1)
        let (packages, names, _) = try graph(context)
        #expect(names["zlib@debian.org"] == "Mark Brown")
        #expect(packages["zlib1g-dev"] == "png@debian.org")
        #expect(
            try context.objects(of: OwnPackage.self).first { $0.name == "zlib1g-dev" }?.maintainerEmail
                == "zlib@debian.org", "the skipped package's own attributes are not mapped")
    }

    // MARK: Syncs

    @Test func aSyncMarksBothEntitiesAndSweepsOnlyTheMaintainerNobodyMentions() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ownfields-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try ObjectStore.open(at: dir, schema: try Schema(OwnPackage.self, OwnMaintainer.self))
        let m = try onePassMapping(modification: true)
        let first = try store.context.sync([OwnPackage.self, OwnMaintainer.self]) { try $0.map(debian, with: m) }
        #expect(first.counts["OwnMaintainer"]?.inserted == 2 && first.counts["OwnPackage"]?.inserted == 3)
        // Every package skipped as unmodified: their maintainers are still seen, nothing is swept.
        let resync = try store.context.sync([OwnPackage.self, OwnMaintainer.self]) { try $0.map(debian, with: m) }
        #expect(resync.counts["OwnMaintainer"]?.unchanged == 2 && resync.counts["OwnMaintainer"]?.swept == 0)
        #expect(resync.counts["OwnPackage"]?.unchanged == 3 && resync.counts["OwnPackage"]?.updated == 0)
        // libpng is handed to the zlib team: its old maintainer is mentioned by nobody.
        let handedOver = document([
            record("zlib1g", email: "zlib@debian.org", maintainer: "Mark"),
            record("libpng16-16", "2", email: "zlib@debian.org", maintainer: "Mark"),
            record("zlib1g-dev", email: "zlib@debian.org", maintainer: "Mark"),
        ])
        let r = try store.context.sync([OwnPackage.self, OwnMaintainer.self], sweepLimit: .unlimited) {
            try $0.map(handedOver, with: m)
        }
        #expect(r.counts["OwnMaintainer"]?.swept == 1 && r.counts["OwnMaintainer"]?.unchanged == 1)
        #expect(r.counts["OwnPackage"]?.updated == 1 && r.counts["OwnPackage"]?.swept == 0)
        try store.close()
        let reopened = try ObjectStore.open(at: dir, schema: try Schema(OwnPackage.self, OwnMaintainer.self))
        let (packages, names, owned) = try graph(reopened.context)
        #expect(names == ["zlib@debian.org": "Mark"])
        #expect(Set(packages.values) == ["zlib@debian.org"])
        #expect(owned["zlib@debian.org"] == ["libpng16-16", "zlib1g", "zlib1g-dev"])
    }

    // MARK: Errors

    @Test func aFieldTheDestinationCannotHoldIsTheUsualErrorAndTheRunIsUndone() throws {
        let context = try ownContext()
        try context.map(debian, with: try onePassMapping())
        try context.save()
        for (value, code) in [
            (#""maintainerTeamSize": "lots""#, MappingError.Code.untransformableValue),
            (#""maintainerTeamSize": {"a": [1]}"#, .untransformableValue),
            (#""maintainerTeamSize": 1e300"#, .untransformableValue),
            (#""maintainerName": null"#, .missingRequiredValue),
        ] {
            let bad = json(
                #"[{"name": "new", "maintainerEmail": "new@debian.org", "maintainerName": "N"},"#
                    + #" {"name": "zlib1g", "maintainerEmail": "other@debian.org", "maintainerName": "O", \#(value)}]"#)
            let error = try #require(throws: MappingError.self) { try context.map(bad, with: try onePassMapping()) }
            #expect(error.code == code, "\(value)")
            #expect(error.sourceIndex == 1 && error.entity == "OwnMaintainer", "\(value)")
            #expect(error.keyPath == (code == .missingRequiredValue ? "maintainerName" : "maintainerTeamSize"))
            #expect(!context.hasChanges, "the run is undone: \(value)")
            let (packages, names, _) = try graph(context)
            #expect(packages.count == 3 && names.count == 2 && packages["zlib1g"] == "zlib@debian.org")
        }
    }

    @Test func anErrorInsideANestedObjectNamesItsFullKeyPath() throws {
        // The maintainer mapped from the fields of a package that is itself nested.
        var maintainers = EntityMapping(OwnMaintainer.self)
        try maintainers.map("maintainerEmail", to: "email")
        try maintainers.identify(by: "email")
        var uploads = EntityMapping(OwnPackage.self)
        try uploads.map("name")
        try uploads.identify(by: "name")
        try uploads.map(to: "maintainedBy", with: maintainers)
        var top = try maintainerMapping()
        try top.map("uploads", to: "uploads", with: uploads)
        let context = try ownContext()
        let error = try #require(throws: MappingError.self) {
            try context.map(
                json(
                    #"[{"maintainerEmail": "a@x", "maintainerName": "A", "uploads": [{"name": "p", "maintainerEmail": [1]}]}]"#
                ), with: top)
        }
        #expect(error.code == .untransformableValue && error.keyPath == "uploads[0].maintainerEmail")
        #expect(try context.objects(of: OwnMaintainer.self).isEmpty)
    }

    @Test func declaringItChecksTheRelationshipAndTheDestinationsIdentification() throws {
        var packages = EntityMapping(OwnPackage.self)
        let unidentified = EntityMapping(OwnMaintainer.self)
        let noID = try #require(throws: MappingError.self) { try packages.map(to: "maintainedBy", with: unidentified) }
        #expect(noID.code == .invalidIdentification)
        let unknown = try #require(throws: MappingError.self) {
            try packages.map(to: "maintainer", with: try maintainerMapping())
        }
        #expect(unknown.code == .unknownAttribute)
        var wrongType = EntityMapping(OwnPackage.self)
        try wrongType.map("name")
        #expect(throws: MappingError.self) { try packages.map(to: "maintainedBy", with: wrongType) }
    }

    // MARK: Equivalence

    @Test func oneRunMakesTheObjectsAndRelationshipsOfTwoRuns() throws {
        // Two generations of a document: 300 packages, 25 maintainers; some packages name no
        // maintainer; the second generation moves a tenth of the packages to another maintainer.
        func generation(_ g: Int) -> Data {
            document(
                (0..<300).map { i in
                    if i % 17 == 3 { return record("p\(i)", email: nil) }
                    let m = (i * 7 + (g == 1 && i % 10 == 0 ? 3 : 0)) % 25
                    return record("p\(i)", "\(g)", email: "m\(m)@debian.org", maintainer: "Maintainer \(m)")
                })
        }
        let one = try ownContext()
        let two = try ownContext()
        let (maintainers, packages) = try twoPassMappings()
        for g in 0..<2 {
            let r1 = try one.map(generation(g), with: try onePassMapping())
            try one.save()
            try two.map(generation(g), with: maintainers)
            let r2 = try two.map(generation(g), with: packages)
            try two.save()
            #expect(r1.counts.inserted == r2.counts.inserted && r1.counts.updated == r2.counts.updated)
            let (p1, n1, o1) = try graph(one)
            let (p2, n2, o2) = try graph(two)
            #expect(p1 == p2 && n1 == n2 && o1 == o2, "generation \(g)")
            #expect(p1.count == 300 && n1.count == 25)
        }
    }

    @Test func oneSyncMarksAndSweepsAsTwoRunsDo() throws {
        // Three generations synced with a modification attribute, as a mirror does: the second
        // drops a sixth of the packages and moves a tenth to another maintainer (with a new
        // version), so that maintainer 24 is named by nobody; the third is the second again.
        func generation(_ g: Int) -> Data {
            document(
                (0..<300).compactMap { i in
                    if g > 0 && i % 6 == 1 { return nil }
                    let moved = g > 0 && i % 10 == 0
                    var m = (i * 7 + (moved ? 3 : 0)) % 25
                    if g > 0 && m == 24 { m = 23 }
                    let version = moved || m == 23 ? "\(min(g, 1))" : "0"
                    return record("p\(i)", version, email: "m\(m)@debian.org", maintainer: "Maintainer \(m)")
                })
        }
        let one = try ownContext()
        let two = try ownContext()
        var (maintainers, packages) = try twoPassMappings()
        try packages.useModificationAttribute("version")
        let entities: [any Entity.Type] = [OwnPackage.self, OwnMaintainer.self]
        for g in 0..<3 {
            let r1 = try one.sync(entities, sweepLimit: .unlimited) {
                try $0.map(generation(g), with: try onePassMapping(modification: true))
            }
            let r2 = try two.sync(entities, sweepLimit: .unlimited) { sync in
                try sync.map(generation(g), with: maintainers)
                try sync.map(generation(g), with: packages)
            }
            let (c1, c2) = (r1.counts["OwnPackage"] ?? SyncCounts(), r2.counts["OwnPackage"] ?? SyncCounts())
            #expect(
                c1.inserted == c2.inserted && c1.updated == c2.updated && c1.unchanged == c2.unchanged
                    && c1.swept == c2.swept, "generation \(g): \(c1) against \(c2)")
            #expect(r1.counts["OwnMaintainer"]?.swept == r2.counts["OwnMaintainer"]?.swept)
            let (p1, n1, o1) = try graph(one)
            let (p2, n2, o2) = try graph(two)
            #expect(p1 == p2 && n1 == n2 && o1 == o2, "generation \(g)")
            #expect(n1["m24@debian.org"] == (g == 0 ? "Maintainer 24" : nil))
        }
    }
}
