import Foundation
import Testing

// README-BEGIN
import ObjectGraph

@Entity final class Package {
    var name: String
    var version: String
    var installedSize: Int64?

    init(name: String, version: String) {
        self.name = name
        self.version = version
    }
}

func readmeExample() throws -> String {
    let context = ModelContext(schema: try Schema(Package.self))

    // Insert SwiftData-style, or straight into the context's storage.
    let zlib = Package(name: "zlib1g", version: "1:1.2.13")
    try context.insert(zlib)
    let curl = try context.insert(Package.self)
    curl.name = "curl"
    curl.version = "7.88.1"
    try context.save()

    // Change, inspect, roll back.
    zlib.installedSize = 164
    print(zlib.isUpdated, zlib.changedValues())   // true ["installedSize": Optional(164)]
    context.rollback()
    print(zlib.installedSize as Any)              // nil

    // Delete and save: the object is gone; its ID is never reused.
    context.delete(curl)
    try context.save()
    return "\(try context.objects(of: Package.self).map(\.name))"   // ["zlib1g"]
}
// README-END

@Suite("README")
struct ReadmeExampleTests {
    @Test func readmeExampleRunsAndPrintsWhatItSays() throws {
        #expect(try readmeExample() == "[\"zlib1g\"]")
    }

    @Test func readmeShowsExactlyTheCompiledExample() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let begin = try #require(source.range(of: "// README-BEGIN\n"))
        let end = try #require(source.range(of: "// README-END"))
        let example = String(source[begin.upperBound..<end.lowerBound])
        #expect(readme.contains("```swift\n" + example + "```"), "README.md's example differs from ReadmeExampleTests.swift")
    }
}
