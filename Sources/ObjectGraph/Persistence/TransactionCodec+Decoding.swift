/// Decodes a payload into a ``ChangeSet`` (for tools, observers and tests; a store's replay
/// writes its tables directly, ``ReplayVisitor``).
struct ChangeSetVisitor: PayloadVisitor {
    let stored: StoredSchema
    /// The change set built so far (each block appended once it is read whole).
    var result = ChangeSet()
    /// The changes of the block being read.
    private var current = EntityChanges(entityName: "", attributeNames: [])
    /// The serial of the object whose fields are being read.
    private var updatedSerial: UInt64 = 0
    /// The stored attributes of the block's entity.
    private var attributes: [AttributeDescription] = []

    init(stored: StoredSchema) { self.stored = stored }

    mutating func beginBlock(
        entity: Int, attributes: [AttributeDescription], nextSerial: UInt64
    ) throws(PayloadReader.Failure) {
        self.attributes = attributes
        current = EntityChanges(entityName: stored.entities[entity].name, attributeNames: attributes.map(\.name))
    }

    mutating func insertedSerials(_ r: inout PayloadReader, count n: Int) throws(PayloadReader.Failure) {
        try r.serialList(count: n, appendingTo: &current.insertedSerials)
        // The decoder bounded `n` by the bytes left: at most 8 values per byte of the payload.
        current.insertedValues = Array(repeating: nil, count: n * attributes.count)
    }

    mutating func insertedColumn(
        _ r: inout PayloadReader, attribute: Int, encoding: PayloadEncoding, rows: Int, nulls: NullBitmap?
    ) throws(PayloadReader.Failure) {
        let width = attributes.count
        let type = attributes[attribute].type
        for i in 0..<rows where !(nulls?.isNull(i) ?? false) {
            current.insertedValues[i * width + attribute] = try r.value(type)
        }
    }

    mutating func updatedObject(serial: UInt64, at offset: Int) throws(PayloadReader.Failure) {
        updatedSerial = serial
    }

    mutating func updatedField(
        _ r: inout PayloadReader, attribute: Int, encoding: PayloadEncoding, isNull: Bool
    ) throws(PayloadReader.Failure) {
        let value: AttributeValue? = isNull ? nil : try r.value(attributes[attribute].type)
        current.updates.append(.init(serial: updatedSerial, attribute: attribute, value: value))
    }

    mutating func deletedSerials(_ r: inout PayloadReader) throws(PayloadReader.Failure) {
        _ = try r.serialList(appendingTo: &current.deletedSerials)
    }

    mutating func endBlock() { result.entities.append(current) }

    mutating func beginLinks(link: Int) throws(PayloadReader.Failure) {
        let l = stored.links[link]
        result.links.append(
            LinkChanges(entityNames: l.entities.map { stored.entities[$0].name }, relationshipNames: l.names))
    }

    mutating func linkPair(
        removed: Bool, _ serial0: UInt64, _ serial1: UInt64, at offset: Int
    ) throws(PayloadReader.Failure) {
        if removed {
            result.links[result.links.count - 1].removed.append(.init(serial0, serial1))
        } else {
            result.links[result.links.count - 1].added.append(.init(serial0, serial1))
        }
    }

    mutating func linkOrder(
        side: Int, owner: UInt64, placements: [(member: UInt64, index: Int)], at offset: Int
    ) throws(PayloadReader.Failure) {
        result.links[result.links.count - 1].orders.append(
            .init(side: side, owner: owner, placements: placements.map { .init(member: $0.member, index: $0.index) }))
    }
}

/// Checks a payload without building its values, listing the serials it touches in a
/// ``TransactionOutline``: what `graph-journal verify` needs of each record. The decoder's
/// checks are the same as for a ``ChangeSet``, so it fails exactly where decoding would.
struct OutlineVisitor: PayloadVisitor {
    var outline: TransactionOutline
    private var entity = 0
    private var inserted = 0
    private var insertedRun: ClosedRange<UInt64>?
    private var updatedStart = 0
    private var deletedStart = 0
    /// The serial of the object whose fields are being read.
    private var updatedSerial: UInt64 = 0

    /// A visitor that fills `outline`'s storage (moved in, emptied; swap it back after).
    init(reusing outline: inout TransactionOutline) {
        self.outline = TransactionOutline()
        swap(&self.outline, &outline)
        self.outline.removeAll()
    }

    mutating func beginBlock(
        entity: Int, attributes: [AttributeDescription], nextSerial: UInt64
    ) throws(PayloadReader.Failure) {
        self.entity = entity
    }

    mutating func insertedSerials(_ r: inout PayloadReader, count n: Int) throws(PayloadReader.Failure) {
        inserted = outline.serials.count
        if outline.keepsInsertedRuns {
            insertedRun = try r.serialRun(count: n, appendingTo: &outline.serials)
            updatedStart = outline.serials.count
            return
        }
        insertedRun = nil
        try r.serialList(count: n, appendingTo: &outline.serials)
        updatedStart = outline.serials.count
    }

    mutating func insertedColumn(
        _ r: inout PayloadReader, attribute: Int, encoding: PayloadEncoding, rows: Int, nulls: NullBitmap?
    ) throws(PayloadReader.Failure) {
        try r.skipValues(encoding, count: rows - (nulls?.nullCount ?? 0))
    }

    mutating func updatedObject(serial: UInt64, at offset: Int) throws(PayloadReader.Failure) {
        updatedSerial = serial
    }

    mutating func updatedField(
        _ r: inout PayloadReader, attribute: Int, encoding: PayloadEncoding, isNull: Bool
    ) throws(PayloadReader.Failure) {
        if !isNull { try r.skipValues(encoding, count: 1) }
        outline.serials.append(updatedSerial)
    }

    mutating func deletedSerials(_ r: inout PayloadReader) throws(PayloadReader.Failure) {
        deletedStart = outline.serials.count
        _ = try r.serialList(appendingTo: &outline.serials)
    }

    mutating func endBlock() {
        outline.blocks.append(
            .init(
                entity: entity, inserted: inserted..<updatedStart, insertedRun: insertedRun,
                updated: updatedStart..<deletedStart,
                deleted: deletedStart..<outline.serials.count))
    }
}
