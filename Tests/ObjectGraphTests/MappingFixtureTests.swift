import Foundation
import GraphJournal
import ObjectGraph
import Testing

// The worked example of Docs/Mapping.md, run on the bundled Debian fixture.

@Entity final class FixturePackage {
    @Attribute(.unique) var name: String = ""
    var version: String = ""
    var section: String = ""
    var priority: String?
    var installedSize: Int64?
    var size: Int64 = 0
    var maintainer: String = ""
    var homepage: URL?
    var summary: String = ""
    @Relationship(inverse: "packages") var maintainedBy: FixtureMaintainer?
}

@Entity final class FixtureMaintainer {
    @Attribute(.unique) var name: String = ""
    @Relationship(deleteRule: .deny, inverse: "maintainedBy") var packages: [FixturePackage]
}

@Suite("Mapping: the worked example on the Debian fixture")
struct MappingFixtureTests {
    /// The fixture's JSON Lines as one JSON array, as an API would send it.
    static func document() throws -> (Data, lines: Int) {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent("Fixtures/debian-packages.jsonl.lz4")
        let bytes = try LZ4.decompressFrame([UInt8](Data(contentsOf: url)))
        let lines = bytes.split(separator: 0x0A).filter { !$0.isEmpty }
        var array: [UInt8] = [0x5B]
        for (i, line) in lines.enumerated() {
            if i > 0 { array.append(0x2C) }
            array += line
        }
        array.append(0x5D)
        return (Data(array), lines.count)
    }

    @Test func packagesAndTheirMaintainersMapFromTheFixtureAndARerunChangesNothing() throws {
        let (json, lines) = try Self.document()
        let context = ModelContext(schema: try Schema(FixturePackage.self, FixtureMaintainer.self))

        // README-BEGIN (Docs/Mapping.md, "A worked example")
        var maintainers = EntityMapping(FixtureMaintainer.self)
        try maintainers.map("maintainer", to: "name")
        try maintainers.identify(by: "name")

        var packages = EntityMapping(FixturePackage.self)
        try packages.map("name", "version", "section", "priority", "installedSize", "size", "maintainer", "homepage")
        try packages.map("description", to: "summary")
        try packages.identify(by: "name")
        try packages.connect("maintainedBy", by: ["maintainer": "name"])

        let people = try context.map(json, with: maintainers)
        let result = try context.map(json, with: packages)
        try context.save()
        // README-END

        let distinct = Set(try context.objects(of: FixturePackage.self).map(\.maintainer))
        #expect(result.counts.inserted == lines && result.sourceCount == lines)
        #expect(
            people.counts.inserted == distinct.count && people.counts.updated == 0,
            "counts are per object: a maintainer named again is counted once")
        #expect(result.counts.unresolvedConnections == 0)
        #expect(try context.objects(of: FixturePackage.self).allSatisfy { $0.maintainedBy?.name == $0.maintainer })
        let zlib = try #require(try context.object(FixturePackage.self, where: \.name, equals: "zlib1g"))
        #expect(zlib.maintainedBy?.packages.contains { $0 === zlib } == true)

        let again = try context.map(json, with: packages)
        #expect(again.counts.unchanged == lines && again.counts.updated == 0 && !context.hasChanges)
        try packages.useModificationAttribute("version")
        let skipped = try context.map(json, with: packages)
        #expect(skipped.counts.skippedUnmodified == lines && !context.hasChanges)
    }
}
