import Foundation
// README-BEGIN (GettingStarted.md)
import ObjectGraph
import Testing

@Entity final class Project {
    @Attribute(.unique) var slug: String = ""
    var title: String = ""
    var stars: Int = 0
    var archivedAt: Date?
}

func mirrorProjects(in directory: URL) throws -> [String] {
    // Open (or create) the store: the journal is replayed into a ready context.
    let store = try ObjectStore.open(at: directory, schema: try Schema(Project.self))
    let context = store.context

    // Upsert by the unique slug: the object with that slug, or a new one.
    try context.upsert(Project.self, where: \.slug, equals: "zlib") {
        $0.title = "zlib"; $0.stars = 5_200
    }
    try context.upsert(Project.self, where: \.slug, equals: "curl") {
        $0.title = "curl"; $0.stars = 34_000
    }
    try context.save()  // one journal record, on disk when save returns

    // Change, look, roll back: nothing reaches the journal.
    if let zlib = try context.object(Project.self, where: \.slug, equals: "zlib") {
        zlib.stars += 1
        print(zlib.changedValues())  // ["stars": Optional(5201)]
        context.rollback()
    }

    // Fetch: the predicate runs on the stored columns.
    let popular = try context.fetch(
        FetchDescriptor<Project>(
            predicate: #Predicate { $0.stars > 10_000 }, sortBy: [SortDescriptor(\.slug)]))
    try store.close()
    return popular.map(\.slug)  // ["curl"]
}
// README-END

@Suite("DocC catalog")
struct DocCExampleTests {
    @Test func theGettingStartedExampleRunsAndReopens() throws {
        let directory = temporaryStoreDirectory()
        #expect(try mirrorProjects(in: directory) == ["curl"])
        // Run again on the saved store: the upserts find the objects, nothing doubles.
        #expect(try mirrorProjects(in: directory) == ["curl"])
        let store = try ObjectStore.open(at: directory, schema: try Schema(Project.self))
        #expect(try store.context.objects(of: Project.self).map(\.stars).sorted() == [5_200, 34_000])
        try store.close()
    }

    @Test func theArticleShowsExactlyTheCompiledExample() throws {
        let example = try documentedBlock(
            in: "Tests/ObjectGraphTests/DocCExampleTests.swift", marker: "// README-BEGIN (GettingStarted.md)")
        let article = try repositoryFile("Sources/ObjectGraph/ObjectGraph.docc/GettingStarted.md")
        #expect(
            article.contains("```swift\n" + example + "```"),
            "GettingStarted.md's example differs from DocCExampleTests.swift")
    }
}
