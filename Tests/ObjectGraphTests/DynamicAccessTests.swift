import Foundation
import ObjectGraph
import Testing

@Suite("Dynamic access by key and every attribute type")
struct DynamicAccessTests {
    @Test func everyAttributeTypeRoundTripsThroughTypedAccessors() throws {
        let context = try makeContext()
        let e = try context.insert(Everything.self)
        let date = Date(timeIntervalSince1970: 1_700_000_000.25)
        let uuid = UUID()
        e.flag = true; e.i8 = -8; e.i16 = -16; e.i32 = -32; e.i64 = .min; e.int = -1
        e.u8 = 8; e.u16 = 16; e.u32 = 32; e.u64 = .max; e.uint = 7
        e.double = -0.5; e.float = 1.25; e.text = "héllo wörld, longer than fifteen bytes"
        e.blob = Data([0, 1, 2, 255]); e.date = date; e.uuid = uuid
        e.url = URL(string: "https://deb.debian.org/debian")
        e.priority = .important; e.level = .high
        e.checksum = Checksum(algorithm: "sha256", hex: "abc")
        e.maybeText = "x"; e.maybeInt = 42
        try context.save()
        #expect(e.flag && e.i8 == -8 && e.i16 == -16 && e.i32 == -32 && e.i64 == .min && e.int == -1)
        #expect(e.u8 == 8 && e.u16 == 16 && e.u32 == 32 && e.u64 == .max && e.uint == 7)
        #expect(e.double == -0.5 && e.float == 1.25 && e.text == "héllo wörld, longer than fifteen bytes")
        #expect(e.blob == Data([0, 1, 2, 255]) && e.date == date && e.uuid == uuid)
        #expect(e.url?.absoluteString == "https://deb.debian.org/debian")
        #expect(e.priority == .important && e.level == .high)
        #expect(e.checksum == Checksum(algorithm: "sha256", hex: "abc"))
        #expect(e.maybeText == "x" && e.maybeInt == 42)
        e.maybeText = nil; e.level = nil; e.checksum = nil
        #expect(e.maybeText == nil && e.level == nil && e.checksum == nil)
        #expect(try e.attributeValue(forKey: "priority") == .string("important"))
    }

    @Test func valueForKeyReturnsPlainSwiftValues() throws {
        let context = try makeContext()
        let p = try context.insert(Person.self)
        p.name = "Ada"; p.age = 36
        #expect(try p.value(forKey: "name") as? String == "Ada")
        #expect(try p.value(forKey: "age") as? Int64 == 36)
        #expect(try p.value(forKey: "city") == nil)
    }

    @Test func setValueForKeyAcceptsAnyIntegerThatFits() throws {
        let context = try makeContext()
        let e = try context.insert(Everything.self)
        try e.setValue(Int(100), forKey: "i8")
        try e.setValue(UInt8(200), forKey: "i16")
        try e.setValue(3, forKey: "double")
        #expect(e.i8 == 100 && e.i16 == 200 && e.double == 3)
    }

    @Test func setValueForKeyRejectsAWrongType() throws {
        let context = try makeContext()
        let p = try context.insert(Person.self)
        let error = try #require(throws: ObjectGraphError.self) { try p.setValue("old", forKey: "age") }
        #expect(error.code == .typeMismatch)
        #expect(error.entity == "Person" && error.key == "age")
        #expect(p.age == 18)
    }

    @Test func setValueForKeyRejectsAnOutOfRangeInteger() throws {
        let context = try makeContext()
        let e = try context.insert(Everything.self)
        #expect(throws: ObjectGraphError.self) { try e.setValue(300, forKey: "i8") }
        #expect(throws: ObjectGraphError.self) { try e.setValue(-1, forKey: "u64") }
        #expect(throws: ObjectGraphError.self) { try e.setValue(1.5, forKey: "int") }
    }

    @Test func setValueForKeyRejectsAnUnknownKey() throws {
        let context = try makeContext()
        let p = try context.insert(Person.self)
        let error = try #require(throws: ObjectGraphError.self) { try p.setValue(1, forKey: "salary") }
        #expect(error.code == .unknownKey)
        #expect(throws: ObjectGraphError.self) { try p.value(forKey: "salary") }
    }

    @Test func setValueNilOnlyForOptionalAttributes() throws {
        let context = try makeContext()
        let p = try context.insert(Person.self)
        p.city = "Oslo"
        try p.setValue(nil, forKey: "city")
        try p.setValue(NSNull(), forKey: "city")
        #expect(p.city == nil)
        #expect(throws: ObjectGraphError.self) { try p.setValue(nil, forKey: "name") }
    }

    @Test func setValueForKeyOnAStandaloneObject() throws {
        let p = Person(id: 1, name: "Ada", email: "e")
        try p.setValue("Oslo", forKey: "city")
        #expect(p.city == "Oslo")
        let context = try makeContext()
        try context.insert(p)
        #expect(p.city == "Oslo")
    }

    @Test func longStringsAndLargeDataSurviveRollbackAndArenaCompaction() throws {
        let context = try makeContext()
        let e = try context.insert(Everything.self)
        let big = Data((0..<(1 << 24) + 10).map { UInt8(truncatingIfNeeded: $0) })  // longer than a 24-bit length
        e.blob = big
        try context.save()
        #expect(e.blob == big)
        // Rewrite the text many times so the arena is mostly garbage, then save to compact it.
        for i in 0..<3 {
            e.blob = Data(repeating: UInt8(i), count: 1 << 20)
            try context.save()
        }
        e.blob = big
        try context.save()
        #expect(e.blob == big)
        e.text = "changed"
        context.rollback()
        #expect(e.blob == big && e.text == "")
    }
}

@Suite("Schema")
struct SchemaTests {
    @Test func entityDescriptionListsAttributesInDeclarationOrder() {
        let d = Person.entityDescription
        #expect(d.name == "Person")
        #expect(d.attributes.map(\.name) == ["id", "name", "email", "age", "city", "score"])
        #expect(d.attributes.map(\.type) == [.int64, .string, .string, .int64, .string, .double])
        #expect(d.attributes.map(\.isOptional) == [false, false, false, false, true, false])
        #expect(d.attribute(named: "age")?.defaultValue == .int(18))
    }

    @Test func transientPropertiesAreNotPersisted() {
        #expect(Everything.entityDescription.attribute(named: "scratch") == nil)
        #expect(Tracked.entityDescription.attributes.map(\.name) == ["label"])
    }

    @Test func enumsAndCodableMapToTheirStorageTypes() {
        let d = Everything.entityDescription
        #expect(d.attribute(named: "priority")?.type == .string)
        #expect(d.attribute(named: "priority")?.valueKind == .rawRepresentable)
        #expect(d.attribute(named: "level")?.type == .int64)
        #expect(d.attribute(named: "checksum")?.type == .data)
        #expect(d.attribute(named: "checksum")?.valueKind == .codable)
        #expect(d.attribute(named: "priority")?.defaultValue == .string("standard"))
    }

    @Test func duplicateEntityTypeIsRejected() {
        #expect(throws: SchemaError.self) { try Schema(Person.self, Person.self) }
    }

    @Test func emptySchemaIsRejected() {
        #expect(throws: SchemaError.self) { try Schema([]) }
    }

    @Test func duplicateAttributeNameIsRejected() {
        #expect(throws: SchemaError.self) { try Schema(DuplicateAttribute.self) }
    }
}

/// A hand-written description with a mistake the schema must catch.
final class DuplicateAttribute: Entity {
    var _backing = ObjectBacking(entity: DuplicateAttribute.entityDescription)
    static let entityDescription = EntityDescription(
        name: "DuplicateAttribute", type: DuplicateAttribute.self,
        attributes: [.attribute("x", Int.self), .attribute("x", String.self)])
    init(_backing: ObjectBacking) { self._backing = _backing }
}
