import Foundation
internal import GraphJournal

/// The compact storage of one entity's objects in one context: its rows and columns, held
/// here, and three parts, each a struct of its own file held inline:
///
/// - ``TableIdentity`` (`identity`): which row holds which serial, the next serial, the free
///   rows and the live count.
/// - ``TableChangeLog`` (`changes`): the pending transaction: inserted, changed, deleted and
///   vanished rows, the before-images of changed committed rows, savepoints and their undo
///   log, and what a save in progress tracks.
/// - ``TableIndexes`` (`indexes`): the unique, secondary, identity and reference indexes and
///   which slots key them.
///
/// The operations that span the parts are extensions of this class, one file per topic:
/// EntityTable+Rows (allocating and freeing rows, instances), +Cells (reading and writing
/// cells), +Transaction (pending state, delete, commit, rollback), +Savepoint, +Columns (the
/// one file that touches the columns' memory: ``ColumnsHandle``, bulk row copies),
/// +Unique, +Secondary, +IdentityIndex, +References, +IndexFill (keeping each kind of index
/// up to date), +Relationships, +Prefetch, +Import and +Renumber.
///
/// Rows and columns. Row-major: row `r` holds `stride` 64-bit cells
/// (`values[r * stride + slot]`) and `maskWords` words of null bits
/// (`nulls[r * maskWords + slot / 64]`, bit `slot % 64` set for nil). Fixed-size attributes
/// are stored as their bit pattern; strings, data, UUIDs and URLs as an ``ArenaRef`` into
/// `arena`, an append-only byte buffer. Nothing is allocated per attribute value, and an
/// object instance is only created when somebody asks for it (then kept in `instances`, so
/// the same row always yields the same instance). Single cells are read and written through
/// the arrays; a loop over many cells takes the columns' buffers once, through a
/// ``ColumnsHandle`` (``read(_:)``, ``update(_:)``).
///
/// Invariants:
/// - `flags`, `instances` and `identity.serialOfRow` have one entry per row (`rowCount`);
///   `values` and `nulls` hold at least `rowCount` rows and may run past the last row (room a
///   bulk import made with ``reserveRows(_:)``), which nothing reads.
/// - A row's flags are 0 when it is free, else ``Flags/live`` plus at most one of
///   ``Flags/inserted`` (pending insert), ``Flags/deleted`` (pending delete of a committed
///   row) and ``Flags/vanished`` (inserted and deleted in the transaction), and
///   ``Flags/dirty`` while a committed row has a before-image in `changes`.
/// - Every variable-length cell that is not null names bytes in `arena`; `arena.garbage`
///   counts the bytes no row, default or before-image names any more. The default cells'
///   bytes lie at the arena's start and are never garbage.
/// - Change tracking: the first change of a committed row in a transaction copies its cells
///   and null bits to a before-image (``TableChangeLog``); `rollback` copies them back and
///   truncates the arena to its committed length, which discards every byte the transaction
///   appended. So no byte below `changes.committedArenaCount` changes inside a transaction.
/// - The invariants of each part are documented on its type.
///
/// The hot stored properties opt out of dynamic exclusivity checking: a table is confined to
/// its context's isolation domain and no method holds an inout access to one of them across a
/// call that touches the same property. Measured (callgrind, `Tools/Benchmarks`): the checks
/// were half to two thirds of the instructions of insert, update and rollback.
final class EntityTable {
    struct Flags {
        static let live: UInt8 = 1
        static let inserted: UInt8 = 2
        static let deleted: UInt8 = 4
        static let dirty: UInt8 = 8
        /// Inserted and deleted in the same transaction: invisible, freed at save or rollback.
        static let vanished: UInt8 = 16
    }

    let entity: EntityDescription
    let entityIndex: Int
    /// The context that owns this table. An object knows only its table, so everything an
    /// object does that involves the rest of its graph goes through here: `modelContext`,
    /// the ownership checks of insert, delete and observation (`table.context === self`),
    /// and a relationship set, which resolves the destination table
    /// (`context.tables[destination]`, on every relationship access) and inserts a
    /// destination not yet in a context. `unowned`: the context owns its tables (a strong
    /// reference back would be a cycle), and an unowned read is cheaper than a weak one on
    /// those paths; the context's `deinit` detaches the instances that outlive it.
    /// Persistence never goes through it: a context's saves go through its door.
    unowned let context: ModelContext
    let stride: Int
    let maskWords: Int
    let types: [AttributeType]
    /// Per slot, the check that an enum attribute's raw value is a case
    /// (``AttributeDescription/rawValueCheck``); nil for the other attributes. Replay and a
    /// change set's apply refuse a record storing one that is not (``RecordRules``).
    let rawValueChecks: [AttributeValidator?]
    /// Per slot, the check that a `Codable` attribute's JSON decodes as the model's type
    /// (``AttributeDescription/codableCheck``); nil for the other attributes. Open checks the
    /// live objects with it (``CodableValueCheck``), a change set's apply the values it stores.
    let codableChecks: [AttributeValidator?]
    /// Null bits of the attributes that must have a value.
    let requiredMask: [UInt64]
    /// The slots of the attributes with declared validators (`@Attribute(.range(…))`).
    let validatedSlots: [Int]
    /// The lifecycle hooks the context still calls on this entity's objects: starts as
    /// `Entity.implementedHooks` and loses a hook when its empty default runs (``EntityHooks``).
    /// The context creates no instance only to call a hook that is not here.
    var hooks: EntityHooks

    // MARK: Rows and columns

    @exclusivity(unchecked) var values: [UInt64] = []
    @exclusivity(unchecked) var nulls: [UInt64] = []
    @exclusivity(unchecked) var arena = ByteArena()
    @exclusivity(unchecked) var flags: [UInt8] = []
    /// Per row, its materialized instance, if any.
    @exclusivity(unchecked) var instances = RowSlots<AnyObject?>(absent: nil)
    /// The cells and null bits every new row starts with.
    var defaultValues: [UInt64] {
        didSet { defaultRow.set(defaultValues) }
    }
    /// A copy of `defaultValues` that a new row's cells are copied from without retaining the
    /// array (a retain and release per row of a bulk import).
    let defaultRow: DefaultCells
    let defaultNulls: [UInt64]

    // MARK: Parts

    @exclusivity(unchecked) var identity = TableIdentity()
    @exclusivity(unchecked) var changes = TableChangeLog()
    @exclusivity(unchecked) var indexes: TableIndexes

    /// The entity's relationships, resolved against the context's schema.
    let relationships: [ResolvedRelationship]
    /// The link tables this entity is a side of (relationships stored as links), with its side.
    var linkSides: [(LinkTable, Int)] = []
    /// The rows whose instances the next sweep looks at (``sweepUnheldInstances(keeping:)``):
    /// those made since the last sweep (``register(_:row:)``), and those the last sweep kept.
    @exclusivity(unchecked) var sweepRows: [Int32] = []
    /// The context's ``ModelContext/retainsRegisteredObjects``, copied here: read for every
    /// instance made, and the context is an unowned reference (a retain and release a read).
    var retainsInstances = false
    /// Whether the entity's instances hold state of their own (`Entity.hasTransientState`).
    let instancesHoldState: Bool
    /// How many results are being built now (``buildingResult(_:)``): no sweep runs meanwhile.
    var resultsBeingBuilt = 0
    /// The length of ``sweepRows`` that starts the next sweep.
    var sweepThreshold = EntityTable.minimumSweep
    /// The fewest instances made between two sweeps of this table: ``minimumSweep``, smaller
    /// in tests that have every few instances swept.
    var sweepFloor = EntityTable.minimumSweep
    /// The fewest instances made between two sweeps.
    static let minimumSweep = 4096

    /// Turns a stored instance back into `any Entity` without a dynamic cast: every instance
    /// of this table is exactly of `entity.type` (measured: the `as?` cast was a third of the
    /// cost of running the save hooks over 1M objects).
    let asEntity: (AnyObject) -> any Entity

    private static func caster<T: Entity>(_ type: T.Type) -> (AnyObject) -> any Entity {
        { unsafeDowncast($0, to: T.self) }
    }

    init(entity: EntityDescription, index: Int, context: ModelContext) {
        self.entity = entity
        self.entityIndex = index
        self.context = context
        asEntity = Self.caster(entity.type)
        hooks = entity.type.implementedHooks
        instancesHoldState = entity.type.hasTransientState
        stride = entity.attributes.count
        maskWords = max(1, (stride + 63) / 64)
        types = entity.attributes.map(\.type)
        rawValueChecks = entity.attributes.map(\.rawValueCheck)
        codableChecks = entity.attributes.map(\.codableCheck)
        var required = Array(repeating: UInt64(0), count: maskWords)
        for (i, a) in entity.attributes.enumerated() where !a.isOptional {
            required[i / 64] |= 1 << UInt64(i % 64)
        }
        requiredMask = required
        validatedSlots = entity.attributes.indices.filter { !entity.attributes[$0].validators.isEmpty }
        // Defaults: cells and null bits every new row starts with. Default bytes live at the
        // start of the arena and are never garbage.
        var dv = Array(repeating: UInt64(0), count: stride)
        var dn = Array(repeating: UInt64(0), count: maskWords)
        var arena = ByteArena()
        for (i, a) in entity.attributes.enumerated() {
            if let d = a.defaultValue, let v = AttributeValue.coerce(attributeValue: d, to: a.type) {
                v.withCell { cell in
                    switch cell {
                    case .fixed(let bits): dv[i] = bits
                    case .bytes(let buffer): dv[i] = arena.append(buffer)
                    }
                }
            } else {
                dn[i / 64] |= 1 << UInt64(i % 64)
            }
        }
        defaultRow = DefaultCells(dv)
        defaultValues = dv
        defaultNulls = dn
        self.arena = arena
        relationships = context.schema.relationships.indices.contains(index) ? context.schema.relationships[index] : []
        indexes = TableIndexes(entity: entity, relationships: relationships)
        changes.committedArenaCount = arena.count
    }
}
