import Foundation
import ObjectGraph
import ObjectGraphTestSupport
import PropertyBased
import Testing

@Suite("Property: random imports in random transactions against a reference dictionary")
struct ImportPropertyTests {
    @Test func randomBatchesWithDuplicateMissingAndExistingIDsMatchTheReference() async {
        await propertyCheck(count: propertyRuns, input: Gen.int(in: 0...1_000_000).array(of: 1...25)) { codes in
            do { try run(codes) } catch { Issue.record("unexpected error: \(error)") }
        }
    }

    private func run(_ codes: [Int]) throws {
        let context = ModelContext(schema: try Schema(ImportedEntity.self))
        var committed: [Int64: Int] = [:]  // id → testNumber
        for (step, code) in codes.enumerated() {
            // A batch of 0–7 sources over a small ID space (so duplicates and existing IDs are
            // common), some without an ID; maybe one source throws on insert or update.
            var rng = SeededGenerator(seed: UInt64(code))
            let size = Int(rng.next() % 8)
            var batch: [ImportSourceRecord] = []
            for i in 0..<size {
                let idCode = rng.next() % 12
                let id: Int64? = idCode == 11 ? nil : Int64(idCode)
                batch.append(ImportSourceRecord(id: id, number: step * 100 + i, text: "s\(step)-\(i)"))
            }
            let throwAt = rng.next() % 4 == 0 && !batch.isEmpty ? Int(rng.next() % UInt64(batch.count)) : nil
            if let throwAt { batch[throwAt].flags = ["throw_on_insert", "throw_on_update"] }
            let cancel = rng.next() % 5 == 0

            // The reference: apply CoreStore's rules to a dictionary.
            var expected = committed
            var failed = false
            var lastIndexOfID: [Int64: Int] = [:]
            for (i, s) in batch.enumerated() { if let id = s.id { lastIndexOfID[id] = i } }
            for (id, i) in lastIndexOfID where batch[i].flags.contains("throw_on_insert") { _ = id; failed = true }
            if !failed { for (id, i) in lastIndexOfID { expected[id] = batch[i].number } }
            let commits = !failed && !cancel

            do {
                try context.transaction { tx in
                    _ = try tx.context.importUniqueObjects(ImportedEntity.self, sourceArray: batch)
                    if cancel { try tx.cancel() }
                }
            } catch is ImportError {
                #expect(failed, "step \(step): import threw although no winning source throws")
            } catch let error as ObjectGraphError where error.code == .cancelled {
                #expect(cancel && !failed)
            }
            if commits { committed = expected }
            var actual: [Int64: Int] = [:]
            for e in try context.objects(of: ImportedEntity.self) { actual[e.testEntityID] = e.testNumber }
            #expect(actual == committed, "step \(step) (commits: \(commits)): context differs from the reference")
            #expect(!context.hasChanges, "step \(step): a transaction left pending changes")
        }
    }
}
