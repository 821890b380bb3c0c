import Foundation
import GraphJournal
import ObjectGraph
import ObjectGraphTestSupport
import Testing

/// `StoredSchema.validateTransaction` (what `graph-journal verify` runs instead of decoding) must
/// reject exactly the payloads `decodeTransaction` rejects, with the same message, and list
/// the serials the decoded change set names.
@Suite("Transaction validation agrees with decoding")
struct TransactionValidationTests {
    /// The transaction payloads of the `v1-clean` fixture (every attribute type, nils, updates,
    /// deletes), of a store with nil and non-nil updates of more types, and of its compacted
    /// base record, with their schemas.
    static func samplePayloads() throws -> [(StoredSchema, [UInt8])] {
        var samples: [(StoredSchema, [UInt8])] = []
        func collect(_ dir: URL) throws { samples += try payloads(in: dir) }
        try collect(FormatFixtureTests.fixtures.appendingPathComponent("v1-clean"))

        let dir = temporaryStoreDirectory("validation")
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        let store = try ObjectStore.open(at: dir, schema: FormatFixtureTests.schema, options: options)
        let c = store.context
        var objects: [Everything] = []
        for i in 0..<12 {
            let e = try c.insert(Everything.self)
            e.flag = i % 2 == 0; e.i8 = Int8(i); e.int = -i * 1000; e.u64 = UInt64(i) << 60; e.float = Float(i)
            e.text = String(repeating: "t", count: i * 3); e.uuid = UUID(); e.maybeText = i % 3 == 0 ? nil : "m\(i)"
            e.url = i % 4 == 0 ? nil : URL(string: "https://example.com/\(i)"); e.maybeInt = i % 5 == 0 ? nil : i
            objects.append(e)
        }
        try c.save()
        for (i, e) in objects.enumerated() where i % 3 == 1 {
            e.flag.toggle(); e.uuid = UUID(); e.url = nil; e.maybeText = "now \(i)"; e.double = Double(i) / 3;
            e.date = Date()
        }
        for (i, e) in objects.enumerated() where i % 4 == 2 { c.delete(e) }
        try c.save()
        try collect(dir)  // the two transactions (tools read without the lock)
        try store.compact()
        try store.close()
        try collect(dir)  // the base record that replaced them
        try? FileManager.default.removeItem(at: dir)
        return samples
    }

    /// The transaction and base payloads of the store at `dir`, each with the schema in force.
    static func payloads(in dir: URL) throws -> [(StoredSchema, [UInt8])] {
        var payloads: [(StoredSchema, [UInt8])] = []
        var schema: StoredSchema?
        _ = try Journal.readRecords(directory: dir.path) { record in
            switch record.entry.kind {
            case .schema: schema = try StoredSchema.decode(record.payload)
            case .transaction, .base: payloads.append((try #require(schema), record.payload))
            case nil: break
            }
        }
        return payloads
    }

    /// Validates and decodes `payload`; records a failure if they disagree.
    static func expectAgreement(_ schema: StoredSchema, _ payload: [UInt8], _ what: @autoclosure () -> String) {
        let decoded = Result { () throws(StoreError) in try schema.decodeTransaction(payload) }
        var outline = TransactionOutline()
        let validated: Result<Void, StoreError> = payload.withUnsafeBytes { buffer in
            do throws(StoreError) { try schema.validateTransaction(buffer, into: &outline) } catch {
                return .failure(error)
            }
            return .success(())
        }
        switch (decoded, validated) {
        case (.failure(let d), .failure(let v)):
            #expect(d.message == v.message, "\(what())")
        case (.success(let changes), .success):
            #expect(
                outline.blocks.map { schema.entities[$0.entity].name } == changes.entities.map(\.entityName),
                "\(what())")
            for (block, entity) in zip(outline.blocks, changes.entities) {
                #expect(Array(outline.serials[block.inserted]) == entity.insertedSerials, "\(what())")
                #expect(Array(outline.serials[block.updated]) == entity.updates.map(\.serial), "\(what())")
                #expect(Array(outline.serials[block.deleted]) == entity.deletedSerials, "\(what())")
            }
        case (.failure(let d), .success):
            Issue.record("decoding fails (\(d.message)) but validation passes: \(what())")
        case (.success, .failure(let v)):
            Issue.record("validation fails (\(v.message)) but decoding passes: \(what())")
        }
    }

    @Test func intactPayloadsValidateWithTheSerialsTheyDecodeTo() throws {
        let samples = try Self.samplePayloads()
        #expect(samples.count >= 5)
        for (i, (schema, payload)) in samples.enumerated() { Self.expectAgreement(schema, payload, "sample \(i)") }
    }

    @Test func trailingBytesAndABadNullFlagAreRejectedByValidationDecodingAndOpening() throws {
        let samples = try Self.samplePayloads()
        let (schema, payload) = try #require(samples.first { $0.1.count > 40 })
        // Bytes after the last block: the length or a count is wrong.
        let trailing = payload + [0]
        #expect(throws: StoreError.self) { try schema.decodeTransaction(trailing) }
        Self.expectAgreement(schema, trailing, "one byte appended")
        // A null flag of 2 (only 0 and 1 exist): find one by flipping bytes until decoding
        // reports exactly that, then check validation agrees.
        var flagged = false
        for i in payload.indices where !flagged {
            var damaged = payload
            guard damaged[i] <= 1 else { continue }
            damaged[i] = 2
            let decoded = Result { () throws(StoreError) in try schema.decodeTransaction(damaged) }
            if case .failure(let e) = decoded, e.message.contains("null flag 2") {
                flagged = true
                Self.expectAgreement(schema, damaged, "null flag 2 at \(i)")
            }
        }
        #expect(flagged, "no column flag found to damage")
    }

    @Test func everyTruncationFailsLikeDecoding() throws {
        for (i, (schema, payload)) in try Self.samplePayloads().enumerated() {
            for length in 0..<payload.count {
                Self.expectAgreement(schema, Array(payload[..<length]), "sample \(i) cut to \(length) bytes")
            }
        }
    }

    @Test func everySingleByteChangeFailsOrPassesLikeDecoding() throws {
        for (i, (schema, payload)) in try Self.samplePayloads().enumerated() {
            for position in payload.indices {
                for value: UInt8 in [
                    0, 1, 2, 0x0F, 0x10, 0x11, 0x7F, 0x80, 0xFF, payload[position] ^ 0x01, payload[position] ^ 0x80,
                ] {
                    var damaged = payload
                    damaged[position] = value
                    Self.expectAgreement(schema, damaged, "sample \(i), byte \(position) set to \(value)")
                }
            }
        }
    }

    @Test func randomDamageFailsOrPassesLikeDecoding() throws {
        let seed = UInt64.random(in: 0 ... .max)
        var generator = SeededGenerator(seed: seed)
        let samples = try Self.samplePayloads()
        for round in 0..<20_000 {
            let (schema, payload) = samples[Int.random(in: 0..<samples.count, using: &generator)]
            var damaged = payload
            for _ in 0..<Int.random(in: 1...4, using: &generator) where !damaged.isEmpty {
                switch Int.random(in: 0..<3, using: &generator) {
                case 0:
                    damaged[Int.random(in: 0..<damaged.count, using: &generator)] = UInt8.random(
                        in: 0...255, using: &generator)
                case 1:
                    damaged.insert(
                        UInt8.random(in: 0...255, using: &generator),
                        at: Int.random(in: 0...damaged.count, using: &generator))
                default: damaged.remove(at: Int.random(in: 0..<damaged.count, using: &generator))
                }
            }
            Self.expectAgreement(schema, damaged, "seed \(seed), round \(round)")
        }
    }
}
