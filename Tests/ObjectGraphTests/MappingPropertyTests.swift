import Foundation
import ObjectGraph
import ObjectGraphTestSupport
import PropertyBased
import Testing

@Suite("Property: random JSON payloads mapped against a reference dictionary")
struct MappingPropertyTests {
    /// What the reference keeps per article ID.
    struct Row: Equatable, CustomStringConvertible {
        var title = ""
        var body: String?
        var words = 0
        var description: String { "(\(title), \(body ?? "nil"), \(words))" }
    }

    @Test func randomPayloadsWithDuplicateIDsNullsMissingKeysAndBadValuesMatchTheReference() async {
        await propertyCheck(count: propertyRuns, input: Gen.int(in: 0...1_000_000).array(of: 1...12)) { codes in
            do { try run(codes) } catch { Issue.record("unexpected error: \(error)") }
        }
    }

    private func run(_ codes: [Int]) throws {
        let context = ModelContext(schema: try Schema(Article.self, Writer.self, ApprovedComment.self))
        var mapping = EntityMapping(Article.self)
        try mapping.map("articleID", "title", "body")
        try mapping.map("words", to: "wordCount")
        var committed: [Int64: Row] = [:]
        for (step, code) in codes.enumerated() {
            var rng = SeededGenerator(seed: UInt64(code))
            var expected = committed
            var fails = false
            var objects: [String] = []
            for _ in 0..<Int(rng.next() % 7) {
                let id = Int64(rng.next() % 6)
                var fields = [rng.next() % 2 == 0 ? "\"articleID\": \(id)" : "\"articleID\": \"\(id)\""]
                var row = expected[id] ?? Row()
                switch rng.next() % 5 {
                case 0: break  // missing: kept
                case 1: fields.append(#""title": null"#); fails = true  // required
                default:
                    let t = "t\(rng.next() % 4)"
                    fields.append("\"title\": \"\(t)\"")
                    row.title = t
                }
                switch rng.next() % 4 {
                case 0: break
                case 1: fields.append(#""body": null"#); row.body = nil
                default:
                    let b = "b\(rng.next() % 4)"
                    fields.append("\"body\": \"\(b)\"")
                    row.body = b
                }
                switch rng.next() % 6 {
                case 0: break
                case 1: fields.append(#""words": "many""#); fails = true  // untransformable
                case 2:
                    let w = Int(rng.next() % 100)
                    fields.append("\"words\": \"\(w)\"")
                    row.words = w
                default:
                    let w = Int(rng.next() % 100)
                    fields.append("\"words\": \(w)")
                    row.words = w
                }
                if rng.next() % 8 == 0 { fields.append(#""unknown": [1, {"x": null}]"#) }
                fields.shuffle(using: &rng)
                objects.append("{" + fields.joined(separator: ", ") + "}")
                expected[id] = row
            }
            let document = "[" + objects.joined(separator: ", ") + "]"
            do {
                try context.map(Data(document.utf8), with: mapping)
                #expect(!fails, "step \(step): \(document) was mapped although it holds an error")
                try context.save()
                committed = expected
            } catch let error as MappingError {
                #expect(fails, "step \(step): \(document) failed: \(error)")
                #expect(!context.hasChanges, "step \(step): a failed run left changes")
            }
            var actual: [Int64: Row] = [:]
            for a in try context.objects(of: Article.self) {
                #expect(actual[a.articleID] == nil, "step \(step): two objects with ID \(a.articleID)")
                actual[a.articleID] = Row(title: a.title, body: a.body, words: a.wordCount)
            }
            #expect(actual == committed, "step \(step): after \(document)")
        }
    }
}
