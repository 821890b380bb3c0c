extension ModelContext {
    /// Creates one object from `source`, unless `shouldInsert` says no.
    ///
    /// - Returns: the new object, or `nil` when skipped.
    /// - Throws: ``ImportError`` (source index 0) when `didInsert` throws; nothing is left behind.
    @discardableResult
    public func importObject<T: ImportableObject>(_ type: T.Type, from source: T.ImportSource) throws -> T? {
        try importObjects(type, sourceArray: [source]).first
    }

    /// Creates one object per source that `shouldInsert` accepts, in order.
    ///
    /// Atomic: when a hook throws, every object this call created is removed again, and the
    /// error (an ``ImportError``) names the failing source; earlier pending changes stay.
    ///
    /// `progress` receives ``WorkProgress`` reports (operation `import`, unit `objects`: the
    /// sources gone through, out of their count when `sourceArray` is a random-access collection
    /// such as an array, else with no total until the final report), the first before any source
    /// and then one every 4,096 sources, where the import also checks whether its task was
    /// cancelled; the final one once every source is done.
    ///
    /// - Throws: ``ImportError``, or `CancellationError` when the task running the import was
    ///   cancelled: everything the import did is then undone, as for a hook that throws.
    public func importObjects<T: ImportableObject, S: Sequence>(
        _ type: T.Type, sourceArray: S, progress: ProgressHandler? = nil
    ) throws -> [T] where S.Element == T.ImportSource {
        let table = try table(for: type)
        // Counted only where that is O(1) and calls no closure of the caller's (a lazy filter's).
        var reporter = _WorkReporter(
            progress, .import, unit: .objects, total: (sourceArray as? any RandomAccessCollection)?.count)
        // The result holds every object it gets: no sweep looks at them while it is built.
        return try table.buildingResult {
            try _importObjects(type, sourceArray: sourceArray, reporter: &reporter)
        }
    }

    private func _importObjects<T: ImportableObject, S: Sequence>(
        _ type: T.Type, sourceArray: S, reporter: inout _WorkReporter
    ) throws -> [T] where S.Element == T.ImportSource {
        try _withImportSavepoint {
            try reporter.begin()
            var result: [T] = []
            var count = 0
            for source in sourceArray {
                let i = count
                count += 1
                try reporter.advance(to: i)
                guard T.shouldInsert(from: source, in: self) else { continue }
                let object = try insert(type)
                do { try object.didInsert(from: source, in: self) } catch {
                    throw ImportError(sourceIndex: i, underlying: error)
                }
                result.append(object)
            }
            reporter.finish(count)
            return result
        }
    }

    /// Imports one object by its unique ID: updates the existing object (if `shouldUpdate`) or
    /// inserts a new one (if `shouldInsert`), setting its ID before `didInsert` runs.
    ///
    /// - Returns: the object, or `nil` when the ID is `nil` or a hook said no.
    /// - Throws: ``ImportError``; nothing is left behind.
    @discardableResult
    public func importUniqueObject<T: ImportableUniqueObject>(_ type: T.Type, from source: T.ImportSource) throws -> T?
    {
        try importUniqueObjects(type, sourceArray: [source]).first
    }

    /// Imports many objects by unique ID with CoreStore's rules:
    /// - every ID is extracted first (`uniqueID(from:in:)`); a throw there creates nothing, and a
    ///   `nil` ID skips its source;
    /// - when an ID appears several times, the last source wins;
    /// - IDs are the same when their stored bytes are, as the unique index compares them
    ///   (Docs/Semantics.md, rule 15): `"café"` with U+00E9 and with a combining accent are two
    ///   IDs, and so are `0.0` and `-0.0`;
    /// - `preProcess`, if given, may rewrite the ID → source mapping before anything is created
    ///   (a Swift dictionary: IDs that `==` calls equal share one entry there);
    /// - existing objects (pending inserts included) are updated if `shouldUpdate`, else skipped
    ///   and not returned; new IDs are inserted if `shouldInsert`, with the ID set before
    ///   `didInsert`;
    /// - results come in the order of each ID's first appearance.
    ///
    /// Finding each existing object is an O(1) lookup in the ID's unique index, so a first
    /// import of n sources is O(n), duplicates included (CoreStore's is O(n²)).
    ///
    /// Where CoreStore leaves half-built objects, this is atomic: when a hook throws, everything
    /// this import did is undone and the ``ImportError`` names the failing source's index.
    ///
    /// `progress` receives ``WorkProgress`` reports (operation `import`, unit `objects`: the
    /// distinct IDs updated, inserted or skipped, out of the number of distinct IDs), the first
    /// once the IDs are extracted and then one every 4,096 IDs, where the import also checks
    /// whether its task was cancelled (the extraction checks every 4,096 sources); the final
    /// one once every ID is done.
    ///
    /// - Throws: ``ImportError``; ``ObjectGraphError`` with code `noUniqueIndex` when the ID
    ///   attribute is not a unique constraint; or `CancellationError` when the task running the
    ///   import was cancelled: everything the import did is then undone, as for a hook that
    ///   throws, and the pending changes made before the import stay.
    @inlinable
    public func importUniqueObjects<T: ImportableUniqueObject, S: Sequence>(
        _ type: T.Type, sourceArray: S,
        preProcess: (([T.UniqueIDType: T.ImportSource]) throws -> [T.UniqueIDType: T.ImportSource])? = nil,
        progress: ProgressHandler? = nil
    ) throws -> [T] where S.Element == T.ImportSource {
        // Inlinable so that it is specialized for `T` in the caller's module: unspecialized, every
        // dictionary operation on `T.UniqueIDType` and every hook call goes through generic
        // metadata lookups (measured with callgrind: a 1M import took 2.9 s instead of 1.2 s).
        let importer = try _UniqueImporter(context: self, type: type, idKeyPath: T.uniqueIDKeyPath)
        // 1. All IDs first. `ids[k]` is the k-th distinct ID in order of first appearance and
        //    `distinct.last(k)` the index of its last source (the one that wins).
        let sources = Array(sourceArray)
        var extracted: [T.UniqueIDType] = []
        extracted.reserveCapacity(sources.count)
        // `from[j]`: the source of `extracted[j]`, kept only once a source has no ID (until
        // then, and in the usual import, it is `j`).
        var from: [Int]?
        var reporter = _WorkReporter(progress, .import, unit: .objects, total: nil)
        for i in sources.indices {
            // The user's hook runs per source: a long extraction stops when the task is cancelled.
            if i & (_WorkReporter.itemStride - 1) == _WorkReporter.itemStride - 1 { try reporter.checkCancellation() }
            let id: T.UniqueIDType?
            // `sources[i]` as the argument, not a loop variable: borrowed, not copied.
            do { id = try T.uniqueID(from: sources[i], in: self) } catch {
                throw ImportError(sourceIndex: i, underlying: error)
            }
            guard let id else {
                if from == nil { from = Array(0..<i) }
                continue
            }
            extracted.append(id)
            from?.append(i)
        }
        let distinct = _DistinctIDs(extracted, sources: from)
        extracted = []  // `distinct.ids` may share its storage; one owner keeps it unique
        let ids = distinct.ids
        var mapping: [T.UniqueIDType: T.ImportSource]?
        if let preProcess {
            var all: [T.UniqueIDType: T.ImportSource] = [:]
            for (k, id) in ids.enumerated() { all[id] = sources[distinct.last(k)] }
            mapping = try preProcess(all)
        }
        // 2. Update or insert, atomically. Into an empty entity every (distinct) ID is new.
        let mayExist = importer.hasObjects
        reporter.total = ids.count
        // The result holds every object it gets: no sweep looks at them while it is built.
        return try importer.buildingResult {
            try _withImportSavepoint {
                try reporter.begin()
                importer.prepare(count: ids.count, empty: !mayExist)
                var result: [T] = []
                result.reserveCapacity(ids.count)
                for (k, id) in ids.enumerated() {
                    try reporter.advance(to: k)
                    // Ask for the cache lines of the IDs ahead (EntityTable+Prefetch.swift): into a
                    // large store each lookup would otherwise wait for several memory loads in turn.
                    if mayExist {
                        // Each ID hashed once, 12 places ahead; the stages reuse the hash.
                        if k == 0 {
                            for j in 0..<min(12, ids.count) { ids[j]._withCell { importer.remember($0, as: j) } }
                        }
                        if k + 12 < ids.count { ids[k + 12]._withCell { importer.remember($0, as: k + 12) } }
                        importer.prefetchStages(at: k, of: ids.count)
                    } else if k + 8 < ids.count {
                        ids[k + 8]._withCell { importer.prefetchBucket($0) }
                    }
                    let index = distinct.last(k)
                    let source: T.ImportSource
                    if let mapping {
                        guard let mapped = mapping[id] else { continue }
                        source = mapped
                    } else {
                        source = sources[index]
                    }
                    if mayExist, let existing = importer.existing(id, as: T.self) {
                        guard T.shouldUpdate(from: source, in: self) else { continue }
                        do { try existing.update(from: source, in: self) } catch {
                            throw ImportError(sourceIndex: index, underlying: error)
                        }
                        result.append(existing)
                    } else {
                        guard T.shouldInsert(from: source, in: self) else { continue }
                        let object = importer.insert(id, as: T.self)
                        do { try object.didInsert(from: source, in: self) } catch {
                            throw ImportError(sourceIndex: index, underlying: error)
                        }
                        result.append(object)
                    }
                }
                reporter.finish(ids.count)
                return result
            }
        }
    }

    /// Runs `body` in a savepoint: kept when it returns, undone when it throws.
    @usableFromInline
    func _withImportSavepoint<R>(_ body: () throws -> R) throws -> R {
        beginSavepoint()
        do {
            let result = try body()
            releaseSavepoint()
            return result
        } catch {
            rollbackToSavepoint()
            throw error
        }
    }
}

/// The distinct IDs of an import in order of first appearance, each with the index of its last
/// source (the one that wins).
///
/// Two IDs are the same when their stored cells are (Docs/Semantics.md, rule 15): the bytes the
/// unique index compares, so that an import finds the same objects as a lookup does. Strings
/// are not compared by canonical equivalence (`"café"` written with U+00E9 and with a
/// combining accent are two IDs), and doubles by bit pattern (`0.0` and `-0.0` are two IDs;
/// a NaN is one ID, equal to itself).
///
/// The table is open addressing, hashed by the cell with ``_KeyHasher``; a `Dictionary`
/// (SipHash) cost 8% of a 1M import with the index's hashing (callgrind). Each bucket holds the
/// position in `all` and 32 bits of the hash, so a probe compares an ID only when those bits
/// match, and the bucket of the ID eight places ahead is prefetched: with 1M IDs the table is
/// far larger than the caches, and each probe was a cache miss followed by another for
/// `all[j]` (perf).
///
/// When no ID repeats, as in most imports, `ids` is `all` itself and nothing else is built:
/// copying the IDs and their source indexes touched 16 MB of fresh memory for 1M IDs, and a
/// page fault costs ~1.4 µs on this VM (perf, `Tools/Benchmarks/Results/peers.md`).
@usableFromInline
struct _DistinctIDs<ID: PrimitiveAttribute & Hashable> {
    /// `ids[k]`: the k-th distinct ID.
    @usableFromInline let ids: [ID]
    /// `lastSources[k]`: the index of the last source with ID `ids[k]`, when some ID repeats.
    @usableFromInline let lastSources: [Int]?
    /// `sources[j]`: the source of `all[j]`, when not `j`.
    @usableFromInline let sources: [Int]?

    /// The index of the last source with ID `ids[k]`.
    @inlinable
    func last(_ k: Int) -> Int {
        if let lastSources { return lastSources[k] }
        if let sources { return sources[k] }
        return k
    }

    /// Finds the distinct IDs of `all`, where `all[j]` is the ID of source `sources?[j] ?? j`.
    @inlinable
    init(_ all: [ID], sources: [Int]?) {
        // `repeats[j]`: -2 when `all[j]` repeats an earlier ID, else the last source of the ID
        // that first appears at `j` when that ID repeats later, else -1. Made at the first
        // repeat.
        var repeats: [Int]?
        func noteRepeat(at j: Int, of first: Int) {
            var marks = repeats ?? [Int](repeating: -1, count: all.count)
            repeats = nil  // `marks` the only reference: changed in place, not copied
            marks[j] = -2
            marks[first] = sources?[j] ?? j
            repeats = marks
        }
        do {  // the table's scope
            // At most half full, so a probe ends soon. A bucket is 0 when empty, else the hash's
            // high 32 bits above j + 1 (or j + 1 alone, compared in full, for more than 2^32 - 2
            // IDs, when j + 1 needs the whole word).
            let tagMask: UInt64 = all.count < Int(UInt32.max) ? 0xFFFF_FFFF_0000_0000 : 0
            var size = 16
            while size < all.count * 2 { size <<= 1 }
            let mask = size - 1
            let seed = _KeyHasher.randomSeed()
            let buckets = _ProbeBuckets(zeros: size)
            defer { buckets.deallocate() }
            let lookahead = 8
            for j in all.indices {
                if j + lookahead < all.count {
                    buckets.prefetch(Self.hash(all[j + lookahead], seed: seed) & mask)
                }
                let id = all[j]
                let h = Self.hash(id, seed: seed)
                let tag = UInt64(truncatingIfNeeded: h) & tagMask
                var b = h & mask
                while true {
                    let bucket = buckets[b]
                    if bucket == 0 {
                        buckets[b] = tag | UInt64(j + 1)
                        break
                    }
                    if bucket & tagMask == tag {
                        let first = Int(truncatingIfNeeded: bucket & ~tagMask) - 1
                        if Self.sameCell(all[first], id) {
                            noteRepeat(at: j, of: first)
                            break
                        }
                    }
                    b = (b + 1) & mask
                }
            }
        }
        guard let repeats else {
            ids = all
            lastSources = nil
            self.sources = sources
            return
        }
        var ids: [ID] = [], last: [Int] = []
        ids.reserveCapacity(all.count)
        last.reserveCapacity(all.count)
        for j in all.indices where repeats[j] != -2 {
            ids.append(all[j])
            last.append(repeats[j] >= 0 ? repeats[j] : sources?[j] ?? j)
        }
        self.ids = ids
        lastSources = last
        self.sources = nil
    }

    /// Whether two IDs have the same stored cell: the same bits, or the same bytes.
    @inlinable
    static func sameCell(_ a: ID, _ b: ID) -> Bool {
        a._withCell { x in
            b._withCell { y in
                switch (x, y) {
                case (.fixed(let p), .fixed(let q)): return p == q
                case (.bytes(let p), .bytes(let q)): return p.count == q.count && p.elementsEqual(q)
                default: return false
                }
            }
        }
    }

    @inlinable
    static func hash(_ id: ID, seed: UInt64) -> Int {
        id._withCell { cell -> Int in
            switch cell {
            case .fixed(let bits): return _KeyHasher.hash(bits, seed: seed)
            case .bytes(let bytes):
                var hasher = _KeyHasher(seed: seed)
                hasher.combine(bytes: bytes)
                return hasher.finalize()
            }
        }
    }
}

/// The non-generic part of a unique import: the table, the ID's unique index and slot.
///
/// One import uses it, on its context's isolation domain, and no method holds an access to one
/// of its stored properties across a call that touches the same property: the mutable ones opt
/// out of dynamic exclusivity checking, as `EntityTable`'s do (the checks were ~4% of a
/// 1M half-update import, callgrind).
@usableFromInline
final class _UniqueImporter {
    let context: ModelContext
    let table: EntityTable
    let index: UniqueIndex
    let slot: Int

    @usableFromInline
    init<T: Entity>(context: ModelContext, type: T.Type, idKeyPath: AnyKeyPath) throws {
        self.context = context
        table = try context.table(for: type)
        slot = try table.slot(for: idKeyPath)
        guard let index = table.uniqueIndex(slot: slot) else {
            throw ObjectGraphError(
                .noUniqueIndex,
                "\(table.entity.name).\(table.entity.attributes[slot].name) is the import's unique ID but not a unique constraint; declare it @Attribute(.unique)",
                entity: table.entity.name, key: table.entity.attributes[slot].name)
        }
        self.index = index
    }

    /// Runs `body`, which builds the import's result, as ``EntityTable/buildingResult(_:)``.
    @usableFromInline
    func buildingResult<R>(_ body: () throws -> R) throws -> R { try table.buildingResult(body) }

    /// Whether the entity has any object, pending inserts included.
    @usableFromInline
    var hasObjects: Bool { table.identity.liveCount > 0 }

    /// While not nil, the index's ``UniqueIndex/changes`` count when it holds only keys this
    /// import inserted: every further ID of the import is then known to be absent, and is
    /// inserted without comparing keys (``EntityTable/indexInsertAbsent(row:cell:into:)``). A
    /// hook that changes the index (inserts or deletes an object of this entity, or sets an
    /// ID) makes the count differ, and the import goes back to the comparing insert.
    @exclusivity(unchecked) private var changesWhileOnlyOurs: Int?

    /// Pre-sizes the table and the index for `count` more objects. `empty`: the entity has no
    /// object, pending ones included, and the import's IDs are distinct.
    @usableFromInline
    func prepare(count: Int, empty: Bool) {
        // Pre-sized only when every ID is new: into a populated entity most may be updates, and
        // growing the rows and the index for them copied every row and rehashed every key for
        // nothing (100k updates into 1M objects: ~1 µs per update). New rows and keys then
        // grow the storage as they come, doubling.
        if empty {
            table.reserveRows(count)
            if (index.used + count) * 2 > index.buckets.count { table.growIndex(index, toHold: index.used + count) }
        }
        changesWhileOnlyOurs = empty ? index.changes : nil
        if !empty { prefetcher = RowPrefetcher(table: table, index: index) }
    }

    /// Prefetches the rows of the IDs ahead in an import into a populated entity; made by
    /// ``prepare(count:empty:)``.
    @exclusivity(unchecked) private var prefetcher: RowPrefetcher?
    @exclusivity(unchecked) private var prefetches = 0

    /// Prefetches the index bucket of the ID whose cell is `cell` (an import into an empty
    /// entity has no rows to look up, only buckets to fill).
    @usableFromInline
    func prefetchBucket(_ cell: RawCell) {
        // The buckets' address taken again now and then: the index may grow. Between times a
        // prefetch may name the old address, a wasted hint and never a fault. Through the
        // array each call retained and released its buffer (perf: atomics were a fifth of a
        // 1M import).
        if bucketPrefetches & 4095 == 0 {
            buckets = index.prefetchHint
            bucketMask = index.buckets.count - 1
        }
        bucketPrefetches &+= 1
        buckets.read((index.hash(cell: cell) & bucketMask) * 4)
    }

    @exclusivity(unchecked) private var bucketPrefetches = 0
    @exclusivity(unchecked) private var buckets = PrefetchHint()
    @exclusivity(unchecked) private var bucketMask = 0

    /// The hashes of the IDs ahead, ID `j` at `lookahead[j % 16]`.
    @exclusivity(unchecked) private var lookahead = [Int](repeating: 0, count: 16)

    /// Hashes the cell of the import's `j`-th ID for ``prefetchStages(at:of:)``.
    @usableFromInline
    func remember(_ cell: RawCell, as j: Int) { lookahead[j & 15] = index.hash(cell: cell) }

    /// Runs the prefetch stages for an import at its `k`-th of `count` IDs: the bucket of ID
    /// k + 12, the rows of ID k + 6, the instances of ID k + 3 (all ``remember(_:as:)``ed).
    @usableFromInline
    func prefetchStages(at k: Int, of count: Int) {
        // Now and then take the row arrays' addresses again: an import that inserts grows them.
        prefetches &+= 1
        if prefetches & 4095 == 0, prefetcher != nil { prefetcher = RowPrefetcher(table: table, index: index) }
        guard let prefetcher else { return }
        if k + 12 < count { table.prefetchBucket(hash: lookahead[(k + 12) & 15], in: index) }
        if k + 6 < count { prefetcher.rows(hash: lookahead[(k + 6) & 15]) }
        if k + 3 < count { prefetcher.instancesAndStrings(hash: lookahead[(k + 3) & 15]) }
    }

    /// The live object whose ID is `id`, pending inserts included. O(1).
    @usableFromInline
    func existing<T: Entity, ID: PrimitiveAttribute>(_ id: ID, as type: T.Type) -> T? {
        let row = id._withCell { table.owner(ofCell: $0, in: index) }
        guard let row, table.isVisible(row: row) else { return nil }
        return unsafeDowncast(table.instance(row: row) as AnyObject, to: T.self)
    }

    /// Inserts a new object with its ID already set.
    ///
    /// Inlinable so that the ID's cell is taken in the caller's specialization: through the
    /// generic `PrimitiveAttribute` witnesses it cost about 100 instructions per object.
    @inlinable
    func insert<T: Entity, ID: PrimitiveAttribute>(_ id: ID, as type: T.Type) -> T {
        let row = id._withCell { _insertRow(id: $0) }
        return _object(row: row, as: type)
    }

    /// Inserts a row with the ID cell `cell` and indexes it.
    @usableFromInline
    func _insertRow(id cell: RawCell) -> Int {
        let row = table.insertRow(indexed: false)
        table.writeFresh(row: row, slot: slot, cell)
        guard let changes = changesWhileOnlyOurs, changes == index.changes else {
            changesWhileOnlyOurs = nil
            table.indexAll(row: row)
            return row
        }
        table.indexInsertAbsent(row: row, cell: cell, into: index)
        changesWhileOnlyOurs = index.changes
        // Most entities have one unique constraint: then no loop (iterating retained the array).
        if table.indexes.uniqueIndexes.count > 1 {
            for other in table.indexes.uniqueIndexes where other !== index { table.indexInsert(row: row, into: other) }
        }
        return row
    }

    /// Creates the object of a row `_insertRow` inserted.
    @usableFromInline
    func _object<T: Entity>(row: Int, as type: T.Type) -> T {
        let object = T(_backing: ObjectBacking(table: table, row: Int32(row)))
        table.register(object, row: row)
        if table.hooks.contains(.awakeFromInsert) { object.awakeFromInsert() }
        return object
    }
}
