internal import CPrefetch

// The one place that touches the memory of an entity table's columns, of its unique indexes'
// buckets and of an import's table of distinct IDs. Everything else reaches them through the
// arrays, through a ``ColumnsHandle`` (``EntityTable/read(_:)``, ``EntityTable/update(_:)``),
// or through the named operations below.

// MARK: The handle

/// An entity table's columns for the span of one closure: the cells and null bits of every
/// row, and in a read handle also the row flags and the before-images.
///
/// The columns are Swift arrays stored in a class. Reached through the arrays, every cell costs
/// a bounds check and every write a uniqueness check, and each call the compiler cannot see
/// into makes it load the array again. A loop over many cells takes the buffers once instead:
/// ``EntityTable/read(_:)`` and ``EntityTable/update(_:)`` pass a handle whose typed accessors
/// address a cell by row and slot, with their bounds checked by `assert` (debug builds only).
///
/// A handle is valid only inside the closure it is passed to, and only while nothing grows or
/// replaces the columns: the closure must not allocate, append or release rows, nor start or
/// end a transaction. Appending to the arena is fine (the arena is not a column).
struct ColumnsHandle {
    /// Cells per row.
    let stride: Int
    /// Null-bit words per row.
    let maskWords: Int
    /// The table's `values`: `stride` cells per row (`valueCount` in all).
    private let values: UnsafeMutablePointer<UInt64>
    private let valueCount: Int
    /// The table's `nulls`: `maskWords` words of null bits per row (`nullCount` in all).
    private let nulls: UnsafeMutablePointer<UInt64>
    private let nullCount: Int
    /// The table's `flags`, one per row (`flagCount`, 0 in an update handle).
    private let flags: UnsafePointer<UInt8>
    private let flagCount: Int
    /// The table's stored `beforeIndex` rows (``RowSlots``): the rows past them have none.
    private let beforeIndex: UnsafePointer<Int32>
    /// The rows `beforeIndex` stores (``RowSlots``); the rows past them have no before-image.
    private let beforeIndexCount: Int
    /// The table's `beforeValues` and `beforeNulls`, laid out as `values` and `nulls` (empty in
    /// an update handle).
    private let beforeValues: UnsafePointer<UInt64>
    private let beforeValueCount: Int
    private let beforeNulls: UnsafePointer<UInt64>
    private let beforeNullCount: Int
    #if DEBUG
        /// Whether the handle came from ``EntityTable/update(_:)``: writes assert it.
        private let isMutable: Bool
    #endif

    /// A read handle over every column.
    fileprivate init(
        stride: Int, maskWords: Int, values: UnsafeBufferPointer<UInt64>, nulls: UnsafeBufferPointer<UInt64>,
        flags: UnsafeBufferPointer<UInt8>, beforeIndex: UnsafeBufferPointer<Int32>,
        beforeValues: UnsafeBufferPointer<UInt64>, beforeNulls: UnsafeBufferPointer<UInt64>
    ) {
        self.stride = stride
        self.maskWords = maskWords
        self.values = UnsafeMutablePointer(mutating: Self.base(values))
        valueCount = values.count
        self.nulls = UnsafeMutablePointer(mutating: Self.base(nulls))
        nullCount = nulls.count
        self.flags = Self.base(flags)
        flagCount = flags.count
        self.beforeIndex = Self.base(beforeIndex)
        beforeIndexCount = beforeIndex.count
        self.beforeValues = Self.base(beforeValues)
        beforeValueCount = beforeValues.count
        self.beforeNulls = Self.base(beforeNulls)
        beforeNullCount = beforeNulls.count
        #if DEBUG
            isMutable = false
        #endif
    }

    /// An update handle: the cells and null bits, writable.
    fileprivate init(
        stride: Int, maskWords: Int, values: UnsafeMutableBufferPointer<UInt64>,
        nulls: UnsafeMutableBufferPointer<UInt64>
    ) {
        self.stride = stride
        self.maskWords = maskWords
        self.values = Self.base(values)
        valueCount = values.count
        self.nulls = Self.base(nulls)
        nullCount = nulls.count
        flags = Self.base(UnsafeBufferPointer<UInt8>(start: nil, count: 0))
        flagCount = 0
        beforeIndex = Self.base(UnsafeBufferPointer<Int32>(start: nil, count: 0))
        beforeIndexCount = 0
        beforeValues = Self.base(UnsafeBufferPointer<UInt64>(start: nil, count: 0))
        beforeValueCount = 0
        beforeNulls = beforeValues
        beforeNullCount = 0
        #if DEBUG
            isMutable = true
        #endif
    }

    /// The start of `buffer`; for an empty one (an entity without attributes has no cells), an
    /// aligned address that nothing reads, since every access is within the count.
    @inline(__always)
    fileprivate static func base<T>(_ buffer: UnsafeBufferPointer<T>) -> UnsafePointer<T> {
        buffer.baseAddress ?? UnsafePointer(bitPattern: MemoryLayout<T>.alignment).unsafelyUnwrapped
    }

    /// ``base(_:)`` of a mutable buffer.
    @inline(__always)
    private static func base<T>(_ buffer: UnsafeMutableBufferPointer<T>) -> UnsafeMutablePointer<T> {
        buffer.baseAddress ?? UnsafeMutablePointer(bitPattern: MemoryLayout<T>.alignment).unsafelyUnwrapped
    }

    /// Asserts that this is an update handle (debug builds only).
    @inline(__always)
    private func assertMutable() {
        #if DEBUG
            assert(isMutable, "a write through a read handle")
        #endif
    }

    /// The index of `row`'s cell of `slot` in `values`, bounds asserted.
    @inline(__always)
    private func cellIndex(_ row: Int, _ slot: Int) -> Int {
        assert(row >= 0 && slot >= 0 && slot < stride && (row + 1) * stride <= valueCount, "cell out of bounds")
        return row &* stride &+ slot
    }

    /// The index of the word holding `row`'s null bit of `slot` in `nulls`, bounds asserted.
    @inline(__always)
    private func maskIndex(_ row: Int, _ slot: Int) -> Int {
        assert(row >= 0 && slot >= 0 && slot < stride && (row + 1) * maskWords <= nullCount, "null bit out of bounds")
        return row &* maskWords &+ slot &>> 6
    }

    // MARK: Cells and null bits

    /// The cell of `slot` in `row` (its bits; meaningless when the null bit is set).
    @inline(__always)
    func cell(row: Int, slot: Int) -> UInt64 { values[cellIndex(row, slot)] }

    /// Writes the cell of `slot` in `row`; the null bit is left as it is.
    @inline(__always)
    func setCell(row: Int, slot: Int, _ bits: UInt64) {
        assertMutable()
        values[cellIndex(row, slot)] = bits
    }

    /// Whether `slot` is unset (`nil`) in `row`.
    @inline(__always)
    func isNull(row: Int, slot: Int) -> Bool {
        nulls[maskIndex(row, slot)] & (1 &<< UInt64(slot & 63)) != 0
    }

    /// Sets or clears the null bit of `slot` in `row`. A bit already clear is not written: null
    /// words that only ever hold zeros stay on zero pages, without memory (``ZeroPages``).
    @inline(__always)
    func setNull(row: Int, slot: Int, _ isNull: Bool) {
        assertMutable()
        let i = maskIndex(row, slot), bit = UInt64(1) &<< UInt64(slot & 63)
        if isNull { nulls[i] |= bit } else if nulls[i] & bit != 0 { nulls[i] &= ~bit }
    }

    /// Writes every cell and null word of `row`: the cells from `template`, the null words from
    /// `nulls` (a new row's defaults).
    @inline(__always)
    func reset(row: Int, cells template: borrowing DefaultCells, nulls defaults: [UInt64]) {
        assertMutable()
        assert((row + 1) * stride <= valueCount && (row + 1) * maskWords <= nullCount && defaults.count == maskWords)
        (values + row &* stride).update(from: template.base, count: stride)
        setNullWords(row: row, to: defaults)
    }

    /// Makes `row`'s null words `words`, writing only those that differ: zero words on zero
    /// pages stay unwritten (``ZeroPages``).
    @inline(__always)
    func setNullWords(row: Int, to words: [UInt64]) {
        for w in 0..<maskWords where nulls[row &* maskWords &+ w] != words[w] {
            nulls[row &* maskWords &+ w] = words[w]
        }
    }

    /// Writes `cells` and `nulls` (a new row's defaults) into every row of `rows`.
    func fill(rows: Range<Int>, cells: [UInt64], nulls defaults: [UInt64]) {
        assertMutable()
        assert(rows.upperBound * stride <= valueCount && rows.upperBound * maskWords <= nullCount)
        assert(cells.count == stride && defaults.count == maskWords)
        for row in rows {
            for slot in 0..<stride { values[row * stride + slot] = cells[slot] }
            setNullWords(row: row, to: defaults)
        }
    }

    // MARK: Rows (read handles)

    /// The flags of `row` (``EntityTable/Flags``).
    @inline(__always)
    func flags(row: Int) -> UInt8 {
        assert(row >= 0 && row < flagCount, "row out of bounds (or an update handle)")
        return flags[row]
    }

    /// Whether `row` is live and has none of the flags in `hidden`.
    @inline(__always)
    func isInView(row: Int, hidden: UInt8) -> Bool {
        flags(row: row) & (EntityTable.Flags.live | hidden) == EntityTable.Flags.live
    }

    /// The index of `row`'s before-image, or nil when it has none (unchanged in the
    /// transaction, or inserted in it).
    @inline(__always)
    func beforeImage(ofRow row: Int) -> Int? {
        assert(row >= 0 && row < flagCount, "row out of bounds (or an update handle)")
        guard row < beforeIndexCount else { return nil }  // past the stored rows: none
        let b = beforeIndex[row]
        return b >= 0 ? Int(b) : nil
    }

    /// The cell and null bit of `slot` in before-image `b`.
    @inline(__always)
    func committedCell(beforeImage b: Int, slot: Int) -> (bits: UInt64, isNull: Bool) {
        assert(
            b >= 0 && slot >= 0 && slot < stride && (b + 1) * stride <= beforeValueCount
                && (b + 1) * maskWords <= beforeNullCount)
        let isNull = beforeNulls[b &* maskWords &+ slot &>> 6] & (1 &<< UInt64(slot & 63)) != 0
        return (beforeValues[b &* stride &+ slot], isNull)
    }

    /// The cell and null bit of `slot` in `row`'s committed image when `committed` and the row
    /// has a before-image, else in its current one.
    @inline(__always)
    func cell(row: Int, slot: Int, committed: Bool) -> (bits: UInt64, isNull: Bool) {
        if committed, let b = beforeImage(ofRow: row) { return committedCell(beforeImage: b, slot: slot) }
        return (cell(row: row, slot: slot), isNull(row: row, slot: slot))
    }

    /// `row`'s cells for evaluating a condition: its committed image when `committed` and the
    /// row has a before-image, else its current one; byte strings are read from `arena`.
    @inline(__always)
    func cells(row: Int, committed: Bool, arena: ArenaBytes) -> RowCells {
        if committed, let b = beforeImage(ofRow: row) {
            assert((b + 1) * stride <= beforeValueCount && (b + 1) * maskWords <= beforeNullCount)
            return RowCells(
                cells: beforeValues + b &* stride, nulls: beforeNulls + b &* maskWords, stride: stride, arena: arena)
        }
        assert((row + 1) * stride <= valueCount && (row + 1) * maskWords <= nullCount)
        return RowCells(cells: values + row &* stride, nulls: nulls + row &* maskWords, stride: stride, arena: arena)
    }

    /// Copies the cells of `slot` in `rows` into `cells[i]` (the i-th row's) and sets bit `i`
    /// of `bitmap` for each null one; returns how many are null. With `committed`, a row with
    /// a before-image contributes that. `cells` and `bitmap` must hold `rows.count` entries;
    /// `bitmap` is cleared first.
    func gather(slot: Int, rows: [Int], committed: Bool, into cells: inout [UInt64], nulls bitmap: inout [UInt8]) -> Int
    {
        assert(cells.count >= rows.count && bitmap.count >= (rows.count + 7) / 8)
        var nullCount = 0
        cells.withUnsafeMutableBufferPointer { cells in
            bitmap.withUnsafeMutableBufferPointer { bitmap in
                bitmap.update(repeating: 0)
                for (i, row) in rows.enumerated() {
                    let (bits, isNull) = cell(row: row, slot: slot, committed: committed)
                    cells[i] = bits
                    if isNull {
                        bitmap[i / 8] |= 1 << UInt8(i % 8)
                        nullCount += 1
                    }
                }
            }
        }
        return nullCount
    }

    /// Hints that the cell of `slot` in `row` is read soon.
    @inline(__always)
    func prefetchCell(row: Int, slot: Int) {
        cprefetch_read(values + (row &* stride &+ slot))
    }
}

/// One row's cells and null bits, and the arena their byte strings are in: what a
/// ``StorageCondition`` is evaluated on (``ColumnsHandle/cells(row:committed:arena:)``).
struct RowCells {
    /// The row's first cell.
    private let cells: UnsafePointer<UInt64>
    /// The row's first null word.
    private let nulls: UnsafePointer<UInt64>
    #if DEBUG
        /// Cells in the row, for the bounds assertions.
        private let stride: Int
    #endif
    /// The bytes of the table's arena.
    let arena: ArenaBytes

    @inline(__always)
    fileprivate init(cells: UnsafePointer<UInt64>, nulls: UnsafePointer<UInt64>, stride: Int, arena: ArenaBytes) {
        self.cells = cells
        self.nulls = nulls
        #if DEBUG
            self.stride = stride
        #endif
        self.arena = arena
    }

    /// Row `row` of cells and null words laid out as an entity table's (`stride` cells and
    /// `maskWords` null words per row): a snapshot page's row.
    @inline(__always)
    init(
        row: Int, cells: UnsafeBufferPointer<UInt64>, nulls: UnsafeBufferPointer<UInt64>, stride: Int, maskWords: Int,
        arena: ArenaBytes
    ) {
        assert((row + 1) * stride <= cells.count && (row + 1) * maskWords <= nulls.count)
        self.init(
            cells: ColumnsHandle.base(cells) + row &* stride, nulls: ColumnsHandle.base(nulls) + row &* maskWords,
            stride: stride,
            arena: arena)
    }

    /// Asserts that `slot` is one of the row's (debug builds only).
    @inline(__always)
    private func check(_ slot: Int) {
        #if DEBUG
            assert(slot >= 0 && slot < stride, "slot out of bounds")
        #endif
    }

    /// Whether `slot` is unset.
    @inline(__always)
    func isNull(_ slot: Int) -> Bool {
        check(slot)
        return nulls[slot &>> 6] & (1 &<< UInt64(slot & 63)) != 0
    }

    /// The cell of `slot`.
    @inline(__always)
    func cell(_ slot: Int) -> UInt64 {
        check(slot)
        return cells[slot]
    }
}

/// A row of cells a new row is copied from: the table's defaults, kept apart from the
/// `defaultValues` array so that copying them retains nothing (a retain and release per row of
/// a bulk import).
struct DefaultCells: ~Copyable {
    /// The cells; at least one, so that the allocation is never empty.
    fileprivate let base: UnsafeMutablePointer<UInt64>
    /// The number of cells (the table's stride).
    private let count: Int

    /// `cells.count` cells holding `cells`.
    init(_ cells: [UInt64]) {
        count = cells.count
        base = .allocate(capacity: max(1, count))
        base.initialize(repeating: 0, count: max(1, count))
        base.update(from: cells, count: count)
    }

    deinit { base.deallocate() }

    /// Replaces the cells with `cells` (as many as there are).
    func set(_ cells: [UInt64]) {
        precondition(cells.count == count)
        base.update(from: cells, count: count)
    }
}

// MARK: Entry points

extension EntityTable {
    /// Calls `body` with a handle that reads every column: cells, null bits, flags and
    /// before-images. `body` must not change the table.
    @inline(__always)
    func read<R, E: Error>(_ body: (ColumnsHandle) throws(E) -> R) throws(E) -> R {
        let stride = self.stride, maskWords = self.maskWords
        return try values.withUnsafeBufferPointer { v throws(E) in
            try nulls.withUnsafeBufferPointer { n throws(E) in
                try flags.withUnsafeBufferPointer { f throws(E) in
                    try changes.beforeIndex.withUnsafeBufferPointer { bi throws(E) in
                        try changes.beforeValues.withUnsafeBufferPointer { bv throws(E) in
                            try changes.beforeNulls.withUnsafeBufferPointer { bn throws(E) in
                                try body(
                                    ColumnsHandle(
                                        stride: stride, maskWords: maskWords, values: v, nulls: n, flags: f,
                                        beforeIndex: bi,
                                        beforeValues: bv, beforeNulls: bn))
                            }
                        }
                    }
                }
            }
        }
    }

    /// Calls `body` with a handle that reads and writes the cells and null bits (nothing
    /// else: flags and before-images stay with the table's arrays). One uniqueness check per
    /// column for the whole closure instead of one per write.
    @inline(__always)
    func update<R, E: Error>(_ body: (ColumnsHandle) throws(E) -> R) throws(E) -> R {
        let stride = self.stride, maskWords = self.maskWords
        return try values.withUnsafeMutableBufferPointer { v throws(E) in
            try nulls.withUnsafeMutableBufferPointer { n throws(E) in
                try body(ColumnsHandle(stride: stride, maskWords: maskWords, values: v, nulls: n))
            }
        }
    }
}

// MARK: Bulk operations on the columns

extension EntityTable {
    /// Appends one row of default cells and null words to the columns (a new row past the
    /// room ``reserveRows(_:)`` made for its cells; its null words may have room, which
    /// ``reserveRows(_:)`` makes further ahead, and are then written in place). Through buffer
    /// pointers: a `memcpy` instead of the generic array append (callgrind).
    func appendDefaultCells() {
        let row = values.count / stride
        defaultValues.withUnsafeBufferPointer { values.append(contentsOf: $0) }
        if nulls.count >= (row + 1) * maskWords {
            update { $0.setNullWords(row: row, to: defaultNulls) }
        } else {
            defaultNulls.withUnsafeBufferPointer { nulls.append(contentsOf: $0) }
        }
    }

    /// Sets `rowOfSerial` for `serials`, the i-th of them to row `first + i`. The map must
    /// already be long enough.
    func mapSerials<Serials: Collection<UInt64>>(_ serials: Serials, toRowsFrom first: Int) {
        identity.rowOfSerial.withUnsafeMutableBufferPointer { map in
            for (i, s) in serials.enumerated() { map[Int(s - 1)] = Int32(first + i) }
        }
    }

    /// Appends `row`'s cells and null words to the before-images.
    @inline(__always)
    func appendBeforeImage(ofRow row: Int) {
        let stride = self.stride, maskWords = self.maskWords
        values.withUnsafeBufferPointer { v in
            changes.beforeValues.append(contentsOf: UnsafeBufferPointer(rebasing: v[row * stride..<(row + 1) * stride]))
        }
        nulls.withUnsafeBufferPointer { n in
            changes.beforeNulls.append(
                contentsOf: UnsafeBufferPointer(rebasing: n[row * maskWords..<(row + 1) * maskWords]))
        }
    }

    /// Copies the before-image of every row in `dirtyRows` back into its cells and null
    /// words, and clears its dirty flag and before-image index (rollback).
    func restoreBeforeImages() {
        let stride = self.stride, maskWords = self.maskWords
        values.withUnsafeMutableBufferPointer { v in
            nulls.withUnsafeMutableBufferPointer { n in
                changes.beforeValues.withUnsafeBufferPointer { bv in
                    changes.beforeNulls.withUnsafeBufferPointer { bn in
                        for r in changes.dirtyRows {
                            let row = Int(r)
                            let b = Int(changes.beforeIndex[row])
                            guard b >= 0 else { continue }
                            for i in 0..<stride { v[row * stride + i] = bv[b * stride + i] }
                            for i in 0..<maskWords { n[row * maskWords + i] = bn[b * maskWords + i] }
                            flags[row] &= ~Flags.dirty
                            changes.beforeIndex.clear(row)
                        }
                    }
                }
            }
        }
    }
}

// MARK: Prefetch hints

/// Where an array's or the arena's memory started when the hint was taken, for prefetch hints
/// only: never read or written through. Should the memory move (an array or the arena grows), a
/// prefetch of the old address is a wasted hint, not a fault.
struct PrefetchHint {
    /// The address the offsets are from; nil for no hints.
    private let base: UnsafeRawPointer?

    /// The start of `array`'s elements now.
    init<T>(_ array: [T]) { base = array.withUnsafeBytes { $0.baseAddress } }

    /// The start of `arena`'s bytes now.
    init(_ arena: ByteArena) { base = arena.baseAddress }

    /// No address: every hint is a no-op.
    init() { base = nil }

    /// Hints that the byte at `offset` is read soon.
    @inline(__always)
    func read(_ offset: Int) { if let base { cprefetch_read(base + offset) } }

    /// Hints that the byte at `offset` is written soon.
    @inline(__always)
    func write(_ offset: Int) { if let base { cprefetch_write(base + offset) } }
}

extension EntityTable {
    /// Prefetches what a lookup reads of `row` after its key matches: its flags, its instance
    /// slot and its before-image index. Each address needs only the row, so the misses overlap
    /// with the key's comparison instead of following it one by one.
    @inline(__always)
    func prefetchRowState(_ row: Int) {
        flags.withUnsafeBufferPointer { if let base = $0.baseAddress { cprefetch_read(base + row) } }
        instances.withUnsafeBufferPointer {
            if row < $0.count, let base = $0.baseAddress { cprefetch_read(base + row) }
        }
        changes.beforeIndex.withUnsafeBufferPointer {
            if row < $0.count, let base = $0.baseAddress { cprefetch_read(base + row) }
        }
    }

    /// Prefetches the cell of `row` at `slot`.
    func prefetchCell(row: Int, slot: Int) {
        values.withUnsafeBufferPointer { if let base = $0.baseAddress { cprefetch_read(base + row * stride + slot) } }
    }

    /// Prefetches, for the rows in the first `limit` buckets of the chain where a probe for
    /// `hash` starts in `buckets` (an index's), their instances (read without retaining) and
    /// the arena bytes their cells in `variableSlots` point to (`arena`).
    @inline(__always)
    func prefetchInstancesAndStrings(
        ofChainOf hash: Int, in buckets: [Int32], limit: Int, variableSlots: [Int], arena: PrefetchHint
    ) {
        let stride = self.stride
        instances.withUnsafeBytes { slots in
            values.withUnsafeBufferPointer { cells in
                UniqueIndex.forEachRow(in: buckets, chainOf: hash, limit: limit) { row in
                    guard row < slots.count / 8 else { return }
                    // `AnyObject?` is one pointer, nil being 0.
                    let bits = slots.load(fromByteOffset: row * 8, as: UInt.self)
                    if let object = UnsafeRawPointer(bitPattern: bits) { cprefetch_write(object) }
                    guard (row + 1) * stride <= cells.count else { return }
                    for slot in variableSlots {
                        // A null cell's bits are stale or 0: a wasted hint at worst.
                        arena.read(ArenaRef(cells[row * stride + slot]).offset)
                    }
                }
            }
        }
    }
}

// MARK: The import's table of distinct IDs

/// The buckets of an import's table of distinct IDs (``_DistinctIDs``): `count` 64-bit words,
/// zero at first, freed by ``deallocate()``. Reached without the uniqueness and bounds checks
/// of an array (the bounds are asserted, in debug builds only): through an array, the checks of
/// the probe loop over 1M IDs cost ~20 instructions an ID (callgrind). Inlined into the
/// importing module with the generic import.
@usableFromInline
struct _ProbeBuckets {
    /// The first bucket.
    @usableFromInline let base: UnsafeMutablePointer<UInt64>
    /// The number of buckets.
    @usableFromInline let count: Int

    /// `count` buckets, all zero.
    @inlinable
    init(zeros count: Int) {
        self.count = count
        base = .allocate(capacity: max(1, count))
        base.initialize(repeating: 0, count: max(1, count))
    }

    /// Frees the buckets; nothing may use them afterwards.
    @inlinable
    func deallocate() { base.deallocate() }

    /// Bucket `i`.
    @inlinable
    subscript(i: Int) -> UInt64 {
        @inline(__always) get {
            assert(i >= 0 && i < count, "bucket out of bounds")
            return base[i]
        }
        @inline(__always) nonmutating set {
            assert(i >= 0 && i < count, "bucket out of bounds")
            base[i] = newValue
        }
    }

    /// Hints that bucket `i` is read soon (never faults, changes nothing).
    @usableFromInline
    func prefetch(_ i: Int) { cprefetch_read(base + i) }
}

// MARK: The unique indexes' buckets

extension UniqueIndex {
    /// Where the buckets are now, for prefetch hints.
    var prefetchHint: PrefetchHint { PrefetchHint(buckets) }

    /// Prefetches the bucket where a probe for `hash` starts.
    @inline(__always)
    func prefetchHome(_ hash: Int) {
        let b = home(hash)
        buckets.withUnsafeBytes { if let base = $0.baseAddress { cprefetch_read(base + b * 4) } }
    }

    /// Calls `body` with the rows in the first `limit` buckets of the chain where a probe for
    /// `hash` starts in `buckets` (an index's), up to its first empty bucket. Static, so that a
    /// caller holding the index `unowned(unsafe)` passes only the array (one retain, not two).
    @inline(__always)
    static func forEachRow(in buckets: [Int32], chainOf hash: Int, limit: Int, _ body: (Int) -> Void) {
        buckets.withUnsafeBufferPointer { buckets in
            let mask = buckets.count - 1
            var b = hash & mask
            for _ in 0..<limit {
                let r = buckets[b]
                if r == Self.empty { return }
                if r >= 0 { body(Int(r)) }
                b = (b + 1) & mask
            }
        }
    }

    /// Puts `row` into the first bucket from `home` on that holds no row (empty or a
    /// tombstone), comparing no key. The table must have a free bucket.
    @inline(__always)
    func claimFreeBucket(from home: Int, row: Int) {
        let mask = self.mask
        var b = home
        buckets.withUnsafeMutableBufferPointer { buckets in
            while buckets[b] >= 0 { b = (b + 1) & mask }
            if buckets[b] == Self.empty { used += 1 }
            buckets[b] = Int32(row)
        }
    }

    /// Fills the empty index with `rows`, in their order: each takes the first empty bucket of
    /// its probe, unless a row met on the way has the same key, when it becomes a duplicate.
    /// `hashes[row]` is the low 32 bits of a row's key hash, which name its home bucket (an
    /// index has at most 2^32 buckets); only rows whose hashes agree there are compared with
    /// `sameKey`. Both the buckets and the hashes of the rows met are cache misses in a large
    /// table: the bucket of the row 32 places ahead is prefetched, and 16 places ahead the hash
    /// of the row that bucket holds (filling to half full, about one insert in four finds its
    /// home bucket taken).
    func placeRows(_ rows: [Int32], hashes: [UInt32], sameKey: (Int, Int) -> Bool) {
        let (placed, found) = buckets.withUnsafeMutableBufferPointer { buckets in
            hashes.withUnsafeBufferPointer { hashes in
                rows.withUnsafeBufferPointer { rows in
                    Self.place(rows, count: rows.count, hashes: hashes, into: buckets, sameKey: sameKey)
                }
            }
        }
        used += placed
        duplicates.formUnion(found)
        changes += 1
    }

    /// ``placeRows(_:hashes:sameKey:)`` of `count` rows into `buckets` (a power of two of
    /// them, at most 2^32, all empty or holding rows placed before): the rows `list` holds, or
    /// 0..<count when it is nil. Returns how many rows took a bucket, and the rows that met a
    /// row with the same key.
    static func place(
        _ list: UnsafeBufferPointer<Int32>?, count n: Int, hashes: UnsafeBufferPointer<UInt32>,
        into buckets: UnsafeMutableBufferPointer<Int32>, sameKey: (Int, Int) -> Bool
    ) -> (placed: Int, duplicates: [Int32]) {
        let mask = buckets.count - 1
        @inline(__always) func rows(_ j: Int) -> Int32 { list.map { $0[j] } ?? Int32(truncatingIfNeeded: j) }
        assert(buckets.count & mask == 0 && mask <= Int(UInt32.max))
        var placed = 0
        var found: [Int32] = []
        guard let base = buckets.baseAddress, let hashBase = hashes.baseAddress else { return (0, []) }
        for j in 0..<n {
            if j + 32 < n { cprefetch_write(base + (Int(hashes[Int(rows(j + 32))]) & mask)) }
            if j + 16 < n, case let r = buckets[Int(hashes[Int(rows(j + 16))]) & mask], r >= 0 {
                cprefetch_read(hashBase + Int(r))
            }
            let row = rows(j), h = hashes[Int(row)]
            var b = Int(h) & mask
            while true {
                let r = buckets[b]
                if r == empty {
                    buckets[b] = row
                    placed += 1
                    break
                }
                if hashes[Int(r)] == h, sameKey(Int(r), Int(row)) {
                    found.append(row)
                    break
                }
                b = (b + 1) & mask
            }
        }
        return (placed, found)
    }

    /// Puts `owners`, rows with distinct keys of one fixed-size cell in `slot` that are not in
    /// the index, into free buckets without comparing keys: the hash straight from the cell
    /// (`columns`), prefetching the key 16 owners ahead and the bucket 8 ahead. The general
    /// path cost ~450 instructions an owner (callgrind).
    func placeFixedKeys(of owners: [Int32], slot: Int, in columns: ColumnsHandle) {
        let mask = self.mask, seed = self.seed, n = owners.count
        buckets.withUnsafeMutableBufferPointer { buckets in
            for j in 0..<n {
                if j + 16 < n { columns.prefetchCell(row: Int(owners[j + 16]), slot: slot) }
                if j + 8 < n {
                    let h = _KeyHasher.hash(columns.cell(row: Int(owners[j + 8]), slot: slot), seed: seed)
                    buckets.baseAddress.map { cprefetch_write($0 + (h & mask)) }
                }
                let r = owners[j]
                var b = _KeyHasher.hash(columns.cell(row: Int(r), slot: slot), seed: seed) & mask
                while buckets[b] != Self.empty { b = (b + 1) & mask }
                buckets[b] = r
            }
        }
        used += n
    }
}

// MARK: Warming pages on another core

extension EntityTable {
    /// Has another core fault in the memory that the next `rows` rows will be written to, as
    /// far as the columns already have room for them (``PageWarmer``). Replay calls it for a
    /// block's inserts, after ``reserve(_:)`` and before it fills the rows.
    ///
    /// Null words that will start as zero pages are not warmed: warming would make them
    /// resident. Replay warms them with ``warmNulls(rows:)`` when a column writes them.
    func warm(rows n: Int) {
        let first = flags.count
        PageWarmer.warm(values, first * stride..<(first + n) * stride)
        if !nullsStartAsZeroPages(rows: first + n) {
            PageWarmer.warm(nulls, first * maskWords..<(first + n) * maskWords)
        }
        PageWarmer.warm(flags, first..<first + n)
        if !identity.serialOfRow.isCounting { PageWarmer.warm(identity.serialOfRow.stored, first..<first + n) }
    }

    /// Has another core fault in the null words of `rows`, which a column is about to write.
    func warmNulls(rows: Range<Int>) {
        PageWarmer.warm(nulls, rows.lowerBound * maskWords..<rows.upperBound * maskWords)
    }
}
