import Foundation
// README-BEGIN
import ObjectGraph
import Testing

@Entity final class Story {
    @Attribute(.unique) var storyID: Int64 = 0
    var title: String = ""
    var publishedAt: Date?
    var isRetracted: Bool = false
}

func readmeMappingExample() throws -> String {
    let context = ModelContext(schema: try Schema(Story.self))
    var stories = EntityMapping(Story.self)  // identified by storyID (inferred)
    try stories.map("storyID", "title")
    try stories.map(["meta.published": "publishedAt", "retracted": "isRetracted"])
    stories.rootKeyPath = "data"
    stories.deletionPredicate = #Predicate { $0.isRetracted }  // tombstones

    let json = Data(
        """
        {"data": [{"storyID": 1, "title": "Hello", "meta": {"published": "2024-05-01T12:00:00Z"}},
                  {"storyID": 2, "title": "Wrong", "retracted": true},
                  {"storyID": 1, "title": "Hello, world"}]}
        """.utf8)
    let result = try context.map(json, with: stories)  // atomic: all of it, or nothing
    try context.save()  // one journal record in a store
    print(result.counts)  // inserted 1, updated 0, unchanged 0, …, tombstoned 1, …

    do {
        try context.map(Data(#"{"data": [{"storyID": "x1"}]}"#.utf8), with: stories)
    } catch let error as MappingError {
        print(error)  // source 0, key path 'storyID': "x1" cannot become Story.storyID, which holds Int64
    }
    return "\(try context.objects(of: Story.self).map(\.title))"  // ["Hello, world"]
}
// README-END

// README-BEGIN (sync)
func readmeSyncExample() throws -> String {
    let context = ModelContext(schema: try Schema(Story.self))
    var stories = EntityMapping(Story.self)
    try stories.map("storyID", "title")
    let feeds = [
        #"[{"storyID": 1, "title": "One"}, {"storyID": 2, "title": "Two"}]"#,
        #"[{"storyID": 2, "title": "Two"}, {"storyID": 3, "title": "Three"}]"#,
    ]
    for feed in feeds {
        let result = try context.sync([Story.self], sweepLimit: .fraction(0.5)) { sync in
            try sync.map(Data(feed.utf8), with: stories)  // marks what the feed lists
        }  // sweeps the rest, saves once
        print(result.counts["Story"] ?? SyncCounts())
        // inserted 2, updated 0, unchanged 0, tombstoned 0, swept 0, invalid 0, discarded 0
        // inserted 1, updated 0, unchanged 1, tombstoned 0, swept 1, invalid 0, discarded 0
    }
    return "\(try context.objects(of: Story.self).map(\.storyID))"  // [2, 3]
}
// README-END

@Suite("README: mapping")
struct ReadmeMappingExampleTests {
    @Test func readmeMappingExampleRunsAndPrintsWhatItSays() throws {
        #expect(try readmeMappingExample() == "[\"Hello, world\"]")
    }

    @Test func readmeSyncExampleRunsAndPrintsWhatItSays() throws {
        #expect(try readmeSyncExample() == "[2, 3]")
    }

    @Test func readmeShowsExactlyTheCompiledSyncExample() throws {
        let example = try documentedBlock(
            in: "Tests/ObjectGraphTests/ReadmeMappingExampleTests.swift", marker: "// README-BEGIN (sync)")
        #expect(
            try repositoryFile("README.md").contains("```swift\n" + example + "```"),
            "README.md's sync example differs from ReadmeMappingExampleTests.swift")
    }

    @Test func readmeShowsExactlyTheCompiledMappingExample() throws {
        let example = try documentedBlock(in: "Tests/ObjectGraphTests/ReadmeMappingExampleTests.swift")
        #expect(
            try repositoryFile("README.md").contains("```swift\n" + example + "```"),
            "README.md's mapping example differs from ReadmeMappingExampleTests.swift")
    }

    @Test func docsMappingShowsExactlyTheWorkedExampleTheFixtureTestRuns() throws {
        let example = try documentedBlock(
            in: "Tests/ObjectGraphTests/MappingFixtureTests.swift", marker: "// README-BEGIN (Docs/Mapping.md")
        #expect(
            try repositoryFile("Docs/Mapping.md").contains(example),
            "Docs/Mapping.md's worked example differs from MappingFixtureTests.swift")
    }
}
