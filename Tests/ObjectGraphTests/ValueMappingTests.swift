import Foundation
import Testing

@testable import ObjectGraph

// Models of the value mapping tests: a small catalogue.

enum VMKind: String, Codable, Sendable {
    case book, film, game
}

struct VMDimensions: Codable, Hashable, Sendable {
    var width: Double
    var height: Double
}

/// Identified by its unique `id`: lookups go through the unique index.
@Entity final class VMItem {
    @Attribute(.unique) var id: Int = 0
    var title: String = ""
    var kind: VMKind = .book
    var rating: Double?
    var releasedAt: Date?
    var size: VMDimensions?
    var pages: Int32 = 0
    var ean: UInt64?
    var cover: URL?
    var token: UUID?
    var thumbnail: Data?
    @Relationship(inverse: "items") var shelf: VMShelf?
}

@Entity final class VMShelf {
    var label: String = ""
    @Relationship(inverse: "shelf") var items: [VMItem]
}

/// Declares no identity: upserts name `id` (or ask for the guess, which picks `id`), and
/// lookups go through an identity index, as no unique constraint covers it.
@Entity final class VMNote {
    var id: Int64 = 0
    var text: String = ""
    var tag: String?
}

/// Nothing to identify it by: every value inserts.
@Entity final class VMLogLine {
    var text: String = ""
}

/// Declares a compound identification.
@Entity final class VMEdition {
    var series: String = ""
    var number: Int = 0
    var title: String = ""
}

extension VMEdition: IdentifiedEntity {
    static var identificationAttributes: [String] { ["series", "number"] }
}

/// Declares a compound identification that a unique constraint indexes, in the other order.
@Entity final class VMSeat {
    #Unique<VMSeat>([\.number, \.row])
    var row: String = ""
    var number: Int = 0
    var holder: String?
}

extension VMSeat: IdentifiedEntity {
    static var identificationAttributes: [String] { ["row", "number"] }
}

/// Counts its inserts, and gives new objects a title of its own before the values are set.
@Entity final class VMHooked {
    @Attribute(.unique) var id: Int = 0
    var title: String = ""
    var origin: String = ""

    func awakeFromInsert() {
        origin = "awake"
        title = "untitled"
    }
}

// Sources.

struct VMItemRecord: Codable, Hashable, Sendable {
    var id: Int
    var title: String
    var kind: VMKind
    var rating: Double?
    var releasedAt: Date?
    var size: VMDimensions?
    var pages: Int32
    var ean: UInt64?
    var cover: URL?
    var token: UUID?
    var thumbnail: Data?

    static func sample(_ id: Int, title: String = "Dune") -> VMItemRecord {
        VMItemRecord(
            id: id, title: title, kind: .film, rating: 4.5, releasedAt: Date(timeIntervalSince1970: 1_700_000_000),
            size: VMDimensions(width: 1.5, height: 2.25), pages: 412, ean: 9_780_441_013_593,
            cover: URL(string: "https://example.com/dune.jpg"),
            token: UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"),
            thumbnail: Data([1, 2, 3]))
    }
}

struct VMNoteRecord: Codable, Sendable {
    var id: Int64
    var text: String
    var tag: String?
}

final class VMItemClass {
    var id = 1
}

/// How the tests identify notes, which declare no identity.
private let byID = ValueIdentity.attribute("id")

private func makeVMContext() throws -> ModelContext {
    ModelContext(
        schema: try Schema(
            VMItem.self, VMShelf.self, VMNote.self, VMLogLine.self, VMEdition.self, VMSeat.self, VMHooked.self))
}

/// The ``MappingError`` `body` throws.
private func mappingError(_ body: () throws -> Void) -> MappingError? {
    do {
        try body()
        return nil
    } catch {
        return error as? MappingError
    }
}

@Suite struct ValueMappingTests {
    // MARK: Structs through reflection

    @Test func aStructSetsEveryKindOfAttribute() throws {
        let context = try makeVMContext()
        let record = VMItemRecord.sample(1)
        let item = try context.upsert(structValue: record, as: VMItem.self)
        #expect(item.id == 1)
        #expect(item.title == "Dune")
        #expect(item.kind == .film)
        #expect(item.rating == 4.5)
        #expect(item.releasedAt == record.releasedAt)
        #expect(item.size == record.size)
        #expect(item.pages == 412)
        #expect(item.ean == 9_780_441_013_593)
        #expect(item.cover == record.cover)
        #expect(item.token == record.token)
        #expect(item.thumbnail == Data([1, 2, 3]))
        #expect(try context.count(of: VMItem.self) == 1)
    }

    @Test func anEntityNamedAtRuntimeIsUpserted() throws {
        let context = try makeVMContext()
        struct Note { var id: Int64; var text: String }
        let first = try context.upsert(structValue: Note(id: 3, text: "one"), entityNamed: "VMNote", identifiedBy: byID)
        let second = try context.upsert(
            structValue: Note(id: 3, text: "two"), entityNamed: "VMNote", identifiedBy: byID)
        #expect(first === second)
        #expect((second as? VMNote)?.text == "two")
    }

    @Test func aValueThatIsNotAStructIsRefused() throws {
        let context = try makeVMContext()
        let values: [Any] = [VMItemClass(), VMKind.book, 42, (1, "tuple"), Optional(VMItemRecord.sample(1)) as Any]
        for value in values {
            let error = mappingError { try context.upsert(structValue: value, as: VMItem.self) }
            #expect(error?.code == .notAStruct, "\(value)")
            #expect(error?.entity == "VMItem")
        }
        #expect(try context.count(of: VMItem.self) == 0)
    }

    @Test func anEntityNotInTheSchemaIsRefused() throws {
        let context = try makeVMContext()
        struct Line { var text: String }
        #expect(
            mappingError { try context.upsert(structValue: Line(text: "x"), entityNamed: "Nowhere") }?.code
                == .unknownEntity)
        #expect(
            mappingError { try context.upsert(structValue: Line(text: "x"), as: Person.self) }?.code == .unknownEntity)
        #expect(
            mappingError { try context.upsert(VMNoteRecord(id: 1, text: "x"), as: Person.self) }?.code == .unknownEntity
        )
        #expect(
            mappingError { try context.upsert([VMNoteRecord(id: 1, text: "x")], as: Person.self) }?.code
                == .unknownEntity)
    }

    @Test func aPropertyTheEntityLacksIsAnErrorNamingIt() throws {
        let context = try makeVMContext()
        struct Noted { var id: Int64; var text: String; var colour: String }
        let error = mappingError {
            try context.upsert(structValue: Noted(id: 1, text: "x", colour: "red"), as: VMNote.self, identifiedBy: byID)
        }
        #expect(error?.code == .unknownProperty)
        #expect(error?.attribute == "colour")
        #expect(error?.entity == "VMNote")
        #expect(error?.message.contains("'colour'") == true)
        #expect(try context.count(of: VMNote.self) == 0)  // never a partial object
    }

    @Test func aPropertyNamingARelationshipIsAnUnknownProperty() throws {
        let context = try makeVMContext()
        struct Shelved { var id: Int; var shelf: String }
        let error = mappingError { try context.upsert(structValue: Shelved(id: 1, shelf: "A"), as: VMItem.self) }
        #expect(error?.code == .unknownProperty)
        #expect(error?.attribute == "shelf")
        #expect(error?.message.contains("relationship") == true)
        struct Filled { var label: String; var items: [Int] }
        #expect(
            mappingError { try context.insert(structValue: Filled(label: "A", items: [1]), as: VMShelf.self) }?.code
                == .unknownProperty)
    }

    @Test func anUnstorablePropertyTypeIsNamed() throws {
        let context = try makeVMContext()
        struct Listed { var id: Int; var title: [String] }
        let error = mappingError { try context.upsert(structValue: Listed(id: 1, title: ["a"]), as: VMItem.self) }
        #expect(error?.code == .unstorableProperty)
        #expect(error?.attribute == "title")
        #expect(error?.message.contains("'title'") == true)
        #expect(error?.message.contains("Array<String>") == true)

        struct Numbered { var id: Int; var title: Int }
        #expect(
            mappingError { try context.upsert(structValue: Numbered(id: 1, title: 5), as: VMItem.self) }?.code
                == .unstorableProperty)

        struct Sized { var id: Int; var size: [Double] }
        let codable = mappingError { try context.upsert(structValue: Sized(id: 1, size: [1, 2]), as: VMItem.self) }
        #expect(codable?.code == .unstorableProperty)
        #expect(codable?.message.contains("VMDimensions") == true)
        #expect(try context.count(of: VMItem.self) == 0)
    }

    @Test func aValueOutOfItsAttributesRangeIsUnstorable() throws {
        let context = try makeVMContext()
        struct Long { var id: Int; var pages: Int }
        #expect(try context.upsert(structValue: Long(id: 1, pages: 300), as: VMItem.self).pages == 300)
        let error = mappingError { try context.upsert(structValue: Long(id: 2, pages: 1 << 40), as: VMItem.self) }
        #expect(error?.code == .unstorableProperty)
        #expect(error?.attribute == "pages")
        #expect(error?.value == "\(1 << 40)")
    }

    @Test func nilForANonOptionalAttributeIsRefused() throws {
        let context = try makeVMContext()
        struct Untitled { var id: Int; var title: String? }
        let error = mappingError { try context.upsert(structValue: Untitled(id: 1, title: nil), as: VMItem.self) }
        #expect(error?.code == .unstorableProperty)
        #expect(error?.attribute == "title")
        #expect(error?.message.contains("not optional") == true)
        // An optional property with a value is unwrapped.
        #expect(try context.upsert(structValue: Untitled(id: 1, title: "T"), as: VMItem.self).title == "T")
    }

    @Test func aNilOptionalClearsTheAttribute() throws {
        let context = try makeVMContext()
        let item = try context.upsert(structValue: VMItemRecord.sample(1), as: VMItem.self)
        var cleared = VMItemRecord.sample(1)
        cleared.rating = nil
        cleared.size = nil
        try context.upsert(structValue: cleared, as: VMItem.self)
        #expect(item.rating == nil)
        #expect(item.size == nil)
        try context.upsert(VMItemRecord.sample(1), as: VMItem.self)
        try context.upsert(cleared, as: VMItem.self)  // encodeIfPresent(nil) sets nil too
        #expect(item.rating == nil)
        #expect(item.size == nil)
    }

    @Test func aRawValueThatIsNoCaseIsRefused() throws {
        let context = try makeVMContext()
        struct Raw { var id: Int; var kind: String }
        #expect(try context.upsert(structValue: Raw(id: 1, kind: "game"), as: VMItem.self).kind == .game)
        let error = mappingError { try context.upsert(structValue: Raw(id: 2, kind: "podcast"), as: VMItem.self) }
        #expect(error?.code == .unstorableProperty)
        #expect(error?.message.contains("podcast") == true)
        #expect(try context.count(of: VMItem.self) == 1)
    }

    @Test func upsertByInferredIdentificationUpdatesTheExistingObject() throws {
        let context = try makeVMContext()
        // Through the unique index on `id`.
        let item = try context.upsert(structValue: VMItemRecord.sample(7), as: VMItem.self)
        try context.save()
        let again = try context.upsert(structValue: VMItemRecord.sample(7, title: "Dune Messiah"), as: VMItem.self)
        #expect(again === item)
        #expect(item.title == "Dune Messiah")
        #expect(item.isUpdated)
        #expect(try context.count(of: VMItem.self) == 1)
        // Through an identity index: VMNote's `id` has no unique constraint, and is a guess.
        #expect(try ValueIdentity.inferred.identificationAttributes(for: VMNote.self) == ["id"])
        struct Note { var id: Int64; var text: String }
        let note = try context.upsert(structValue: Note(id: 1, text: "a"), as: VMNote.self, identifiedBy: .inferred)
        try context.upsert(structValue: Note(id: 2, text: "b"), as: VMNote.self, identifiedBy: .inferred)
        #expect(
            try context.upsert(structValue: Note(id: 1, text: "c"), as: VMNote.self, identifiedBy: .inferred) === note)
        #expect(note.text == "c")
        #expect(try context.count(of: VMNote.self) == 2)
    }

    @Test func aDeclaredCompoundIdentificationFindsTheObject() throws {
        let context = try makeVMContext()
        struct Edition { var series: String; var number: Int; var title: String }
        let first = try context.upsert(
            structValue: Edition(series: "Dune", number: 1, title: "Dune"), as: VMEdition.self)
        try context.upsert(structValue: Edition(series: "Dune", number: 2, title: "Messiah"), as: VMEdition.self)
        let again = try context.upsert(
            structValue: Edition(series: "Dune", number: 1, title: "Dune (revised)"), as: VMEdition.self)
        #expect(again === first)
        #expect(first.title == "Dune (revised)")
        #expect(try context.count(of: VMEdition.self) == 2)
    }

    @Test func aCompoundKeyIsFoundThroughItsIndexOrItsLookupTable() throws {
        let context = try makeVMContext()
        struct Seat: Codable { var row: String; var number: Int; var holder: String? }
        let seats = try context.upsert(
            [
                Seat(row: "A", number: 1, holder: "x"), Seat(row: "A", number: 2),
                Seat(row: "A", number: 1, holder: "y"),
            ], as: VMSeat.self)
        #expect(seats[0] === seats[2])
        #expect(seats[0].holder == "y")
        #expect(try context.count(of: VMSeat.self) == 2)
        #expect(try context.upsert(structValue: Seat(row: "A", number: 2, holder: "z"), as: VMSeat.self) === seats[1])

        struct Edition: Codable { var series: String; var number: Int; var title: String }
        let stored = try context.upsert(
            structValue: Edition(series: "Dune", number: 2, title: "stored"), as: VMEdition.self)
        try context.save()
        let editions = try context.upsert(
            (0..<50).map {
                Edition(series: $0.isMultiple(of: 2) ? "Dune" : "Foundation", number: $0 % 10, title: "\($0)")
            },
            as: VMEdition.self)
        #expect(try context.count(of: VMEdition.self) == 10)
        #expect(editions[2] === stored)
        #expect(stored.title == "42")
        #expect(editions[0] === editions[40])
        #expect(editions[0].title == "40")
    }

    @Test func anEntityWithoutIdentificationIsInsertedNotUpserted() throws {
        let context = try makeVMContext()
        struct Line { var text: String }
        try context.insert(structValue: Line(text: "same"), as: VMLogLine.self)
        try context.insert(structValue: Line(text: "same"), as: VMLogLine.self)
        #expect(try context.count(of: VMLogLine.self) == 2)
        let error = mappingError {
            try context.upsert(structValue: Line(text: "same"), as: VMLogLine.self, identifiedBy: .inferred)
        }
        #expect(error?.code == .invalidIdentification)
        #expect(error?.entity == "VMLogLine")
        #expect(try context.count(of: VMLogLine.self) == 2)
    }

    @Test func aValueWithoutItsIdentifyingPropertyIsRefused() throws {
        let context = try makeVMContext()
        struct Texted { var text: String }
        let error = mappingError {
            try context.upsert(structValue: Texted(text: "a"), as: VMNote.self, identifiedBy: byID)
        }
        #expect(error?.code == .invalidIdentification)
        #expect(error?.entity == "VMNote")
        #expect(error?.attribute == "id")
        struct Untagged: Encodable { var text: String }
        let batch = mappingError { try context.upsert([Untagged(text: "a")], as: VMNote.self, identifiedBy: byID) }
        #expect(batch?.code == .invalidIdentification)
        #expect(batch?.sourceIndex == 0)
        #expect(try context.count(of: VMNote.self) == 0)
    }

    @Test func aNilIdentifyingValueInsertsANewObject() throws {
        let context = try makeVMContext()
        struct Coded { var id: Int; var ean: UInt64? }
        try context.upsert(structValue: Coded(id: 1, ean: nil), as: VMItem.self, identifiedBy: .attribute("ean"))
        try context.upsert(structValue: Coded(id: 2, ean: nil), as: VMItem.self, identifiedBy: .attribute("ean"))
        #expect(try context.count(of: VMItem.self) == 2)
    }

    @Test func settingEqualValuesDoesNotDirtyTheObject() throws {
        let context = try makeVMContext()
        let item = try context.upsert(structValue: VMItemRecord.sample(1), as: VMItem.self)
        let note = try context.upsert(VMNoteRecord(id: 5, text: "n", tag: nil), as: VMNote.self, identifiedBy: byID)
        try context.save()
        #expect(try context.upsert(structValue: VMItemRecord.sample(1), as: VMItem.self) === item)
        #expect(try context.upsert(VMItemRecord.sample(1), as: VMItem.self) === item)
        #expect(
            try context.upsert([VMNoteRecord(id: 5, text: "n", tag: nil)], as: VMNote.self, identifiedBy: byID).first
                === note)
        #expect(!item.isUpdated)
        #expect(!note.isUpdated)
        #expect(!context.hasChanges)
    }

    @Test func anUpsertIsAtomic() throws {
        let context = try makeVMContext()
        let item = try context.upsert(structValue: VMItemRecord.sample(1), as: VMItem.self)
        try context.save()
        // `title` is set before `kind` fails: the whole call is undone.
        struct Partial { var id: Int; var title: String; var kind: String }
        let error = mappingError {
            try context.upsert(structValue: Partial(id: 1, title: "changed", kind: "podcast"), as: VMItem.self)
        }
        #expect(error?.code == .unstorableProperty)
        #expect(item.title == "Dune")
        #expect(!context.hasChanges)
    }

    @Test func awakeFromInsertRunsBeforeTheValuesAreSet() throws {
        let context = try makeVMContext()
        struct Hooked { var id: Int; var title: String }
        let hooked = try context.upsert(structValue: Hooked(id: 1, title: "given"), as: VMHooked.self)
        #expect(hooked.origin == "awake")
        #expect(hooked.title == "given")
        let batch = try context.upsert(
            [VMHookedRecord(id: 2, title: "b"), VMHookedRecord(id: 3, title: "c")], as: VMHooked.self)
        #expect(batch.map(\.origin) == ["awake", "awake"])
        #expect(batch.map(\.title) == ["b", "c"])
    }

    // MARK: Encodable values

    @Test func encodableRoundTripsThroughDecodable() throws {
        let context = try makeVMContext()
        let record = VMItemRecord.sample(9)
        let item = try context.upsert(record, as: VMItem.self)
        #expect(item.kind == .film)
        #expect(item.size == record.size)
        #expect(try item.decode(as: VMItemRecord.self) == record)
        var sparse = VMItemRecord.sample(10)
        sparse.rating = nil
        sparse.releasedAt = nil
        sparse.size = nil
        sparse.cover = nil
        #expect(try context.upsert(sparse, as: VMItem.self).decode() == sparse)
    }

    @Test func anUnknownKeyInAnEncodableValueIsAnErrorNamingIt() throws {
        let context = try makeVMContext()
        struct Extra: Encodable { var id: Int64; var text: String; var colour: String }
        let error = mappingError {
            try context.upsert(Extra(id: 1, text: "x", colour: "red"), as: VMNote.self, identifiedBy: byID)
        }
        #expect(error?.code == .unknownProperty)
        #expect(error?.attribute == "colour")
        #expect(error?.keyPath == "colour")
        #expect(error?.sourceIndex == nil)
        #expect(try context.count(of: VMNote.self) == 0)
    }

    @Test func anEncodedValueItsAttributeCannotHoldIsUnstorable() throws {
        let context = try makeVMContext()
        struct Wrong: Encodable { var id: Int; var title: Double }
        let error = mappingError { try context.upsert(Wrong(id: 1, title: 2), as: VMItem.self) }
        #expect(error?.code == .unstorableProperty)
        #expect(error?.attribute == "title")
        struct Kinded: Encodable { var id: Int; var kind: String }
        #expect(
            mappingError { try context.upsert(Kinded(id: 1, kind: "podcast"), as: VMItem.self) }?.code
                == .unstorableProperty)
        #expect(try context.upsert(Kinded(id: 1, kind: "game"), as: VMItem.self).kind == .game)
        struct Sized: Encodable { var id: Int; var size: [Double] }
        #expect(
            mappingError { try context.upsert(Sized(id: 1, size: [1]), as: VMItem.self) }?.code == .unstorableProperty)
    }

    @Test func aValueWithoutKeyedPropertiesIsRefused() throws {
        let context = try makeVMContext()
        #expect(mappingError { try context.upsert(42, as: VMNote.self, identifiedBy: byID) }?.code == .codingFailed)
        #expect(try context.count(of: VMNote.self) == 0)
    }

    @Test func aNestedContainerIsUnstorableEvenWhenTheValueSwallowsTheError() throws {
        let context = try makeVMContext()
        struct Nested: Encodable {
            enum Keys: String, CodingKey { case id, text, extra }
            enum Inner: String, CodingKey { case x }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: Keys.self)
                try c.encode(Int64(1), forKey: .id)
                var inner = c.nestedContainer(keyedBy: Inner.self, forKey: .text)
                try? inner.encode(1, forKey: .x)
                try? c.encode("ignored", forKey: .extra)
            }
        }
        let error = mappingError { try context.upsert(Nested(), as: VMNote.self, identifiedBy: byID) }
        #expect(error?.code == .unstorableProperty)
        #expect(error?.keyPath == "text")
        #expect(try context.count(of: VMNote.self) == 0)
    }

    @Test func aFailingValueInABatchLeavesTheContextUnchanged() throws {
        let context = try makeVMContext()
        // pending, stays
        let kept = try context.upsert(VMNoteRecord(id: 1, text: "kept"), as: VMNote.self, identifiedBy: byID)
        struct Line: Encodable { var id: Int64; var text: String; var colour: String? }
        let lines = [
            Line(id: 1, text: "changed", colour: nil), Line(id: 2, text: "new", colour: nil),
            Line(id: 3, text: "bad", colour: "red"),
        ]
        struct Skipping: Encodable {
            var line: Line
            enum Keys: String, CodingKey { case id, text, colour }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: Keys.self)
                try c.encode(line.id, forKey: .id)
                try c.encode(line.text, forKey: .text)
                if let colour = line.colour { try c.encode(colour, forKey: .colour) }
            }
        }
        let error = mappingError { try context.upsert(lines.map(Skipping.init), as: VMNote.self, identifiedBy: byID) }
        #expect(error?.code == .unknownProperty)
        #expect(error?.sourceIndex == 2)
        #expect(error?.attribute == "colour")
        #expect(try context.count(of: VMNote.self) == 1)
        #expect(kept.text == "kept")
        #expect(context.insertedObjects.count == 1)
    }

    @Test func aBatchFindsTheObjectsItInsertedEarlier() throws {
        let context = try makeVMContext()
        let notes = try context.upsert(
            [VMNoteRecord(id: 1, text: "a"), VMNoteRecord(id: 2, text: "b"), VMNoteRecord(id: 1, text: "c")],
            as: VMNote.self, identifiedBy: byID)
        #expect(notes.count == 3)
        #expect(notes[0] === notes[2])
        #expect(notes[0].text == "c")
        #expect(try context.count(of: VMNote.self) == 2)
        let items = try context.upsert([VMItemRecord.sample(1), VMItemRecord.sample(1, title: "b")], as: VMItem.self)
        #expect(items[0] === items[1])
        #expect(try context.count(of: VMItem.self) == 1)
    }

    @Test func aBatchFindsObjectsAlreadyStoredWithoutAUniqueIndex() throws {
        let context = try makeVMContext()
        for id in 0..<40 {
            try context.upsert(VMNoteRecord(id: Int64(id), text: "v1"), as: VMNote.self, identifiedBy: byID)
        }
        try context.save()
        // Enough values to grow the identity index several times.
        let records = (0..<100).map { VMNoteRecord(id: Int64($0 % 70), text: "v2-\($0)") }
        let notes = try context.upsert(records.lazy.map { $0 }, as: VMNote.self, identifiedBy: byID)
        #expect(notes.count == 100)
        #expect(try context.count(of: VMNote.self) == 70)
        #expect(notes[5] === notes[75])
        #expect(notes[75].text == "v2-75")
    }

    @Test func aSequenceOfValuesIsOneBatch() throws {
        let context = try makeVMContext()
        let notes: [VMNote] = try context.upsert(
            (1...3).lazy.map { VMNoteRecord(id: Int64($0), text: "\($0)") }, as: VMNote.self, identifiedBy: byID)
        #expect(notes.map(\.text) == ["1", "2", "3"])
        let set: Set<VMItemRecord> = [VMItemRecord.sample(1), VMItemRecord.sample(2)]
        let items: [VMItem] = try context.upsert(set, as: VMItem.self)
        #expect(Set(items.map(\.id)) == [1, 2])
    }

    // MARK: Decoding

    @Test func decodingAnAttributeTheObjectLacksThrowsKeyNotFound() throws {
        let context = try makeVMContext()
        let note = try context.insert(VMNoteRecord(id: 1, text: "a", tag: nil), as: VMNote.self)
        struct Missing: Decodable { var id: Int64; var colour: String }
        #expect(throws: DecodingError.self) { try note.decode(as: Missing.self) }
        do {
            _ = try note.decode(as: Missing.self)
        } catch DecodingError.keyNotFound(let key, _) {
            #expect(key.stringValue == "colour")
        }
        struct Lenient: Decodable { var id: Int64; var colour: String?; var tag: String? }
        let decoded = try note.decode(as: Lenient.self)
        #expect(decoded.id == 1)
        #expect(decoded.colour == nil)
        #expect(decoded.tag == nil)
    }

    @Test func relationshipsAreNotDecoded() throws {
        let context = try makeVMContext()
        let item = try context.upsert(VMItemRecord.sample(1), as: VMItem.self)
        let shelf = try context.insert(VMShelf.self)
        item.shelf = shelf
        struct Shelved: Decodable { var id: Int; var shelf: String? }
        #expect(try item.decode(as: Shelved.self).shelf == nil)
        struct Required: Decodable { var shelf: Int }
        #expect(throws: DecodingError.self) { try item.decode(as: Required.self) }
    }

    @Test func decodingConvertsIntegerWidthsAndRefusesWhatDoesNotFit() throws {
        let context = try makeVMContext()
        let item = try context.upsert(VMItemRecord.sample(1), as: VMItem.self)
        struct Wide: Decodable { var pages: Int; var id: Int64 }
        #expect(try item.decode(as: Wide.self).pages == 412)
        struct Narrow: Decodable { var pages: Int8 }
        #expect(throws: DecodingError.self) { try item.decode(as: Narrow.self) }
        struct Raw: Decodable { var kind: String }
        #expect(try item.decode(as: Raw.self).kind == "film")
        item.rating = nil
        struct Rated: Decodable { var rating: Double }
        #expect(throws: DecodingError.self) { try item.decode(as: Rated.self) }
    }

    @Test func aDecodedSnapshotCrossesIsolationDomains() async throws {
        let context = try makeVMContext()
        let record = try context.upsert(VMItemRecord.sample(3), as: VMItem.self).decode(as: VMItemRecord.self)
        let title = await Task.detached { record.title }.value
        #expect(title == "Dune")
    }
}

struct VMHookedRecord: Encodable {
    var id: Int
    var title: String
}
