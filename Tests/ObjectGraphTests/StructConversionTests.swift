import Foundation
import Testing

@testable import ObjectGraph

// Converting Swift values into objects: inserts that never look for an object, upserts that
// identify objects only by an identity the model declares or the caller names, guesses only
// when asked, and identity lookups through an index. `Bookmark` (MappingTests.swift) has a
// `url` and a `title`, and declares no identity.

/// Two unique constraints and no declaration saying which identifies an account.
@Entity final class SCAccount {
    @Attribute(.unique) var email: String = ""
    @Attribute(.unique) var handle: String = ""
    var name: String = ""
}

struct SCBookmarkRecord: Codable, Sendable {
    var url: URL
    var title: String
}

private func makeSCContext() throws -> ModelContext {
    ModelContext(schema: try Schema(Bookmark.self, SCAccount.self))
}

private func home(_ i: Int = 0) -> URL {
    URL(fileURLWithPath: "/bookmarks/\(i)")
}

/// The ``MappingError`` `body` throws.
private func conversionError(_ body: () throws -> Void) -> MappingError? {
    do {
        try body()
        return nil
    } catch {
        return error as? MappingError
    }
}

@Suite struct StructConversionTests {
    // MARK: Inserts

    @Test func twoBookmarksWithTheSameURLStayTwoObjects() throws {
        let context = try makeSCContext()
        let first = try context.insert(structValue: SCBookmarkRecord(url: home(), title: "Home"), as: Bookmark.self)
        let second = try context.insert(structValue: SCBookmarkRecord(url: home(), title: "Start"), as: Bookmark.self)
        #expect(first !== second)
        #expect(first.title == "Home")
        #expect(second.title == "Start")
        let named = try context.insert(
            structValue: SCBookmarkRecord(url: home(), title: "Named"), entityNamed: "Bookmark")
        let encoded = try context.insert(SCBookmarkRecord(url: home(), title: "Encoded"), as: Bookmark.self)
        let batch = try context.insert(
            [SCBookmarkRecord(url: home(), title: "a"), SCBookmarkRecord(url: home(), title: "b")], as: Bookmark.self)
        let sequence: [Bookmark] = try context.insert(
            (0..<2).lazy.map { SCBookmarkRecord(url: home(), title: "s\($0)") }, as: Bookmark.self)
        #expect(named !== first && encoded !== first && batch[0] !== batch[1] && sequence[0] !== sequence[1])
        #expect(try context.count(of: Bookmark.self) == 8)
        try context.save()
        #expect(
            try context.fetch(FetchDescriptor<Bookmark>()).map(\.title).sorted() == [
                "Encoded", "Home", "Named", "Start", "a", "b", "s0", "s1",
            ])
    }

    @Test func anInsertThatCollidesWithAUniqueKeyFailsTheSaveInsteadOfUpdating() throws {
        let context = try makeSCContext()
        struct Account { var email: String; var handle: String; var name: String }
        let first = try context.insert(
            structValue: Account(email: "ada@example.com", handle: "ada", name: "Ada"), as: SCAccount.self)
        let second = try context.insert(
            structValue: Account(email: "ada@example.com", handle: "ada2", name: "Other"), as: SCAccount.self)
        #expect(first !== second)
        #expect(first.name == "Ada")
        #expect(throws: ValidationError.self) { try context.save() }
    }

    // MARK: Identity: declared, named, or guessed when asked

    @Test func upsertWithoutADeclaredIdentityRefusesToGuessTheURL() throws {
        let context = try makeSCContext()
        struct Saved { var url: URL; var title: String }
        let error = conversionError {
            try context.upsert(structValue: Saved(url: home(), title: "Home"), as: Bookmark.self)
        }
        #expect(error?.code == .invalidIdentification)
        #expect(error?.entity == "Bookmark")
        #expect(error?.message.contains("declares no identity") == true)
        #expect(
            conversionError {
                try context.upsert(structValue: Saved(url: home(), title: "Start"), entityNamed: "Bookmark")
            }?.code == .invalidIdentification)
        #expect(
            conversionError { try context.upsert(SCBookmarkRecord(url: home(), title: "Start"), as: Bookmark.self) }?
                .code == .invalidIdentification)
        #expect(
            conversionError { try context.upsert([SCBookmarkRecord(url: home(), title: "Start")], as: Bookmark.self) }?
                .code == .invalidIdentification)
        #expect(try context.count(of: Bookmark.self) == 0)
    }

    @Test func aGuessIsMadeOnlyWhenAskedAndSaysWhichAttribute() throws {
        #expect(try ValueIdentity.inferred.identificationAttributes(for: Bookmark.self) == ["url"])
        #expect(throws: MappingError.self) {
            _ = try ValueIdentity.declared.identificationAttributes(for: Bookmark.self)
        }
        #expect(try ValueIdentity.declared.identificationAttributes(for: VMItem.self) == ["id"])
        #expect(try ValueIdentity.declared.identificationAttributes(for: VMSeat.self) == ["row", "number"])
        #expect(try ValueIdentity.attribute("title").identificationAttributes(for: Bookmark.self) == ["title"])

        let context = try makeSCContext()
        let first = try context.upsert(
            structValue: SCBookmarkRecord(url: home(), title: "Home"), as: Bookmark.self, identifiedBy: .inferred)
        let second = try context.upsert(
            SCBookmarkRecord(url: home(), title: "Start"), as: Bookmark.self, identifiedBy: .inferred)
        #expect(first === second)
        #expect(first.title == "Start")
        #expect(try context.count(of: Bookmark.self) == 1)
    }

    @Test func anExplicitIdentityIsTheOneUsed() throws {
        let context = try makeSCContext()
        let byTitle = ValueIdentity.attribute("title")
        let first = try context.upsert(
            structValue: SCBookmarkRecord(url: home(1), title: "Home"), as: Bookmark.self, identifiedBy: byTitle)
        let second = try context.upsert(
            structValue: SCBookmarkRecord(url: home(2), title: "Home"), as: Bookmark.self, identifiedBy: byTitle)
        let third = try context.upsert(
            structValue: SCBookmarkRecord(url: home(2), title: "Other"), as: Bookmark.self, identifiedBy: byTitle)
        #expect(first === second)
        #expect(first.url == home(2))
        #expect(third !== first)
        #expect(try context.count(of: Bookmark.self) == 2)
        // A compound identity: both attributes together.
        let both = ValueIdentity.attributes(["url", "title"])
        #expect(
            try context.upsert(SCBookmarkRecord(url: home(2), title: "Other"), as: Bookmark.self, identifiedBy: both)
                === third)
        #expect(
            try context.upsert(SCBookmarkRecord(url: home(3), title: "Other"), as: Bookmark.self, identifiedBy: both)
                !== third)
        #expect(try context.count(of: Bookmark.self) == 3)
    }

    @Test func anIdentityNamingNoAttributeIsATypedErrorNamingIt() throws {
        let context = try makeSCContext()
        let record = SCBookmarkRecord(url: home(), title: "Home")
        let unknown = conversionError {
            try context.upsert(structValue: record, as: Bookmark.self, identifiedBy: .attribute("link"))
        }
        #expect(unknown?.code == .unknownAttribute)
        #expect(unknown?.entity == "Bookmark")
        #expect(unknown?.attribute == "link")
        let empty = conversionError { try context.upsert(record, as: Bookmark.self, identifiedBy: .attributes([])) }
        #expect(empty?.code == .invalidIdentification)
        #expect(empty?.entity == "Bookmark")
        let twice = conversionError {
            try context.upsert([record], as: Bookmark.self, identifiedBy: .attributes(["url", "url"]))
        }
        #expect(twice?.code == .invalidIdentification)
        #expect(twice?.attribute == "url")
        let relationship = conversionError {
            _ = try ValueIdentity.attribute("shelf").identificationAttributes(for: VMItem.self)
        }
        #expect(relationship?.code == .unknownAttribute)
        #expect(relationship?.message.contains("relationship") == true)
        #expect(try context.count(of: Bookmark.self) == 0)
    }

    @Test func severalUniqueConstraintsWithoutADeclarationAreNotPickedFrom() throws {
        let context = try makeSCContext()
        struct Account { var email: String; var handle: String; var name: String }
        let error = conversionError {
            try context.upsert(structValue: Account(email: "a@x", handle: "a", name: "A"), as: SCAccount.self)
        }
        #expect(error?.code == .invalidIdentification)
        #expect(error?.entity == "SCAccount")
        #expect(error?.message.contains("SCAccount(email)") == true)
        #expect(
            conversionError { _ = try ValueIdentity.inferred.identificationAttributes(for: SCAccount.self) }?.code
                == .invalidIdentification)
        // Named, either constraint's index serves it.
        let ada = try context.upsert(
            structValue: Account(email: "a@x", handle: "a", name: "A"), as: SCAccount.self,
            identifiedBy: .attribute("email"))
        let renamed = try context.upsert(
            structValue: Account(email: "a@x", handle: "a", name: "Ada"), as: SCAccount.self,
            identifiedBy: .attribute("handle"))
        #expect(ada === renamed)
        #expect(ada.name == "Ada")
    }

    @Test func aValueIdentifyingSeveralObjectsUpdatesNone() throws {
        let context = try makeSCContext()
        let first = try context.insert(structValue: SCBookmarkRecord(url: home(), title: "Home"), as: Bookmark.self)
        let second = try context.insert(structValue: SCBookmarkRecord(url: home(), title: "Start"), as: Bookmark.self)
        try context.save()
        let error = conversionError {
            try context.upsert(
                structValue: SCBookmarkRecord(url: home(), title: "Changed"), as: Bookmark.self,
                identifiedBy: .attribute("url"))
        }
        #expect(error?.code == .ambiguousIdentification)
        #expect(error?.entity == "Bookmark")
        #expect(error?.attribute == "url")
        #expect(first.title == "Home")
        #expect(second.title == "Start")
        #expect(!context.hasChanges)
        // Once one of them is deleted, the other is the one.
        context.delete(second)
        let found = try context.upsert(
            structValue: SCBookmarkRecord(url: home(), title: "Changed"), as: Bookmark.self,
            identifiedBy: .attribute("url"))
        #expect(found === first)
        #expect(first.title == "Changed")
    }

    // MARK: Lookups through an index

    @Test func oneAtATimeConversionFindsIdentityThroughAnIndex() throws {
        // The work per conversion, counted, must not grow with the number of objects: at 10k
        // and 40k objects each lookup compares the same number of rows (about one: the match).
        var perLookup: [Double] = []
        for n in [10_000, 40_000] {
            let context = try makeSCContext()
            for i in 0..<n {
                try context.upsert(
                    structValue: SCBookmarkRecord(url: home(i), title: "v1"), as: Bookmark.self,
                    identifiedBy: .attribute("url"))
            }
            // Every fourth again, in the same unsaved transaction: each finds its pending insert.
            for i in stride(from: 0, to: n, by: 4) {
                try context.upsert(
                    structValue: SCBookmarkRecord(url: home(i), title: "v2"), as: Bookmark.self,
                    identifiedBy: .attribute("url"))
            }
            #expect(try context.count(of: Bookmark.self) == n)
            let table = try context.table(for: Bookmark.self)
            #expect(table.indexes.identityIndexes.count == 1)
            let index = try #require(table.indexes.identityIndexes.first)
            #expect(index.builds == 1)
            #expect(index.lookups == n + n / 4)
            perLookup.append(Double(index.rowsCompared) / Double(index.lookups))
            #expect(try context.fetch(FetchDescriptor<Bookmark>()).filter { $0.title == "v2" }.count == n / 4)
        }
        #expect(perLookup[0] <= 1, "\(perLookup)")
        #expect(perLookup[1] <= perLookup[0] * 1.1 + 0.01, "\(perLookup)")
    }

    @Test func theIdentityIndexFollowsChangesDeletesRollbacksAndSaves() throws {
        let context = try makeSCContext()
        let byURL = ValueIdentity.attribute("url")
        func upsert(_ i: Int, _ title: String) throws -> Bookmark {
            try context.upsert(
                structValue: SCBookmarkRecord(url: home(i), title: title), as: Bookmark.self, identifiedBy: byURL)
        }
        let one = try upsert(1, "one")
        let two = try upsert(2, "two")
        try context.save()
        // A key changed by hand: found under its new key, not under its old one.
        one.url = home(10)
        #expect(try upsert(10, "ten") === one)
        let fresh = try upsert(1, "one again")
        #expect(fresh !== one)
        // Deleted: not found.
        context.delete(two)
        let replacement = try upsert(2, "two again")
        #expect(replacement !== two)
        // Rolled back: the keys are the saved ones again.
        context.rollback()
        #expect(try upsert(1, "one") === one)
        #expect(try upsert(2, "two") === two)
        #expect(try context.count(of: Bookmark.self) == 2)
        // A failing call is undone, its inserts with it.
        struct Coloured: Encodable {
            var url: URL
            var title: String
            var colour: String?
            enum Keys: String, CodingKey { case url, title, colour }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: Keys.self)
                try c.encode(url, forKey: .url)
                try c.encode(title, forKey: .title)
                if let colour { try c.encode(colour, forKey: .colour) }  // Bookmark has no colour
            }
        }
        let batch = [
            Coloured(url: home(3), title: "three", colour: nil), Coloured(url: home(4), title: "four", colour: "red"),
        ]
        #expect(conversionError { try context.upsert(batch, as: Bookmark.self, identifiedBy: byURL) }?.sourceIndex == 1)
        let three = try upsert(3, "three")
        #expect(try upsert(3, "three") === three)
        try context.save()
        #expect(try context.count(of: Bookmark.self) == 3)
        #expect(try upsert(3, "3") === three)
    }
}
