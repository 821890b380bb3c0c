import Foundation
import ObjectGraph
import Testing

/// Articles and tags: a many-to-many, set semantics both ways.
@Entity final class Post {
    var title: String = ""
    @Relationship(inverse: "posts") var tags: [Tag]
}

@Entity final class Tag {
    var label: String = ""
    @Relationship(inverse: "tags") var posts: [Post]
}

/// A playlist orders its tracks; a track is in many playlists (ordered many-to-many).
@Entity final class Playlist {
    var name: String = ""
    @Relationship(deleteRule: .deny, inverse: "playlists", ordered: true) var tracks: [Track]
}

@Entity final class Track {
    var title: String = ""
    @Relationship(inverse: "tracks") var playlists: [Playlist]
}

/// A book's chapters, in order, each in one book (ordered one-to-many, cascade).
@Entity final class Manuscript {
    var title: String = ""
    @Relationship(deleteRule: .cascade, inverse: "manuscript", ordered: true) var chapters: [Chapter]
}

@Entity final class Chapter {
    var heading: String = ""
    @Relationship(inverse: "chapters") var manuscript: Manuscript?
}

/// Debian-style dependencies: a many-to-many of an entity with itself.
@Entity final class Pkg {
    var name: String = ""
    @Relationship(inverse: "dependents") var depends: [Pkg]
    @Relationship(inverse: "depends") var dependents: [Pkg]
}

let linkSchema = try! Schema(Post.self, Tag.self, Playlist.self, Track.self, Manuscript.self, Chapter.self, Pkg.self)

private func labels(_ tags: [Tag]) -> [String] { tags.map(\.label).sorted() }
private func titles(_ tracks: [Track]) -> [String] { tracks.map(\.title) }

@Suite("Many-to-many and ordered relationships")
struct LinkTests {
    @Test func manyToManyMaintainsBothSidesWithSetSemantics() throws {
        let c = ModelContext(schema: linkSchema)
        let a = try c.insert(Post.self), b = try c.insert(Post.self)
        let swift = try c.insert(Tag.self), linux = try c.insert(Tag.self)
        swift.label = "swift"; linux.label = "linux"
        a.tags = [swift, linux, swift]  // duplicates count once
        b.tags = [swift]
        #expect(labels(a.tags) == ["linux", "swift"])
        #expect(Set(swift.posts.map(ObjectIdentifier.init)) == [ObjectIdentifier(a), ObjectIdentifier(b)])
        #expect(linux.posts.map(ObjectIdentifier.init) == [ObjectIdentifier(a)])
        linux.posts = [b]  // set from the other side
        #expect(labels(a.tags) == ["swift"])
        #expect(labels(b.tags) == ["linux", "swift"])
        try c.add(linux, to: "tags", of: a)
        try c.remove(swift, from: "tags", of: b)
        #expect(labels(a.tags) == ["linux", "swift"])
        #expect(labels(b.tags) == ["linux"])
        #expect(swift.posts.count == 1)
    }

    @Test func rollbackAndSavepointsRestoreLinksAndOrder() throws {
        let c = ModelContext(schema: linkSchema)
        let p = try c.insert(Playlist.self)
        let tracks = try (0..<5).map { i in try c.insert(Track.self) { $0.title = "t\(i)" } }
        p.tracks = tracks
        try c.save()
        try c.move(in: "tracks", of: p, from: 0, to: 4)
        try c.add(try c.insert(Track.self) { $0.title = "new" }, to: "tracks", of: p, at: 1)
        try c.remove(tracks[2], from: "tracks", of: p)
        #expect(titles(p.tracks) == ["t1", "new", "t3", "t4", "t0"])
        #expect(c.hasChanges)
        c.rollback()
        #expect(titles(p.tracks) == ["t0", "t1", "t2", "t3", "t4"])
        #expect(!c.hasChanges)
        try c.transaction { _ in
            p.tracks = [tracks[4], tracks[3]]
            #expect(titles(p.tracks) == ["t4", "t3"])
        }
        #expect(titles(p.tracks) == ["t4", "t3"])
        #expect(throws: CancellationError.self) {
            try c.transaction { _ in
                p.tracks = tracks
                throw CancellationError()
            }
        }
        #expect(titles(p.tracks) == ["t4", "t3"])
        #expect(tracks[0].playlists.isEmpty)
    }

    @Test func changedAndCommittedValuesReportLinks() throws {
        let c = ModelContext(schema: linkSchema)
        let a = try c.insert(Post.self)
        let t1 = try c.insert(Tag.self), t2 = try c.insert(Tag.self)
        a.tags = [t1]
        try c.save()
        #expect(a.changedValues().isEmpty)
        a.tags = [t1, t2]
        let changed = a.changedValues()
        guard case .objects(let ids)?? = changed["tags"] else {
            Issue.record("tags not reported: \(changed)")
            return
        }
        #expect(Set(ids) == Set([t1.objectID!, t2.objectID!]))
        guard case .objects(let before)?? = try a.committedValues(forKeys: ["tags"])["tags"] else {
            Issue.record("no committed tags")
            return
        }
        #expect(before == [t1.objectID!])
        #expect(t2.changedValues()["posts"] != nil)
    }

    @Test func deleteRulesApplyToLinks() throws {
        let c = ModelContext(schema: linkSchema)
        // nullify (default): deleting a tag removes it from its articles.
        let a = try c.insert(Post.self)
        let t = try c.insert(Tag.self)
        a.tags = [t]
        try c.save()
        c.delete(t)
        #expect(a.tags.isEmpty)
        c.rollback()
        #expect(a.tags.count == 1)
        c.delete(t)
        try c.save()
        #expect(a.tags.isEmpty)
        // cascade: a manuscript takes its chapters.
        let m = try c.insert(Manuscript.self)
        m.chapters = try (0..<3).map { i in try c.insert(Chapter.self) { $0.heading = "c\(i)" } }
        try c.save()
        c.delete(m)
        #expect(try c.count(of: Chapter.self) == 0)
        try c.save()
        // deny: a playlist with tracks cannot be deleted.
        let p = try c.insert(Playlist.self)
        let track = try c.insert(Track.self)
        p.tracks = [track]
        try c.save()
        c.delete(p)
        #expect(throws: ValidationError.self) { try c.save() }
        c.rollback()
        p.tracks = []
        c.delete(p)
        try c.save()
        #expect(track.playlists.isEmpty)
    }

    @Test func orderedOneToManyKeepsOrderAndItsToOneSide() throws {
        let c = ModelContext(schema: linkSchema)
        let m1 = try c.insert(Manuscript.self), m2 = try c.insert(Manuscript.self)
        let ch = try (0..<4).map { i in try c.insert(Chapter.self) { $0.heading = "c\(i)" } }
        m1.chapters = [ch[2], ch[0], ch[1]]
        #expect(m1.chapters.map(\.heading) == ["c2", "c0", "c1"])
        #expect(ch[0].manuscript === m1)
        ch[0].manuscript = m2  // leaves m1
        #expect(m1.chapters.map(\.heading) == ["c2", "c1"])
        #expect(m2.chapters.map(\.heading) == ["c0"])
        try c.add(ch[1], to: "chapters", of: m2, at: 0)  // moves it from m1 (a to-one side)
        #expect(m2.chapters.map(\.heading) == ["c1", "c0"])
        #expect(m1.chapters.map(\.heading) == ["c2"])
        ch[3].manuscript = m1
        #expect(m1.chapters.map(\.heading) == ["c2", "c3"])
    }

    @Test func selfReferentialManyToMany() throws {
        let c = ModelContext(schema: linkSchema)
        let libc = try c.insert(Pkg.self) { $0.name = "libc6" }
        let zlib = try c.insert(Pkg.self) { $0.name = "zlib1g" }
        let curl = try c.insert(Pkg.self) { $0.name = "curl" }
        curl.depends = [libc, zlib]
        zlib.depends = [libc]
        #expect(libc.dependents.map(\.name).sorted() == ["curl", "zlib1g"])
        #expect(libc.depends.isEmpty)
    }

    @Test func linksSurviveSaveReopenCompactionAndOrderEdits() throws {
        let dir = temporaryStoreDirectory()
        do {
            let store = try ObjectStore.open(at: dir, schema: linkSchema)
            let c = store.context
            let p = try c.insert(Playlist.self) { $0.name = "mix" }
            let tracks = try (0..<6).map { i in try c.insert(Track.self) { $0.title = "t\(i)" } }
            p.tracks = tracks
            let a = try c.insert(Post.self)
            let tags = try (0..<3).map { i in try c.insert(Tag.self) { $0.label = "l\(i)" } }
            a.tags = tags
            let m = try c.insert(Manuscript.self)
            m.chapters = try (0..<3).map { i in try c.insert(Chapter.self) { $0.heading = "c\(i)" } }
            try c.save()
            try c.move(in: "tracks", of: p, from: 5, to: 0)
            try c.move(in: "tracks", of: p, from: 2, to: 4)
            try c.remove(tracks[3], from: "tracks", of: p)
            try c.add(tracks[3], to: "tracks", of: p, at: 2)
            c.delete(tags[1])
            c.delete(tracks[1])
            try c.save()
            #expect(titles(p.tracks) == ["t5", "t0", "t3", "t2", "t4"])
            try store.close()
        }
        for round in 0..<2 {
            let store = try ObjectStore.open(at: dir, schema: linkSchema)
            let c = store.context
            let p = try #require(try c.objects(of: Playlist.self).first)
            #expect(titles(p.tracks) == ["t5", "t0", "t3", "t2", "t4"], "round \(round)")
            let a = try #require(try c.objects(of: Post.self).first)
            #expect(labels(a.tags) == ["l0", "l2"])
            let m = try #require(try c.objects(of: Manuscript.self).first)
            #expect(m.chapters.map(\.heading) == ["c0", "c1", "c2"])
            #expect(m.chapters.allSatisfy { $0.manuscript === m })
            if round == 0 { try store.compact() }
            try store.close()
        }
    }

    @Test func changeSetsCarryLinksToABackend() throws {
        final class Recorder: PersistenceBackend {
            var sets: [ChangeSet] = []
            func persist(_ changes: ChangeSet) throws { sets.append(changes) }
        }
        let recorder = Recorder()
        let c = ModelContext(schema: linkSchema, backend: recorder)
        let p = try c.insert(Playlist.self)
        let tracks = try (0..<3).map { i in try c.insert(Track.self) { $0.title = "t\(i)" } }
        p.tracks = tracks
        try c.save()
        try c.move(in: "tracks", of: p, from: 2, to: 0)
        try c.save()
        // Replayed into a fresh context, the change sets rebuild the same lists.
        let replica = ModelContext(schema: linkSchema)
        for set in recorder.sets { try replica.apply(set) }
        let q = try #require(try replica.objects(of: Playlist.self).first)
        #expect(titles(q.tracks) == ["t2", "t0", "t1"])
    }

    @Test func snapshotsFollowLinks() async throws {
        let dir = temporaryStoreDirectory()
        let store = try AsyncStore(at: dir, schema: linkSchema)
        try await store.perform { c in
            let p = try c.insert(Playlist.self) { $0.name = "mix" }
            p.tracks = try (0..<3).map { i in try c.insert(Track.self) { $0.title = "t\(i)" } }
        }
        let first = try store.snapshot.objects(of: Playlist.self).first.map { titles($0.tracks) }
        #expect(first == ["t0", "t1", "t2"])
        try await store.perform { c in
            let p = try #require(try c.objects(of: Playlist.self).first)
            try c.move(in: "tracks", of: p, from: 0, to: 2)
        }
        let second = try store.snapshot.objects(of: Playlist.self).first.map { titles($0.tracks) }
        #expect(second == ["t1", "t2", "t0"])
        let back = try store.snapshot.objects(of: Track.self).first.map { $0.playlists.map(\.name) }
        #expect(back == ["mix"])
        try await store.close()
    }

    @Test func fetchPredicatesOverManyToMany() throws {
        let c = ModelContext(schema: linkSchema)
        let swift = try c.insert(Tag.self) { $0.label = "swift" }
        let linux = try c.insert(Tag.self) { $0.label = "linux" }
        for i in 0..<6 {
            try c.insert(Post.self) { p in
                p.title = "p\(i)"
                p.tags = i == 0 ? [] : i % 2 == 0 ? [swift, linux] : [swift]
            }
        }
        let untagged = try c.fetch(FetchDescriptor<Post>(predicate: #Predicate { $0.tags.isEmpty }))
        #expect(untagged.map(\.title) == ["p0"])
        #expect(try c.fetchCount(FetchDescriptor<Post>(predicate: #Predicate { $0.tags.count > 1 })) == 2)
        let aboutLinux = try c.fetch(
            FetchDescriptor<Post>(
                predicate: #Predicate { $0.tags.contains { $0.label == "linux" } }, sortBy: [SortDescriptor(\.title)]))
        #expect(aboutLinux.map(\.title) == ["p2", "p4"])
        let popular = try c.fetch(FetchDescriptor<Tag>(predicate: #Predicate { $0.posts.count >= 5 }))
        #expect(popular.map(\.label) == ["swift"])
    }

    @Test func observersSeeLinkChangesOnBothSidesWithTheirKeys() throws {
        let c = ModelContext(schema: linkSchema)
        let a = try c.insert(Post.self), b = try c.insert(Post.self)
        let t = try c.insert(Tag.self)
        a.tags = [t]
        try c.save()
        var seen: [ContextChanges] = []
        let token = c.observe { seen.append($0) }
        defer { token.cancel() }
        try c.add(t, to: "tags", of: b)
        try c.save()
        let changes = try #require(seen.last)
        #expect(changes.changedKeys(of: try #require(b.objectID)) == ["tags"])
        #expect(changes.changedKeys(of: try #require(t.objectID)) == ["posts"])
        #expect(changes.changedKeys(of: try #require(a.objectID)) == nil)
        c.delete(b)  // t loses b with the deletion
        try c.save()
        let last = try #require(seen.last)
        #expect(last.changedKeys(of: try #require(t.objectID)) == ["posts"])
        #expect(t.posts.map(ObjectIdentifier.init) == [ObjectIdentifier(a)])
    }

    @Test func aToOneStoredAsLinksReadsFromSnapshotsAndReportsItsChanges() async throws {
        let dir = temporaryStoreDirectory()
        let store = try AsyncStore(at: dir, schema: linkSchema)
        try await store.perform { c in
            let m = try c.insert(Manuscript.self) { $0.title = "guide" }
            m.chapters = try (0..<2).map { i in try c.insert(Chapter.self) { $0.heading = "c\(i)" } }
        }
        let owners = try store.snapshot.objects(of: Chapter.self).map { $0.manuscript?.title }
        #expect(owners == ["guide", "guide"])
        try await store.perform { c in
            let first = try #require(try c.objects(of: Chapter.self).first)
            first.manuscript = nil
            #expect(first.changedValues()["manuscript"] != nil)
            guard case .object(let id)?? = try first.committedValues(forKeys: ["manuscript"])["manuscript"] else {
                Issue.record("no committed manuscript")
                return
            }
            #expect(id.entityName == "Manuscript")
        }
        let after = try store.snapshot.objects(of: Chapter.self).map { $0.manuscript?.title }
        #expect(after == [nil, "guide"])
        try await store.close()
    }

    @Test func aToOneBecomesLinksWhenItsInverseBecomesOrdered() throws {
        // Stored with an unordered one-to-many (a slot on the to-one side), read with the
        // to-many declared ordered (links): each chapter keeps its manuscript.
        final class M1: Entity {
            var _backing = ObjectBacking(entity: M1.entityDescription)
            static let entityDescription = EntityDescription(
                name: "Manuscript", type: M1.self, attributes: [.attribute("title", String.self)],
                relationships: [.toMany("chapters", C1.self, inverse: "manuscript")])
            init(_backing: ObjectBacking) { self._backing = _backing }
        }
        final class C1: Entity {
            var _backing = ObjectBacking(entity: C1.entityDescription)
            static let entityDescription = EntityDescription(
                name: "Chapter", type: C1.self, attributes: [.attribute("heading", String.self)],
                relationships: [.toOne("manuscript", M1.self, inverse: "chapters")])
            init(_backing: ObjectBacking) { self._backing = _backing }
        }
        let dir = temporaryStoreDirectory()
        do {
            let store = try ObjectStore.open(at: dir, schema: try Schema(M1.self, C1.self))
            let c = store.context
            let m = try c.insert(M1.self)
            try m.setValue("guide", forKey: "title")
            for i in 0..<3 {
                let ch = try c.insert(C1.self)
                try ch.setValue("c\(i)", forKey: "heading")
                try ch.setValue(m, forKey: "manuscript")
            }
            try c.save()
            let last = try #require(try c.objects(of: C1.self).last)
            try last.setValue(nil, forKey: "manuscript")  // a later record updates the slot
            try c.save()
            try store.close()
        }
        let store = try ObjectStore.open(at: dir, schema: try Schema(Manuscript.self, Chapter.self))
        defer { try? store.close() }
        let m = try #require(try store.context.objects(of: Manuscript.self).first)
        #expect(m.chapters.map(\.heading) == ["c0", "c1"])
        let loose = try store.context.objects(of: Chapter.self).filter { $0.manuscript == nil }
        #expect(loose.map(\.heading) == ["c2"])
    }

    @Test func manyLinksReplayTogetherFromLogsAndFromABase() throws {
        let dir = temporaryStoreDirectory()
        var expected: [String: [String]] = [:]
        do {
            let store = try ObjectStore.open(at: dir, schema: linkSchema)
            let c = store.context
            let tags = try (0..<30).map { i in try c.insert(Tag.self) { $0.label = "l\(i)" } }
            var posts: [Post] = []
            for i in 0..<60 {
                posts.append(
                    try c.insert(Post.self) { p in
                        p.title = "p\(i)"
                        p.tags = (0..<12).map { tags[(i * 7 + $0 * 5) % 30] }
                    })
            }
            try c.save()
            // A second record whose additions interleave objects (not grouped by post).
            for k in 0..<300 { try c.add(tags[(k * 11) % 30], to: "tags", of: posts[(k * 13) % 60]) }
            for p in posts where p.title.hasSuffix("7") { try c.remove(p.tags[0], from: "tags", of: p) }
            try c.save()
            for p in posts { expected[p.title] = labels(p.tags) }
            try store.close()
        }
        for round in 0..<2 {
            let store = try ObjectStore.open(at: dir, schema: linkSchema)
            var found: [String: [String]] = [:]
            for p in try store.context.objects(of: Post.self) { found[p.title] = labels(p.tags) }
            #expect(found == expected, "round \(round)")
            let total = try store.context.objects(of: Tag.self).reduce(0) { $0 + $1.posts.count }
            #expect(total == expected.values.reduce(0) { $0 + $1.count })
            if round == 0 { try store.compact() }
            try store.close()
        }
    }

    @Test func aChangeSetGivingAToOneASecondLinkIsRefused() throws {
        final class Recorder: PersistenceBackend {
            var sets: [ChangeSet] = []
            func persist(_ changes: ChangeSet) throws { sets.append(changes) }
        }
        let recorder = Recorder()
        let c = ModelContext(schema: linkSchema, backend: recorder)
        let m1 = try c.insert(Manuscript.self), m2 = try c.insert(Manuscript.self)
        let chapter = try c.insert(Chapter.self)
        chapter.manuscript = m1
        try c.save()
        let replica = ModelContext(schema: linkSchema)
        for set in recorder.sets { try replica.apply(set) }
        // A change set that adds the chapter to m2 without removing it from m1.
        let links = try #require(recorder.sets.last?.links.first)
        var bad = ChangeSet(links: [
            LinkChanges(entityNames: links.entityNames, relationshipNames: links.relationshipNames)
        ])
        let chapterSide = links.entityNames[0] == "Chapter" ? 0 : 1
        let s = (m2.objectID!.serial, chapter.objectID!.serial)
        bad.links[0].added = [chapterSide == 1 ? .init(s.0, s.1) : .init(s.1, s.0)]
        let error = #expect(throws: ObjectGraphError.self) { try replica.apply(bad) }
        #expect(error?.code == .inconsistentChangeSet)
        #expect("\(error.map { "\($0)" } ?? "")".contains("to-one"))
        let copy = try #require(try replica.objects(of: Chapter.self).first)
        #expect(copy.manuscript?.objectID == m1.objectID, "nothing changed")
        #expect(!replica.hasChanges)
    }
}
