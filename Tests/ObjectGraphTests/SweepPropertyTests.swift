import Foundation
import PropertyBased
import Testing

@testable import ObjectGraph

/// Random inserts, sets, deletes, imports, saves, rollbacks and resets of an entity whose
/// pending instances are let go (``PlainRecord``: no state of its own, no hook), with a sweep
/// every couple of instances: the values are the reference model's after every step, and an
/// instance the test holds stays the object's instance for as long as the object is in the
/// context (Docs/Semantics.md, rule 1).
@Suite("Property: sweeps of pending instances against a reference model")
struct SweepPropertyTests {
    @Test func randomOperationsWithASweepEveryFewInstancesMatchTheReference() async {
        await propertyCheck(count: propertyRuns, input: Gen.int(in: 0...1_000_000).array(of: 1...60)) { codes in
            do { try run(codes) } catch { Issue.record("unexpected error: \(error)") }
        }
    }

    private func run(_ codes: [Int]) throws {
        let context = ModelContext(schema: try Schema(PlainRecord.self))
        let table = try context.table(for: PlainRecord.self)
        table.sweepFloor = 2
        table.sweepThreshold = 2
        var committed: [Int: String] = [:]  // key → label
        var current: [Int: String] = [:]
        var held: [Int: PlainRecord] = [:]
        // Held objects deleted since the save: a rollback gives them back their keys.
        var heldDeleted: [Int: PlainRecord] = [:]
        var nextKey = 0

        func object(_ key: Int) throws -> PlainRecord? {
            try context.object(PlainRecord.self, where: \.key, equals: key)
        }
        func someKey(_ arg: Int) -> Int? {
            let keys = current.keys.sorted()
            return keys.isEmpty ? nil : keys[arg % keys.count]
        }

        for (step, code) in codes.enumerated() {
            let op = code % 10
            let arg = code / 10
            switch op {
            case 0, 1:
                let o = try context.insert(PlainRecord.self)
                o.key = nextKey
                o.label = "L\(arg % 7)"
                current[nextKey] = o.label
                if arg % 3 == 0 { held[nextKey] = o }
                nextKey += 1
            case 2:
                if let key = someKey(arg), let o = try object(key) {
                    o.label = "S\(step)"
                    current[key] = o.label
                }
            case 3:
                if let key = someKey(arg), let o = try object(key) {
                    context.delete(o)
                    current[key] = nil
                    if let h = held.removeValue(forKey: key) { heldDeleted[key] = h }
                }
            case 4:
                try context.save()
                committed = current
                heldDeleted = [:]  // deleted objects are detached
            case 5:
                context.rollback()
                current = committed
                held = held.filter { committed[$0.key] != nil }  // new objects are detached
                for (key, o) in heldDeleted where committed[key] != nil { held[key] = o }
                heldDeleted = [:]
            case 6:
                // Keys old and new, some twice; the result is let go at once.
                let keys = (0..<(arg % 6)).map { (arg / 7 + $0 * 3) % (nextKey + 3) }
                _ = try context.importUniqueObjects(PlainRecord.self, sourceArray: keys)
                for key in keys { current[key] = "imported \(key)" }
                nextKey = max(nextKey, (keys.max() ?? -1) + 1)
            case 7:
                let all = try context.objects(of: PlainRecord.self)
                #expect(Dictionary(all.map { ($0.key, $0.label) }, uniquingKeysWith: { a, _ in a }) == current)
            case 8:
                context.reset()
                current = committed
                held = [:]
                heldDeleted = [:]
            default:
                if let key = someKey(arg) { #expect(try object(key)?.label == current[key]) }
            }
            #expect(try context.count(of: PlainRecord.self) == current.count, "step \(step), op \(op)")
            for (key, o) in held {
                #expect(try object(key) === o, "step \(step): the held instance of \(key) is still its instance")
                #expect(o.label == current[key], "step \(step): \(key)")
            }
        }
        for (key, label) in current { #expect(try object(key)?.label == label) }
        try context.save()
        #expect(try context.count(of: PlainRecord.self) == current.count)
    }
}
