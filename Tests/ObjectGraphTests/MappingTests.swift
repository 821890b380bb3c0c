import Foundation
import ObjectGraph
import Testing

// Models of the mapping tests: a small news API.

@Entity final class Article {
    @Attribute(.unique) var articleID: Int64 = 0
    var title: String = ""
    var body: String?
    var wordCount: Int = 0
    var publishedAt: Date?
    var revision: String?
    var isRetracted: Bool = false
    var writerID: Int64?
    var editorEmail: String?
    @Relationship(inverse: "articles") var writer: Writer?
    @Relationship(inverse: "article") var comments: [ApprovedComment]
    @Relationship(inverse: "edited") var editor: Writer?
}

@Entity final class Writer {
    @Attribute(.unique) var writerID: Int64 = 0
    var name: String = ""
    var email: String?
    var updatedAt: Date?
    @Relationship(inverse: "writer") var articles: [Article]
    @Relationship(inverse: "editor") var edited: [Article]
}

@Entity final class ApprovedComment {
    // The JSON key's own spelling: the mapping infers the attribute from it.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    var approved_comment_id: Int64 = 0
    var id: Int64 = 0
    var text: String = ""
    @Attribute(.range(0...5)) var stars: Int = 0
    @Relationship(inverse: "comments") var article: Article?
}

/// Identified by `identifier` before `id`, by inference.
@Entity final class Gadget {
    var id: Int64 = 0
    var identifier: String = ""
    var name: String = ""
}

/// Only `url`.
@Entity final class Bookmark {
    var url: URL?
    var title: String = ""
}

/// Nothing to infer: every source inserts.
@Entity final class LogLine {
    var text: String = ""
}

/// Declares its identification, which wins over the name-based forms.
@Entity final class Release {
    var releaseID: Int64 = 0
    var distribution: String = ""
    var version: String = ""
    var day: Date?
}

extension Release: IdentifiedEntity {
    static var identificationAttributes: [String] { ["distribution", "version"] }
}

/// Refuses some inserts in its validation hook.
@Entity final class Meter {
    @Attribute(.unique) var id: Int64 = 0
    var value: Double = 0
    var label: String

    init(label: String) { self.label = label }

    func validateForInsert() throws {
        if value < 0 { throw ObjectValidationError(key: "value", reason: "a reading is never negative") }
    }
    func validateForUpdate() throws {
        if value < 0 { throw ObjectValidationError(key: "value", reason: "a reading is never negative") }
    }
}

private func newsContext(backend: (any PersistenceBackend)? = nil) throws -> ModelContext {
    ModelContext(
        schema: try Schema(
            Article.self, Writer.self, ApprovedComment.self, Gadget.self, Bookmark.self, LogLine.self, Release.self,
            Meter.self),
        backend: backend)
}

private func json(_ text: String) -> Data { Data(text.utf8) }

private func articles() throws -> EntityMapping<Article> {
    var m = EntityMapping(Article.self)
    try m.map("articleID", "title", "body")
    try m.map(["words": "wordCount", "meta.published": "publishedAt"])
    return m
}

@Suite("Mapping: RestKit's entity mapping behaviours")
struct MappingTests {
    // MARK: Attributes and key paths

    @Test func attributesMapFromKeysNestedKeyPathsAndARootKeyPathIgnoringUnknownKeys() throws {
        let context = try newsContext()
        var m = try articles()
        m.rootKeyPath = "data.items"
        let result = try context.map(
            json(
                """
                {"data": {"items": [
                  {"articleID": 1, "title": "One", "words": 120, "meta": {"published": "2024-05-01T12:00:00Z"}, "unknown": [1, 2]},
                  {"articleID": 2, "title": "Two", "extra": {"x": 1}}
                ]}}
                """), with: m)
        #expect(result.counts.inserted == 2)
        let objects = result.objects
        #expect(objects.map(\.title) == ["One", "Two"])
        #expect(objects[0].wordCount == 120)
        #expect(objects[0].publishedAt == Date(timeIntervalSince1970: 1_714_564_800))
        #expect(objects[1].wordCount == 0, "a missing key leaves a new object's default")
    }

    @Test func aRootKeyPathThatNamesNothingIsAnError() throws {
        let context = try newsContext()
        var m = try articles()
        m.rootKeyPath = "data.items"
        let error = try #require(throws: MappingError.self) { try context.map(json(#"{"data": {}}"#), with: m) }
        #expect(error.code == .rootKeyPathNotFound && error.keyPath == "data.items")
    }

    @Test func aSingleObjectDocumentMapsOneObject() throws {
        let context = try newsContext()
        let result = try context.map(json(#"{"articleID": 7, "title": "Seven"}"#), with: try articles())
        #expect(result.objects.map(\.articleID) == [7])
    }

    @Test func namingAnAttributeTheEntityLacksIsRefusedWhenTheMappingIsBuilt() throws {
        var m = EntityMapping(Article.self)
        #expect(throws: MappingError.self) { try m.map("headline") }
        let error = try #require(throws: MappingError.self) { try m.map("x", to: "headline") }
        #expect(error.code == .unknownAttribute && error.attribute == "headline" && error.entity == "Article")
        #expect(throws: MappingError.self) { try m.connect("publisher", by: "writerID") }
        #expect(throws: MappingError.self) { try m.connect("writer", by: ["writerID": "nickname"]) }
    }

    // MARK: Transformation

    @Test func valuesAreTransformedPerAttributeType() throws {
        let context = ModelContext(schema: try Schema(Everything.self))
        var m = EntityMapping(Everything.self)
        m.infersIdentification = false
        try m.map(
            "flag", "i8", "int", "u16", "double", "float", "text", "date", "uuid", "url", "maybeInt", "maybeText",
            "priority", "checksum")
        let result = try context.map(
            json(
                """
                [{"flag": "yes", "i8": "-12", "int": 3.0, "u16": "65535", "double": "2.5", "float": 1, "text": 42,
                  "date": 86400, "uuid": "E621E1F8-C36C-495A-93FC-0C247A3E6E5F", "url": "https://example.com/a",
                  "maybeInt": null, "maybeText": true, "priority": "important", "checksum": {"hex": "ab", "algorithm": "sha1"}}]
                """), with: m)
        let e = try #require(result.objects.first)
        #expect(e.flag && e.i8 == -12 && e.int == 3 && e.u16 == 65535 && e.double == 2.5 && e.float == 1)
        #expect(e.text == "42")
        #expect(e.date == Date(timeIntervalSince1970: 86400))
        #expect(e.uuid == UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"))
        #expect(e.url == URL(string: "https://example.com/a"))
        #expect(e.maybeInt == nil && e.maybeText == "true")
        #expect(e.priority == .important)
        #expect(e.checksum == Checksum(algorithm: "sha1", hex: "ab"))
    }

    @Test func dateStringsTryISO8601ThenTheMappingsFormatsInOrder() throws {
        let context = try newsContext()
        var m = try articles()
        m.dateFormats = ["dd/MM/yyyy", "yyyy-MM-dd"]
        let result = try context.map(
            json(
                """
                [{"articleID": 1, "meta": {"published": "2024-05-01T12:00:00.500+02:00"}},
                 {"articleID": 2, "meta": {"published": "02/01/2024"}},
                 {"articleID": 3, "meta": {"published": "2024-01-03"}}]
                """), with: m)
        let dates = result.objects.map(\.publishedAt)
        #expect(dates[0] == Date(timeIntervalSince1970: 1_714_557_600.5))
        #expect(dates[1] == Date(timeIntervalSince1970: 1_704_153_600))
        #expect(dates[2] == Date(timeIntervalSince1970: 1_704_240_000))
    }

    @Test func aValueThatCannotBeTransformedNamesTheSourceKeyPathValueAndAttributeAndChangesNothing() throws {
        let context = try newsContext()
        try context.map(json(#"[{"articleID": 1, "title": "kept"}]"#), with: try articles())
        try context.save()
        do {
            try context.map(
                json(#"[{"articleID": 1, "title": "changed"}, {"articleID": 2, "words": "many"}]"#),
                with: try articles())
            Issue.record("expected an error")
        } catch let e as MappingError {
            #expect(e.code == .untransformableValue)
            #expect(e.sourceIndex == 1 && e.keyPath == "words" && e.value == #""many""# && e.attribute == "wordCount")
        }
        #expect(!context.hasChanges)
        #expect(try context.objects(of: Article.self).map(\.title) == ["kept"])
    }

    @Test func aNestedValueErrorNamesTheNestedKeyPath() throws {
        let context = try newsContext()
        var w = EntityMapping(Writer.self)
        try w.map("writerID", "name", "updatedAt")
        var m = try articles()
        try m.map("writer", to: "writer", with: w)
        do {
            try context.map(json(#"[{"articleID": 1, "writer": {"writerID": 3, "updatedAt": "yesterday"}}]"#), with: m)
            Issue.record("expected an error")
        } catch let e as MappingError {
            #expect(
                e.code == .untransformableValue && e.keyPath == "writer.updatedAt" && e.entity == "Writer"
                    && e.sourceIndex == 0)
        }
        #expect(!context.hasChanges)
    }

    @Test func nullOrMissingForARequiredAttributeOfANewObjectIsAnError() throws {
        let context = ModelContext(schema: try Schema(Meter.self))
        var m = EntityMapping(Meter.self)
        try m.map("id", "value", "label")
        do {
            try context.map(json(#"[{"id": 1, "label": "a"}, {"id": 2, "label": null}]"#), with: m)
            Issue.record("expected an error")
        } catch let e as MappingError {
            #expect(
                e.code == .missingRequiredValue && e.sourceIndex == 1 && e.attribute == "label" && e.value == "null")
        }
        do {
            try context.map(json(#"[{"id": 3}]"#), with: m)
            Issue.record("expected an error")
        } catch let e as MappingError {
            #expect(e.code == .missingRequiredValue && e.sourceIndex == 0 && e.value == nil)
        }
        #expect(!context.hasChanges)
    }

    @Test func malformedJSONIsAnErrorWithItsByteOffsetAndChangesNothing() throws {
        let context = try newsContext()
        let text = #"[{"articleID": 1, "title": "a"}, {"articleID": 2, "title": }]"#
        do {
            try context.map(json(text), with: try articles())
            Issue.record("expected an error")
        } catch let e as MappingError {
            #expect(e.code == .malformedJSON)
            #expect(e.byteOffset == text.utf8.count - 2, "\(e)")
        }
        #expect(!context.hasChanges)
    }

    @Test func malformedJSONAtEveryTruncationOffsetIsRefusedWithThatOffset() throws {
        let context = try newsContext()
        let text = Array(
            #"[{"articleID": 1, "title": "a\u00e9", "words": -1.5e2, "meta": {"published": null}}, {"articleID": 2}]"#
                .utf8)
        for n in 0..<text.count {
            do {
                try context.map(Data(text[..<n]), with: try articles())
                Issue.record("a document cut at byte \(n) was accepted")
            } catch let e as MappingError {
                #expect(e.code == .malformedJSON, "cut at \(n): \(e)")
                #expect(e.byteOffset == n, "cut at \(n): \(e)")
            }
            #expect(!context.hasChanges)
        }
    }

    @Test func documentsParsedIntoTheKeptBuffersAfterAMalformedOneMapCorrectly() throws {
        let context = try newsContext()
        #expect(!context.keepsJSONBuffers, "a context keeps only what it must")
        context.keepsJSONBuffers = true
        let m = try articles()
        try context.map(
            json(#"[{"articleID": 1, "title": "a long title that the next, shorter document must not leave behind"}]"#),
            with: m)
        #expect(throws: MappingError.self) { try context.map(json(#"[{"articleID": 2, "title": "#), with: m) }
        let r = try context.map(json(#"[{"articleID": 2, "title": "b"}]"#), with: m)
        #expect(r.objects.map(\.title) == ["b"])
        context.keepsJSONBuffers = false
        let s = try context.map(json(#"[{"articleID": 3, "title": "c"}]"#), with: m)
        #expect(s.objects.map(\.title) == ["c"])
        #expect(
            try context.objects(of: Article.self).map(\.title).sorted() == [
                "a long title that the next, shorter document must not leave behind", "b", "c",
            ])
    }

    @Test func aRunWhoseTaskIsCancelledStopsAndChangesNothing() async throws {
        let outcome = await Task { () -> String in
            do {
                let context = try newsContext()
                let big = "[" + (0..<10_000).map { #"{"articleID": \#($0)}"# }.joined(separator: ",") + "]"
                withUnsafeCurrentTask { $0?.cancel() }
                do {
                    try context.map(json(big), with: try articles())
                    return "mapped"
                } catch is CancellationError {
                    return try context.count(of: Article.self) == 0 && !context.hasChanges
                        ? "cancelled, unchanged" : "cancelled, changed"
                }
            } catch {
                return "\(error)"
            }
        }.value
        #expect(outcome == "cancelled, unchanged")
    }

    // MARK: Missing keys and null

    @Test func aMissingKeyKeepsAnExistingValueUnlessTheMappingAssignsDefaultsAndNullIsNotMissing() throws {
        let context = try newsContext()
        let m = try articles()
        try context.map(json(#"[{"articleID": 1, "title": "t", "body": "b", "words": 5}]"#), with: m)
        try context.save()
        try context.map(json(#"[{"articleID": 1}]"#), with: m)
        let a = try #require(try context.object(Article.self, where: \.articleID, equals: 1))
        #expect(a.title == "t" && a.body == "b" && a.wordCount == 5 && !a.hasChanges)
        try context.map(json(#"[{"articleID": 1, "body": null}]"#), with: m)
        #expect(a.body == nil && a.title == "t")
        var defaults = m
        defaults.assignsDefaultValueForMissingAttributes = true
        try context.map(json(#"[{"articleID": 1}]"#), with: defaults)
        #expect(a.title == "" && a.wordCount == 0)
    }

    // MARK: Identification

    @Test func identificationInferenceFollowsRestKitsOrder() {
        #expect(EntityMapping(Article.self).identificationAttributes == ["articleID"])
        #expect(EntityMapping(Writer.self).identificationAttributes == ["writerID"])
        #expect(EntityMapping(ApprovedComment.self).identificationAttributes == ["approved_comment_id"])
        #expect(EntityMapping(Gadget.self).identificationAttributes == ["identifier"])
        #expect(EntityMapping(Bookmark.self).identificationAttributes == ["url"])
        #expect(EntityMapping(LogLine.self).identificationAttributes == [])
        #expect(
            EntityMapping(Release.self).identificationAttributes == ["distribution", "version"],
            "the entity's declaration comes first")
    }

    @Test func identificationInferenceCanBeTurnedOffPerMapping() throws {
        let context = try newsContext()
        var m = try articles()
        m.infersIdentification = false
        #expect(m.identificationAttributes == [])
        try context.map(json(#"[{"articleID": 1}, {"articleID": 1}]"#), with: m)
        #expect(try context.count(of: Article.self) == 2, "without identification every source inserts")
        context.rollback()
        m.infersIdentification = nil
        try context.map(json(#"[{"articleID": 1}, {"articleID": 1}]"#), with: m)
        #expect(try context.count(of: Article.self) == 1)
    }

    @Test func anEmptyOrUnknownIdentificationIsRefusedWhenTheMappingIsBuilt() {
        var m = EntityMapping(Article.self)
        #expect(throws: MappingError.self) { try m.identify(by: [String]()) }
        #expect(throws: MappingError.self) { try m.identify(by: "slug") }
    }

    @Test func anIdentificationAttributeTheMappingDoesNotMapIsAnErrorNotADuplicate() throws {
        let context = try newsContext()
        var m = EntityMapping(Article.self)
        try m.map("title")
        do {
            try context.map(json(#"[{"title": "x"}]"#), with: m)
            Issue.record("expected an error")
        } catch let e as MappingError {
            #expect(e.code == .invalidIdentification && e.attribute == "articleID")
        }
    }

    @Test func compoundIdentificationFindsTheObjectByAllItsAttributes() throws {
        let context = try newsContext()
        var m = EntityMapping(Release.self)
        try m.map("distribution", "version", "releaseID")
        try context.map(
            json(
                """
                [{"distribution": "bookworm", "version": "1.0", "releaseID": 1},
                 {"distribution": "trixie", "version": "1.0", "releaseID": 2},
                 {"distribution": "bookworm", "version": "1.0", "releaseID": 3}]
                """), with: m)
        let releases = try context.objects(of: Release.self).sorted { $0.releaseID < $1.releaseID }
        #expect(releases.map(\.releaseID) == [2, 3])
    }

    @Test func valuesAreTransformedBeforeTheLookup() throws {
        let context = try newsContext()
        var m = EntityMapping(Release.self)
        try m.map("distribution", "version", "day")
        try m.identify(by: ["day"])
        let first = try context.map(json(#"[{"day": "2024-01-01T00:00:00Z", "version": "1"}]"#), with: m)
        let second = try context.map(json(#"[{"day": 1704067200, "version": "2"}]"#), with: m)
        #expect(first.objectIDs == second.objectIDs)
        #expect(try context.objects(of: Release.self).map(\.version) == ["2"])
        let byString = try context.map(json(#"[{"articleID": "42"}, {"articleID": 42}]"#), with: try articles())
        #expect(byString.counts.inserted == 1)
        #expect(try context.count(of: Article.self) == 1)
    }

    @Test func identificationFindsPendingInsertsOfTheSameRunAndNeverObjectsPendingDeletion() throws {
        let context = try newsContext()
        let m = try articles()
        try context.map(json(#"[{"articleID": 1, "title": "old"}]"#), with: m)
        try context.save()
        let old = try #require(try context.object(Article.self, where: \.articleID, equals: 1))
        context.delete(old)
        let result = try context.map(
            json(#"[{"articleID": 1, "title": "a"}, {"articleID": 1, "title": "b"}]"#), with: m)
        #expect(result.counts.inserted == 1)
        #expect(result.objects.count == 2 && result.objects[0] === result.objects[1])
        #expect(result.objects[0] !== old && result.objects[0].title == "b")
    }

    @Test func aDocumentInStorageOrderFindsTheSameObjectsAsAShuffledOneAroundDeletedAndDuplicateRows() throws {
        // Identification first checks the row after the last one found (a re-sync of a
        // document in storage order); a deleted row there, or a pending duplicate key, must
        // not be taken for the owner.
        let context = try newsContext()
        let m = try articles()
        let all = (0..<50).map { #"{"articleID": \#($0), "title": "v1"}"# }
        try context.map(json("[" + all.joined(separator: ",") + "]"), with: m)
        try context.save()
        let deleted = try #require(try context.object(Article.self, where: \.articleID, equals: 20))
        context.delete(deleted)
        let pending = try context.insert(Article.self)
        pending.articleID = 30  // a pending duplicate of article 30
        let ordered = (0..<50).map { #"{"articleID": \#($0), "title": "v2"}"# }
        let r = try context.map(json("[" + ordered.joined(separator: ",") + "]"), with: m)
        #expect(
            r.counts.inserted == 1 && r.counts.updated == 49, "article 20 is pending deletion: a new one is inserted")
        context.delete(pending)
        var rng = SystemRandomNumberGenerator()
        let shuffled = (0..<50).shuffled(using: &rng).map { #"{"articleID": \#($0), "title": "v3"}"# }
        let s = try context.map(json("[" + shuffled.joined(separator: ",") + "]"), with: m)
        #expect(s.counts.inserted == 0 && s.counts.updated == 50)
        #expect(try context.objects(of: Article.self).allSatisfy { $0.title == "v3" })
        #expect(try context.count(of: Article.self) == 50)
        try context.save()
    }

    @Test func aDocumentLargeEnoughForTheLookaheadMapsAsASmallOneDoes() throws {
        // With an index of 128k buckets or more, a run maps each source a few places behind its
        // walk over the array and prefetches for the sources ahead (IdentificationLookahead).
        // Duplicates inside and outside that window, sources without an ID, keys in another
        // order, re-runs in both orders and errors must come out as without it.
        let n = 70_000
        let context = try newsContext()
        let m = try articles()
        var sources: [String] = []
        sources.reserveCapacity(n)
        for i in 0..<n {
            switch i % 1000 {
            case 5: sources.append(#"{"title": "no id"}"#)
            case 7: sources.append(#"{"title": "t\#(i)", "body": null, "articleID": \#(i)}"#)
            case 11: sources.append(#"{"articleID": \#(i - 3), "title": "again \#(i)"}"#)
            case 40: sources.append(#"{"articleID": \#(i - 30), "title": "again \#(i)"}"#)
            default: sources.append(#"{"articleID": \#(i), "title": "t\#(i)"}"#)
            }
        }
        let r = try context.map(json("[" + sources.joined(separator: ",") + "]"), with: m)
        #expect(r.counts.inserted == n / 1000 * 997 && r.counts.skippedWithoutIdentification == n / 1000)
        #expect(r.sourceCount == n && r.objects.count == n - n / 1000)
        #expect(try context.count(of: Article.self) == n / 1000 * 997)
        for block in [0, 34, 69] {
            let b = block * 1000
            let byID = { (id: Int) in try context.object(Article.self, where: \.articleID, equals: Int64(id)) }
            #expect(try byID(b + 8)?.title == "again \(b + 11)" && byID(b + 10)?.title == "again \(b + 40)")
            #expect(try byID(b + 7)?.title == "t\(b + 7)" && byID(b + 999)?.title == "t\(b + 999)")
        }
        try context.save()

        // Re-runs: shuffled (the guess of the next row misses, so the lookahead prefetches the
        // rows it updates), then in storage order with new objects at the end.
        let ids = (0..<n).filter { $0 % 1000 != 5 && $0 % 1000 != 11 && $0 % 1000 != 40 }
        var rng = SystemRandomNumberGenerator()
        let shuffled = ids.shuffled(using: &rng).map { #"{"articleID": \#($0), "title": "v2 \#($0)"}"# }
        let s = try context.map(json("[" + shuffled.joined(separator: ",") + "]"), with: m)
        #expect(s.counts.inserted == 0 && s.counts.updated == ids.count)
        let ordered = (ids + (n..<(n + 100))).map { #"{"articleID": \#($0), "title": "v3 \#($0)"}"# }
        let o = try context.map(json("[" + ordered.joined(separator: ",") + "]"), with: m)
        #expect(o.counts.inserted == 100 && o.counts.updated == ids.count)
        #expect(try context.objects(of: Article.self).allSatisfy { $0.title == "v3 \($0.articleID)" })
        try context.save()

        // An error in the middle of the walk and one in its last window name their sources and
        // change nothing.
        for bad in [n / 2, ordered.count - 3] {
            var failing = ordered
            failing[bad] = #"{"articleID": 1, "words": "many"}"#
            do {
                try context.map(json("[" + failing.joined(separator: ",") + "]"), with: m)
                Issue.record("expected an error")
            } catch let e as MappingError {
                #expect(e.code == .untransformableValue && e.sourceIndex == bad)
            }
            #expect(!context.hasChanges)
        }
    }

    @Test func aLargeDocumentIdentifiedByAStringMapsAsASmallOneDoes() throws {
        // The lookahead hashes a string key from the document's bytes.
        let context = ModelContext(schema: try Schema(FixturePackage.self, FixtureMaintainer.self))
        var m = EntityMapping(FixturePackage.self)
        try m.map("name", "version")
        try m.identify(by: "name")
        let n = 70_000
        let first = (0..<n).map { i in
            i % 100 == 50 ? #"{"name": "p\#(i - 20)", "version": "dup"}"# : #"{"name": "p\#(i)", "version": "1"}"#
        }
        let r = try context.map(json("[" + first.joined(separator: ",") + "]"), with: m)
        #expect(r.counts.inserted == n - n / 100 && r.objects[50] === r.objects[30] && r.objects[30].version == "dup")
        var rng = SystemRandomNumberGenerator()
        let names = (0..<n).filter { $0 % 100 != 50 }
        let second = names.shuffled(using: &rng).map { #"{"name": "p\#($0)", "version": "2"}"# }
        let s = try context.map(json("[" + second.joined(separator: ",") + "]"), with: m)
        #expect(s.counts.inserted == 0 && s.counts.updated == names.count)
        #expect(try context.objects(of: FixturePackage.self).allSatisfy { $0.version == "2" })
    }

    @Test func aSourceWithoutItsIdentificationValueIsSkippedNotInsertedWithADefaultKey() throws {
        let context = try newsContext()
        var w = EntityMapping(Writer.self)
        try w.map("writerID", "name")
        var m = try articles()
        try m.map("writer", to: "writer", with: w)
        let r = try context.map(
            json(#"[{"title": "no id"}, {"articleID": null}, {"articleID": 1, "writer": {"name": "no id"}}]"#), with: m)
        #expect(r.counts.inserted == 1 && r.counts.skippedWithoutIdentification == 2)
        #expect(r.countsByEntity["Writer"]?.skippedWithoutIdentification == 1 && r.objects[0].writer == nil)
        #expect(r.objects.map(\.articleID) == [1], "skipped sources have no object")
        try context.save()
    }

    @Test func identificationWithoutAUniqueIndexUsesOneTableForTheRun() throws {
        let context = try newsContext()
        var m = EntityMapping(Gadget.self)
        try m.map("identifier", "name")
        try context.map(json(#"[{"identifier": "a", "name": "1"}, {"identifier": "b", "name": "2"}]"#), with: m)
        try context.save()
        let r = try context.map(
            json(
                #"[{"identifier": "b", "name": "3"}, {"identifier": "c", "name": "4"}, {"identifier": "c", "name": "5"}]"#
            ), with: m)
        #expect(r.counts.inserted == 1 && r.counts.updated == 1)
        #expect(try context.objects(of: Gadget.self).map(\.name).sorted() == ["1", "3", "5"])
    }

    @Test func theIdentificationPredicateFiltersWhatIsFound() throws {
        let context = try newsContext()
        var m = try articles()
        try context.map(json(#"[{"articleID": 1, "title": "a"}]"#), with: m)
        try context.save()
        m.identificationPredicate = #Predicate<Article> { $0.title != "a" }
        // The existing object is not found, so a new one is inserted; saving would collide.
        let r = try context.map(json(#"[{"articleID": 1, "title": "b"}]"#), with: m)
        #expect(r.counts.inserted == 1)
        #expect(throws: ValidationError.self) { try context.save() }
    }

    // MARK: Modification attribute

    @Test func theModificationAttributeSkipsEqualStrings() throws {
        let context = try newsContext()
        var m = try articles()
        try m.map("revision")
        try m.useModificationAttribute("revision")
        try context.map(json(#"[{"articleID": 1, "title": "a", "revision": "r1"}]"#), with: m)
        try context.save()
        let skipped = try context.map(json(#"[{"articleID": 1, "title": "changed", "revision": "r1"}]"#), with: m)
        #expect(skipped.counts.skippedUnmodified == 1 && !context.hasChanges)
        let mapped = try context.map(json(#"[{"articleID": 1, "title": "changed", "revision": "r2"}]"#), with: m)
        #expect(mapped.counts.updated == 1 && mapped.objects[0].title == "changed")
    }

    @Test func theModificationAttributeSkipsDatesThatAreNotNewer() throws {
        let context = try newsContext()
        var m = EntityMapping(Writer.self)
        try m.map("writerID", "name", "updatedAt")
        try m.useModificationAttribute("updatedAt")
        try context.map(json(#"[{"writerID": 1, "name": "a", "updatedAt": "2024-01-02T00:00:00Z"}]"#), with: m)
        try context.save()
        let older = try context.map(
            json(#"[{"writerID": 1, "name": "b", "updatedAt": "2024-01-01T00:00:00Z"}]"#), with: m)
        let same = try context.map(
            json(#"[{"writerID": 1, "name": "b", "updatedAt": "2024-01-02T00:00:00Z"}]"#), with: m)
        #expect(older.counts.skippedUnmodified == 1 && same.counts.skippedUnmodified == 1 && !context.hasChanges)
        let newer = try context.map(
            json(#"[{"writerID": 1, "name": "b", "updatedAt": "2024-01-03T00:00:00Z"}]"#), with: m)
        #expect(newer.counts.updated == 1 && newer.objects[0].name == "b")
    }

    @Test func theModificationAttributeSkipsNumbersThatAreNotGreater() throws {
        let context = try newsContext()
        var m = try articles()
        try m.useModificationAttribute("wordCount")
        try context.map(json(#"[{"articleID": 1, "title": "a", "words": 10}]"#), with: m)
        try context.save()
        let r1 = try context.map(
            json(#"[{"articleID": 1, "title": "b", "words": 9}, {"articleID": 2, "title": "new", "words": 0}]"#),
            with: m)
        #expect(r1.counts.skippedUnmodified == 1 && r1.counts.inserted == 1, "new objects are always mapped")
        let r2 = try context.map(json(#"[{"articleID": 1, "title": "b", "words": 11}]"#), with: m)
        #expect(r2.counts.updated == 1 && r2.objects[0].title == "b")
    }

    // MARK: Relationships

    @Test func nestedObjectsAreIdentifiedLikeTopLevelOnes() throws {
        let context = try newsContext()
        var w = EntityMapping(Writer.self)
        try w.map("writerID", "name")
        var c = EntityMapping(ApprovedComment.self)
        try c.map("approved_comment_id", "text")
        var m = try articles()
        try m.map("writer", to: "writer", with: w)
        try m.map("comments", to: "comments", with: c)
        let r = try context.map(
            json(
                """
                [{"articleID": 1, "writer": {"writerID": 9, "name": "Ada"}, "comments": [{"approved_comment_id": 1, "text": "x"}, {"approved_comment_id": 2, "text": "y"}]},
                 {"articleID": 2, "writer": {"writerID": 9, "name": "Ada L."}, "comments": []}]
                """), with: m)
        #expect(try context.count(of: Writer.self) == 1)
        let writer = try #require(r.objects[0].writer)
        #expect(writer === r.objects[1].writer && writer.name == "Ada L.")
        #expect(Set(writer.articles.map(\.articleID)) == [1, 2], "inverses are maintained")
        #expect(r.objects[0].comments.map(\.text).sorted() == ["x", "y"])
        #expect(r.countsByEntity["Writer"]?.inserted == 1 && r.countsByEntity["ApprovedComment"]?.inserted == 2)
        try context.map(json(#"[{"articleID": 1, "writer": null}]"#), with: m)
        #expect(r.objects[0].writer == nil, "null clears a to-one")
    }

    @Test func aConnectionByNameFindsAnObjectLaterInTheSamePayload() throws {
        let context = try newsContext()
        var m = try articles()
        try m.map("writerID")
        try m.connect("writer", by: "writerID")
        var w = EntityMapping(Writer.self)
        try w.map("writerID", "name")
        var r = try context.map(json(#"[{"articleID": 1, "writerID": 5}, {"articleID": 2, "writerID": 6}]"#), with: m)
        #expect(r.counts.unresolvedConnections == 2 && r.objects.allSatisfy { $0.writer == nil })
        try context.map(json(#"[{"writerID": 5, "name": "Five"}]"#), with: w)
        r = try context.map(json(#"[{"articleID": 1, "writerID": 5}, {"articleID": 2, "writerID": 6}]"#), with: m)
        #expect(
            r.objects[0].writer?.name == "Five" && r.objects[1].writer == nil && r.counts.unresolvedConnections == 1)
        // Writers and articles in one payload: the writer comes later than the article.
        var both = EntityMapping(Writer.self)
        try both.map("writerID", "name")
        try both.map("articles", to: "articles", with: m)
        var nested = try context.map(
            json(
                #"[{"writerID": 7, "name": "Seven", "articles": [{"articleID": 3, "writerID": 8}]}, {"writerID": 8, "name": "Eight"}]"#
            ), with: both)
        #expect(
            nested.objects[1].articles.map(\.articleID) == [3],
            "the connection overrides the nesting once all sources are mapped")
        nested = try context.map(json("[]"), with: both)
        #expect(nested.sourceCount == 0)
    }

    @Test func aConnectionByAListOfNamesMatchesEveryAttribute() throws {
        let context = try newsContext()
        var m = try articles()
        try m.map("writerID", "editorEmail")
        try m.connect("writer", by: ["writerID"])
        var w = EntityMapping(Writer.self)
        try w.map("writerID", "name")
        try context.map(json(#"[{"writerID": 1, "name": "One"}]"#), with: w)
        let r = try context.map(json(#"[{"articleID": 1, "writerID": 1}]"#), with: m)
        #expect(r.objects[0].writer?.name == "One")
    }

    @Test func aConnectionByADictionaryMapsSourceToDestinationAttributesToOneAndToMany() throws {
        let context = try newsContext()
        var w = EntityMapping(Writer.self)
        try w.map("writerID", "name", "email")
        try context.map(json(#"[{"writerID": 1, "name": "One", "email": "one@example.com"}]"#), with: w)
        var m = try articles()
        try m.map("editorEmail")
        try m.connect("editor", by: ["editorEmail": "email"])
        let r = try context.map(
            json(
                #"[{"articleID": 1, "editorEmail": "one@example.com"}, {"articleID": 2, "editorEmail": "one@example.com"}]"#
            ), with: m)
        #expect(r.objects.allSatisfy { $0.editor?.name == "One" })
        // To-many: a writer's articles are every article whose writerID equals the writer's.
        var a = try articles()
        try a.map("writerID")
        try context.map(
            json(
                #"[{"articleID": 5, "writerID": 1}, {"articleID": 6, "writerID": 1}, {"articleID": 7, "writerID": 2}]"#),
            with: a)
        var byArticles = EntityMapping(Writer.self)
        try byArticles.map("writerID", "name")
        try byArticles.connect("articles", by: ["writerID": "writerID"])
        let writers = try context.map(json(#"[{"writerID": 1, "name": "One"}]"#), with: byArticles)
        #expect(writers.objects[0].articles.map(\.articleID).sorted() == [5, 6])
    }

    // MARK: Tombstones

    @Test func tombstonesDeleteTouchedAndUntouchedObjectsMatchingTheDeletionPredicate() throws {
        let context = try newsContext()
        var m = try articles()
        try m.map(["retracted": "isRetracted"])
        try context.map(
            json(#"[{"articleID": 1, "title": "a"}, {"articleID": 2, "title": "b", "retracted": true}]"#), with: m)
        try context.save()
        #expect(try context.count(of: Article.self) == 2, "without a deletion predicate nothing is deleted")
        m.deletionPredicate = #Predicate<Article> { $0.isRetracted }
        let r = try context.map(
            json(#"[{"articleID": 1, "retracted": true}, {"articleID": 3, "title": "c"}]"#), with: m)
        #expect(r.counts.tombstoned == 2, "the touched 1 and the untouched, stored 2")
        #expect(try context.objects(of: Article.self).map(\.articleID) == [3])
        #expect(r.objects.map(\.articleID) == [3])
    }

    @Test func aTombstoneForAnIDNeverSeenInsertsNothingThatIsSaved() throws {
        let backend = RecordingBackend()
        let context = try newsContext(backend: backend)
        var m = try articles()
        try m.map(["retracted": "isRetracted"])
        m.deletionPredicate = #Predicate<Article> { $0.isRetracted }
        let r = try context.map(json(#"[{"articleID": 99, "retracted": true}]"#), with: m)
        #expect(
            r.counts.tombstoned == 1 && r.counts.inserted == 0 && r.objects.isEmpty,
            "inserted counts the new objects that remain")
        #expect(context.makeChangeSet().isEmpty)
        try context.save()
        #expect(backend.saved.isEmpty)
    }

    // MARK: Invalid objects

    @Test func invalidNewObjectsAreDiscardedOnInsertButInvalidUpdatesStillFailTheSave() throws {
        let context = try newsContext()
        var m = EntityMapping(Meter.self)
        try m.map("id", "value", "label")
        m.discardsInvalidObjectsOnInsert = true
        let r = try context.map(
            json(
                #"[{"id": 1, "value": 1, "label": "ok"}, {"id": 2, "value": -1, "label": "bad"}, {"id": 3, "value": 2}]"#
            ), with: m)
        #expect(r.counts.inserted == 1 && r.counts.discarded == 2)
        #expect(r.discarded.map(\.sourceIndex) == [1, 2])
        #expect(r.discarded[0].reasons.contains { $0.contains("never negative") })
        #expect(r.discarded[1].reasons.contains { $0.contains("label") })
        try context.save()
        try context.map(json(#"[{"id": 1, "value": -5}]"#), with: m)
        #expect(throws: ValidationError.self) { try context.save() }
    }

    @Test func attributeValidatorsDiscardNewObjects() throws {
        let context = try newsContext()
        var c = EntityMapping(ApprovedComment.self)
        try c.map("approved_comment_id", "stars")
        c.discardsInvalidObjectsOnInsert = true
        let r = try context.map(
            json(#"[{"approved_comment_id": 1, "stars": 9}, {"approved_comment_id": 2, "stars": 3}]"#), with: c)
        #expect(r.discarded.map(\.sourceIndex) == [0] && r.counts.inserted == 1)
        try context.save()
    }

    // MARK: Atomicity and saving

    @Test func aRunThatThrowsLeavesTheContextExactlyAsBefore() throws {
        let context = try newsContext()
        var w = EntityMapping(Writer.self)
        try w.map("writerID", "name")
        var m = try articles()
        try m.map("writer", to: "writer", with: w)
        try context.map(json(#"[{"articleID": 1, "title": "a", "writer": {"writerID": 1, "name": "W"}}]"#), with: m)
        try context.save()
        try context.map(json(#"[{"articleID": 2, "title": "pending"}]"#), with: m)
        let before = context.makeChangeSet()
        #expect(throws: MappingError.self) {
            try context.map(
                json(
                    #"[{"articleID": 1, "title": "x", "writer": {"writerID": 2, "name": "V"}}, {"articleID": 3, "words": "x"}]"#
                ), with: m)
        }
        #expect(context.makeChangeSet() == before)
        #expect(try context.count(of: Writer.self) == 1)
        #expect(try context.object(Article.self, where: \.articleID, equals: 1)?.title == "a")
    }

    @Test func aMappingSavedIntoAStoreIsOneJournalRecordAndReopens() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("mapping-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let schema = try Schema(
            Article.self, Writer.self, ApprovedComment.self, Gadget.self, Bookmark.self, LogLine.self, Release.self,
            Meter.self)
        var w = EntityMapping(Writer.self)
        try w.map("writerID", "name")
        var m = try articles()
        try m.map("writer", to: "writer", with: w)
        do {
            let store = try ObjectStore.open(at: dir, schema: schema)
            try store.context.map(json(#"[{"articleID": 1, "writer": {"writerID": 1, "name": "W"}}]"#), with: m)
            try store.context.save()
            // The first save also wrote the schema record; the second run is one record.
            let before = store.stats.records
            try store.context.map(
                json(#"[{"articleID": 1, "title": "t"}, {"articleID": 2, "writer": {"writerID": 1}}]"#), with: m)
            try store.context.save()
            #expect(store.stats.records == before + 1)
            try store.close()
        }
        let reopened = try ObjectStore.open(at: dir, schema: schema)
        #expect(try reopened.context.objects(of: Article.self).compactMap { $0.writer?.name } == ["W", "W"])
    }

    @Test func foundationValuesAndDictionariesMapLikeJSON() throws {
        let context = try newsContext()
        let m = try articles()
        let r = try context.map(
            [
                ["articleID": 1, "title": "a", "meta": ["published": Date(timeIntervalSince1970: 5)]],
                ["articleID": Int64(2), "body": NSNull()],
            ], with: m)
        #expect(r.objects.map(\.articleID) == [1, 2])
        #expect(r.objects[0].publishedAt == Date(timeIntervalSince1970: 5))
        let parsed = try JSONSerialization.jsonObject(with: json(#"{"items": [{"articleID": 3}]}"#))
        var rooted = m
        rooted.rootKeyPath = "items"
        #expect(try context.map(jsonObject: parsed, with: rooted).objects.map(\.articleID) == [3])
    }
}
