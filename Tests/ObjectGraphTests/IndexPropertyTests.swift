import Foundation
import PropertyBased
import Testing

@testable import ObjectGraph

/// Random operations on a store whose entity has secondary indexes, each followed by random
/// fetches: every fetch through the indexes must return what the same fetch returns by scanning
/// (the same objects in the same order, and the same count), in both views. The failing input
/// and its seed are reported by `propertyCheck`.
@Suite("Property: fetches through secondary indexes equal scans")
struct IndexPropertyTests {
    @Test func randomOperationsAndFetchesGiveTheScansAnswer() async {
        await propertyCheck(count: max(20, propertyRuns / 3), input: Gen.int(in: 0...1_000_000_000).array(of: 1...50)) {
            codes in
            do {
                try run(codes)
            } catch {
                Issue.record("unexpected error: \(error)")
            }
        }
    }

    static let strings = [
        "", "a", "b", "a section name longer than sixteen bytes", "a section name longer than sixteen bytez",
        "caf\u{E9}", "cafe\u{301}", "cafe", "cafz", "Z", "\u{E4}", "a\u{308}", "libs", "net", "web", "x y",
    ]
    static let prices: [Double] = [-100, -2.5, -0.0, 0, 1, 1.5, 3, 100, .infinity, -.infinity]
    static let ratings: [Float?] = [nil, -1, 0, 0.5, 2]
    static let sizes: [UInt32] = [0, 1, 7, 4_000_000_000]
    static let levels: [Int8?] = [nil, -128, -1, 0, 5, 127]

    /// A deterministic source of choices from one code.
    struct Dice {
        var state: UInt64
        init(_ code: Int, _ salt: Int) { state = UInt64(code) &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(salt) }
        mutating func next(_ n: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(n))
        }
        mutating func pick<T>(_ values: [T]) -> T { values[next(values.count)] }
        mutating func string() -> String { pick(IndexPropertyTests.strings) }
        mutating func maintainer() -> String? { next(4) == 0 ? nil : string() }
    }

    private func fill(_ l: Listing, _ d: inout Dice) {
        l.section = d.string()
        l.maintainer = d.maintainer()
        l.version = d.next(21)
        l.price = d.pick(Self.prices)
        l.released = Date(timeIntervalSinceReferenceDate: Double(d.next(8) * 1000))
        l.stable = d.next(2) == 0
        l.rating = d.pick(Self.ratings)
        l.size = d.pick(Self.sizes)
        l.level = d.pick(Self.levels)
        l.note = d.next(3) == 0 ? "" : d.string()
        l.downloads = d.next(100)
    }

    private func change(_ l: Listing, _ d: inout Dice) {
        switch d.next(11) {
        case 0: l.section = d.string()
        case 1: l.maintainer = d.maintainer()
        case 2: l.version = d.next(21)
        case 3: l.price = d.pick(Self.prices)
        case 4: l.released = Date(timeIntervalSinceReferenceDate: Double(d.next(8) * 1000))
        case 5: l.stable.toggle()
        case 6: l.rating = d.pick(Self.ratings)
        case 7: l.size = d.pick(Self.sizes)
        case 8: l.level = d.pick(Self.levels)
        case 9: l.note = d.string()
        default: l.downloads += 1
        }
    }

    private func all(_ context: ModelContext) throws -> [Listing] { try context.fetch(Listing.self) { _ in true } }

    private func run(_ codes: [Int]) throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let schema = try Schema(Listing.self)
        let options = StoreOptions(durability: .none)
        var store = try ObjectStore.open(at: dir, schema: schema, options: options)
        defer { try? store.close() }
        struct Abandon: Error {}

        func saveOrRollback(_ context: ModelContext) {
            do { try context.save() } catch { context.rollback() }
        }

        for (step, code) in codes.enumerated() {
            var d = Dice(code, step)
            let context = store.context
            let objects = try all(context)
            func some() -> Listing? { objects.isEmpty ? nil : objects[d.next(objects.count)] }
            let op = d.next(14)
            switch op {
            case 0, 1, 2:
                for _ in 0...d.next(4) { fill(try context.insert(Listing.self), &d) }
            case 3, 4:
                for _ in 0...d.next(3) { if let l = some() { change(l, &d) } }
            case 5:
                if let l = some() { context.delete(l) }
            case 6:
                saveOrRollback(context)
            case 7:
                context.rollback()
            case 8:
                try? context.transaction { tx in
                    for _ in 0...d.next(12) { if let l = some() { change(l, &d) } }
                    fill(try tx.context.insert(Listing.self), &d)
                    _ = try? tx.context.transaction { inner in
                        for _ in 0...d.next(20) { if let l = some(), !l.isDeleted { change(l, &d) } }
                        if let l = some(), !l.isDeleted { inner.context.delete(l) }
                        fill(try inner.context.insert(Listing.self), &d)
                        try compare(inner.context, &d, "step \(step) inside the inner transaction")
                        throw Abandon()
                    }
                    try compare(tx.context, &d, "step \(step) after the inner rollback")
                    for l in try all(tx.context) where l.version > 1000 { l.version = 0 }
                }
            case 9:
                saveOrRollback(context)
                try store.close()
                store = try ObjectStore.open(at: dir, schema: schema, options: options)
            case 10:
                saveOrRollback(context)
                try store.compact()
            case 11:
                for _ in 0..<(40 + d.next(40)) { fill(try context.insert(Listing.self), &d) }
            case 12:
                if let l = some() {
                    l.version = 5000
                    #expect(throws: ValidationError.self) { try context.save() }
                }
            default:
                for l in objects.prefix(10 + d.next(30)) { change(l, &d) }
            }
            try compare(store.context, &d, "step \(step) (op \(op))")
        }
    }

    /// Runs a few random fetches through the indexes and by scanning, and compares them.
    private func compare(_ context: ModelContext, _ d: inout Dice, _ what: String) throws {
        for _ in 0..<3 {
            var descriptor = FetchDescriptor<Listing>(predicate: predicate(&d), sortBy: sort(&d))
            if d.next(2) == 0 { descriptor.fetchLimit = d.next(12) }
            if d.next(3) == 0 { descriptor.fetchOffset = d.next(6) }
            descriptor.includePendingChanges = d.next(3) != 0
            var scan = descriptor
            scan.allowsIndexes = false
            var foundation = descriptor
            foundation.allowsStorageEvaluation = false
            let indexed = try context.fetch(descriptor).map(ObjectIdentifier.init)
            let scanned = try context.fetch(scan).map(ObjectIdentifier.init)
            let evaluated = try context.fetch(foundation).map(ObjectIdentifier.init)
            let description =
                "\(what): \(String(describing: descriptor.predicate)) sorted by \(descriptor.sortBy.map { "\($0.order)" }) "
                + "limit \(String(describing: descriptor.fetchLimit)) offset \(String(describing: descriptor.fetchOffset)) "
                + "pending \(descriptor.includePendingChanges)"
            #expect(indexed == scanned, "\(description): index differs from scan")
            #expect(scanned == evaluated, "\(description): scan differs from Foundation's evaluation")
            #expect(try context.fetchCount(descriptor) == scanned.count, "\(description): fetchCount")
        }
    }

    private func sort(_ d: inout Dice) -> [SortDescriptor<Listing>] {
        let order: SortOrder = d.next(2) == 0 ? .forward : .reverse
        switch d.next(8) {
        case 0: return [SortDescriptor(\.price, order: order)]
        case 1: return [SortDescriptor(\.released, order: order), SortDescriptor(\.downloads)]
        case 2: return [SortDescriptor(\.size, order: order)]
        case 3: return [SortDescriptor(\.version, order: order)]
        case 4: return [SortDescriptor(\.price, order: order), SortDescriptor(\.version, order: .reverse)]
        default: return []
        }
    }

    private func predicate(_ d: inout Dice) -> Predicate<Listing>? {
        let s = d.string(), t = d.string(), m = d.maintainer(), n = d.string()
        let v = d.next(21), w = d.next(21), p = d.pick(Self.prices), q = d.pick(Self.prices)
        let date = Date(timeIntervalSinceReferenceDate: Double(d.next(8) * 1000)), b = d.next(2) == 0
        let r = d.pick(Self.ratings), u = d.pick(Self.sizes), l = d.pick(Self.levels)
        switch d.next(23) {
        case 0: return #Predicate { $0.section == s }
        case 1: return #Predicate { $0.section >= s && $0.section < t }
        case 2: return #Predicate { $0.section > s }
        case 3: return #Predicate { $0.maintainer == m }
        case 4: return #Predicate { $0.maintainer == m && $0.version == v }
        case 5: return #Predicate { $0.maintainer == m && $0.version > v }
        case 6: return #Predicate { $0.maintainer == m && $0.version >= v && $0.version <= w }
        case 7: return #Predicate { $0.price < p }
        case 8: return #Predicate { $0.price >= p && $0.price <= q }
        case 9: return #Predicate { $0.released > date }
        case 10: return #Predicate { $0.stable == b }
        case 11: return #Predicate { $0.rating == r }
        case 12: return #Predicate { $0.size <= u }
        case 13: return #Predicate { $0.level == l }
        case 14: return #Predicate { $0.section == s && $0.note == n }
        case 15: return #Predicate { $0.section == s && $0.price > p }
        case 16: return #Predicate { $0.maintainer == m && $0.version > v && $0.stable == b }
        case 17: return #Predicate { $0.section == s && $0.note.isEmpty }
        case 18: return #Predicate { $0.version < v }
        case 19: return #Predicate { $0.section < s || $0.price > p }
        case 20: return #Predicate { $0.stable }
        case 21: return #Predicate { 5 < $0.version && $0.maintainer == m }
        default: return nil
        }
    }
}
