import Foundation
import ObjectGraph
import PropertyBased
import Testing

/// How many random operation sequences each property test runs: short in `make test`,
/// long in `make fuzz` (OBJECTGRAPH_PROPERTY_RUNS).
let propertyRuns = ProcessInfo.processInfo.environment["OBJECTGRAPH_PROPERTY_RUNS"].flatMap(Int.init) ?? 150

/// The plain reference model: what each object's values are, committed and current.
private struct Ref: Equatable {
    var name: String
    var city: String?
    var score: Double
}

@Suite("Property: random operation sequences against a reference model")
struct GraphPropertyTests {
    @Test func randomInsertSetDeleteSaveRollbackResetMatchesTheReferenceModel() async {
        await propertyCheck(count: propertyRuns, input: Gen.int(in: 0...1_000_000).array(of: 1...80)) { codes in
            do {
                try run(codes)
            } catch {
                Issue.record("unexpected error: \(error)")
            }
        }
    }

    private func run(_ codes: [Int]) throws {
        let backend = RecordingBackend()
        let context = ModelContext(schema: try Schema(Person.self), backend: backend)
        var committed: [UInt64: Ref] = [:]
        var current: [UInt64: Ref] = [:]
        var nextSerial: UInt64 = 1

        func live(_ arg: Int) -> (UInt64, Person)? {
            let keys = current.keys.sorted()
            guard !keys.isEmpty else { return nil }
            let s = keys[arg % keys.count]
            guard let p = context.object(with: ObjectID(entityName: "Person", serial: s), as: Person.self) else {
                Issue.record("object Person/\(s) is missing from the context")
                return nil
            }
            return (s, p)
        }

        for (step, code) in codes.enumerated() {
            let op = code % 9
            let arg = code / 9
            switch op {
            case 0, 1:
                let p = try context.insert(Person.self)
                p.id = Int64(arg); p.name = "P\(arg % 13)"; p.email = "e"
                #expect(p.objectID?.serial == nextSerial)
                current[nextSerial] = Ref(name: p.name, city: nil, score: 0)
                nextSerial += 1
            case 2:
                if let (s, p) = live(arg) {
                    p.name = "P\(arg % 13)"
                    current[s]?.name = p.name
                }
            case 3:
                if let (s, p) = live(arg) {
                    let city: String? = arg % 4 == 0 ? nil : "City with a long name \(arg % 5)"
                    p.city = city
                    current[s]?.city = city
                }
            case 4:
                if let (s, p) = live(arg) {
                    p.score = Double(arg % 3)
                    current[s]?.score = p.score
                }
            case 5:
                if let (s, p) = live(arg) {
                    context.delete(p)
                    current[s] = nil
                }
            case 6:
                try context.save()
                committed = current
            case 7:
                context.rollback()
                current = committed
            default:
                context.reset()
                current = committed
            }
            check(context, committed: committed, current: current, step: step, op: op)
        }

        // Replaying what was saved gives the committed state.
        let replayed = ModelContext(schema: try Schema(Person.self))
        for c in backend.saved { try replayed.apply(c) }
        var replayedState: [UInt64: Ref] = [:]
        for p in try replayed.objects(of: Person.self) {
            replayedState[p.objectID?.serial ?? 0] = Ref(name: p.name, city: p.city, score: p.score)
        }
        #expect(replayedState == committed)
    }

    private func check(_ context: ModelContext, committed: [UInt64: Ref], current: [UInt64: Ref], step: Int, op: Int) {
        let objects = (try? context.objects(of: Person.self)) ?? []
        var actual: [UInt64: Ref] = [:]
        for p in objects { actual[p.objectID?.serial ?? 0] = Ref(name: p.name, city: p.city, score: p.score) }
        #expect(actual == current, "step \(step) (op \(op)): context differs from the reference model")
        #expect(context.hasChanges == (current != committed), "step \(step): hasChanges")
        let inserted = Set(context.insertedObjects.compactMap { $0.objectID?.serial })
        let deleted = Set(context.deletedObjects.compactMap { $0.objectID?.serial })
        let updated = Set(context.updatedObjects.compactMap { $0.objectID?.serial })
        #expect(inserted == Set(current.keys).subtracting(committed.keys), "step \(step): insertedObjects")
        #expect(deleted == Set(committed.keys).subtracting(current.keys), "step \(step): deletedObjects")
        let changed = Set(current.keys.filter { committed[$0] != nil && committed[$0] != current[$0] })
        #expect(updated == changed, "step \(step): updatedObjects")
        #expect((try? context.count(of: Person.self)) == current.count, "step \(step): count")
    }
}
