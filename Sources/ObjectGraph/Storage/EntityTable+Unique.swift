// The key-path and key lookups behind ModelContext+Unique.swift (object(where:), upsert).

extension EntityTable {
    func slot(for keyPath: AnyKeyPath) throws(ObjectGraphError) -> Int {
        guard let slot = entity.slot(for: keyPath) else {
            throw ObjectGraphError(
                .unknownKey, "\(keyPath) is not an attribute of \(entity.name) (hand-written models pass keyPaths: to EntityDescription)",
                entity: entity.name)
        }
        return slot
    }

    /// The index of the constraint that is exactly the attribute at `slot`.
    func uniqueIndex(slot: Int) -> UniqueIndex? {
        for i in indexesBySlot[slot] where uniqueIndexes[i].slots.count == 1 { return uniqueIndexes[i] }
        return nil
    }

    /// The index of the constraint whose keys are exactly `slots` (in any order).
    func uniqueIndex(slots: [Int]) -> UniqueIndex? {
        let wanted = Set(slots)
        return uniqueIndexes.first { Set($0.slots) == wanted && $0.slots.count == slots.count }
    }
}

extension EntityTable {
    /// The first unique index other than `index` in which both `row` and `owner` have a key
    /// (no nil attribute) and the keys' stored bytes differ: the key a merge of `row` into
    /// `owner` would change. Nil when a merge changes no other unique key (giving `owner` a key
    /// it did not have is not a change of identity).
    func otherUniqueKeyThatDiffers(_ row: Int, _ owner: Int, besides index: UniqueIndex) -> UniqueIndex? {
        uniqueIndexes.first { other in
            other !== index
                && !other.slots.contains { isNull(row: row, slot: $0) || isNull(row: owner, slot: $0) }
                && !sameKey(row, owner, other)
        }
    }
}
