import Foundation
import ObjectGraph
import Testing

// Entity mapping into relationships stored as links: nested arrays and connections by
// attribute filling many-to-many and ordered to-many relationships.

/// Courses and students: a many-to-many, set semantics both ways.
@Entity final class LMCourse {
    @Attribute(.unique) var code: String = ""
    var title: String = ""
    var department: String?
    @Relationship(inverse: "courses") var students: [LMStudent]
}

@Entity final class LMStudent {
    @Attribute(.unique) var login: String = ""
    var name: String = ""
    var department: String?
    var isGone: Bool = false
    @Relationship(inverse: "students") var courses: [LMCourse]
}

/// An album orders its songs; a song is on many albums (ordered many-to-many).
@Entity final class LMAlbum {
    @Attribute(.unique) var albumID: Int64 = 0
    var title: String = ""
    var version: Int64 = 0
    @Relationship(inverse: "albums", ordered: true) var songs: [LMSong]
}

@Entity final class LMSong {
    @Attribute(.unique) var songID: Int64 = 0
    var title: String = ""
    var albumTitle: String?
    @Relationship(inverse: "songs") var albums: [LMAlbum]
}

/// A recipe's steps, in order, each in one recipe (ordered one-to-many; the to-one side is
/// stored as links too).
@Entity final class LMRecipe {
    @Attribute(.unique) var name: String = ""
    @Relationship(deleteRule: .cascade, inverse: "recipe", ordered: true) var steps: [LMStep]
}

@Entity final class LMStep {
    @Attribute(.unique) var stepID: Int64 = 0
    var text: String = ""
    var recipeName: String?
    @Relationship(inverse: "steps") var recipe: LMRecipe?
}

/// Debian-style dependencies: a many-to-many of an entity with itself.
@Entity final class LMUnit {
    @Attribute(.unique) var name: String = ""
    var version: String = ""
    var dependsNames: [String] = []
    @Relationship(inverse: "dependents") var depends: [LMUnit]
    @Relationship(inverse: "depends") var dependents: [LMUnit]
}

private var linkMappingSchema: Schema {
    get throws {
        try Schema(LMCourse.self, LMStudent.self, LMAlbum.self, LMSong.self, LMRecipe.self, LMStep.self, LMUnit.self)
    }
}

private func json(_ text: String) -> Data { Data(text.utf8) }

private func students() throws -> EntityMapping<LMStudent> {
    var m = EntityMapping(LMStudent.self)
    try m.map("login", "name")
    try m.identify(by: "login")
    return m
}

private func courses() throws -> EntityMapping<LMCourse> {
    var m = EntityMapping(LMCourse.self)
    try m.map("code", "title")
    try m.identify(by: "code")
    try m.map("students", to: "students", with: try students())
    return m
}

private func songs() throws -> EntityMapping<LMSong> {
    var m = EntityMapping(LMSong.self)
    try m.map("songID", "title")
    try m.identify(by: "songID")
    return m
}

private func albums() throws -> EntityMapping<LMAlbum> {
    var m = EntityMapping(LMAlbum.self)
    try m.map("albumID", "title")
    try m.identify(by: "albumID")
    try m.map("songs", to: "songs", with: try songs())
    return m
}

private func logins(_ s: [LMStudent]) -> [String] { s.map(\.login).sorted() }
private func codes(_ c: [LMCourse]) -> [String] { c.map(\.code).sorted() }
private func songIDs(_ a: LMAlbum) -> [Int64] { a.songs.map(\.songID) }

private func course(_ code: String, in context: ModelContext) throws -> LMCourse {
    try #require(try context.object(LMCourse.self, where: \.code, equals: code))
}

private func student(_ login: String, in context: ModelContext) throws -> LMStudent {
    try #require(try context.object(LMStudent.self, where: \.login, equals: login))
}

private func album(_ id: Int64, in context: ModelContext) throws -> LMAlbum {
    try #require(try context.object(LMAlbum.self, where: \.albumID, equals: id))
}

private let enrolment = """
    [{"code": "cs101", "title": "Programming", "students": [{"login": "ada", "name": "Ada"}, {"login": "alan", "name": "Alan"}]},
     {"code": "ma201", "title": "Algebra", "students": [{"login": "ada"}, {"login": "emmy", "name": "Emmy"}, {"login": "ada"}]},
     {"code": "ph110", "title": "Physics", "students": []}]
    """

@Suite("Mapping into many-to-many and ordered relationships")
struct LinkMappingTests {
    // MARK: Nested arrays into a many-to-many

    @Test func aNestedArrayFillsAManyToManyAndTheOtherSideShowsIt() throws {
        let context = ModelContext(schema: try linkMappingSchema)
        let r = try context.map(json(enrolment), with: try courses())
        #expect(r.counts.inserted == 3)
        #expect(r.countsByEntity["LMStudent"]?.inserted == 3, "a student named twice is one object")
        #expect(logins(try course("cs101", in: context).students) == ["ada", "alan"])
        #expect(
            logins(try course("ma201", in: context).students) == ["ada", "emmy"], "a member listed twice counts once")
        #expect(try course("ph110", in: context).students.isEmpty)
        // The inverse: each student lists the courses whose arrays named them.
        #expect(codes(try student("ada", in: context).courses) == ["cs101", "ma201"])
        #expect(codes(try student("alan", in: context).courses) == ["cs101"])
        #expect(codes(try student("emmy", in: context).courses) == ["ma201"])
        #expect(try student("ada", in: context).name == "Ada", "a later nested source without the key leaves the name")
    }

    @Test func reRunningTheSameDocumentChangesNothing() throws {
        let context = ModelContext(schema: try linkMappingSchema)
        try context.map(json(enrolment), with: try courses())
        try context.save()
        // Members in another order in the array: set semantics, nothing changes either.
        let reordered = """
            [{"code": "ma201", "title": "Algebra", "students": [{"login": "emmy", "name": "Emmy"}, {"login": "ada"}]},
             {"code": "cs101", "title": "Programming", "students": [{"login": "alan", "name": "Alan"}, {"login": "ada", "name": "Ada"}]},
             {"code": "ph110", "title": "Physics", "students": []}]
            """
        for document in [enrolment, reordered] {
            let again = try context.map(json(document), with: try courses())
            #expect(again.counts.unchanged == 3 && again.counts.updated == 0 && again.counts.inserted == 0)
            #expect(again.countsByEntity["LMStudent"]?.updated == 0)
            #expect(!context.hasChanges, "no link was touched")
            #expect(context.updatedObjects.isEmpty)
            #expect(try course("cs101", in: context).changedValues().isEmpty)
        }
    }

    @Test func aChangedArrayUpdatesBothSidesAndTheResultCountsIt() throws {
        let context = ModelContext(schema: try linkMappingSchema)
        try context.map(json(enrolment), with: try courses())
        try context.save()
        let r = try context.map(
            json(
                """
                [{"code": "cs101", "students": [{"login": "alan"}, {"login": "grace", "name": "Grace"}]},
                 {"code": "ma201", "title": "Algebra"},
                 {"code": "ph110", "students": null}]
                """), with: try courses())
        #expect(
            r.counts.updated == 1 && r.counts.unchanged == 2,
            "only cs101 changed: a missing key leaves ma201, null clears the empty ph110")
        #expect(logins(try course("cs101", in: context).students) == ["alan", "grace"])
        #expect(codes(try student("ada", in: context).courses) == ["ma201"], "ada left cs101")
        #expect(codes(try student("grace", in: context).courses) == ["cs101"])
        #expect(
            logins(try course("ma201", in: context).students) == ["ada", "emmy"],
            "a missing key leaves the relationship")
        let changed = try course("cs101", in: context).changedValues()
        guard case .objects(let ids)?? = changed["students"] else {
            Issue.record("students not reported as changed: \(changed)")
            return
        }
        #expect(ids.count == 2)
        // null clears a many-to-many, and the other side with it.
        try context.map(json(#"[{"code": "ma201", "students": null}]"#), with: try courses())
        #expect(try course("ma201", in: context).students.isEmpty)
        #expect(try student("emmy", in: context).courses.isEmpty)
    }

    @Test func theOtherSideMapsToo() throws {
        // The same relationship mapped from the students' side, in a document of students.
        let context = ModelContext(schema: try linkMappingSchema)
        var byCode = EntityMapping(LMCourse.self)
        try byCode.map("code")
        try byCode.identify(by: "code")
        var m = try students()
        try m.map("courses", to: "courses", with: byCode)
        let document = json(
            """
            [{"login": "ada", "courses": [{"code": "cs101"}, {"code": "ma201"}]},
             {"login": "alan", "courses": [{"code": "cs101"}]}]
            """)
        try context.map(document, with: m)
        #expect(logins(try course("cs101", in: context).students) == ["ada", "alan"])
        #expect(logins(try course("ma201", in: context).students) == ["ada"])
        try context.save()
        let again = try context.map(document, with: m)
        #expect(again.counts.unchanged == 2 && !context.hasChanges)
    }

    @Test func aSelfReferentialManyToManyFromNestedObjects() throws {
        let context = ModelContext(schema: try linkMappingSchema)
        var byName = EntityMapping(LMUnit.self)
        try byName.map("name")
        try byName.identify(by: "name")
        var units = EntityMapping(LMUnit.self)
        try units.map("name", "version")
        try units.identify(by: "name")
        try units.map("depends", to: "depends", with: byName)
        let document = json(
            """
            [{"name": "curl", "version": "7.88", "depends": [{"name": "libc6"}, {"name": "zlib1g"}, {"name": "libcurl4"}]},
             {"name": "libcurl4", "version": "7.88", "depends": [{"name": "libc6"}, {"name": "zlib1g"}]},
             {"name": "zlib1g", "version": "1.2.13", "depends": [{"name": "libc6"}]},
             {"name": "libc6", "version": "2.36", "depends": []}]
            """)
        let r = try context.map(document, with: units)
        #expect(
            r.counts.inserted == 4, "a unit named as a dependency first and listed later is one object: \(r.counts)")
        let libc = try #require(try context.object(LMUnit.self, where: \.name, equals: "libc6"))
        #expect(libc.version == "2.36")
        #expect(libc.dependents.map(\.name).sorted() == ["curl", "libcurl4", "zlib1g"])
        #expect(libc.depends.isEmpty)
        try context.save()
        let again = try context.map(document, with: units)
        #expect(again.counts.inserted == 0 && again.counts.updated == 0, "\(again.counts)")
        #expect(!context.hasChanges)
    }

    /// An object mapped by a top-level source and named in a nested array of the same entity is
    /// one object, and the run's counts for the entity count it once, across both mappings.
    @Test func anObjectNamedTopLevelAndNestedIsCountedOnce() throws {
        let context = ModelContext(schema: try linkMappingSchema)
        var byName = EntityMapping(LMUnit.self)
        try byName.map("name")
        try byName.identify(by: "name")
        var units = EntityMapping(LMUnit.self)
        try units.map("name", "version")
        try units.identify(by: "name")
        try units.map("depends", to: "depends", with: byName)
        let document = json(
            #"[{"name": "zlib1g", "version": "1", "depends": [{"name": "libc6"}]}, {"name": "libc6", "version": "2"}]"#)
        let first = try context.map(document, with: units)
        #expect(try context.count(of: LMUnit.self) == 2)
        #expect(
            first.counts.inserted == 2 && first.counts.updated == 0 && first.counts.unchanged == 0, "\(first.counts)")
        let again = try context.map(document, with: units)
        #expect(again.counts.unchanged == 2, "\(again.counts)")
    }

    // MARK: Ordered relationships

    @Test func anOrderedToManyTakesTheArraysOrder() throws {
        let context = ModelContext(schema: try linkMappingSchema)
        let document = json(
            """
            [{"albumID": 1, "title": "A", "songs": [{"songID": 30, "title": "c"}, {"songID": 10, "title": "a"}, {"songID": 20, "title": "b"}]},
             {"albumID": 2, "title": "B", "songs": [{"songID": 20}, {"songID": 40, "title": "d"}, {"songID": 30}, {"songID": 20}]}]
            """)
        try context.map(document, with: try albums())
        #expect(songIDs(try album(1, in: context)) == [30, 10, 20])
        #expect(songIDs(try album(2, in: context)) == [20, 40, 30], "a repeated member keeps its first place")
        let twenty = try #require(try context.object(LMSong.self, where: \.songID, equals: 20))
        #expect(twenty.albums.map(\.albumID).sorted() == [1, 2])
        try context.save()
        let again = try context.map(document, with: try albums())
        #expect(again.counts.unchanged == 2 && again.countsByEntity["LMSong"]?.updated == 0)
        #expect(!context.hasChanges)
    }

    @Test func aNewOrderInTheDocumentReordersAndOnlyThat() throws {
        let context = ModelContext(schema: try linkMappingSchema)
        try context.map(
            json(#"[{"albumID": 1, "songs": [{"songID": 1}, {"songID": 2}, {"songID": 3}, {"songID": 4}]}]"#),
            with: try albums())
        try context.save()
        let r = try context.map(
            json(#"[{"albumID": 1, "songs": [{"songID": 4}, {"songID": 1}, {"songID": 2}, {"songID": 3}]}]"#),
            with: try albums())
        #expect(r.counts.updated == 1, "the same members in another order is a change of an ordered relationship")
        #expect(songIDs(try album(1, in: context)) == [4, 1, 2, 3])
        // Order changes, a member leaves, another joins, in one array.
        try context.map(
            json(#"[{"albumID": 1, "songs": [{"songID": 3}, {"songID": 5}, {"songID": 4}, {"songID": 1}]}]"#),
            with: try albums())
        #expect(songIDs(try album(1, in: context)) == [3, 5, 4, 1])
        #expect(try #require(try context.object(LMSong.self, where: \.songID, equals: 2)).albums.isEmpty)
        context.rollback()
        #expect(songIDs(try album(1, in: context)) == [1, 2, 3, 4], "rollback restores the saved order")
    }

    @Test func orderedLinksMappedSurviveSaveAndReopen() throws {
        let dir = temporaryStoreDirectory()
        let document = json(
            """
            [{"albumID": 1, "title": "A", "songs": [{"songID": 3}, {"songID": 1}, {"songID": 2}]},
             {"albumID": 2, "title": "B", "songs": [{"songID": 2}, {"songID": 3}]}]
            """)
        do {
            let store = try ObjectStore.open(at: dir, schema: try linkMappingSchema)
            try store.context.map(document, with: try albums())
            try store.context.save()
            try store.context.map(
                json(#"[{"albumID": 2, "songs": [{"songID": 3}, {"songID": 1}, {"songID": 2}]}]"#), with: try albums())
            try store.context.save()
            try store.close()
        }
        let store = try ObjectStore.open(at: dir, schema: try linkMappingSchema)
        let context = store.context
        #expect(songIDs(try album(1, in: context)) == [3, 1, 2])
        #expect(songIDs(try album(2, in: context)) == [3, 1, 2])
        // The reopened store maps the last document again without a change.
        let again = try context.map(
            json(#"[{"albumID": 2, "songs": [{"songID": 3}, {"songID": 1}, {"songID": 2}]}]"#), with: try albums())
        #expect(again.counts.unchanged == 1 && !context.hasChanges)
        try store.close()
    }

    @Test func anOrderedOneToManyFromEitherSide() throws {
        let context = ModelContext(schema: try linkMappingSchema)
        var step = EntityMapping(LMStep.self)
        try step.map("stepID", "text")
        try step.identify(by: "stepID")
        var recipe = EntityMapping(LMRecipe.self)
        try recipe.map("name")
        try recipe.identify(by: "name")
        try recipe.map("steps", to: "steps", with: step)
        let document = json(
            """
            [{"name": "bread", "steps": [{"stepID": 3, "text": "bake"}, {"stepID": 1, "text": "mix"}, {"stepID": 2, "text": "rise"}]},
             {"name": "tea", "steps": [{"stepID": 10, "text": "boil"}]}]
            """)
        try context.map(document, with: recipe)
        let bread = try #require(try context.object(LMRecipe.self, where: \.name, equals: "bread"))
        #expect(bread.steps.map(\.stepID) == [3, 1, 2])
        #expect(bread.steps.allSatisfy { $0.recipe === bread })
        try context.save()
        #expect(try context.map(document, with: recipe).counts.unchanged == 2)
        #expect(!context.hasChanges)
        // From the steps' side: the to-one moves a step to another recipe, at its end.
        var byRecipe = EntityMapping(LMRecipe.self)
        try byRecipe.map("name")
        try byRecipe.identify(by: "name")
        var steps = EntityMapping(LMStep.self)
        try steps.map("stepID")
        try steps.identify(by: "stepID")
        try steps.map("recipe", to: "recipe", with: byRecipe)
        let moved = try context.map(
            json(#"[{"stepID": 1, "recipe": {"name": "tea"}}, {"stepID": 2, "recipe": {"name": "bread"}}]"#),
            with: steps)
        #expect(moved.counts.updated == 1 && moved.counts.unchanged == 1)
        let tea = try #require(try context.object(LMRecipe.self, where: \.name, equals: "tea"))
        #expect(tea.steps.map(\.stepID) == [10, 1])
        #expect(bread.steps.map(\.stepID) == [3, 2])
        // null clears the to-one side.
        try context.map(json(#"[{"stepID": 10, "recipe": null}]"#), with: steps)
        #expect(tea.steps.map(\.stepID) == [1])
    }

    // MARK: Connections by attribute

    @Test func aConnectionFillsAManyToManyWithEveryMatch() throws {
        let context = ModelContext(schema: try linkMappingSchema)
        var people = try students()
        try people.map("department")
        try context.map(
            json(
                """
                [{"login": "ada", "department": "cs"}, {"login": "alan", "department": "cs"},
                 {"login": "emmy", "department": "math"}, {"login": "kurt"}]
                """), with: people)
        var m = EntityMapping(LMCourse.self)
        try m.map("code", "department")
        try m.identify(by: "code")
        try m.connect("students", by: "department")
        let document = json(
            """
            [{"code": "cs101", "department": "cs"}, {"code": "cs102", "department": "cs"},
             {"code": "ma201", "department": "math"}, {"code": "ar100", "department": "art"}, {"code": "xx000"}]
            """)
        let r = try context.map(document, with: m)
        #expect(r.counts.unresolvedConnections == 1, "art has no student; a nil department is not counted")
        #expect(logins(try course("cs101", in: context).students) == ["ada", "alan"])
        #expect(logins(try course("cs102", in: context).students) == ["ada", "alan"])
        #expect(logins(try course("ma201", in: context).students) == ["emmy"])
        #expect(
            codes(try student("ada", in: context).courses) == ["cs101", "cs102"],
            "the other side shows every connection")
        #expect(try student("kurt", in: context).courses.isEmpty)
        try context.save()
        let again = try context.map(document, with: m)
        #expect(again.counts.unchanged == 5 && !context.hasChanges, "connecting the same matches again changes nothing")
        // A student moves department: the next run connects the courses to the new set.
        try context.map(json(#"[{"login": "emmy", "department": "cs"}]"#), with: people)
        try context.map(document, with: m)
        #expect(context.hasChanges)
        #expect(logins(try course("cs101", in: context).students) == ["ada", "alan", "emmy"])
        #expect(try course("ma201", in: context).students.isEmpty)
        #expect(codes(try student("emmy", in: context).courses) == ["cs101", "cs102"])
    }

    /// The result counts as updated an object whose relationships changed, a connection's
    /// included.
    @Test func anObjectWhoseConnectionChangedIsCountedAsUpdated() throws {
        let context = ModelContext(schema: try linkMappingSchema)
        var people = try students()
        try people.map("department")
        try context.map(
            json(#"[{"login": "ada", "department": "cs"}, {"login": "emmy", "department": "math"}]"#), with: people)
        var m = EntityMapping(LMCourse.self)
        try m.map("code", "department")
        try m.identify(by: "code")
        try m.connect("students", by: "department")
        let document = json(#"[{"code": "cs101", "department": "cs"}, {"code": "ma201", "department": "math"}]"#)
        try context.map(document, with: m)
        try context.save()
        try context.map(json(#"[{"login": "emmy", "department": "cs"}]"#), with: people)
        let r = try context.map(document, with: m)
        #expect(logins(try course("cs101", in: context).students) == ["ada", "emmy"])
        #expect(try course("ma201", in: context).students.isEmpty)
        #expect(r.counts.updated == 2 && r.counts.unchanged == 0, "\(r.counts)")
    }

    @Test func aConnectionThroughAUniqueAttributeFillsAManyToMany() throws {
        // A connection whose destination attribute is unique: one match per object, found in O(1).
        let context = ModelContext(schema: try linkMappingSchema)
        try context.map(json(#"[{"albumID": 1, "title": "Blue"}, {"albumID": 2, "title": "Red"}]"#), with: try albums())
        var m = try songs()
        try m.map("albumTitle")
        try m.connect("albums", by: ["albumTitle": "title"])
        let document = json(
            #"[{"songID": 5, "albumTitle": "Blue"}, {"songID": 6, "albumTitle": "Blue"}, {"songID": 7, "albumTitle": "Green"}]"#
        )
        let r = try context.map(document, with: m)
        #expect(r.counts.unresolvedConnections == 1)
        #expect(
            songIDs(try album(1, in: context)) == [5, 6],
            "the ordered side takes the connections in the order they are made")
        try context.save()
        #expect(try context.map(document, with: m).counts.unchanged == 3)
        #expect(!context.hasChanges)
        // A connection that no longer matches clears the song's albums, and the album's side.
        try context.map(json(#"[{"songID": 5, "albumTitle": "Gone"}]"#), with: m)
        #expect(songIDs(try album(1, in: context)) == [6])
    }

    @Test func aConnectionFillsAnOrderedToManyInStorageOrder() throws {
        let context = ModelContext(schema: try linkMappingSchema)
        var s = try songs()
        try s.map("albumTitle")
        try context.map(
            json(
                #"[{"songID": 8, "albumTitle": "Blue"}, {"songID": 2, "albumTitle": "Red"}, {"songID": 5, "albumTitle": "Blue"}]"#
            ), with: s)
        var m = EntityMapping(LMAlbum.self)
        try m.map("albumID", "title")
        try m.identify(by: "albumID")
        try m.connect("songs", by: ["title": "albumTitle"])
        let document = json(#"[{"albumID": 1, "title": "Blue"}, {"albumID": 2, "title": "Red"}]"#)
        try context.map(document, with: m)
        #expect(songIDs(try album(1, in: context)) == [8, 5])
        #expect(songIDs(try album(2, in: context)) == [2])
        try context.save()
        #expect(try context.map(document, with: m).counts.unchanged == 2)
        #expect(!context.hasChanges)
    }

    @Test func aConnectionFillsTheToOneSideOfAnOrderedToMany() throws {
        let context = ModelContext(schema: try linkMappingSchema)
        var recipes = EntityMapping(LMRecipe.self)
        try recipes.map("name")
        try context.map(json(#"[{"name": "bread"}, {"name": "tea"}]"#), with: recipes)
        var steps = EntityMapping(LMStep.self)
        try steps.map("stepID", "text", "recipeName")
        try steps.identify(by: "stepID")
        try steps.connect("recipe", by: ["recipeName": "name"])
        let document = json(
            """
            [{"stepID": 1, "text": "mix", "recipeName": "bread"}, {"stepID": 2, "text": "boil", "recipeName": "tea"},
             {"stepID": 3, "text": "bake", "recipeName": "bread"}]
            """)
        try context.map(document, with: steps)
        let bread = try #require(try context.object(LMRecipe.self, where: \.name, equals: "bread"))
        #expect(bread.steps.map(\.stepID) == [1, 3])
        try context.save()
        #expect(try context.map(document, with: steps).counts.unchanged == 3)
        #expect(!context.hasChanges, "a to-one stored as links that already holds the match is left alone")
    }

    /// RestKit connects a to-many by an array of keys (`IN`): each element names a member, in
    /// the array's order; a name that matches nothing is skipped.
    @Test func anArrayOfKeysConnectsEveryObjectItNames() throws {
        let context = ModelContext(schema: try linkMappingSchema)
        var units = EntityMapping(LMUnit.self)
        try units.map("name")
        try units.map(["depends": "dependsNames"])
        try units.identify(by: "name")
        try units.connect("depends", by: ["dependsNames": "name"])
        let document = json(
            #"""
            [{"name": "curl", "depends": ["libc6", "zlib1g", "virtual-x", "libc6"]},
             {"name": "zlib1g", "depends": ["libc6"]}, {"name": "libc6", "depends": []}]
            """#)
        let r = try context.map(document, with: units)
        #expect(r.counts.unresolvedConnections == 1, "libc6 names nothing")
        let curl = try #require(try context.object(LMUnit.self, where: \.name, equals: "curl"))
        #expect(curl.depends.map(\.name).sorted() == ["libc6", "zlib1g"])
        let libc = try #require(try context.object(LMUnit.self, where: \.name, equals: "libc6"))
        #expect(libc.dependents.map(\.name).sorted() == ["curl", "zlib1g"])
        try context.save()
        let again = try context.map(document, with: units)
        #expect(again.counts.updated == 0, "\(again.counts)")
        #expect(!context.hasChanges)
    }

    /// A first sync connects into a link table that holds nothing, and sets every object's
    /// list at once; the result, the save and a rollback must be those of the one-by-one path,
    /// which a table holding one link already takes.
    @Test func aFirstConnectIntoAnEmptyTableLinksAsTheOneByOnePathDoes() throws {
        var units = EntityMapping(LMUnit.self)
        try units.map("name")
        try units.map(["depends": "dependsNames"])
        try units.identify(by: "name")
        try units.connect("depends", by: ["dependsNames": "name"])
        // 400 units, each naming up to six others (a repeat, and a name nothing has, now and
        // then): about 1,000 links.
        var generator = LZ4Tests.SeededGenerator(state: 41)
        var records: [String] = []
        for i in 0..<400 {
            var names = (0..<Int(generator.next() % 7)).map { _ in "\"u\(generator.next() % 400)\"" }
            if i % 9 == 0, let first = names.first { names.append(first) }
            if i % 13 == 0 { names.append("\"virtual-\(i)\"") }
            records.append(#"{"name": "u\#(i)", "depends": [\#(names.joined(separator: ", "))]}"#)
        }
        let document = json("[" + records.joined(separator: ",\n") + "]")
        func links(_ context: ModelContext) throws -> [String: [String]] {
            var result: [String: [String]] = [:]
            for unit in try context.fetch(FetchDescriptor<LMUnit>()) where unit.name.hasPrefix("u") {
                result[unit.name] = unit.depends.map(\.name).sorted() + ["|"] + unit.dependents.map(\.name).sorted()
            }
            return result
        }

        let dir = temporaryStoreDirectory()
        let store = try ObjectStore.open(at: dir, schema: try linkMappingSchema)
        let fresh = try store.context.map(document, with: units)
        // The one-by-one path: a table that holds a link already.
        let other = ModelContext(schema: try linkMappingSchema)
        try other.map(json(#"[{"name": "x1", "depends": ["x2"]}, {"name": "x2", "depends": []}]"#), with: units)
        try other.save()
        let oneByOne = try other.map(document, with: units)
        #expect(fresh.counts.inserted == oneByOne.counts.inserted)
        #expect(fresh.counts.connections == oneByOne.counts.connections)
        let expected = try links(other)
        #expect(expected.values.reduce(0) { $0 + $1.count } > 1_500, "the document links enough to take the bulk path")
        #expect(try links(store.context) == expected)

        // Undone, then done again and saved: the journal holds what the one-by-one path holds.
        store.context.rollback()
        #expect(try store.context.count(of: LMUnit.self) == 0)
        try store.context.map(document, with: units)
        try store.context.save()
        #expect(try links(store.context) == expected)
        try store.close()
        let reopened = try ObjectStore.open(at: dir, schema: try linkMappingSchema)
        #expect(try links(reopened.context) == expected)
        let again = try reopened.context.map(document, with: units)
        #expect(again.counts.updated == 0 && !reopened.context.hasChanges, "\(again.counts)")
        try reopened.close()
    }

    /// A list longer than the few names a package has (each name three times, and names of
    /// nothing among them) connects each destination once, as a short one does.
    @Test func aLongListOfKeysConnectsEachDestinationOnce() throws {
        let context = ModelContext(schema: try linkMappingSchema)
        var units = EntityMapping(LMUnit.self)
        try units.map("name")
        try units.map(["depends": "dependsNames"])
        try units.identify(by: "name")
        try units.connect("depends", by: ["dependsNames": "name"])
        let names = (0..<300).map { "\"lib\($0 % 100)\"" } + (0..<5).map { "\"virtual-\($0)\"" }
        let document = json(
            "[{\"name\": \"big\", \"depends\": [\(names.joined(separator: ", "))]}, "
                + (0..<100).map { #"{"name": "lib\#($0)", "depends": []}"# }.joined(separator: ", ") + "]")
        let r = try context.map(document, with: units)
        #expect(r.counts.connections["depends"]?.unmatchedKeys == 5)
        let big = try #require(try context.object(LMUnit.self, where: \.name, equals: "big"))
        #expect(big.depends.count == 100)
        #expect(Set(big.depends.map(\.name)) == Set((0..<100).map { "lib\($0)" }))
        let lib = try #require(try context.object(LMUnit.self, where: \.name, equals: "lib42"))
        #expect(lib.dependents.map(\.name) == ["big"])
    }

    // MARK: Runs that fail, tombstones and syncs

    @Test func aRunThatFailsLeavesTheLinksAsTheyWere() throws {
        let context = ModelContext(schema: try linkMappingSchema)
        try context.map(json(#"[{"albumID": 1, "songs": [{"songID": 1}, {"songID": 2}]}]"#), with: try albums())
        try context.save()
        #expect(throws: MappingError.self) {
            try context.map(
                json(#"[{"albumID": 1, "songs": [{"songID": 2}, {"songID": 3}]}, {"albumID": "x"}]"#),
                with: try albums())
        }
        #expect(songIDs(try album(1, in: context)) == [1, 2])
        #expect(try context.count(of: LMSong.self) == 2)
        #expect(!context.hasChanges)
    }

    @Test func aTombstonedMemberLeavesTheOtherSide() throws {
        let context = ModelContext(schema: try linkMappingSchema)
        try context.map(json(enrolment), with: try courses())
        try context.save()
        var m = try students()
        try m.map(["gone": "isGone"])
        m.deletionPredicate = #Predicate<LMStudent> { $0.isGone }
        let r = try context.map(json(#"[{"login": "ada", "gone": true}]"#), with: m)
        #expect(r.counts.tombstoned == 1)
        #expect(logins(try course("cs101", in: context).students) == ["alan"])
        #expect(logins(try course("ma201", in: context).students) == ["emmy"])
        try context.save()
        #expect(logins(try course("ma201", in: context).students) == ["emmy"])
    }

    @Test func aSyncSweepsAMemberAndTheOtherSideForgetsIt() throws {
        let context = ModelContext(schema: try linkMappingSchema)
        var byName = EntityMapping(LMUnit.self)
        try byName.map("name")
        try byName.identify(by: "name")
        var units = EntityMapping(LMUnit.self)
        try units.map("name", "version")
        try units.identify(by: "name")
        try units.map("depends", to: "depends", with: byName)
        try context.sync([LMUnit.self]) { sync in
            try sync.map(
                json(
                    """
                    [{"name": "a", "depends": [{"name": "b"}, {"name": "c"}]}, {"name": "b", "depends": [{"name": "c"}]}, {"name": "c"}]
                    """), with: units)
        }
        try context.sync([LMUnit.self]) { sync in
            try sync.map(json(#"[{"name": "a"}, {"name": "c"}]"#), with: units)
        }
        let a = try #require(try context.object(LMUnit.self, where: \.name, equals: "a"))
        #expect(a.depends.map(\.name) == ["c"], "b was swept")
        let c = try #require(try context.object(LMUnit.self, where: \.name, equals: "c"))
        #expect(c.dependents.map(\.name) == ["a"])
    }

    // MARK: The worked example of Docs/Mapping.md

    @Test func theDocumentedExampleRunsAsWritten() throws {
        let context = ModelContext(schema: try linkMappingSchema)
        let document = Data(
            """
            [{"albumID": 1, "title": "Blue", "songs": [{"songID": 3, "title": "Carey"},
                                                       {"songID": 1, "title": "All I Want"}]},
             {"albumID": 2, "title": "Hits", "songs": [{"songID": 1}, {"songID": 9, "title": "Big Yellow Taxi"}]}]
            """.utf8)

        var song = EntityMapping(LMSong.self)
        try song.map("songID", "title")
        try song.identify(by: "songID")
        var album = EntityMapping(LMAlbum.self)
        try album.map("albumID", "title")
        try album.identify(by: "albumID")
        try album.map("songs", to: "songs", with: song)

        try context.map(document, with: album)
        try context.save()
        let blue = try #require(try context.object(LMAlbum.self, where: \.albumID, equals: 1))
        #expect(blue.songs.map(\.title) == ["Carey", "All I Want"])
        let allIWant = try #require(try context.object(LMSong.self, where: \.songID, equals: 1))
        #expect(allIWant.albums.map(\.title).sorted() == ["Blue", "Hits"])
        let again = try context.map(document, with: album)
        #expect(again.counts.unchanged == 2)
        #expect(!context.hasChanges)
    }
}
