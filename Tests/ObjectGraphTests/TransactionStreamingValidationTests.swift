import Foundation
import ObjectGraph
import ObjectGraphTestSupport
import Testing

@testable import GraphJournal

/// `StoredSchema.validateTransaction(_: JournalPayload, into:)` checks a payload lent piece by
/// piece (what `graph-journal verify` does with a chunked payload): whatever the pieces' sizes,
/// it must return the outline or throw the error that validating the whole buffer does.
@Suite("Streaming validation agrees with whole-buffer validation")
struct TransactionStreamingValidationTests {
    /// Piece sizes from one byte (every read crosses a boundary) to larger than the payloads.
    static let pieceSizes = [1, 2, 3, 5, 9, 10, 11, 64, 1000, 1 << 20]

    /// The outline's contents, or the error's message.
    static func wholeResult(_ schema: StoredSchema, _ payload: [UInt8]) -> Result<[[UInt64]], StoreError> {
        var outline = TransactionOutline()
        return payload.withUnsafeBytes { buffer in
            do throws(StoreError) { try schema.validateTransaction(buffer, into: &outline) } catch {
                return .failure(error)
            }
            return .success(Self.contents(outline))
        }
    }

    /// `payload` validated in pieces of `size` bytes; nil when validation said the pieces
    /// ended early.
    static func streamedResult(
        _ schema: StoredSchema, _ payload: [UInt8], pieceSize size: Int,
        outline: inout TransactionOutline
    ) -> Result<[[UInt64]], StoreError>? {
        payload.withUnsafeBytes { buffer in
            let pieces = stride(from: 0, to: buffer.count, by: size).map {
                UnsafeRawBufferPointer(rebasing: buffer[$0..<min($0 + size, buffer.count)])
            }
            do throws(StoreError) {
                guard try schema.validateTransaction(JournalPayload(pieces: pieces), into: &outline) else { return nil }
            } catch {
                return .failure(error)
            }
            return .success(Self.contents(outline))
        }
    }

    /// Each block's entity, then its inserted, updated and deleted serials.
    static func contents(_ outline: TransactionOutline) -> [[UInt64]] {
        outline.blocks.flatMap { block in
            [
                [UInt64(block.entity)], outline.insertedSerials(of: block), Array(outline.serials[block.updated]),
                Array(outline.serials[block.deleted]),
            ]
        }
    }

    /// Expects every piece size (or those given) to validate `payload` as the whole buffer does.
    static func expectAgreement(
        _ schema: StoredSchema, _ payload: [UInt8], sizes: [Int] = pieceSizes,
        _ what: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let whole = wholeResult(schema, payload)
        var outline = TransactionOutline()  // reused, as verify reuses it
        for (n, size) in sizes.enumerated() {
            // Every other size keeps consecutive inserts as runs, as verify does: the same
            // serials and errors either way.
            outline.keepsInsertedRuns = n % 2 == 1
            let streamed = streamedResult(schema, payload, pieceSize: size, outline: &outline)
            switch (whole, streamed) {
            case (.success(let w), .success(let s)):
                #expect(w == s, "pieces of \(size): \(what())", sourceLocation: sourceLocation)
            case (.failure(let w), .failure(let s)):
                #expect(w.message == s.message, "pieces of \(size): \(what())", sourceLocation: sourceLocation)
            default:
                Issue.record(
                    "pieces of \(size): whole \(whole), streamed \(String(describing: streamed)): \(what())",
                    sourceLocation: sourceLocation)
            }
        }
    }

    /// The sample payloads of the whole-buffer tests, plus a large one: 1,500 objects with
    /// every attribute type, so that the fast paths (several values in one piece) run.
    static func samplePayloads() throws -> [(StoredSchema, [UInt8])] {
        var samples = try TransactionValidationTests.samplePayloads()
        let dir = temporaryStoreDirectory("streaming-validation")
        defer { try? FileManager.default.removeItem(at: dir) }
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        let store = try ObjectStore.open(at: dir, schema: FormatFixtureTests.schema, options: options)
        let c = store.context
        var objects: [Everything] = []
        for i in 0..<1500 {
            let e = try c.insert(Everything.self)
            e.flag = i % 2 == 0; e.i8 = Int8(truncatingIfNeeded: i);
            e.int = Int(truncatingIfNeeded: UInt64(i) &* 0x9E37_79B9_7F4A_7C15)
            e.u64 = UInt64(i) << (i % 64); e.float = Float(i); e.text = String(repeating: "t", count: i % 300)
            e.uuid = UUID(); e.maybeText = i % 3 == 0 ? nil : "m\(i)"
            e.url = i % 4 == 0 ? nil : URL(string: "https://example.com/\(i)"); e.maybeInt = i % 5 == 0 ? nil : i
            objects.append(e)
        }
        try c.save()
        for (i, e) in objects.enumerated() where i % 7 == 1 { e.text = "now \(i)"; e.maybeText = nil; e.int = i }
        for (i, e) in objects.enumerated() where i % 11 == 2 { c.delete(e) }
        try c.save()
        try store.close()
        samples += try TransactionValidationTests.payloads(in: dir)
        #expect(samples.contains { $0.1.count > 50_000 })
        return samples
    }

    /// Inserted serials kept as runs: a run broken anywhere, serials that are not increasing,
    /// and a run that would pass Int64.max read exactly as the listed form reads them.
    @Test func insertedRunsHoldTheSameSerialsAndErrorsAsTheList() throws {
        let schema = try #require(try TransactionValidationTests.samplePayloads().first?.0)
        let entity = try #require(schema.entities.firstIndex { $0.attributes.isEmpty == false })
        func payload(_ serials: [Int64]) -> [UInt8] {
            // version, one block: entity, next serial, the inserted serials (zig-zag deltas) with
            // every attribute null, no updates, no deletes.
            var bytes: [UInt8] = [1, 1]
            func varint(_ v: UInt64) {
                var v = v; while v >= 0x80 { bytes.append(UInt8(v & 0x7F) | 0x80); v >>= 7 }; bytes.append(UInt8(v))
            }
            varint(UInt64(entity)); varint(1)
            varint(UInt64(serials.count))
            var previous: Int64 = 0
            for s in serials { let d = s &- previous; varint(UInt64(bitPattern: (d << 1) ^ (d >> 63))); previous = s }
            if !serials.isEmpty {
                for _ in schema.entities[entity].attributes {
                    bytes.append(1)
                    bytes += [UInt8](repeating: 0xFF, count: (serials.count + 7) / 8)
                }
            }
            varint(0); varint(0)
            return bytes
        }
        let cases: [[Int64]] = [
            [], [7], Array(1...300), Array(5...200) + [202] + Array(203...260), [3, 2, 1], Array(10...20) + [10],
            [Int64.max - 2, Int64.max - 1, Int64.max], [Int64.max - 1, Int64.max, Int64.max &+ 1], [0, 1],
            Array(1...9) + [-4],
        ]
        for serials in cases {
            Self.expectAgreement(schema, payload(serials), "serials \(serials.prefix(4))… (\(serials.count))")
        }
        var outline = TransactionOutline()
        outline.keepsInsertedRuns = true
        try payload(Array(1...300)).withUnsafeBytes { try schema.validateTransaction($0, into: &outline) }
        #expect(outline.blocks.first?.insertedRun == 1...300)
        #expect(outline.serials.isEmpty)
    }

    @Test func intactPayloadsValidateInAnyPiecesAsWhole() throws {
        for (i, (schema, payload)) in try Self.samplePayloads().enumerated() {
            Self.expectAgreement(schema, payload, "sample \(i)")
            #expect((try? Self.wholeResult(schema, payload).get()) != nil, "sample \(i) is valid")
        }
    }

    @Test func everyTruncationFailsInPiecesAsWhole() throws {
        let samples = try TransactionValidationTests.samplePayloads()
        for (i, (schema, payload)) in samples.enumerated() {
            for length in 0..<payload.count {
                Self.expectAgreement(
                    schema, Array(payload[..<length]), sizes: [1, 3, 10, 64], "sample \(i) cut to \(length) bytes")
            }
        }
    }

    @Test func everySingleByteChangeFailsOrPassesInPiecesAsWhole() throws {
        let samples = try TransactionValidationTests.samplePayloads()
        for (i, (schema, payload)) in samples.enumerated() {
            for position in payload.indices {
                for value: UInt8 in [0x80, 0xFF, payload[position] ^ 0x01] {
                    var damaged = payload
                    damaged[position] = value
                    Self.expectAgreement(
                        schema, damaged, sizes: [1, 13], "sample \(i), byte \(position) set to \(value)")
                }
            }
        }
    }

    /// Random damage to the large payload, where long runs of values are read by the fast
    /// paths, in pieces that end anywhere (the seed is printed to replay a failure).
    @Test func randomDamageToALargePayloadFailsOrPassesInPiecesAsWhole() throws {
        let seed = UInt64.random(in: 0 ... .max)
        print("randomDamageToALargePayloadFailsOrPassesInPiecesAsWhole seed \(seed)")
        var generator = SeededGenerator(seed: seed)
        let (schema, payload) = try #require(try Self.samplePayloads().max { $0.1.count < $1.1.count })
        for round in 0..<50 {
            var damaged = payload
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let position = Int.random(in: 0..<damaged.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: damaged[position] = UInt8.random(in: 0...255, using: &generator)
                case 1: damaged[position] ^= 0x80
                default:
                    damaged.removeSubrange(
                        position..<min(position + Int.random(in: 1...9, using: &generator), damaged.count))
                }
            }
            let sizes = [Int.random(in: 1...20, using: &generator), Int.random(in: 21...5000, using: &generator)]
            Self.expectAgreement(schema, damaged, sizes: sizes, "seed \(seed), round \(round)")
        }
    }

    /// Pieces that end before the payload's length (a chunk that does not decompress) make
    /// validation return false or fail, never report a complete outline.
    @Test func piecesThatEndEarlyNeverValidate() throws {
        let (schema, payload) = try #require(try Self.samplePayloads().max { $0.1.count < $1.1.count })
        var outline = TransactionOutline()
        for cut in stride(from: 0, to: payload.count, by: max(1, payload.count / 500)) {
            let result: Bool? = payload.withUnsafeBytes { buffer in
                let pieces = [
                    UnsafeRawBufferPointer(rebasing: buffer[..<(cut / 2)]),
                    UnsafeRawBufferPointer(rebasing: buffer[(cut / 2)..<cut]),
                ]
                return try? schema.validateTransaction(
                    JournalPayload(pieces: pieces, count: payload.count), into: &outline)
            }
            #expect(result != true, "cut at \(cut)")
        }
    }
}
