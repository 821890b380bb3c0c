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
    public func importObjects<T: ImportableObject, S: Sequence>(_ type: T.Type, sourceArray: S) throws -> [T]
    where S.Element == T.ImportSource {
        _ = try table(for: type)
        return try _withImportSavepoint {
            var result: [T] = []
            for (i, source) in sourceArray.enumerated() where T.shouldInsert(from: source, in: self) {
                let object = try insert(type)
                do { try object.didInsert(from: source, in: self) } catch { throw ImportError(sourceIndex: i, underlying: error) }
                result.append(object)
            }
            return result
        }
    }

    /// Imports one object by its unique ID: updates the existing object (if `shouldUpdate`) or
    /// inserts a new one (if `shouldInsert`), setting its ID before `didInsert` runs.
    ///
    /// - Returns: the object, or `nil` when the ID is `nil` or a hook said no.
    /// - Throws: ``ImportError``; nothing is left behind.
    @discardableResult
    public func importUniqueObject<T: ImportableUniqueObject>(_ type: T.Type, from source: T.ImportSource) throws -> T? {
        try importUniqueObjects(type, sourceArray: [source]).first
    }

    /// Imports many objects by unique ID with CoreStore's rules:
    /// - every ID is extracted first (`uniqueID(from:in:)`); a throw there creates nothing, and a
    ///   `nil` ID skips its source;
    /// - when an ID appears several times, the last source wins;
    /// - `preProcess`, if given, may rewrite the ID → source mapping before anything is created;
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
    /// - Throws: ``ImportError``; or ``ObjectGraphError`` with code `noUniqueIndex` when the ID
    ///   attribute is not a unique constraint.
    @inlinable
    public func importUniqueObjects<T: ImportableUniqueObject, S: Sequence>(
        _ type: T.Type, sourceArray: S,
        preProcess: (([T.UniqueIDType: T.ImportSource]) throws -> [T.UniqueIDType: T.ImportSource])? = nil
    ) throws -> [T] where S.Element == T.ImportSource {
        // Inlinable so that it is specialized for `T` in the caller's module: unspecialized, every
        // dictionary operation on `T.UniqueIDType` and every hook call goes through generic
        // metadata lookups (measured with callgrind: a 1M import took 2.9 s instead of 1.2 s).
        let importer = try _UniqueImporter(context: self, type: type, idKeyPath: T.uniqueIDKeyPath)
        // 1. All IDs first. `ids[k]` is the k-th distinct ID in order of first appearance and
        //    `last[k]` the index of its last source (the one that wins).
        let sources = Array(sourceArray)
        var distinct = _DistinctIDs<T.UniqueIDType>(capacity: sources.count)
        for i in sources.indices {
            let id: T.UniqueIDType?
            // `sources[i]` as the argument, not a loop variable: borrowed, not copied.
            do { id = try T.uniqueID(from: sources[i], in: self) } catch { throw ImportError(sourceIndex: i, underlying: error) }
            guard let id else { continue }
            distinct.note(id, source: i)
        }
        let ids = distinct.ids, last = distinct.last
        var mapping: [T.UniqueIDType: T.ImportSource]?
        if let preProcess {
            var all: [T.UniqueIDType: T.ImportSource] = [:]
            for (k, id) in ids.enumerated() { all[id] = sources[last[k]] }
            mapping = try preProcess(all)
        }
        // 2. Update or insert, atomically. Into an empty entity every (distinct) ID is new.
        let mayExist = importer.hasObjects
        return try _withImportSavepoint {
            importer.prepare(count: ids.count)
            var result: [T] = []
            result.reserveCapacity(ids.count)
            for (k, id) in ids.enumerated() {
                let index = last[k]
                let source: T.ImportSource
                if let mapping {
                    guard let mapped = mapping[id] else { continue }
                    source = mapped
                } else {
                    source = sources[index]
                }
                if mayExist, let existing = importer.existing(id, as: T.self) {
                    guard T.shouldUpdate(from: source, in: self) else { continue }
                    do { try existing.update(from: source, in: self) } catch { throw ImportError(sourceIndex: index, underlying: error) }
                    result.append(existing)
                } else {
                    guard T.shouldInsert(from: source, in: self) else { continue }
                    let object = importer.insert(id, as: T.self)
                    do { try object.didInsert(from: source, in: self) } catch { throw ImportError(sourceIndex: index, underlying: error) }
                    result.append(object)
                }
            }
            return result
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

extension EntityTable {
    /// Pre-sizes an index before a bulk import.
    func growIndex(_ index: UniqueIndex, toHold count: Int) {
        let owners = index.buckets.filter { $0 >= 0 }
        index.reset(capacity: max(count, owners.count))
        let saved = index.duplicates
        for r in owners { indexInsert(row: Int(r), into: index) }
        index.duplicates = saved
    }
}

/// The distinct IDs of an import in order of first appearance, each with the index of its last
/// source (the one that wins).
///
/// For IDs whose stored cell is equal exactly when the IDs are (integers, `Bool`, `UUID`) this
/// is an open-addressing table of positions hashed by the cell with ``_KeyHasher``; a
/// `Dictionary` (SipHash) cost 8% of a 1M import with the index's hashing (callgrind). Strings
/// compare by canonical equivalence, not bytes, and doubles treat -0.0 as 0.0, so those keep the
/// dictionary.
@usableFromInline
struct _DistinctIDs<ID: PrimitiveAttribute & Hashable> {
    /// `ids[k]`: the k-th distinct ID.
    @usableFromInline var ids: [ID] = []
    /// `last[k]`: the index of the last source with ID `ids[k]`.
    @usableFromInline var last: [Int] = []
    /// Positions in `ids`, -1 for empty; at most half full.
    @usableFromInline var buckets: [Int32] = []
    @usableFromInline var mask = 0
    @usableFromInline let seed: UInt64
    @usableFromInline var positions: [ID: Int] = [:]
    @usableFromInline let byCell: Bool

    @inlinable
    init(capacity: Int) {
        ids.reserveCapacity(capacity)
        last.reserveCapacity(capacity)
        seed = _KeyHasher.randomSeed()
        byCell = ID.attributeType.cellEqualityIsEquality && capacity < Int(Int32.max)
        if byCell {
            var size = 16
            while size < capacity * 2 { size <<= 1 }
            buckets = Array(repeating: -1, count: size)
            mask = size - 1
        } else {
            positions.reserveCapacity(capacity)
        }
    }

    /// Records that source `i` has ID `id`.
    @inlinable
    mutating func note(_ id: ID, source i: Int) {
        guard byCell else {
            if let k = positions[id] {
                last[k] = i
            } else {
                positions[id] = ids.count
                ids.append(id)
                last.append(i)
            }
            return
        }
        var b = Self.hash(id, seed: seed) & mask
        while true {
            let k = Int(buckets[b])
            if k < 0 { break }
            if ids[k] == id {
                last[k] = i
                return
            }
            b = (b + 1) & mask
        }
        if ids.count * 2 >= buckets.count { return grow(adding: id, source: i) }
        buckets[b] = Int32(ids.count)
        ids.append(id)
        last.append(i)
    }

    /// Doubles the table (only when the capacity given was too small), then adds `id`.
    @usableFromInline
    mutating func grow(adding id: ID, source i: Int) {
        ids.append(id)
        last.append(i)
        let size = buckets.count * 2
        buckets = Array(repeating: -1, count: size)
        mask = size - 1
        for (k, id) in ids.enumerated() {
            var b = Self.hash(id, seed: seed) & mask
            while buckets[b] >= 0 { b = (b + 1) & mask }
            buckets[b] = Int32(k)
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

extension AttributeType {
    /// Whether two values of this type are equal (`==`) exactly when their stored cells are.
    @usableFromInline
    var cellEqualityIsEquality: Bool {
        switch self {
        case .bool, .int8, .int16, .int32, .int64, .uint8, .uint16, .uint32, .uint64, .uuid: true
        case .double, .float, .date, .string, .data, .url: false
        }
    }
}

/// The non-generic part of a unique import: the table, the ID's unique index and slot.
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

    /// Whether the entity has any object, pending inserts included.
    @usableFromInline
    var hasObjects: Bool { table.liveCount > 0 }

    /// Pre-sizes the table and the index for `count` more objects.
    @usableFromInline
    func prepare(count: Int) {
        table.reserve(count)
        if (index.used + count) * 2 > index.buckets.count { table.growIndex(index, toHold: index.used + count) }
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
        table.indexAll(row: row)
        return row
    }

    /// Creates the object of a row `_insertRow` inserted.
    @usableFromInline
    func _object<T: Entity>(row: Int, as type: T.Type) -> T {
        let object = T(_backing: ObjectBacking(table: table, row: Int32(row)))
        table.instances[row] = object
        if table.hooks.contains(.awakeFromInsert) { object.awakeFromInsert() }
        return object
    }
}
