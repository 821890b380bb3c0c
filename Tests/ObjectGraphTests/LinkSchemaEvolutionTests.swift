import Foundation
import ObjectGraph
import Testing

// Relationships stored as links across versions of a model: a to-one slot that becomes links
// (migrated), a many-to-many whose side becomes a to-one (refused), a relationship removed
// (dropped), a set that becomes ordered and back, and sides that swap.

/// Declares an entity `name` with a `name` attribute and `relationships`, by hand, so that two
/// versions of a model can use the same entity names.
private func leEntity(
    _ name: String, _ type: any Entity.Type, _ relationships: [RelationshipDescription]
) -> EntityDescription {
    EntityDescription(
        name: name, type: type, attributes: [.attribute("name", String.self)], relationships: relationships)
}

/// Version 1 of owners and pets: a to-one slot `owner` and its unordered to-many `pets`.
final class LeOwnerV1: Entity {
    var _backing = ObjectBacking(entity: LeOwnerV1.entityDescription)
    static let entityDescription = leEntity(
        "LeOwner", LeOwnerV1.self, [.toMany("pets", LePetV1.self, inverse: "owner")])
    init(_backing: ObjectBacking) { self._backing = _backing }
}

final class LePetV1: Entity {
    var _backing = ObjectBacking(entity: LePetV1.entityDescription)
    static let entityDescription = leEntity("LePet", LePetV1.self, [.toOne("owner", LeOwnerV1.self, inverse: "pets")])
    init(_backing: ObjectBacking) { self._backing = _backing }
}

/// Version 2: `pets` is ordered, so `owner` is stored as links too.
final class LeOwnerV2: Entity {
    var _backing = ObjectBacking(entity: LeOwnerV2.entityDescription)
    static let entityDescription = leEntity(
        "LeOwner", LeOwnerV2.self, [.toMany("pets", LePetV2.self, inverse: "owner", ordered: true)])
    init(_backing: ObjectBacking) { self._backing = _backing }
}

final class LePetV2: Entity {
    var _backing = ObjectBacking(entity: LePetV2.entityDescription)
    static let entityDescription = leEntity("LePet", LePetV2.self, [.toOne("owner", LeOwnerV2.self, inverse: "pets")])
    init(_backing: ObjectBacking) { self._backing = _backing }
}

/// Version 1 of students and courses: an unordered many-to-many.
final class LeStudentV1: Entity {
    var _backing = ObjectBacking(entity: LeStudentV1.entityDescription)
    static let entityDescription = leEntity(
        "LeStudent", LeStudentV1.self, [.toMany("courses", LeCourseV1.self, inverse: "students")])
    init(_backing: ObjectBacking) { self._backing = _backing }
}

final class LeCourseV1: Entity {
    var _backing = ObjectBacking(entity: LeCourseV1.entityDescription)
    static let entityDescription = leEntity(
        "LeCourse", LeCourseV1.self, [.toMany("students", LeStudentV1.self, inverse: "courses")])
    init(_backing: ObjectBacking) { self._backing = _backing }
}

/// A student takes one course: the many-to-many's student side became a to-one.
final class LeStudentToOne: Entity {
    var _backing = ObjectBacking(entity: LeStudentToOne.entityDescription)
    static let entityDescription = leEntity(
        "LeStudent", LeStudentToOne.self, [.toOne("courses", LeCourseToOne.self, inverse: "students")])
    init(_backing: ObjectBacking) { self._backing = _backing }
}

final class LeCourseToOne: Entity {
    var _backing = ObjectBacking(entity: LeCourseToOne.entityDescription)
    static let entityDescription = leEntity(
        "LeCourse", LeCourseToOne.self, [.toMany("students", LeStudentToOne.self, inverse: "courses")])
    init(_backing: ObjectBacking) { self._backing = _backing }
}

/// The relationship removed from both entities.
final class LeStudentBare: Entity {
    var _backing = ObjectBacking(entity: LeStudentBare.entityDescription)
    static let entityDescription = leEntity("LeStudent", LeStudentBare.self, [])
    init(_backing: ObjectBacking) { self._backing = _backing }
}

final class LeCourseBare: Entity {
    var _backing = ObjectBacking(entity: LeCourseBare.entityDescription)
    static let entityDescription = leEntity("LeCourse", LeCourseBare.self, [])
    init(_backing: ObjectBacking) { self._backing = _backing }
}

/// The many-to-many ordered on both sides.
final class LeStudentOrdered: Entity {
    var _backing = ObjectBacking(entity: LeStudentOrdered.entityDescription)
    static let entityDescription = leEntity(
        "LeStudent", LeStudentOrdered.self,
        [.toMany("courses", LeCourseOrdered.self, inverse: "students", ordered: true)])
    init(_backing: ObjectBacking) { self._backing = _backing }
}

final class LeCourseOrdered: Entity {
    var _backing = ObjectBacking(entity: LeCourseOrdered.entityDescription)
    static let entityDescription = leEntity(
        "LeCourse", LeCourseOrdered.self,
        [.toMany("students", LeStudentOrdered.self, inverse: "courses", ordered: true)])
    init(_backing: ObjectBacking) { self._backing = _backing }
}

/// An object's `name`.
private func leName(_ o: any Entity) -> String { ((try? o.value(forKey: "name")) as? String) ?? "?" }

/// The names of `o`'s related objects under `key` (a to-many, or a to-one as zero or one name).
private func leRelated(_ o: any Entity, _ key: String) -> [String] {
    switch (try? o.value(forKey: key)) ?? nil {
    case let many as [any Entity]: return many.map(leName)
    case let one as any Entity: return [leName(one)]
    default: return []
    }
}

/// Every object of `entity` by name, with its related names under `key` (sorted unless
/// `ordered`).
private func leLists(
    _ c: ModelContext, _ entity: String, _ key: String, ordered: Bool = false
) throws -> [String: [String]] {
    var result: [String: [String]] = [:]
    for o in try c.objects(ofEntityNamed: entity) {
        let related = leRelated(o, key)
        result[leName(o)] = ordered ? related : related.sorted()
    }
    return result
}

private func leInsert<T: Entity>(_ type: T.Type, _ name: String, into c: ModelContext) throws -> T {
    let o = try c.insert(type)
    try o.setValue(name, forKey: "name")
    return o
}

private func leFiles(_ dir: URL) throws -> [String: Data] {
    var result: [String: Data] = [:]
    for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) {
        result[name] = try Data(contentsOf: dir.appendingPathComponent(name))
    }
    return result
}

@Suite("Schema evolution of relationships stored as links")
struct LinkSchemaEvolutionTests {
    static var options: StoreOptions {
        var o = StoreOptions(durability: .none)
        o.autoCompactionRatio = nil
        return o
    }

    /// Owners and pets saved with a to-one slot: inserted with their owners, then moved,
    /// cleared and deleted; with `compacting`, a base record holds the first state. Returns
    /// each pet's owner.
    func writeOwnersAndPets(_ dir: URL, compacting: Bool) throws -> [String: [String]] {
        let store = try ObjectStore.open(
            at: dir, schema: try Schema(LePetV1.self, LeOwnerV1.self), options: Self.options)
        let c = store.context
        let owners = try (0..<3).map { try leInsert(LeOwnerV1.self, "o\($0)", into: c) }
        let pets = try (0..<8).map { try leInsert(LePetV1.self, "p\($0)", into: c) }
        for (i, p) in pets.enumerated() where i != 7 { try p.setValue(owners[i % 3], forKey: "owner") }
        try c.save()
        if compacting { try store.compact() }
        try pets[0].setValue(owners[2], forKey: "owner")
        try pets[1].setValue(nil, forKey: "owner")
        c.delete(pets[4])
        try c.save()
        c.delete(owners[1])  // nullify: p1 was moved off it; p7 never had an owner
        let late = try leInsert(LePetV1.self, "p8", into: c)
        try late.setValue(owners[0], forKey: "owner")
        try c.save()
        let result = try leLists(c, "LePet", "owner")
        try store.close()
        return result
    }

    @Test(arguments: [false, true])
    func aToOneSlotBecomesLinksWhenItsToManyBecomesOrderedAndEveryObjectKeepsItsOwner(compacting: Bool) throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let owners = try writeOwnersAndPets(dir, compacting: compacting)
        #expect(owners["p0"] == ["o2"] && owners["p1"] == [] && owners["p8"] == ["o0"] && owners["p4"] == nil)
        let v2 = try Schema(LeOwnerV2.self, LePetV2.self)
        var order: [String] = []
        do {
            let store = try ObjectStore.open(at: dir, schema: v2, options: Self.options)
            let c = store.context
            #expect(try leLists(c, "LePet", "owner") == owners, "each pet keeps its owner")
            // Each owner's pets are the pets that point at it, both ways.
            var expected: [String: [String]] = [:]
            for (pet, owner) in owners { if let o = owner.first { expected[o, default: []].append(pet) } }
            for (o, list) in try leLists(c, "LeOwner", "pets") {
                #expect(list == (expected[o] ?? []).sorted(), "\(o).pets")
            }
            // Now ordered: reorder, save, and the order stays through reopening and compaction.
            let o0 = try #require(try c.objects(ofEntityNamed: "LeOwner").first { leName($0) == "o0" })
            let before = leRelated(o0, "pets")
            #expect(before.count >= 3)
            try c.move(in: "pets", of: o0, from: before.count - 1, to: 0)
            order = leRelated(o0, "pets")
            try c.save()
            try store.close()
        }
        for round in 0..<3 {
            let store = try ObjectStore.open(at: dir, schema: v2, options: Self.options)
            let o0 = try #require(try store.context.objects(ofEntityNamed: "LeOwner").first { leName($0) == "o0" })
            #expect(leRelated(o0, "pets") == order, "round \(round)")
            #expect(try leLists(store.context, "LePet", "owner") == owners, "round \(round)")
            if round == 1 { try store.compact() }
            try store.close()
        }
        // Back to the slot: refused, naming the relationship, nothing changed.
        let files = try leFiles(dir)
        let error = try #require(throws: StoreError.self) {
            try ObjectStore.open(at: dir, schema: try Schema(LePetV1.self, LeOwnerV1.self), options: Self.options)
        }
        #expect(error.code == .incompatibleSchema, "\(error)")
        #expect(error.message.contains("LePet.owner") || error.message.contains("LeOwner.pets"), "\(error.message)")
        #expect(try leFiles(dir) == files)
    }

    /// Students and courses saved as a many-to-many, saved twice (links added and removed).
    func writeStudentsAndCourses(_ dir: URL, ordered: Bool = false) throws -> [String: [String]] {
        let schema =
            ordered
            ? try Schema(LeStudentOrdered.self, LeCourseOrdered.self) : try Schema(LeStudentV1.self, LeCourseV1.self)
        let store = try ObjectStore.open(at: dir, schema: schema, options: Self.options)
        let c = store.context
        let students: [any Entity] = try (0..<4).map { i in
            ordered
                ? try leInsert(LeStudentOrdered.self, "s\(i)", into: c) as any Entity
                : try leInsert(LeStudentV1.self, "s\(i)", into: c)
        }
        let courses: [any Entity] = try (0..<3).map { i in
            ordered
                ? try leInsert(LeCourseOrdered.self, "c\(i)", into: c) as any Entity
                : try leInsert(LeCourseV1.self, "c\(i)", into: c)
        }
        try students[0].setValue([courses[2], courses[0], courses[1]], forKey: "courses")
        try students[1].setValue([courses[1]], forKey: "courses")
        try students[2].setValue([courses[0], courses[2]], forKey: "courses")
        try c.save()
        try c.remove(courses[1], from: "courses", of: students[0])
        try c.add(courses[1], to: "courses", of: students[3])
        try c.save()
        let result = try leLists(c, "LeStudent", "courses", ordered: ordered)
        try store.close()
        return result
    }

    @Test func aManyToManyWhoseSideBecameAToOneIsRefusedNamingTheRelationship() throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        _ = try writeStudentsAndCourses(dir)
        let files = try leFiles(dir)
        let error = try #require(throws: StoreError.self) {
            try ObjectStore.open(
                at: dir, schema: try Schema(LeStudentToOne.self, LeCourseToOne.self), options: Self.options)
        }
        #expect(error.code == .incompatibleSchema, "\(error)")
        #expect(error.message.contains("LeStudent.courses"), "\(error.message)")
        #expect(try leFiles(dir) == files, "a refused open changes nothing")
    }

    @Test func aRemovedRelationshipDropsItsLinksAndTheStoreOpens() throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        _ = try writeStudentsAndCourses(dir)
        let bare = try Schema(LeStudentBare.self, LeCourseBare.self)
        for round in 0..<3 {
            let store = try ObjectStore.open(at: dir, schema: bare, options: Self.options)
            let c = store.context
            #expect(
                try c.objects(ofEntityNamed: "LeStudent").map(leName).sorted() == ["s0", "s1", "s2", "s3"]
                    + (round > 0 ? ["s4"] : []), "round \(round)")
            #expect(
                try c.objects(ofEntityNamed: "LeCourse").map(leName).sorted() == ["c0", "c1", "c2"], "round \(round)")
            if round == 0 {
                _ = try leInsert(LeStudentBare.self, "s4", into: c)
                try c.save()
            }
            if round == 1 { try store.compact() }
            try store.close()
        }
        // After the compaction the journal holds no links; the full model starts them empty.
        let store = try ObjectStore.open(
            at: dir, schema: try Schema(LeStudentV1.self, LeCourseV1.self), options: Self.options)
        defer { try? store.close() }
        #expect(try leLists(store.context, "LeStudent", "courses").values.allSatisfy(\.isEmpty))
        #expect(try store.context.count(of: LeStudentV1.self) == 5)
    }

    @Test func aSetThatBecomesOrderedAndBackKeepsItsMembers() throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let sets = try writeStudentsAndCourses(dir)
        let ordered = try Schema(LeStudentOrdered.self, LeCourseOrdered.self)
        var order: [String] = []
        do {
            let store = try ObjectStore.open(at: dir, schema: ordered, options: Self.options)
            let c = store.context
            #expect(try leLists(c, "LeStudent", "courses") == sets)
            let s2 = try #require(try c.objects(ofEntityNamed: "LeStudent").first { leName($0) == "s2" })
            try c.move(in: "courses", of: s2, from: 1, to: 0)
            order = leRelated(s2, "courses")
            try c.save()
            try store.close()
        }
        do {
            let store = try ObjectStore.open(at: dir, schema: ordered, options: Self.options)
            let s2 = try #require(try store.context.objects(ofEntityNamed: "LeStudent").first { leName($0) == "s2" })
            #expect(leRelated(s2, "courses") == order)
            try store.close()
        }
        // Unordered again: the order is dropped, the members stay, through a compaction too.
        for round in 0..<2 {
            let store = try ObjectStore.open(
                at: dir, schema: try Schema(LeStudentV1.self, LeCourseV1.self), options: Self.options)
            #expect(try leLists(store.context, "LeStudent", "courses") == sets, "round \(round)")
            if round == 0 { try store.compact() }
            try store.close()
        }
    }

    /// The entities listed the other way round: each side of the link table is the other
    /// side now (an ordered one keeps its order on both sides).
    @Test func swappedSidesKeepEveryListAndItsOrder() throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        var students = try writeStudentsAndCourses(dir, ordered: true)
        var courses: [String: [String]]
        do {
            let store = try ObjectStore.open(
                at: dir, schema: try Schema(LeStudentOrdered.self, LeCourseOrdered.self), options: Self.options)
            courses = try leLists(store.context, "LeCourse", "students", ordered: true)
            try store.close()
        }
        let swapped = try Schema(LeCourseOrdered.self, LeStudentOrdered.self)
        for round in 0..<3 {
            let store = try ObjectStore.open(at: dir, schema: swapped, options: Self.options)
            #expect(try leLists(store.context, "LeStudent", "courses", ordered: true) == students, "round \(round)")
            #expect(try leLists(store.context, "LeCourse", "students", ordered: true) == courses, "round \(round)")
            if round == 0 {
                // A save with the swapped schema, then the records of both schemas replay.
                let c0 = try #require(try store.context.objects(ofEntityNamed: "LeCourse").first { leName($0) == "c0" })
                let s3 = try #require(
                    try store.context.objects(ofEntityNamed: "LeStudent").first { leName($0) == "s3" })
                try store.context.add(s3, to: "students", of: c0, at: 0)
                try store.context.save()
                students["s3", default: []].append("c0")
                courses["c0", default: []].insert("s3", at: 0)
                try store.close()
                continue
            }
            if round == 1 { try store.compact() }
            try store.close()
        }
    }
}
