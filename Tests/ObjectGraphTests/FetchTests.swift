import Foundation
import ObjectGraph
import Testing

/// An entity with computed properties over its attributes, to pin that key paths which are not
/// plain attributes are still evaluated correctly (by Foundation).
@Entity final class Gauge {
    var label: String = ""
    var reading: Int = 0
    var limit: Int?
    var doubled: Int { reading * 2 }
    var alias: Int { reading }
}

@Suite("Fetch")
struct FetchTests {
    /// People 1...n with age = i % 50, city "City i % 7" (nil when i % 5 == 0), score = i / 4.
    func populated(_ n: Int = 200, backend: (any PersistenceBackend)? = nil) throws -> ModelContext {
        let context = try makeContext(backend: backend)
        for i in 1...n {
            try context.insert(Person.self) { p in
                p.id = Int64(i)
                p.name = "Person \(i)"
                p.email = "p\(i)@example.com"
                p.age = i % 50
                p.city = i % 5 == 0 ? nil : "City \(i % 7)"
                p.score = Double(i) / 4
            }
        }
        try context.save()
        return context
    }

    func ids(_ people: [Person]) -> [Int64] { people.map(\.id) }

    @Test func fetchIncludesPendingInsertsAndExcludesPendingDeletes() throws {
        let context = try populated(10)
        let fresh = try context.insert(Person.self) {
            $0.id = 100; $0.age = 99
        }
        let doomed = try #require(try context.fetch(Person.self) { $0.id == 3 }.first)
        context.delete(doomed)
        let all = try context.fetch(FetchDescriptor<Person>())
        #expect(all.contains { $0 === fresh })
        #expect(!all.contains { $0 === doomed })
        #expect(try context.fetchCount(FetchDescriptor<Person>()) == 10)
        let old = try context.fetch(FetchDescriptor<Person>(predicate: #Predicate { $0.age > 98 }))
        #expect(old.map(\.id) == [100])
    }

    @Test func committedViewExcludesPendingInsertsIncludesPendingDeletesAndSeesSavedValues() throws {
        let context = try populated(10)
        try context.insert(Person.self) {
            $0.id = 100; $0.age = 40
        }
        let deleted = try #require(try context.fetch(Person.self) { $0.id == 3 }.first)
        context.delete(deleted)
        let changed = try #require(try context.fetch(Person.self) { $0.id == 4 }.first)
        changed.age = 40  // was 4
        var d = FetchDescriptor<Person>(
            predicate: #Predicate { $0.age >= 3 && $0.age <= 5 }, sortBy: [SortDescriptor(\.age)])
        d.includePendingChanges = false
        #expect(ids(try context.fetch(d)) == [3, 4, 5])
        #expect(try context.fetchCount(d) == 3)
        d.includePendingChanges = true
        #expect(ids(try context.fetch(d)) == [5])
        // Foundation's path (a shape that is not translated) agrees.
        var slow = FetchDescriptor<Person>(
            predicate: #Predicate { $0.age + 0 >= 3 && $0.age + 0 <= 5 }, sortBy: [SortDescriptor(\.name)])
        slow.includePendingChanges = false
        #expect(ids(try context.fetch(slow)) == [3, 4, 5])
    }

    @Test func predicateThatThrowsSurfacesTheError() throws {
        let context = try populated(10)  // person 5 and 10 have no city
        let d = FetchDescriptor<Person>(predicate: #Predicate { $0.city! == "City 1" })
        #expect(throws: PredicateError.self) { try context.fetch(d) }
        #expect(throws: PredicateError.self) { try context.fetchCount(d) }
        struct Refused: Error {}
        #expect(throws: Refused.self) { try context.fetch(Person.self) { _ in throw Refused() } }
        #expect(throws: Refused.self) { try context.count(Person.self) { _ in throw Refused() } }
    }

    @Test func prefilterSkipsRowsWithoutHidingErrorsOfRowsItPasses() throws {
        let context = try populated(10)
        // `id == 3 && city!` only unwraps for person 3 (a city): no error.
        let safe = FetchDescriptor<Person>(predicate: #Predicate { $0.id == 3 && $0.city! == "City 3" })
        #expect(ids(try context.fetch(safe)) == [3])
        // person 5 has no city and passes the first conjunct: Foundation throws, so do we.
        let unsafe = FetchDescriptor<Person>(predicate: #Predicate { $0.id == 5 && $0.city! == "City 3" })
        #expect(throws: PredicateError.self) { try context.fetch(unsafe) }
        // A right-hand conjunct is not used to skip rows whose left side would throw.
        let rightSide = FetchDescriptor<Person>(predicate: #Predicate { $0.city! == "City 3" && $0.id == 3 })
        #expect(throws: PredicateError.self) { try context.fetch(rightSide) }
    }

    @Test func sortLimitAndOffsetApplyInThatOrder() throws {
        let context = try populated(20)
        var d = FetchDescriptor<Person>(
            predicate: #Predicate { $0.age >= 5 }, sortBy: [SortDescriptor(\.age, order: .reverse)])
        d.fetchOffset = 2
        d.fetchLimit = 3
        // ages 5...20 descending: 20, 19, | 18, 17, 16 | 15 ...
        #expect(ids(try context.fetch(d)) == [18, 17, 16])
        #expect(try context.fetchCount(d) == 3)
        d.fetchOffset = 15
        #expect(ids(try context.fetch(d)) == [5])
        #expect(try context.fetchCount(d) == 1)
        d.fetchOffset = 100
        #expect(try context.fetch(d).isEmpty)
        d.fetchOffset = nil
        d.fetchLimit = 0
        #expect(try context.fetch(d).isEmpty)
    }

    @Test func sortTiesKeepStorageOrderAndLaterDescriptorsBreakTies() throws {
        let context = try populated(100)
        let d = FetchDescriptor<Person>(
            predicate: #Predicate { $0.age < 3 },
            sortBy: [SortDescriptor(\.age), SortDescriptor(\.name, order: .reverse)])
        // age 0: 50, 100; age 1: 1, 51; age 2: 2, 52 — names descending within an age.
        #expect(ids(try context.fetch(d)) == [50, 100, 51, 1, 52, 2])
        let byAgeOnly = FetchDescriptor<Person>(predicate: #Predicate { $0.age < 3 }, sortBy: [SortDescriptor(\.age)])
        #expect(ids(try context.fetch(byAgeOnly)) == [50, 100, 1, 51, 2, 52])
        let byScore = FetchDescriptor<Person>(
            predicate: #Predicate { $0.age == 7 }, sortBy: [SortDescriptor(\.score, order: .reverse)])
        #expect(ids(try context.fetch(byScore)) == [57, 7])
    }

    @Test func storagePredicatesAgreeWithSwiftClosures() throws {
        let context = try populated(300)
        // Strings that only Unicode-aware comparison gets right.
        try context.insert(Person.self) {
            $0.id = 1001; $0.name = "Caf\u{E9}"; $0.city = "\u{212A}iel"
        }  // Kelvin sign
        try context.insert(Person.self) {
            $0.id = 1002; $0.name = "Cafe\u{301}"; $0.city = "Kiel"
        }
        let cases: [(Predicate<Person>, (Person) -> Bool)] = [
            (#Predicate { $0.age > 30 }, { $0.age > 30 }),
            (#Predicate { 30 >= $0.age }, { 30 >= $0.age }),
            (#Predicate { $0.age != 7 && $0.score < 20.5 }, { $0.age != 7 && $0.score < 20.5 }),
            (
                #Predicate { $0.age == 3 || $0.age == 4 || !($0.id > 10) },
                { $0.age == 3 || $0.age == 4 || !($0.id > 10) }
            ),
            (#Predicate { $0.city == "City 3" }, { $0.city == "City 3" }),
            (#Predicate { $0.city != "City 3" }, { $0.city != "City 3" }),
            (#Predicate { $0.city == nil }, { $0.city == nil }),
            (#Predicate { $0.city != nil && $0.age < 10 }, { $0.city != nil && $0.age < 10 }),
            (#Predicate { $0.name == "Caf\u{E9}" }, { $0.name == "Caf\u{E9}" }),
            (#Predicate { $0.city == "Kiel" }, { $0.city == "Kiel" }),
            (#Predicate { $0.name < "Person 2" }, { $0.name < "Person 2" }),
            (#Predicate { $0.name >= "Caf" && $0.name <= "Cafz" }, { $0.name >= "Caf" && $0.name <= "Cafz" }),
            (#Predicate { $0.email > "p5" }, { $0.email > "p5" }),
            (#Predicate { _ in true }, { _ in true }),
            (#Predicate { $0.age * 2 > 40 && $0.id < 100 }, { $0.age * 2 > 40 && $0.id < 100 }),
            (#Predicate { $0.name.contains("1") }, { $0.name.contains("1") }),
        ]
        for (i, (predicate, closure)) in cases.enumerated() {
            for pending in [true, false] {
                var d = FetchDescriptor<Person>(predicate: predicate)
                d.includePendingChanges = pending
                let expected = try context.fetch(Person.self, where: closure)
                    .filter { pending || !$0.isInserted }
                #expect(ids(try context.fetch(d)) == ids(expected), "case \(i), pending \(pending)")
                #expect(try context.fetchCount(d) == expected.count, "case \(i), pending \(pending)")
            }
        }
    }

    @Test func everyNumericAttributeTypeIsComparedLikeSwift() throws {
        let context = try makeContext()
        for i in 0..<40 {
            try context.insert(Everything.self) { e in
                e.flag = i % 3 == 0
                e.i8 = Int8(i - 20)
                e.i16 = Int16(i * 100 - 2000)
                e.i32 = Int32(i) * -3
                e.i64 = Int64(i) << 40
                e.int = i - 7
                e.u8 = UInt8(200 + i)
                e.u16 = UInt16(i * 1000)
                e.u32 = UInt32(i) * 100_000_000
                e.u64 = UInt64(i) << 60
                e.uint = UInt(i)
                e.double = Double(i) - 19.5
                e.float = Float(i) / 8
                e.date = Date(timeIntervalSinceReferenceDate: Double(i) * 1e6)
                e.text = String(repeating: "x", count: i)
                e.maybeInt = i % 4 == 0 ? nil : i
                e.maybeText = i % 3 == 0 ? nil : "t\(i)"
            }
        }
        let cutoff = Date(timeIntervalSinceReferenceDate: 20e6)
        let big: Int64 = 1 << 44
        let huge: UInt64 = 1 << 63
        let cases: [(Predicate<Everything>, (Everything) -> Bool)] = [
            (#Predicate { $0.flag }, { $0.flag }),
            (#Predicate { !$0.flag }, { !$0.flag }),
            (#Predicate { $0.flag == false }, { $0.flag == false }),
            (#Predicate { $0.i8 < -3 }, { $0.i8 < -3 }),
            (#Predicate { $0.i16 >= 0 }, { $0.i16 >= 0 }),
            (#Predicate { $0.i32 > -30 }, { $0.i32 > -30 }),
            (#Predicate { $0.i64 > big }, { $0.i64 > big }),
            (#Predicate { $0.int <= 0 }, { $0.int <= 0 }),
            (#Predicate { $0.u8 > 220 }, { $0.u8 > 220 }),
            (#Predicate { $0.u16 < 5000 }, { $0.u16 < 5000 }),
            (#Predicate { $0.u32 >= 3_000_000_000 }, { $0.u32 >= 3_000_000_000 }),
            (#Predicate { $0.u64 > huge }, { $0.u64 > huge }),
            (#Predicate { $0.uint == 3 }, { $0.uint == 3 }),
            (#Predicate { $0.double > -0.5 }, { $0.double > -0.5 }),
            (#Predicate { $0.float <= 2.125 }, { $0.float <= 2.125 }),
            (#Predicate { $0.date < cutoff }, { $0.date < cutoff }),
            (#Predicate { $0.text > "xxxx" }, { $0.text > "xxxx" }),
            (#Predicate { $0.maybeInt == 5 }, { $0.maybeInt == 5 }),
            (#Predicate { $0.maybeInt != 5 }, { $0.maybeInt != 5 }),
            (#Predicate { $0.maybeInt == nil }, { $0.maybeInt == nil }),
            (
                #Predicate { $0.maybeText == "t4" || $0.maybeText == nil },
                { $0.maybeText == "t4" || $0.maybeText == nil }
            ),
        ]
        for (i, (predicate, closure)) in cases.enumerated() {
            let expected = try context.fetch(Everything.self, where: closure).map(\.i32)
            #expect(try context.fetch(FetchDescriptor(predicate: predicate)).map(\.i32) == expected, "case \(i)")
        }
        let sorted = try context.fetch(FetchDescriptor<Everything>(sortBy: [SortDescriptor(\.double, order: .reverse)]))
        #expect(sorted.map(\.double) == sorted.map(\.double).sorted(by: >))
        let byDate = try context.fetch(FetchDescriptor<Everything>(sortBy: [SortDescriptor(\.date)]))
        #expect(byDate.map(\.date) == byDate.map(\.date).sorted())
    }

    @Test func computedPropertiesAreEvaluatedByFoundation() throws {
        let context = ModelContext(schema: try Schema(Gauge.self))
        for i in 0..<20 {
            try context.insert(Gauge.self) {
                $0.reading = i; $0.label = "g\(i)"; $0.limit = i % 2 == 0 ? i : nil
            }
        }
        let doubled = try context.fetch(FetchDescriptor<Gauge>(predicate: #Predicate { $0.doubled > 30 }))
        #expect(doubled.map(\.reading) == [16, 17, 18, 19])
        let alias = try context.fetch(
            FetchDescriptor<Gauge>(
                predicate: #Predicate { $0.alias < 2 }, sortBy: [SortDescriptor(\.doubled, order: .reverse)]))
        #expect(alias.map(\.reading) == [1, 0])
        let limited = try context.fetch(
            FetchDescriptor<Gauge>(predicate: #Predicate { $0.limit != nil && $0.reading > 15 }))
        #expect(limited.map(\.reading) == [16, 18])
    }

    @Test func fetchedObjectsAreTheContextsInstances() throws {
        let context = try populated(5)
        let a = try context.fetch(FetchDescriptor<Person>(predicate: #Predicate { $0.id == 2 }))
        let b = try context.fetch(Person.self) { $0.id == 2 }
        let id = try #require(a.first?.objectID)
        #expect(a.first === b.first)
        #expect(context.object(with: id) === a.first)
    }

    @Test func fetchingAnEntityOutsideTheSchemaThrows() throws {
        let context = ModelContext(schema: try Schema(Gauge.self))
        #expect(throws: ObjectGraphError.self) { try context.fetch(FetchDescriptor<Person>()) }
        #expect(throws: ObjectGraphError.self) { try context.count(Person.self) { _ in true } }
    }
}
