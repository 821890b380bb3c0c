import Foundation
import GraphJournal
import ObjectGraph
import ObjectGraphTestSupport
import Testing

// Damaged link sections: in transaction and base payloads (truncated, bits flipped, crafted
// with indexes, serials, pairs and order edits that cannot be), in the schema record (version
// 3 with a bad link side), and as the last record of a store.

/// Bytes as the journal's payloads write them, with the link section's grammar.
typealias LinkBytes = PayloadBytes

extension PayloadBytes {
    /// The version of a payload with links: its pairs in runs.
    static let version: UInt8 = 3
    /// The earlier version, each pair alone.
    static let pairVersion: UInt8 = 2

    /// One link block of the transaction payload's grammar (`TransactionCodec+Links.swift`):
    /// pairs in runs (version 3), or each alone (`runs: false`, version 2).
    mutating func block(
        link: Int, removed: [(UInt64, UInt64)] = [], added: [(UInt64, UInt64)] = [],
        orders: [[(owner: UInt64, placements: [(UInt64, Int)])]?] = [nil, nil], runs: Bool = true
    ) {
        varint(link)
        for pairs in [removed, added] {
            varint(pairs.count)
            if runs {
                // Runs of consecutive pairs of one side-0 serial; both previous serials carry.
                var starts: [Int] = []
                for i in pairs.indices where i == 0 || pairs[i].0 != pairs[i - 1].0 { starts.append(i) }
                varint(starts.count)
                var previous0: Int64 = 0, previous1: Int64 = 0
                for (j, start) in starts.enumerated() {
                    let end = j + 1 < starts.count ? starts[j + 1] : pairs.count
                    signed(Int64(bitPattern: pairs[start].0) &- previous0)
                    previous0 = Int64(bitPattern: pairs[start].0)
                    varint(end - start)
                    for (_, s1) in pairs[start..<end] {
                        signed(Int64(bitPattern: s1) &- previous1)
                        previous1 = Int64(bitPattern: s1)
                    }
                }
                continue
            }
            var previous: Int64 = 0
            for (s0, s1) in pairs {
                signed(Int64(bitPattern: s0) &- previous)
                previous = Int64(bitPattern: s0)
                varint(s1)
            }
        }
        for side in 0..<2 {
            guard let owners = orders[side] else { continue }
            varint(owners.count)
            for (owner, placements) in owners {
                varint(owner)
                varint(placements.count)
                for (member, index) in placements {
                    varint(member)
                    varint(index)
                }
            }
        }
    }

    /// The link section a payload ends with, written from its decoded change set.
    static func section(_ changes: ChangeSet, _ schema: StoredSchema, runs: Bool = true) -> [UInt8]? {
        var w = LinkBytes()
        w.varint(changes.links.count)
        for c in changes.links {
            guard
                let k = schema.links.firstIndex(where: { l in
                    l.entities.map { schema.entities[$0].name } == c.entityNames && l.names == c.relationshipNames
                })
            else { return nil }
            let orders: [[(owner: UInt64, placements: [(UInt64, Int)])]?] = (0..<2).map { side in
                guard schema.links[k].ordered[side] else { return nil }
                return c.orders.filter { $0.side == side }.map { o in
                    (o.owner, o.placements.map { ($0.member, $0.index) })
                }
            }
            w.block(
                link: k, removed: c.removed.map { ($0.serial0, $0.serial1) },
                added: c.added.map { ($0.serial0, $0.serial1) },
                orders: orders, runs: runs)
        }
        return w.bytes
    }

    /// The link list a version 3 schema record ends with (`SchemaCodec.swift`).
    static func schemaLinks(_ schema: StoredSchema) -> [UInt8] {
        var w = LinkBytes()
        w.varint(schema.links.count)
        for l in schema.links {
            for side in 0..<2 {
                w.varint(l.entities[side])
                w.string(l.names[side])
                w.bytes.append((l.ordered[side] ? 1 : 0) | (l.toOne[side] ? 2 : 0))
            }
        }
        return w.bytes
    }
}

/// Every link list of every live object in `c`, by entity, serial and key: what a damaged
/// record must not change.
func lpFingerprint(_ c: ModelContext) -> [String] {
    var lines: [String] = []
    for (l, spec) in lpSpecs.enumerated() {
        for side in 0..<2 {
            let objects = ((try? c.objects(ofEntityNamed: spec.kinds[side].name)) ?? []).sorted {
                ($0.objectID?.serial ?? 0) < ($1.objectID?.serial ?? 0)
            }
            for o in objects {
                var members = LpAccess.read(o, l, side).filter { !$0.isDeleted }.map { $0.objectID?.serial ?? 0 }
                if !spec.ordered[side] { members.sort() }
                lines.append("\(spec.kinds[side].name)/\(o.objectID?.serial ?? 0).\(spec.keys[side]) = \(members)")
            }
        }
    }
    return lines
}

/// What is wrong with the links of `c`: a member that does not list its owner back, a
/// member twice in a list, a to-one side with more than one object.
func lpInconsistencies(_ c: ModelContext) -> [String] {
    var problems: [String] = []
    for (l, spec) in lpSpecs.enumerated() {
        for side in 0..<2 {
            for o in (try? c.objects(ofEntityNamed: spec.kinds[side].name)) ?? [] {
                let members = LpAccess.read(o, l, side).filter { !$0.isDeleted }
                let name = "\(spec.kinds[side].name)/\(o.objectID?.serial ?? 0).\(spec.keys[side])"
                if Set(members.map(ObjectIdentifier.init)).count != members.count {
                    problems.append("\(name) lists a member twice")
                }
                if spec.toOne[side] && members.count > 1 { problems.append("\(name) holds \(members.count) objects") }
                for m in members where !LpAccess.read(m, l, 1 - side).contains(where: { $0 === o }) {
                    problems.append("\(name) lists \(m.objectID.map { "\($0)" } ?? "?"), which does not list it back")
                }
            }
        }
    }
    return problems
}

/// A journal record with its schema: the store's records in order.
struct LinkRecord {
    var schema: StoredSchema
    var payload: [UInt8]
    var sequence: UInt64
}

@Suite("Damaged link sections: clear errors, decoding and validation agree", .serialized)
struct LinkDamageTests {
    static var options: StoreOptions {
        var o = StoreOptions(durability: .none)
        o.autoCompactionRatio = nil
        return o
    }

    /// A store whose records have link sections of every kind: pairs added and removed on
    /// every relationship, order edits on both sides of an ordered many-to-many and on an
    /// ordered one-to-many, deleted members, a compaction's base record, and a record after it.
    /// Returns the fingerprint after each save (the base repeats the state before it).
    @discardableResult
    static func makeStore(_ dir: URL, compact: Bool = true) throws -> [[String]] {
        var states: [[String]] = []
        let store = try ObjectStore.open(at: dir, schema: try lpSchema(), options: options)
        let c = store.context
        func save() throws {
            try c.save()
            states.append(lpFingerprint(c))
        }
        let articles = try (0..<3).map { i in try c.insert(LpArticle.self) { $0.n = i } }
        let labels = try (0..<4).map { i in try c.insert(LpLabel.self) { $0.n = i } }
        let albums = try (0..<2).map { i in try c.insert(LpAlbum.self) { $0.n = i } }
        let songs = try (0..<6).map { i in try c.insert(LpSong.self) { $0.n = i } }
        let crate = try c.insert(LpCrate.self)
        let binders = try (0..<2).map { i in try c.insert(LpBinder.self) { $0.n = i } }
        let pages = try (0..<5).map { i in try c.insert(LpPage.self) { $0.n = i } }
        let nodes = try (0..<3).map { i in try c.insert(LpNode.self) { $0.n = i } }
        articles[0].labels = [labels[0], labels[1], labels[2]]
        articles[1].labels = [labels[2], labels[3]]
        albums[0].songs = songs
        albums[1].songs = [songs[3], songs[1], songs[5]]
        crate.songs = [songs[4], songs[0]]
        binders[0].pages = Array(pages[0..<4])
        pages[4].binder = binders[1]
        nodes[0].outgoing = [nodes[1], nodes[2]]
        nodes[1].outgoing = [nodes[0]]
        nodes[2].outgoing = [nodes[2]]
        try save()
        // Moves on both ordered sides, inserts at an index, removals, deletions, a to-one moved.
        try c.move(in: "songs", of: albums[0], from: 5, to: 0)
        try c.move(in: "albums", of: songs[3], from: 1, to: 0)
        try c.add(songs[0], to: "songs", of: albums[1], at: 1)
        try c.remove(labels[1], from: "labels", of: articles[0])
        c.delete(labels[3])
        c.delete(songs[2])
        pages[1].binder = binders[1]
        try c.move(in: "pages", of: binders[0], from: 2, to: 0)
        try c.add(nodes[0], to: "incoming", of: nodes[2])
        try save()
        albums[0].songs = albums[0].songs.reversed()
        try c.add(pages[0], to: "pages", of: binders[1], at: 0)
        c.delete(nodes[1])
        try save()
        if compact {
            try store.compact()
            states.append(states[states.count - 1])
        }
        try c.move(in: "songs", of: albums[1], from: 0, to: 2)
        articles[2].labels = [labels[0]]
        _ = try c.insert(LpSong.self) { $0.n = 9 }  // on no album
        try save()
        try store.close()
        return states
    }

    /// The records of the store at `dir`, each with the schema in force.
    static func records(in dir: URL) throws -> [LinkRecord] {
        var result: [LinkRecord] = []
        var schema: StoredSchema?
        _ = try Journal.readRecords(directory: dir.path) { record in
            switch record.entry.kind {
            case .schema: schema = try StoredSchema.decode(record.payload)
            case .transaction, .base:
                result.append(
                    LinkRecord(schema: try #require(schema), payload: record.payload, sequence: record.entry.sequence))
            case nil: break
            }
        }
        return result
    }

    /// The records of ``makeStore(_:compact:)``'s store, as two journals: without the
    /// compaction (every transaction), and with it (the base record, then the last save).
    static func journals() throws -> [[LinkRecord]] {
        try [false, true].map { compact in
            let dir = temporaryStoreDirectory("link-damage")
            defer { try? FileManager.default.removeItem(at: dir) }
            try makeStore(dir, compact: compact)
            return try records(in: dir)
        }
    }

    /// Every record of ``journals()``.
    static func samples() throws -> [LinkRecord] { try journals().flatMap { $0 } }

    /// The offset of the link section of `payload` (a version 3 payload), found as the suffix
    /// the decoded change set's links write.
    static func linkSectionStart(_ record: LinkRecord) throws -> Int {
        let changes = try record.schema.decodeTransaction(record.payload)
        let section = try #require(LinkBytes.section(changes, record.schema))
        #expect(Array(record.payload.suffix(section.count)) == section, "the link section is written as documented")
        return record.payload.count - section.count
    }

    /// The message's byte offset ("at byte N"), if it names one.
    static func offset(in message: String) -> Int? {
        guard let range = message.range(of: "at byte ") else { return nil }
        return Int(message[range.upperBound...].prefix { $0.isNumber })
    }

    /// Decoding `payload` fails with `corruptPayload` naming a byte offset inside it.
    static func expectCorrupt(
        _ schema: StoredSchema, _ payload: [UInt8], _ what: String, containing reason: String? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        do {
            _ = try schema.decodeTransaction(payload)
            Issue.record("\(what): decoded", sourceLocation: sourceLocation)
        } catch {
            #expect(error.code == .corruptPayload, "\(what): \(error)", sourceLocation: sourceLocation)
            let at = offset(in: error.message)
            #expect(
                at.map { $0 >= 0 && $0 <= payload.count } == true,
                "\(what): no offset in the payload: \(error.message)", sourceLocation: sourceLocation)
            if let reason {
                #expect(error.message.contains(reason), "\(what): \(error.message)", sourceLocation: sourceLocation)
            }
        }
        TransactionValidationTests.expectAgreement(schema, payload, what)
    }

    // MARK: Intact payloads

    @Test func intactLinkSectionsFollowTheGrammarAndValidateAsTheyDecode() throws {
        let samples = try Self.samples()
        #expect(samples.count >= 5)
        var removed = 0, added = 0, orders = [0, 0]
        for (i, r) in samples.enumerated() {
            TransactionValidationTests.expectAgreement(r.schema, r.payload, "sample \(i)")
            TransactionStreamingValidationTests.expectAgreement(r.schema, r.payload, sizes: [1, 3, 64], "sample \(i)")
            guard r.payload.first == LinkBytes.version else { continue }
            _ = try Self.linkSectionStart(r)
            let changes = try r.schema.decodeTransaction(r.payload)
            for l in changes.links {
                removed += l.removed.count
                added += l.added.count
                for o in l.orders { orders[o.side] += 1 }
            }
        }
        #expect(
            removed > 0 && added > 0 && orders[0] > 0 && orders[1] > 0,
            "removed \(removed), added \(added), orders \(orders)")
    }

    /// Journals written before pairs were grouped in runs: every record rewritten with its
    /// pairs alone (version 2) decodes to the same changes, and the store opens to the same
    /// state after every save.
    @Test func payloadsWithPairsAloneStillReadAsBefore() throws {
        let dir = temporaryStoreDirectory("link-version-2")
        defer { try? FileManager.default.removeItem(at: dir) }
        let states = try Self.makeStore(dir, compact: false)
        let records = try Self.records(in: dir)
        var rewritten: [LinkRecord] = []
        var converted = 0
        for r in records {
            guard r.payload.first == LinkBytes.version else {
                rewritten.append(r)
                continue
            }
            let start = try Self.linkSectionStart(r)
            let changes = try r.schema.decodeTransaction(r.payload)
            let section = try #require(LinkBytes.section(changes, r.schema, runs: false))
            let old = [LinkBytes.pairVersion] + r.payload[1..<start] + section
            #expect(try r.schema.decodeTransaction(old) == changes, "record \(r.sequence) as version 2")
            TransactionValidationTests.expectAgreement(r.schema, old, "record \(r.sequence) as version 2")
            rewritten.append(LinkRecord(schema: r.schema, payload: old, sequence: r.sequence))
            converted += 1
        }
        #expect(converted >= 3)
        // Each prefix of the rewritten journal opens to the state of the same saves.
        for n in 1...rewritten.count {
            let copy = temporaryStoreDirectory("link-version-2-open")
            defer { try? FileManager.default.removeItem(at: copy) }
            try Self.write(rewritten.prefix(n), to: copy)
            let store = try ObjectStore.open(at: copy, schema: try lpSchema(), options: Self.options)
            #expect(lpFingerprint(store.context) == states[n - 1], "the first \(n) records as version 2")
            try store.close()
        }
    }

    // MARK: Truncation and bit flips

    @Test func everyTruncationFailsWithItsOffsetAndValidationAgrees() throws {
        for (i, r) in try Self.samples().enumerated() where r.payload.first == LinkBytes.version {
            let start = try Self.linkSectionStart(r)
            for length in 0..<r.payload.count {
                Self.expectCorrupt(r.schema, Array(r.payload[..<length]), "sample \(i) cut to \(length) bytes")
            }
            // Pieces of any size end the same way inside the link section.
            for length in stride(from: start, to: r.payload.count, by: 3) {
                TransactionStreamingValidationTests.expectAgreement(
                    r.schema, Array(r.payload[..<length]), sizes: [1, 4], "sample \(i) cut to \(length) bytes")
            }
        }
    }

    /// Every bit of every link section flipped: decoding and validation agree; a payload that
    /// still decodes is applied to the state before it, which takes it or refuses it with
    /// `inconsistentChangeSet`, changing nothing.
    @Test func everyBitFlipInALinkSectionFailsOrPassesAlikeAndApplyingRefusesCleanly() throws {
        var decodable = 0, refused = 0
        for (j, journal) in try Self.journals().enumerated() {
            for (i, r) in journal.enumerated() where r.payload.first == LinkBytes.version {
                let start = try Self.linkSectionStart(r)
                // The state before this record: the records before it in its journal.
                func before() throws -> ModelContext {
                    let c = ModelContext(schema: try lpSchema())
                    for e in journal[..<i] { try c.apply(try e.schema.decodeTransaction(e.payload)) }
                    return c
                }
                var context = try before()
                for position in start..<r.payload.count {
                    for bit in 0..<8 {
                        var damaged = r.payload
                        damaged[position] ^= UInt8(1) << UInt8(bit)
                        let what = "journal \(j) record \(i), byte \(position) bit \(bit)"
                        TransactionValidationTests.expectAgreement(r.schema, damaged, what)
                        guard let changes = try? r.schema.decodeTransaction(damaged) else { continue }
                        decodable += 1
                        let fingerprint = lpFingerprint(context)
                        do throws(ObjectGraphError) {
                            try context.apply(changes)
                            let problems = lpInconsistencies(context)
                            #expect(problems.isEmpty, "\(what): \(problems.prefix(3))")
                        } catch {
                            refused += 1
                            #expect(error.code == .inconsistentChangeSet, "\(what): \(error)")
                            #expect(
                                lpFingerprint(context) == fingerprint,
                                "\(what): a refused change set changed the context")
                            #expect(!context.hasChanges, "\(what)")
                            continue
                        }
                        context = try before()
                    }
                }
            }
        }
        #expect(decodable > 0 && refused > 0, "decodable \(decodable), refused \(refused)")
    }

    /// Random edits (bytes set, inserted, removed), mostly in the link section: decoding and
    /// validation agree, and what decodes applies or is refused cleanly (the seed is printed
    /// to replay a failure).
    @Test func randomDamageToLinkPayloadsFailsOrPassesAlike() throws {
        let seed = UInt64.random(in: 0 ... .max)
        print("randomDamageToLinkPayloadsFailsOrPassesAlike seed \(seed)")
        var random = SeededGenerator(seed: seed)
        let journals = try Self.journals()
        var cases: [(journal: Int, index: Int, start: Int)] = []
        for (j, journal) in journals.enumerated() {
            for (i, r) in journal.enumerated() where r.payload.first == LinkBytes.version {
                cases.append((j, i, try Self.linkSectionStart(r)))
            }
        }
        var contexts: [String: ModelContext] = [:]
        func before(_ j: Int, _ i: Int) throws -> ModelContext {
            if let c = contexts["\(j).\(i)"] { return c }
            let c = ModelContext(schema: try lpSchema())
            for e in journals[j][..<i] { try c.apply(try e.schema.decodeTransaction(e.payload)) }
            contexts["\(j).\(i)"] = c
            return c
        }
        for round in 0..<10_000 {
            let (j, i, start) = cases[Int.random(in: 0..<cases.count, using: &random)]
            let r = journals[j][i]
            var damaged = r.payload
            for _ in 0..<Int.random(in: 1...4, using: &random) where !damaged.isEmpty {
                let low = Int.random(in: 0..<10, using: &random) < 7 ? min(start, damaged.count - 1) : 0
                let position = Int.random(in: low..<damaged.count, using: &random)
                switch Int.random(in: 0..<3, using: &random) {
                case 0: damaged[position] = UInt8.random(in: 0...255, using: &random)
                case 1: damaged.insert(UInt8.random(in: 0...255, using: &random), at: position)
                default: damaged.remove(at: position)
                }
            }
            let what = "seed \(seed), round \(round)"
            TransactionValidationTests.expectAgreement(r.schema, damaged, what)
            guard let changes = try? r.schema.decodeTransaction(damaged) else { continue }
            let c = try before(j, i)
            let fingerprint = lpFingerprint(c)
            do throws(ObjectGraphError) {
                try c.apply(changes)
                contexts["\(j).\(i)"] = nil
                let problems = lpInconsistencies(c)
                #expect(problems.isEmpty, "\(what): \(problems.prefix(3))")
            } catch {
                #expect(error.code == .inconsistentChangeSet, "\(what): \(error)")
                #expect(
                    lpFingerprint(c) == fingerprint && !c.hasChanges,
                    "\(what): a refused change set changed the context")
            }
        }
    }

    /// Every bit of the last record's link section flipped, the record written with a valid
    /// checksum after the ones before it: opening replays it or refuses it with a
    /// `StoreError`, never a crash; a store that opens has consistent links and every save
    /// before the record.
    @Test func everyBitFlipInTheLastRecordsLinkSectionOpensConsistentlyOrIsRefused() throws {
        var opened = 0, refused = 0
        for journal in try Self.journals() {
            guard let last = journal.last, last.payload.first == LinkBytes.version else { continue }
            let start = try Self.linkSectionStart(last)
            // The state before the last record.
            let earlier = temporaryStoreDirectory("link-flip-earlier")
            defer { try? FileManager.default.removeItem(at: earlier) }
            try Self.write(journal.dropLast(), to: earlier)
            let before: [String]
            do {
                let store = try ObjectStore.open(at: earlier, schema: try lpSchema(), options: Self.options)
                before = lpFingerprint(store.context)
                try store.close()
            }
            for position in start..<last.payload.count {
                for bit in 0..<8 {
                    var damaged = last.payload
                    damaged[position] ^= UInt8(1) << UInt8(bit)
                    guard (try? last.schema.decodeTransaction(damaged)) != nil else { continue }
                    let what = "byte \(position) bit \(bit)"
                    let dir = temporaryStoreDirectory("link-flip-replay")
                    defer { try? FileManager.default.removeItem(at: dir) }
                    try Self.write(
                        journal.dropLast() + [LinkRecord(schema: last.schema, payload: damaged, sequence: 0)], to: dir)
                    do {
                        let store = try ObjectStore.open(at: dir, schema: try lpSchema(), options: Self.options)
                        opened += 1
                        let problems = lpInconsistencies(store.context)
                        #expect(problems.isEmpty, "\(what): \(problems.prefix(3))")
                        try store.close()
                    } catch let error as StoreError {
                        refused += 1
                        #expect(error.code == .journal || error.code == .corruptPayload, "\(what): \(error)")
                        var pointInTime = Self.options
                        pointInTime.recovery = .pointInTime
                        let store = try ObjectStore.open(at: dir, schema: try lpSchema(), options: pointInTime)
                        #expect(lpFingerprint(store.context) == before, "\(what): point in time lost a save")
                        try store.close()
                    }
                }
            }
        }
        #expect(opened > 0 && refused > 0, "opened \(opened), refused \(refused)")
    }

    /// Writes `records` as a journal at `dir`, each with a valid checksum.
    static func write(_ records: some Sequence<LinkRecord>, to dir: URL) throws {
        let journal = try Journal.open(directory: dir)
        var schema: StoredSchema?
        for r in records {
            try journal.append(r.payload, schema: schema == r.schema ? nil : r.schema.encoded())
            schema = r.schema
        }
        try journal.close()
    }

    // MARK: Crafted link sections

    /// A payload with no entity blocks and `blocks` as its link section.
    static func crafted(
        _ blocks: (inout LinkBytes) -> Void, count: Int = 1, version: UInt8 = LinkBytes.version
    ) -> [UInt8] {
        var w = LinkBytes()
        w.bytes = [version, 0]
        w.varint(count)
        blocks(&w)
        return w.bytes
    }

    /// What can be wrong in a link section that the grammar catches: each fails decoding and
    /// validation alike, with the offset of the problem.
    @Test func structuralDamageFailsDecodingAndValidationAlike() throws {
        let stored = StoredSchema(try lpSchema())
        let n = stored.links.count
        let album = try #require(stored.links.firstIndex { $0.ordered == [true, true] })
        // No order edits, for each ordered side of link `k`.
        func none(_ k: Int) -> [[(owner: UInt64, placements: [(UInt64, Int)])]?] {
            stored.links.indices.contains(k) ? stored.links[k].ordered.map { $0 ? [] : nil } : [nil, nil]
        }
        // A link index past the schema's links, and one out of order.
        Self.expectCorrupt(stored, Self.crafted { $0.block(link: n, orders: none(n)) }, "link index \(n)")
        Self.expectCorrupt(
            stored,
            Self.crafted(
                {
                    $0.block(link: 1, orders: none(1)); $0.block(link: 1, orders: none(1))
                }, count: 2), "link 1 twice", containing: "out of order")
        Self.expectCorrupt(
            stored,
            Self.crafted(
                {
                    $0.block(link: 2, orders: none(2)); $0.block(link: 0, orders: none(0))
                }, count: 2), "links 2, 0", containing: "out of order")
        // More blocks than links.
        Self.expectCorrupt(
            stored, Self.crafted({ w in for k in 0..<n { w.block(link: k, orders: none(k)) } }, count: n + 1),
            "\(n + 1) blocks")
        // Serial 0, on either side, removed or added.
        Self.expectCorrupt(
            stored, Self.crafted { $0.block(link: 0, added: [(0, 1)], orders: none(0)) }, "serial 0 on side 0",
            containing: "serial 0")
        Self.expectCorrupt(
            stored, Self.crafted { $0.block(link: 0, removed: [(1, 0)], orders: none(0)) }, "serial 0 on side 1",
            containing: "serial 0")
        // A negative serial from the deltas.
        var negative = LinkBytes()
        negative.bytes = [3, 0, 1, 0, 0, 0, 1, 1]
        negative.signed(-5)
        negative.varint(1)
        negative.signed(1)
        Self.expectCorrupt(stored, negative.bytes, "negative serial")
        var negativeMember = LinkBytes()
        negativeMember.bytes = [3, 0, 1, 0, 0, 0, 2, 1]
        negativeMember.signed(1)
        negativeMember.varint(2)
        negativeMember.signed(1)
        negativeMember.signed(-1)
        Self.expectCorrupt(stored, negativeMember.bytes, "a member's serial back to 0", containing: "serial 0")
        // Runs that do not hold the pairs counted: a run of no pairs, more runs than pairs,
        // runs of fewer pairs than counted, and runs without pairs.
        Self.expectCorrupt(stored, [3, 0, 1, 0, 0, 0, 1, 1, 2, 0, 2], "a run of no pairs", containing: "no pairs")
        Self.expectCorrupt(
            stored, [3, 0, 1, 0, 0, 0, 1, 2, 2, 1, 2, 2, 1, 2], "two runs of one pair", containing: "exceeds")
        Self.expectCorrupt(
            stored, [3, 0, 1, 0, 0, 0, 2, 1, 2, 1, 2, 0, 0], "a run of one of two pairs", containing: "not 2")
        Self.expectCorrupt(
            stored, [3, 0, 1, 0, 0, 0, 0, 1, 2, 1, 2, 0, 0], "runs counted without pairs", containing: "exceeds")
        Self.expectCorrupt(stored, [3, 0, 1, 0, 0, 0, 1, 0, 0, 0], "pairs without runs", containing: "runs of 1 pairs")
        // The same damage in a version 2 payload, whose pairs stand alone.
        Self.expectCorrupt(
            stored, Self.crafted({ $0.block(link: 0, added: [(0, 1)], orders: none(0), runs: false) }, version: 2),
            "version 2: serial 0", containing: "serial 0")
        var negative2 = LinkBytes()
        negative2.bytes = [2, 0, 1, 0, 0, 1]
        negative2.signed(-5)
        negative2.varint(1)
        negative2.varint(0)
        Self.expectCorrupt(stored, negative2.bytes, "version 2: negative serial")
        // Order indexes not ascending, and an index past Int32.
        let descending = Self.crafted {
            $0.block(link: album, orders: [[(owner: 1, placements: [(1, 2), (2, 1)])], []])
        }
        Self.expectCorrupt(stored, descending, "descending order indexes", containing: "order index")
        var huge = LinkBytes()
        huge.bytes = [3, 0, 1]
        huge.varint(album)
        huge.bytes += [0, 0, 0, 0, 1, 1, 1, 1]
        huge.varint(UInt64(Int32.max) + 1)
        huge.varint(0)
        Self.expectCorrupt(stored, huge.bytes, "an order index past Int32")
        // Counts past the payload.
        var counts = LinkBytes()
        counts.bytes = [3, 0, 1, 0]
        counts.varint(1 << 40)
        Self.expectCorrupt(stored, counts.bytes, "a pair count past the payload")
        // A link section in a version 1 payload, and in a payload of a schema without links.
        Self.expectCorrupt(
            stored, Self.crafted({ $0.block(link: 0, orders: none(0)) }, version: 1), "links after a version 1 payload",
            containing: "after the last block")
        let noLinks = StoredSchema(try Schema(Person.self))
        Self.expectCorrupt(
            noLinks, Self.crafted { $0.block(link: 0, orders: none(0)) }, "links without links in the schema",
            containing: "schema has no links")
        Self.expectCorrupt(stored, [4, 0, 0], "payload version 4")
        // Bytes after the link section.
        Self.expectCorrupt(
            stored, Self.crafted { $0.block(link: 0, orders: none(0)) } + [0], "a byte after the links",
            containing: "after the last block")
    }

    /// What only the state can tell wrong: the record decodes (and validates) but cannot apply.
    /// Applied as a change set it is refused with `inconsistentChangeSet`; as the last record of
    /// a store, opening reports it with its sequence, and a point-in-time open keeps every
    /// record before it.
    @Test func semanticDamageIsRefusedByApplyAndReportedByOpening() throws {
        let original = temporaryStoreDirectory("link-semantic")
        defer { try? FileManager.default.removeItem(at: original) }
        let states = try Self.makeStore(original)
        let stored = StoredSchema(try lpSchema())
        func link(_ from: String, _ key: String) throws -> Int {
            try #require(
                stored.links.firstIndex { l in
                    (0..<2).contains { stored.entities[l.entities[$0]].name == from && l.names[$0] == key }
                })
        }
        let labels = try link("LpArticle", "labels")
        let songs = try link("LpAlbum", "songs")
        // The album's state: the serials of album 1's songs, and a serial that never existed.
        let reopened = try ObjectStore.open(at: original, schema: try lpSchema(), options: Self.options)
        let album = try #require(try reopened.context.objects(of: LpAlbum.self).first { $0.n == 0 })
        let albumSerial = try #require(album.objectID?.serial)
        let member = try #require(album.songs.first?.objectID?.serial)
        let count = album.songs.count
        let articleSerial = try #require(
            try reopened.context.objects(of: LpArticle.self).first { $0.n == 0 }?.objectID?.serial)
        let linkedLabel = try #require(
            try reopened.context.objects(of: LpArticle.self).first { $0.n == 0 }?.labels.first?.objectID?.serial)
        let unlinkedLabel = try #require(
            try reopened.context.objects(of: LpLabel.self).first { l in !l.articles.contains { $0.n == 0 } }?.objectID?
                .serial)
        let unlisted = try #require(
            try reopened.context.objects(of: LpSong.self).first { s in !s.albums.contains { $0 === album } }?.objectID?
                .serial)
        try reopened.close()
        let albumSide = stored.entities[stored.links[songs].entities[0]].name == "LpAlbum" ? 0 : 1
        func orders(_ placements: [(UInt64, Int)]) -> [[(owner: UInt64, placements: [(UInt64, Int)])]?] {
            var o: [[(owner: UInt64, placements: [(UInt64, Int)])]?] = [[], []]
            o[albumSide] = [(albumSerial, placements)]
            return o
        }
        func pair(_ article: UInt64, _ label: UInt64) -> (UInt64, UInt64) {
            stored.entities[stored.links[labels].entities[0]].name == "LpArticle" ? (article, label) : (label, article)
        }
        let cases: [(String, [UInt8], String)] = [
            (
                "a link to a serial that does not exist",
                Self.crafted { $0.block(link: labels, added: [pair(articleSerial, 999)]) }, "does not exist"
            ),
            (
                "a link from a serial that does not exist",
                Self.crafted { $0.block(link: labels, added: [pair(999, linkedLabel)]) }, "does not exist"
            ),
            (
                "an unlink of a pair that is not linked",
                Self.crafted { $0.block(link: labels, removed: [pair(articleSerial, unlinkedLabel)]) }, "not linked"
            ),
            (
                "a link of a pair linked already",
                Self.crafted { $0.block(link: labels, added: [pair(articleSerial, linkedLabel)]) }, "linked already"
            ),
            (
                "an order edit naming a non-member",
                Self.crafted { $0.block(link: songs, orders: orders([(unlisted, 0)])) }, "does not have"
            ),
            (
                "an order edit naming a serial that does not exist",
                Self.crafted { $0.block(link: songs, orders: orders([(999, 0)])) }, "does not exist"
            ),
            (
                "an order edit with an index past the end",
                Self.crafted { $0.block(link: songs, orders: orders([(member, count)])) }, "past its end"
            ),
            (
                "an order edit naming a member twice",
                Self.crafted { $0.block(link: songs, orders: orders([(member, 0), (member, 1)])) }, "does not have"
            ),
            (
                "an order edit of an owner that does not exist",
                Self.crafted { w in
                    var o: [[(owner: UInt64, placements: [(UInt64, Int)])]?] = [[], []]
                    o[albumSide] = [(999, [(member, 0)])]
                    w.block(link: songs, orders: o)
                }, "does not exist"
            ),
        ]
        for (what, payload, reason) in cases {
            // Decoding and validation agree: the grammar is intact.
            TransactionValidationTests.expectAgreement(stored, payload, what)
            let changes = try stored.decodeTransaction(payload)
            // Applied as a change set: refused, nothing changed.
            let copy = try Self.copy(original)
            defer { try? FileManager.default.removeItem(at: copy) }
            do {
                let store = try ObjectStore.open(at: copy, schema: try lpSchema(), options: Self.options)
                let before = lpFingerprint(store.context)
                #expect(before == states.last, "\(what): the store before the damage")
                do {
                    try store.context.apply(changes)
                    Issue.record("\(what): applied")
                } catch {
                    #expect(error.code == .inconsistentChangeSet, "\(what): \(error)")
                }
                #expect(lpFingerprint(store.context) == before, "\(what): a refused change set changed the context")
                try store.close()
            }
            // The last record of a store: opening reports it, point in time keeps what came before.
            let journal = try Journal.open(directory: copy)
            let sequence = try journal.append(payload)
            try journal.close()
            do {
                let store = try ObjectStore.open(at: copy, schema: try lpSchema(), options: Self.options)
                try? store.close()
                Issue.record("\(what): the store opened")
            } catch let error as StoreError {
                // Refused with the record's file, offset and sequence, and what is wrong.
                #expect(error.code == .journal, "\(what): \(error)")
                #expect(error.file != nil && error.offset != nil, "\(what): \(error)")
                #expect(error.message.contains("record \(sequence):"), "\(what): \(error.message)")
                #expect(error.message.contains(reason), "\(what): \(error.message)")
            }
            var pointInTime = Self.options
            pointInTime.recovery = .pointInTime
            let store = try ObjectStore.open(at: copy, schema: try lpSchema(), options: pointInTime)
            #expect(lpFingerprint(store.context) == states.last, "\(what): point in time lost a saved record")
            try store.close()
        }
    }

    /// A to-one side's object given two destinations in one record: what the writer never
    /// writes (it removes a to-one's link before adding another). Opening refuses the record,
    /// naming the to-one; were it accepted, the to-one would have to hold one object that both
    /// sides agree on.
    @Test func aToOneWithTwoDestinationsInOneRecordStaysConsistent() throws {
        let dir = temporaryStoreDirectory("link-two-owners")
        defer { try? FileManager.default.removeItem(at: dir) }
        let serials: (page: UInt64, binders: [UInt64])
        do {
            let store = try ObjectStore.open(at: dir, schema: try lpSchema(), options: Self.options)
            let page = try store.context.insert(LpPage.self)
            let binders = try (0..<2).map { _ in try store.context.insert(LpBinder.self) }
            try store.context.save()
            serials = (try #require(page.objectID?.serial), binders.compactMap { $0.objectID?.serial })
            try store.close()
        }
        let stored = StoredSchema(try lpSchema())
        let k = try #require(stored.links.firstIndex { $0.toOne.contains(true) })
        let pageFirst = stored.entities[stored.links[k].entities[0]].name == "LpPage"
        let pairs = serials.binders.map { pageFirst ? (serials.page, $0) : ($0, serials.page) }
        let payload = Self.crafted { $0.block(link: k, added: pairs, orders: pageFirst ? [nil, []] : [[], nil]) }
        TransactionValidationTests.expectAgreement(stored, payload, "two destinations")
        let journal = try Journal.open(directory: dir)
        try journal.append(payload)
        try journal.close()
        do {
            let store = try ObjectStore.open(at: dir, schema: try lpSchema(), options: Self.options)
            defer { try? store.close() }
            let page = try #require(try store.context.objects(of: LpPage.self).first)
            let holding = try store.context.objects(of: LpBinder.self).filter { $0.pages.contains { $0 === page } }
            #expect(holding.count <= 1, "the page is in \(holding.count) binders")
            #expect(holding.first === page.binder)
        } catch let error as StoreError {
            #expect(error.code == .corruptPayload || error.code == .journal, "\(error)")
            #expect(error.message.contains("is a to-one that holds a link already"), "\(error)")
        }
    }

    // MARK: The last record of a store

    static func copy(_ dir: URL) throws -> URL {
        let copy = temporaryStoreDirectory("link-damage-copy")
        try FileManager.default.copyItem(at: dir, to: copy)
        return copy
    }

    /// The newest log segment of the store at `dir`.
    static func lastSegment(_ dir: URL) throws -> URL {
        let logs = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".log") }
            .sorted()
        return dir.appendingPathComponent(try #require(logs.last))
    }

    /// The last record (a save with link changes of every kind) cut anywhere is a torn tail:
    /// opening recovers to the save before it, every list as it was then.
    @Test func aTornLastLinkRecordRecoversToThePreviousSave() throws {
        let dir = temporaryStoreDirectory("link-torn")
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try ObjectStore.open(at: dir, schema: try lpSchema(), options: Self.options)
        let c = store.context
        let album = try c.insert(LpAlbum.self)
        let songs = try (0..<8).map { i in try c.insert(LpSong.self) { $0.n = i } }
        album.songs = songs
        let article = try c.insert(LpArticle.self)
        article.labels = try (0..<5).map { _ in try c.insert(LpLabel.self) }
        try c.save()
        let saved = lpFingerprint(c)
        let segment = try Self.lastSegment(dir)
        let sizeBefore = try #require(try FileManager.default.attributesOfItem(atPath: segment.path)[.size] as? Int)
        try c.move(in: "songs", of: album, from: 7, to: 0)
        try c.move(in: "songs", of: album, from: 3, to: 6)
        c.delete(songs[4])
        article.labels = Array(article.labels.prefix(2))
        try c.save()
        try store.close()
        let sizeAfter = try #require(try FileManager.default.attributesOfItem(atPath: segment.path)[.size] as? Int)
        #expect(sizeAfter > sizeBefore)
        for cut in Set([1, 2, 3, 8, (sizeAfter - sizeBefore) / 2, sizeAfter - sizeBefore - 1])
        where cut > 0 && cut < sizeAfter - sizeBefore {
            let copy = try Self.copy(dir)
            defer { try? FileManager.default.removeItem(at: copy) }
            let handle = try FileHandle(forWritingTo: try Self.lastSegment(copy))
            try handle.truncate(atOffset: UInt64(sizeAfter - cut))
            try handle.close()
            let reopened = try ObjectStore.open(at: copy, schema: try lpSchema(), options: Self.options)
            #expect(reopened.openReport.tornTail != nil, "cut \(cut): the torn tail is reported")
            #expect(lpFingerprint(reopened.context) == saved, "cut \(cut)")
            try reopened.close()
        }
    }

    /// A bit flipped on disk inside the last record's link section: the checksum catches it;
    /// opening either refuses with the location or treats it as a torn tail, and keeps every
    /// save before it.
    @Test func aLastRecordDamagedOnDiskIsReportedAndLosesNothingBeforeIt() throws {
        let dir = temporaryStoreDirectory("link-flip")
        defer { try? FileManager.default.removeItem(at: dir) }
        let states = try Self.makeStore(dir)
        let segment = try Self.lastSegment(dir)
        let bytes = try [UInt8](Data(contentsOf: segment))
        // The last record's payload is stored LZ4-compressed or not; its tail end holds the link
        // section either way.
        for back in [1, 3, 6, 10, 16] where back < bytes.count {
            for bit in [0, 7] {
                let copy = try Self.copy(dir)
                defer { try? FileManager.default.removeItem(at: copy) }
                var damaged = bytes
                damaged[bytes.count - back] ^= UInt8(1) << UInt8(bit)
                try Data(damaged).write(to: try Self.lastSegment(copy))
                let what = "byte \(bytes.count - back) bit \(bit)"
                do {
                    let store = try ObjectStore.open(at: copy, schema: try lpSchema(), options: Self.options)
                    let state = lpFingerprint(store.context)
                    #expect(
                        state == states[states.count - 2] && store.openReport.tornTail != nil,
                        "\(what): opened without reporting the damage, or with another state")
                    try store.close()
                } catch let error as StoreError {
                    #expect(error.code == .corruptPayload || error.code == .journal, "\(what): \(error)")
                    var pointInTime = Self.options
                    pointInTime.recovery = .pointInTime
                    let store = try ObjectStore.open(at: copy, schema: try lpSchema(), options: pointInTime)
                    #expect(
                        lpFingerprint(store.context) == states[states.count - 2], "\(what): point in time lost a save")
                    try store.close()
                }
            }
        }
    }

    // MARK: The schema record

    /// A version 3 schema record with a bad link side fails to decode with its offset; every
    /// truncation fails; a store whose schema record is damaged is refused.
    @Test func aSchemaRecordWithABadLinkSideIsACorruptPayload() throws {
        let stored = StoredSchema(try lpSchema())
        let bytes = stored.encoded()
        #expect(bytes.first == 3)
        let links = LinkBytes.schemaLinks(stored)
        #expect(Array(bytes.suffix(links.count)) == links, "the link list is written as documented")
        #expect(try StoredSchema.decode(bytes) == stored)
        let start = bytes.count - links.count
        func expectCorrupt(
            _ damaged: [UInt8], _ what: String, containing reason: String? = nil,
            sourceLocation: SourceLocation = #_sourceLocation
        ) {
            do {
                _ = try StoredSchema.decode(damaged)
                Issue.record("\(what): decoded", sourceLocation: sourceLocation)
            } catch {
                #expect(error.code == .corruptPayload, "\(what): \(error)", sourceLocation: sourceLocation)
                #expect(
                    Self.offset(in: error.message).map { $0 <= damaged.count } == true, "\(what): \(error.message)",
                    sourceLocation: sourceLocation)
                if let reason {
                    #expect(error.message.contains(reason), "\(what): \(error.message)", sourceLocation: sourceLocation)
                }
            }
        }
        for length in 0..<bytes.count { expectCorrupt(Array(bytes[..<length]), "schema cut to \(length) bytes") }
        // Each link side: entity index, name, flags.
        func side(_ link: Int, _ s: Int, entity: Int? = nil, flags: UInt8? = nil) -> [UInt8] {
            var w = LinkBytes()
            w.varint(stored.links.count)
            for (k, link0) in stored.links.enumerated() {
                for t in 0..<2 {
                    w.varint(k == link && t == s ? entity ?? link0.entities[t] : link0.entities[t])
                    w.string(link0.names[t])
                    let f: UInt8 = (link0.ordered[t] ? 1 : 0) | (link0.toOne[t] ? 2 : 0)
                    w.bytes.append(k == link && t == s ? flags ?? f : f)
                }
            }
            return Array(bytes[..<start]) + w.bytes
        }
        let n = stored.entities.count
        for k in stored.links.indices {
            for s in 0..<2 {
                expectCorrupt(
                    side(k, s, entity: n), "link \(k) side \(s) names entity \(n)", containing: "names entity")
                expectCorrupt(side(k, s, entity: 1 << 30), "link \(k) side \(s) names entity 2^30")
                for flags: UInt8 in [3, 4, 8, 0x80, 0xFF] {
                    expectCorrupt(side(k, s, flags: flags), "link \(k) side \(s) flags \(flags)", containing: "flags")
                }
            }
            // Both sides to-one.
            var both = stored
            both.links[k].toOne = [true, true]
            both.links[k].ordered = [false, false]
            expectCorrupt(
                Array(bytes[..<start]) + LinkBytes.schemaLinks(both), "link \(k) with two to-one sides",
                containing: "two to-one")
        }
        // A link count past the record, and bytes after the link list.
        var count = LinkBytes()
        count.varint(1 << 40)
        expectCorrupt(Array(bytes[..<start]) + count.bytes, "a link count of 2^40")

        // A store whose schema record has a bad link side is refused, with nothing changed.
        let dir = temporaryStoreDirectory("link-schema")
        defer { try? FileManager.default.removeItem(at: dir) }
        try Self.makeStore(dir)
        let records = try Self.records(in: dir)
        let damagedDir = temporaryStoreDirectory("link-schema-damaged")
        defer { try? FileManager.default.removeItem(at: damagedDir) }
        let journal = try Journal.open(directory: damagedDir)
        try journal.append(try #require(records.first).payload, schema: side(0, 1, flags: 3))
        try journal.close()
        let error = try #require(throws: StoreError.self) {
            try ObjectStore.open(at: damagedDir, schema: try lpSchema(), options: Self.options)
        }
        #expect(error.code == .journal && error.file != nil, "\(error)")
        #expect(error.message.contains("link side flags 3"), "\(error.message)")
        #expect(throws: StoreError.self) { try ObjectStore.openDynamic(at: damagedDir, options: Self.options) }
    }

    /// Bytes after the link list mean a count is wrong (a link count one too small leaves
    /// the last link's bytes unread), as bytes after a transaction payload's last block do.
    @Test func aSchemaRecordWithBytesAfterItsLinkListIsRefused() throws {
        let stored = StoredSchema(try lpSchema())
        let bytes = stored.encoded()
        let links = LinkBytes.schemaLinks(stored)
        var fewer = LinkBytes()
        fewer.varint(stored.links.count - 1)
        let damaged = Array(bytes[..<(bytes.count - links.count)]) + fewer.bytes + links.dropFirst()
        #expect(throws: StoreError.self, "a link count one too small") { try StoredSchema.decode(damaged) }
        #expect(throws: StoreError.self, "a byte after the link list") { try StoredSchema.decode(bytes + [0]) }
    }

    /// A `StoredSchema` is a public value a tool can change: a link naming an entity it does
    /// not have, or with sides missing, must make decoding fail, not trap. Run in a child
    /// process: today both trap (index out of range).
    @Test func aStoredSchemaWithAnInvalidLinkFailsDecodingWithoutTrapping() async {
        await #expect(processExitsWith: .success, "a link side naming entity 99") {
            var stored = StoredSchema(try lpSchema())
            stored.links[0].entities = [99, 0]
            _ = try? stored.decodeTransaction([2, 0, 1, 0, 0, 0])
            var outline = TransactionOutline()
            _ = try? stored.validateTransaction([2, 0, 1, 0, 0, 0], into: &outline)
        }
        await #expect(processExitsWith: .success, "a link without its ordered flags") {
            var stored = StoredSchema(try lpSchema())
            stored.links[1].ordered = []
            _ = try? stored.decodeTransaction([2, 0, 1, 1, 0, 0, 0, 0])
        }
    }

    /// Every bit of the schema record's link list flipped: it fails to decode, or it decodes
    /// and a store written with it and the real records opens or is refused with a
    /// `StoreError`, typed and dynamic, never a crash.
    @Test func everyBitFlipInTheSchemaLinkListFailsOrOpensCleanly() throws {
        let stored = StoredSchema(try lpSchema())
        let bytes = stored.encoded()
        let start = bytes.count - LinkBytes.schemaLinks(stored).count
        let dir = temporaryStoreDirectory("link-schema-flips")
        defer { try? FileManager.default.removeItem(at: dir) }
        try Self.makeStore(dir)
        let transactions = try Self.records(in: dir).map(\.payload)
        var opened = 0, refused = 0
        for position in start..<bytes.count {
            for bit in 0..<8 {
                var damaged = bytes
                damaged[position] ^= UInt8(1) << UInt8(bit)
                let what = "schema byte \(position) bit \(bit)"
                guard let schema = try? StoredSchema.decode(damaged) else { continue }
                // Every payload decodes and validates alike against it.
                for (i, t) in transactions.enumerated() {
                    TransactionValidationTests.expectAgreement(schema, t, "\(what), record \(i)")
                }
                let store = temporaryStoreDirectory("link-schema-flip")
                defer { try? FileManager.default.removeItem(at: store) }
                let journal = try Journal.open(directory: store)
                for (i, t) in transactions.enumerated() { try journal.append(t, schema: i == 0 ? damaged : nil) }
                try journal.close()
                for dynamic in [false, true] {
                    do {
                        let s =
                            dynamic
                            ? try ObjectStore.openDynamic(at: store, options: Self.options)
                            : try ObjectStore.open(at: store, schema: try lpSchema(), options: Self.options)
                        try s.close()
                        opened += 1
                    } catch let error as StoreError {
                        refused += 1
                        #expect(
                            [.corruptPayload, .incompatibleSchema, .journal].contains(error.code),
                            "\(what), dynamic \(dynamic): \(error)")
                    }
                }
            }
        }
        #expect(opened + refused > 0)
    }
}
