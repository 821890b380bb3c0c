/// What the transaction payload's decoder hands each part of a payload to: replay into the
/// entity tables, a ``ChangeSet``, or the validating skim behind ``TransactionOutline``.
///
/// The decoder (``PayloadDecoder``) reads the structure (blocks, counts, null flags and
/// bitmaps, update fields, the end) and fails the same way for every visitor; a visitor reads
/// the values and serial lists it is handed the reader for, with the reader's value methods,
/// and adds the checks of what it builds (a replay refuses an update of an object that does
/// not exist). A format change is made in the decoder and the reader, once.
protocol PayloadVisitor {
    /// A block of the stored entity `entity` begins; `attributes` are its stored attributes.
    mutating func beginBlock(
        entity: Int, attributes: [AttributeDescription], nextSerial: UInt64) throws(PayloadReader.Failure)

    /// Reads the deltas of the block's `count` inserted serials (a serial list whose count the
    /// decoder read and bounded: ``RecordRules/maximumInsertedCount(remaining:attributes:)``).
    mutating func insertedSerials(_ r: inout PayloadReader, count: Int) throws(PayloadReader.Failure)

    /// Reads the inserted objects' values of attribute `attribute`: one per row of `rows`,
    /// except where `nulls` (when the column has nil values) has the row's bit set.
    mutating func insertedColumn(
        _ r: inout PayloadReader, attribute: Int, encoding: PayloadEncoding, rows: Int, nulls: NullBitmap?
    ) throws(PayloadReader.Failure)

    /// The fields of the object `serial` follow (its serial was read at payload offset `offset`).
    mutating func updatedObject(serial: UInt64, at offset: Int) throws(PayloadReader.Failure)

    /// Reads one updated field of the last ``updatedObject(serial:at:)``: its new value, or
    /// nothing when it became nil.
    mutating func updatedField(
        _ r: inout PayloadReader, attribute: Int, encoding: PayloadEncoding, isNull: Bool
    ) throws(PayloadReader.Failure)

    /// Reads the block's deleted serials (a serial list).
    mutating func deletedSerials(_ r: inout PayloadReader) throws(PayloadReader.Failure)

    /// The block is read whole.
    mutating func endBlock()

    /// The changes of the stored link `link` (``StoredSchema/links``) follow.
    mutating func beginLinks(link: Int) throws(PayloadReader.Failure)

    /// `count` pairs removed (`removed`) or added follow (a visitor may reserve room for them).
    mutating func linkPairs(removed: Bool, count: Int)

    /// A run of `count` pairs of the side-0 object `serial0` follows (a version 3 payload), each
    /// then handed to ``linkPair(removed:_:_:at:)``; read at payload offset `offset`.
    mutating func beginRun(removed: Bool, _ serial0: UInt64, count: Int, at offset: Int) throws(PayloadReader.Failure)

    /// One link removed (`removed`) or added, between the objects `serial0` (side 0) and
    /// `serial1` (side 1); read at payload offset `offset`. Removals come before additions.
    mutating func linkPair(
        removed: Bool, _ serial0: UInt64, _ serial1: UInt64, at offset: Int) throws(PayloadReader.Failure)

    /// The order of `owner`'s list on the ordered side `side`, after the additions (appended
    /// in their order): each of `placements` is taken out, then put back at its index, in
    /// ascending index order.
    mutating func linkOrder(
        side: Int, owner: UInt64, placements: [(member: UInt64, index: Int)], at offset: Int) throws(PayloadReader
        .Failure)
}

extension PayloadVisitor {
    mutating func endBlock() {}
    mutating func beginLinks(link: Int) throws(PayloadReader.Failure) {}
    mutating func linkPairs(removed: Bool, count: Int) {}
    mutating func beginRun(removed: Bool, _ serial0: UInt64, count: Int, at offset: Int) throws(PayloadReader.Failure) {
    }
    mutating func linkPair(
        removed: Bool, _ serial0: UInt64, _ serial1: UInt64, at offset: Int
    ) throws(PayloadReader.Failure) {}
    mutating func linkOrder(
        side: Int, owner: UInt64, placements: [(member: UInt64, index: Int)], at offset: Int
    ) throws(PayloadReader.Failure) {}
}

/// The one decoder of the transaction payload (the format is in `TransactionCodec`'s
/// documentation and `Docs/JournalFormat.md`).
enum PayloadDecoder {
    /// Reads a whole payload, handing its parts to `visitor` in order.
    ///
    /// - Throws: `.malformed` with the payload offset, or `.piecesEnded` when a payload lent in
    ///   pieces ends before its length.
    static func decode<Visitor: PayloadVisitor>(
        _ r: inout PayloadReader, stored: StoredSchema, into visitor: inout Visitor
    ) throws(PayloadReader.Failure) {
        let version = try r.byte()
        guard
            version == TransactionCodec.version || version == TransactionCodec.linkVersion
                || version == TransactionCodec.pairLinkVersion
        else {
            throw PayloadReader.malformed(0, "transaction payload version \(version)")
        }
        let entities = stored.entities.count
        var bitmap: [UInt8] = []
        // Writers put each entity's changes in one block. A second block of an entity would make
        // its objects' fate depend on how an applier sequences blocks (a serial deleted by one
        // block and inserted by the next): refused by the one decoder, for every applier alike.
        var blocked = EntitySet(count: entities)
        for _ in 0..<(try r.count(limit: entities)) {
            let entityOffset = r.offset
            let entity = try r.count(limit: entities - 1)
            guard blocked.insert(entity) else {
                throw PayloadReader.malformed(entityOffset, "a second block of entity \(entity)")
            }
            let attributes = stored.entities[entity].attributes
            let claimOffset = r.offset
            let nextSerial = try r.varint()
            if let v = RecordRules.nextSerial(nextSerial) { throw PayloadReader.violation(claimOffset, v) }
            try visitor.beginBlock(entity: entity, attributes: attributes, nextSerial: nextSerial)
            // Every count is bounded by the bytes that follow it before a visitor sees it: it
            // sizes what the visitor allocates (rows, a change set's values).
            let countOffset = r.offset
            let claimed = try r.varint()
            let most = RecordRules.maximumInsertedCount(remaining: r.remaining, attributes: attributes.count)
            if let v = RecordRules.insertedCount(claimed, most: most, remaining: r.remaining) {
                throw PayloadReader.violation(countOffset, v)
            }
            let rows = Int(claimed)
            try visitor.insertedSerials(&r, count: rows)
            let entityName = stored.entities[entity].name
            if rows > 0 {
                for (j, a) in attributes.enumerated() {
                    let nulls = try r.nullFlag() ? try r.nullBitmap(rows, into: &bitmap) : nil
                    do {
                        try visitor.insertedColumn(
                            &r, attribute: j, encoding: a.type.payloadEncoding, rows: rows, nulls: nulls)
                    } catch {
                        throw Self.locating(error, entity: entityName, attribute: a.name, serial: nil)
                    }
                }
            }
            // Each update takes at least two bytes: its serial and its field count.
            for _ in 0..<(try r.count(limit: r.remaining / 2)) {
                let start = r.offset
                let serial = try r.serial()
                try visitor.updatedObject(serial: serial, at: start)
                for _ in 0..<(try r.count(limit: attributes.count)) {
                    let field = try r.varint()
                    let j = Int(field >> 1)
                    guard j < attributes.count else { throw PayloadReader.malformed(r.offset, "attribute \(j)") }
                    do {
                        try visitor.updatedField(
                            &r, attribute: j, encoding: attributes[j].type.payloadEncoding, isNull: field & 1 == 1)
                    } catch {
                        throw Self.locating(error, entity: entityName, attribute: attributes[j].name, serial: serial)
                    }
                }
            }
            try visitor.deletedSerials(&r)
            visitor.endBlock()
        }
        if version != TransactionCodec.version {
            try decodeLinks(&r, stored: stored, runs: version == TransactionCodec.linkVersion, into: &visitor)
        }
        // Bytes after the last block mean a length or a count is wrong: the payload is not what
        // its writer wrote.
        guard r.isAtEnd else {
            throw PayloadReader.malformed(r.offset, "\(r.count - r.offset) bytes after the last block")
        }
    }

    /// `failure`, naming the entity, attribute and object when it is a list cell that does
    /// not decode (the reader that found it knows only the bytes).
    private static func locating(
        _ failure: PayloadReader.Failure, entity: String, attribute: String, serial: UInt64?
    ) -> PayloadReader.Failure {
        guard case .violation(let offset, let v) = failure, v.rule == .malformedList, v.entity == nil else {
            return failure
        }
        return .violation(
            offset: offset, RecordRules.located(v, entity: entity, attribute: attribute, serial: serial))
    }

    /// The link section of a version 3 payload (`runs`: pairs in runs) or a version 2 one.
    private static func decodeLinks<Visitor: PayloadVisitor>(
        _ r: inout PayloadReader, stored: StoredSchema, runs: Bool, into visitor: inout Visitor
    ) throws(PayloadReader.Failure) {
        guard !stored.links.isEmpty else {
            throw PayloadReader.malformed(r.offset, "link changes, but the schema has no links")
        }
        var previous = -1
        for _ in 0..<(try r.count(limit: stored.links.count)) {
            let offset = r.offset
            let k = try r.count(limit: stored.links.count - 1)
            guard k > previous else { throw PayloadReader.malformed(offset, "link \(k) out of order") }
            previous = k
            // A schema built in code may be anything: every visitor reads these.
            let l = stored.links[k]
            guard l.entities.count == 2, l.names.count == 2, l.ordered.count == 2, l.toOne.count == 2,
                l.entities.allSatisfy({ stored.entities.indices.contains($0) })
            else {
                throw PayloadReader.malformed(offset, "link \(k) of the schema does not have two sides of its entities")
            }
            try visitor.beginLinks(link: k)
            for removed in [true, false] {
                if runs { try decodeRuns(&r, removed: removed, into: &visitor); continue }
                var serial0: Int64 = 0
                // Each pair takes at least two bytes.
                let n = try r.count(limit: (r.count - r.offset) / 2)
                visitor.linkPairs(removed: removed, count: n)
                for _ in 0..<n {
                    let at = r.offset
                    serial0 &+= try r.signed()
                    guard RecordRules.isValidSerial(UInt64(bitPattern: serial0)) else {
                        throw PayloadReader.violation(at, RecordRules.serialOutOfBounds(serial0))
                    }
                    let serial1 = try r.serial()
                    try visitor.linkPair(removed: removed, UInt64(serial0), serial1, at: at)
                }
            }
            var placements: [(member: UInt64, index: Int)] = []
            for side in 0..<2 where stored.links[k].ordered[side] {
                // Each owner takes at least two bytes (its serial and its count), each placement
                // two (its member and its index).
                for _ in 0..<(try r.count(limit: r.remaining / 2)) {
                    let at = r.offset
                    let owner = try r.serial()
                    placements.removeAll(keepingCapacity: true)
                    var last = -1
                    for _ in 0..<(try r.count(limit: r.remaining / 2)) {
                        let member = try r.serial()
                        let indexOffset = r.offset
                        let index = try r.count(limit: Int(Int32.max))
                        guard index > last else {
                            throw PayloadReader.malformed(indexOffset, "order index \(index) after \(last)")
                        }
                        last = index
                        placements.append((member, index))
                    }
                    try visitor.linkOrder(side: side, owner: owner, placements: placements, at: at)
                }
            }
        }
    }

    /// One list of pairs written in runs (version 3), each pair handed to the visitor with the
    /// offset of its side-1 serial.
    private static func decodeRuns<Visitor: PayloadVisitor>(
        _ r: inout PayloadReader, removed: Bool, into visitor: inout Visitor
    ) throws(PayloadReader.Failure) {
        // Each pair takes at least a byte, each run at least two more.
        let n = try r.count(limit: r.count - r.offset)
        let runsOffset = r.offset
        let runs = try r.count(limit: min(n, (r.count - r.offset) / 3))
        guard (runs == 0) == (n == 0) else { throw PayloadReader.malformed(runsOffset, "\(runs) runs of \(n) pairs") }
        visitor.linkPairs(removed: removed, count: n)
        var serial0: Int64 = 0, serial1: Int64 = 0
        var left = n
        for _ in 0..<runs {
            let at = r.offset
            serial0 &+= try r.signed()
            guard RecordRules.isValidSerial(UInt64(bitPattern: serial0)) else {
                throw PayloadReader.violation(at, RecordRules.serialOutOfBounds(serial0))
            }
            let countOffset = r.offset
            let k = try r.count(limit: left)
            guard k > 0 else { throw PayloadReader.malformed(countOffset, "a run of no pairs") }
            left -= k
            try visitor.beginRun(removed: removed, UInt64(serial0), count: k, at: at)
            for _ in 0..<k {
                let memberOffset = r.offset
                serial1 &+= try r.signed()
                guard RecordRules.isValidSerial(UInt64(bitPattern: serial1)) else {
                    throw PayloadReader.violation(memberOffset, RecordRules.serialOutOfBounds(serial1))
                }
                try visitor.linkPair(removed: removed, UInt64(serial0), UInt64(serial1), at: memberOffset)
            }
        }
        guard left == 0 else { throw PayloadReader.malformed(runsOffset, "runs of \(n - left) pairs, not \(n)") }
    }

    /// ``decode(_:stored:into:)`` on a whole payload in one buffer, its failure as a
    /// ``StoreError`` with code `corruptPayload`.
    static func decode<Visitor: PayloadVisitor>(
        _ payload: UnsafeRawBufferPointer, stored: StoredSchema, into visitor: inout Visitor
    ) throws(StoreError) {
        var r = PayloadReader(payload)
        do throws(PayloadReader.Failure) {
            try decode(&r, stored: stored, into: &visitor)
        } catch {
            throw StoreError(payload: error)
        }
    }
}

extension StoreError {
    /// A payload's decoding failure, as the error a store reports.
    init(payload failure: PayloadReader.Failure) {
        switch failure {
        case .malformed(let malformed): self.init(.corruptPayload, "\(malformed)")
        case .piecesEnded: self.init(.corruptPayload, "the payload ends before its length")
        case .violation(let offset, let violation):
            self.init(violation.storeErrorCode, "at byte \(offset) of the payload: \(violation.reason)")
        }
    }
}

/// The entities a payload's blocks named so far: a word of bits for up to 64 entities (no
/// allocation per record), a set beyond.
private struct EntitySet {
    private var bits: UInt64 = 0
    private var more: Set<Int> = []
    private let small: Bool

    init(count: Int) { small = count <= 64 }

    /// Adds `entity`; false when it was there already.
    mutating func insert(_ entity: Int) -> Bool {
        guard small else { return more.insert(entity).inserted }
        let bit: UInt64 = 1 << UInt64(entity)
        defer { bits |= bit }
        return bits & bit == 0
    }
}
