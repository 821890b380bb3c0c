import Foundation
import ObjectGraph
import ObjectGraphTestSupport
import PropertyBased
import Testing

@Suite("Property: random sync payloads, errors included, against a reference dictionary")
struct SyncPropertyTests {
    @Test func randomSyncSequencesMatchTheReference() async {
        await propertyCheck(count: propertyRuns, input: Gen.int(in: 0...1_000_000).array(of: 1...10)) { codes in
            do { try run(codes) } catch { Issue.record("unexpected error: \(error)") }
        }
    }

    private func run(_ codes: [Int]) throws {
        let context = ModelContext(
            schema: try Schema(
                SyncFolder.self, SyncFile.self, SyncNote.self, SyncGuard.self, SyncShelf.self, SyncBook.self))
        var mapping = EntityMapping(SyncFolder.self)
        try mapping.map("id", "version")
        var stored: [Int64: Int] = [:]  // id → version
        for (step, code) in codes.enumerated() {
            var rng = SeededGenerator(seed: UInt64(code))
            var objects: [String] = []
            var listed: [Int64: Int] = [:]
            var broken = false
            for _ in 0..<Int(rng.next() % 8) {
                let id = Int64(rng.next() % 10)
                if rng.next() % 12 == 0 {
                    objects.append(#"{"id": \#(id), "version": "x"}"#)
                    broken = true
                } else {
                    let v = Int(rng.next() % 5)
                    objects.append(#"{"id": \#(id), "version": \#(v)}"#)
                    listed[id] = v
                }
            }
            let allowEmpty = rng.next() % 3 == 0
            let limit = rng.next() % 3 == 0 ? Int(rng.next() % 4) : nil
            let document = Data(("[" + objects.joined(separator: ", ") + "]").utf8)

            // The reference.
            let wouldSweep = stored.keys.filter { listed[$0] == nil }.count
            var expected = stored
            var refused = broken
            if !refused && listed.isEmpty && !stored.isEmpty && !allowEmpty { refused = true }
            if !refused, let limit, wouldSweep > limit { refused = true }
            // No limit given: the default one, half of the saved objects, except for an empty
            // sync the caller allowed.
            if !refused, limit == nil, !(listed.isEmpty && allowEmpty), wouldSweep > stored.count / 2 { refused = true }
            if !refused { expected = listed }

            do {
                try context.sync([SyncFolder.self], sweepLimit: limit.map { .count($0) }) { sync in
                    try sync.map(document, with: mapping)
                    if allowEmpty { sync.allowEmptySync(of: SyncFolder.self) }
                }
                #expect(
                    !refused, "step \(step): the sync of \(objects) went through although it should have been refused")
            } catch is MappingError {
                #expect(broken, "step \(step): a mapping error without a broken value")
            } catch let e as SyncError {
                #expect(refused && !broken, "step \(step): \(e)")
            }
            stored = expected
            var actual: [Int64: Int] = [:]
            for f in try context.objects(of: SyncFolder.self) { actual[f.id] = f.version }
            #expect(
                actual == stored,
                "step \(step): after \(objects) (allowEmpty \(allowEmpty), limit \(limit.map(String.init) ?? "none"))")
            #expect(!context.hasChanges, "step \(step): a sync left pending changes")
        }
    }
}
