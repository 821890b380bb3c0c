/// Which object serials a transaction or base payload inserts, updates and deletes, entity by
/// entity: what ``StoredSchema/validateTransaction(_:into:)-([UInt8],_)`` keeps of a payload it
/// checks without building its values.
///
/// One outline can be reused for payload after payload: validating clears it but keeps its
/// storage, so a long journal is checked without an allocation per record.
///
/// ```swift
/// var outline = TransactionOutline()
/// try schema.validateTransaction(payload, into: &outline)
/// for block in outline.blocks {
///     print(schema.entities[block.entity].name, outline.serials[block.inserted].count, "inserted")
/// }
/// ```
public struct TransactionOutline: Sendable {
    /// The changes of one entity: ranges of ``TransactionOutline/serials``.
    public struct Block: Sendable, Hashable {
        /// The entity's index in the schema the payload was validated against.
        public var entity: Int
        /// The serials of the inserted objects (empty when ``insertedRun`` holds them).
        public var inserted: Range<Int>
        /// The serials of the inserted objects when the outline keeps consecutive inserts as a
        /// run (``TransactionOutline/keepsInsertedRuns``) and they are consecutive: then
        /// ``inserted`` is empty and no serial of them is in ``TransactionOutline/serials``.
        public var insertedRun: ClosedRange<UInt64>?
        /// The serial of each updated field, in payload order: an object whose update changes
        /// three attributes appears three times (as it has three ``EntityChanges/updates``).
        public var updated: Range<Int>
        /// The serials of the deleted objects.
        public var deleted: Range<Int>
    }

    /// One block per entity the payload changes, in payload order.
    public internal(set) var blocks: [Block] = []
    /// The serials the blocks' ranges refer to.
    public internal(set) var serials: [UInt64] = []

    /// Whether a block whose inserted serials are consecutive (`n`, `n + 1`, …, as a save of
    /// new objects writes them) keeps them as ``Block/insertedRun`` instead of listing each in
    /// ``serials``. For a reader of large payloads: the million serials of a 1M-object save are
    /// 8 MB of fresh memory otherwise (`graph-journal verify` sets it). False by default.
    public var keepsInsertedRuns = false

    /// Creates an empty outline.
    public init() {}

    /// The serials block `block` inserts, from ``Block/insertedRun`` or ``serials``.
    public func insertedSerials(of block: Block) -> [UInt64] {
        if let run = block.insertedRun { return Array(run) }
        return Array(serials[block.inserted])
    }

    /// Empties the outline, keeping its storage.
    mutating func removeAll() {
        blocks.removeAll(keepingCapacity: true)
        serials.removeAll(keepingCapacity: true)
    }
}
