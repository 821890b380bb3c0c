/// An ``EntityTable``'s indexes: the hash index of each unique constraint, the declared
/// secondary indexes, the identity indexes made on demand, and the reference indexes of the
/// to-ones whose inverse is a to-many, with the per-slot lists that tell a set of a slot which
/// of them to update.
///
/// Invariants:
/// - `indexesBySlot[slot]` lists the positions in `uniqueIndexes` of the indexes keyed by
///   `slot`, `secondaryBySlot[slot]` those in `secondaryIndexes`.
/// - `secondarySlotMask` (`identitySlotMask`) has bit `s` for each slot `s` below 64 that a
///   secondary (identity) index keys, and bit 63 also for every slot from 63 on that one keys.
/// - `referenceIndexOfSlot[slot]` is non-nil exactly for the slots in `referenceSlots`.
/// - `plainSlots` has bit `s` (below 64) exactly when no unique index keys `s` and no reference
///   index tracks it.
/// - Secondary and identity indexes may lag behind the rows: a change only marks a row dirty
///   in them (``EntityTable/touchIndexes(row:)``), and their next lookup catches up. A
///   reference index is exact while it is built; what rewrites cells wholesale drops it.
struct TableIndexes {
    /// One hash index per unique constraint; `indexesBySlot[slot]` lists the indexes a slot
    /// is a key of.
    let uniqueIndexes: [UniqueIndex]
    let indexesBySlot: [[Int]]
    /// The declared non-unique indexes (SecondaryIndex.swift); `secondaryBySlot[slot]` lists
    /// the ones a slot is a key of.
    let secondaryIndexes: [SecondaryIndex]
    let secondaryBySlot: [[Int]]
    /// Bit `s` for each slot `s` below 64 that a secondary index keys, and bit 63 also for
    /// every slot from 63 on that one keys: a set of another slot skips the index hook at once.
    let secondarySlotMask: UInt64
    /// The hash indexes that conversions of Swift values made to find objects by attributes
    /// no unique constraint covers (IdentityIndex.swift), kept up to date by the same hooks as
    /// the secondary indexes.
    var identityIndexes: [IdentityIndex] = []
    /// ``secondarySlotMask`` for the identity indexes.
    var identitySlotMask: UInt64 = 0
    /// Per slot, the index of a to-one whose inverse is a to-many (ReferenceIndex.swift).
    let referenceIndexOfSlot: [ReferenceIndex?]
    /// The slots that have a reference index.
    let referenceSlots: [Int]
    /// Bit `s` for each slot `s` below 64 that no unique index keys and no reference index
    /// tracks: on a row inserted since the innermost savepoint, a set of such a slot needs only
    /// the write (``EntityTable/setCell(row:slot:_:primitive:)``).
    let plainSlots: UInt64
    /// Unique index fills running on another core during replay (``IndexFillJob``).
    var indexFillJobs: [IndexFillJob] = []

    /// The indexes `entity` declares, and the reference indexes of its `relationships`.
    init(entity: EntityDescription, relationships: [ResolvedRelationship]) {
        let stride = entity.attributes.count
        uniqueIndexes = zip(entity.uniqueConstraints, entity.uniqueSlots).map { UniqueIndex(constraint: $0, slots: $1) }
        var bySlot = Array(repeating: [Int](), count: stride)
        for (i, slots) in entity.uniqueSlots.enumerated() { for s in Set(slots) { bySlot[s].append(i) } }
        indexesBySlot = bySlot
        secondaryIndexes = zip(entity.indexes, entity.indexSlots).map {
            SecondaryIndex(description: $0, slots: $1, entity: entity)
        }
        var secondaryBySlot = Array(repeating: [Int](), count: stride)
        for (i, index) in secondaryIndexes.enumerated() { for s in index.slots { secondaryBySlot[s].append(i) } }
        self.secondaryBySlot = secondaryBySlot
        var secondaryMask: UInt64 = 0
        for (s, indexes) in secondaryBySlot.enumerated() where !indexes.isEmpty {
            secondaryMask |= 1 << UInt64(min(s, 63))
        }
        secondarySlotMask = secondaryMask
        var references = Array(repeating: ReferenceIndex?.none, count: stride)
        for r in relationships where r.slot >= 0 && r.inverseIsToMany {
            references[r.slot] = ReferenceIndex(slot: r.slot)
        }
        referenceIndexOfSlot = references
        referenceSlots = references.indices.filter { references[$0] != nil }
        var plain: UInt64 = 0
        for s in 0..<min(64, stride) where bySlot[s].isEmpty && references[s] == nil { plain |= 1 << UInt64(s) }
        plainSlots = plain
    }

    /// Whether any index keeps rows by key and must hear of every change of a row
    /// (``EntityTable/touchIndexes(row:)``).
    var tracksRowKeys: Bool { !secondaryIndexes.isEmpty || !identityIndexes.isEmpty }
}
