// Reading and writing the cells of rows, with the change tracking, undo logging and index
// upkeep each write needs.

extension EntityTable {
    // MARK: Reading

    @inline(__always)
    func isNull(row: Int, slot: Int) -> Bool {
        nulls[row * maskWords + slot / 64] & (1 << UInt64(slot % 64)) != 0
    }

    @inline(__always)
    func read<T: PrimitiveAttribute>(row: Int, slot: Int, as type: T.Type) -> T? {
        if isNull(row: row, slot: slot) { return nil }
        let cell = values[row * stride + slot]
        if types[slot].isVariableLength {
            // The arena's stored fields, not the arena: see `ByteArena.unretainedBase`.
            return T._decode(.bytes(ByteArena.bytes(ArenaRef(cell), base: arena.unretainedBase, count: arena.count)))
        }
        return T._decode(.fixed(cell))
    }

    /// The cell of `slot` in `row` as a read decodes it (nil when it has no value); the bytes
    /// of a variable-length value are valid until the arena next grows.
    @inline(__always)
    func rawCell(row: Int, slot: Int) -> RawCell? {
        if isNull(row: row, slot: slot) { return nil }
        let cell = values[row * stride + slot]
        if types[slot].isVariableLength {
            return .bytes(ByteArena.bytes(ArenaRef(cell), base: arena.unretainedBase, count: arena.count))
        }
        return .fixed(cell)
    }

    /// Whether the arena bytes the cell `ref` points to equal `bytes`. Through the arena's stored
    /// fields, not a method of the arena (see ``ByteArena/unretainedBase``), which would retain
    /// and release the arena's storage around each comparison.
    @inline(__always)
    func arenaHolds(_ ref: UInt64, _ bytes: UnsafeRawBufferPointer) -> Bool {
        ByteArena.equal(ArenaRef(ref), bytes, base: arena.unretainedBase, count: arena.count)
    }

    func value(row: Int, slot: Int) -> AttributeValue? {
        if isNull(row: row, slot: slot) { return nil }
        return decode(cell: values[row * stride + slot], slot: slot)
    }

    func decode(cell: UInt64, slot: Int) -> AttributeValue {
        let type = types[slot]
        if type.isVariableLength {
            return arena.withBytes(ArenaRef(cell)) { AttributeValue.decode(.bytes($0), as: type) }
        }
        return AttributeValue.decode(.fixed(cell), as: type)
    }

    func committedValue(row: Int, slot: Int) -> AttributeValue? {
        let b = Int(changes.beforeIndex[row])
        guard b >= 0 else { return value(row: row, slot: slot) }
        if changes.beforeNulls[b * maskWords + slot / 64] & (1 << UInt64(slot % 64)) != 0 { return nil }
        return decode(cell: changes.beforeValues[b * stride + slot], slot: slot)
    }

    func slots(forKeys keys: [String]?) throws(ObjectGraphError) -> [Int] {
        guard let keys else { return Array(0..<stride) }
        return try entity.slots(forKeys: keys)
    }

    func changedValues(row: Int) -> [String: AttributeValue?] {
        guard row >= 0 else { return [:] }
        var result: [String: AttributeValue?] = [:]
        if flags[row] & Flags.inserted != 0 {
            for slot in 0..<stride where !isNull(row: row, slot: slot) {
                result[entity.attributes[slot].name] = .some(value(row: row, slot: slot))
            }
            return result
        }
        for slot in 0..<stride where slotDiffers(row: row, slot: slot) {
            result[entity.attributes[slot].name] = .some(value(row: row, slot: slot))
        }
        return result
    }

    func committedValues(row: Int, slots: [Int]) -> [String: AttributeValue?] {
        guard row >= 0, flags[row] & Flags.inserted == 0 else { return [:] }
        var result: [String: AttributeValue?] = [:]
        for slot in slots { result[entity.attributes[slot].name] = .some(committedValue(row: row, slot: slot)) }
        return result
    }

    // MARK: Writing

    @inline(__always)
    func willChange(row: Int) {
        if flags[row] & (Flags.inserted | Flags.dirty) == 0 { captureBeforeImage(row: row) }
    }

    func captureBeforeImage(row: Int) {
        changes.beforeIndex[row] = Int32(changes.dirtyRows.count)
        changes.dirtyRows.append(Int32(row))
        appendBeforeImage(ofRow: row)
        flags[row] |= Flags.dirty
    }

    func write<T: PrimitiveAttribute>(row: Int, slot: Int, _ value: T) {
        value._withCell { setCell(row: row, slot: slot, $0) }
    }

    func set(row: Int, slot: Int, value: AttributeValue?, primitive: Bool = false) {
        guard let value else {
            if isNull(row: row, slot: slot) { return }
            willChange(row: row)
            changes.notePrimitive(primitive, row: row, slot: slot)
            if !primitive { changes.willSaveTouched?.insert(Int32(row)) }
            if !changes.savepoints.isEmpty { logCell(row: row, slot: slot) }
            let indexed = !indexes.indexesBySlot[slot].isEmpty
            if indexed { unindex(row: row, slot: slot) }
            if !indexes.referenceSlots.isEmpty && isVisible(row: row) { unreference(row: row, slot: slot) }
            if types[slot].isVariableLength { arena.garbage += ArenaRef(values[row * stride + slot]).length }
            nulls[row * maskWords + slot / 64] |= 1 << UInt64(slot % 64)
            if indexed { reindex(row: row, slot: slot) }
            touchIndexes(row: row, slot: slot)
            return
        }
        value.withCell { setCell(row: row, slot: slot, $0, primitive: primitive) }
    }

    /// Whether a (non-primitive) set of `slot` on `row` only has to write the cell: the row was
    /// inserted in this transaction and since the innermost savepoint, no `willSave` pass or
    /// primitive set is being tracked, and no index covers the slot.
    @inline(__always)
    private func isFreshWrite(row: Int, slot: Int, primitive: Bool) -> Bool {
        guard !primitive, slot < 64, indexes.plainSlots & (1 << UInt64(slot)) != 0,
            flags[row] & Flags.inserted != 0, changes.willSaveTouched == nil, changes.primitiveOnly.isEmpty
        else { return false }
        return changes.savepoints.isEmpty || changes.isNewInInnermostSavepoint(row: row)
    }

    func setCell(row: Int, slot: Int, _ cell: RawCell, primitive: Bool = false) {
        let index = row * stride + slot
        let maskIndex = row * maskWords + slot / 64
        let bit = UInt64(1) << UInt64(slot % 64)
        let wasNull = nulls[maskIndex] & bit != 0
        switch cell {
        case .fixed(let bits):
            if !wasNull && values[index] == bits { return }
        case .bytes(let buffer):
            if !wasNull && arenaHolds(values[index], buffer) { return }
        }
        // A row inserted since the innermost savepoint, as an import's `didInsert` writes them:
        // the bookkeeping below would all be no-ops (no before-image, already in
        // `willSaveTouched` when that is tracked, no undo inside its savepoint, no index on the
        // slot), so only the write is left.
        let fresh = isFreshWrite(row: row, slot: slot, primitive: primitive)
        if !fresh {
            willChange(row: row)
            changes.notePrimitive(primitive, row: row, slot: slot)
            if !primitive { changes.willSaveTouched?.insert(Int32(row)) }
            if !changes.savepoints.isEmpty { logCell(row: row, slot: slot) }
        }
        let indexed = !fresh && !indexes.indexesBySlot[slot].isEmpty  // a fresh row's slot has no index
        if indexed { unindex(row: row, slot: slot) }
        let referenced =
            !fresh && !indexes.referenceSlots.isEmpty && indexes.referenceIndexOfSlot[slot] != nil
            && isVisible(row: row)
        if referenced { unreference(row: row, slot: slot) }
        switch cell {
        case .fixed(let bits):
            values[index] = bits
        case .bytes(let buffer):
            if !wasNull { arena.garbage += ArenaRef(values[index]).length }
            values[index] = arena.append(buffer)
        }
        if wasNull { nulls[maskIndex] &= ~bit }
        if indexed { reindex(row: row, slot: slot) }
        touchIndexes(row: row, slot: slot)
        if referenced { rereference(row: row, slot: slot) }
    }
}
