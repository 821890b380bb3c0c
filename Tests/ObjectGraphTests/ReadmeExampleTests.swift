import Foundation
// README-BEGIN
import ObjectGraph
import Testing

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
    print(zlib.isUpdated, zlib.changedValues())  // true ["installedSize": Optional(164)]
    context.rollback()
    print(zlib.installedSize as Any)  // nil

    // Delete and save: the object is gone; its ID is never reused.
    context.delete(curl)
    try context.save()
    return "\(try context.objects(of: Package.self).map(\.name))"  // ["zlib1g"]
}
// README-END

@Suite("README")
struct ReadmeExampleTests {
    @Test func readmeExampleRunsAndPrintsWhatItSays() throws {
        #expect(try readmeExample() == "[\"zlib1g\"]")
    }

    @Test func readmeShowsExactlyTheCompiledExample() throws {
        let example = try documentedBlock(in: "Tests/ObjectGraphTests/ReadmeExampleTests.swift")
        #expect(
            try repositoryFile("README.md").contains("```swift\n" + example + "```"),
            "README.md's example differs from ReadmeExampleTests.swift")
    }
}

/// The repository's root directory.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// The text of a file of the repository.
func repositoryFile(_ path: String) throws -> String {
    try String(contentsOf: repositoryRoot.appendingPathComponent(path), encoding: .utf8)
}

/// The lines between a `README-BEGIN` marker and the `README-END` marker of a test file, as the
/// documentation shows them: the marker's own indentation removed from each line.
func documentedBlock(in path: String, marker: String = "// README-BEGIN") throws -> String {
    let source = try repositoryFile(path)
    let lines = source.split(separator: "\n", omittingEmptySubsequences: false)
    guard let first = lines.firstIndex(where: { $0.trimmingCharacters(in: .whitespaces).hasPrefix(marker) }),
        let last = lines[first...].firstIndex(where: {
            $0.trimmingCharacters(in: .whitespaces).hasPrefix("// README-END")
        })
    else { throw CocoaError(.fileReadCorruptFile) }
    let indent = lines[first].prefix { $0 == " " }.count
    return lines[(first + 1)..<last].map {
        $0.hasPrefix(String(repeating: " ", count: indent)) ? String($0.dropFirst(indent)) : String($0)
    }
    .map { $0 + "\n" }.joined()
}
