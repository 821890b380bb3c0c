internal import Tracing

/// An in-memory object graph: typed objects with change tracking, rollback and saves.
///
/// A context holds every object of its schema in compact per-entity tables and hands out
/// instances on demand; the same ``ObjectID`` gives the same instance for as long as the
/// context keeps it (until save detaches a deleted object, ``reset()``, or a compaction of its
/// store releases an instance that nothing else holds).
///
/// ```swift
/// let context = ModelContext(schema: try Schema(Package.self))
/// let p = try context.insert(Package.self)
/// p.name = "zlib1g"
/// try context.save()
/// p.version = "1:1.3"
/// context.rollback()            // p.version is back to its saved value
/// ```
///
/// ## Concurrency
/// A context is not `Sendable`: create and use it in one isolation domain (an actor you own, or
/// the main actor). Objects belong to their context's domain too. Pass ``ObjectID``s or plain
/// value snapshots between domains, never objects.
public final class ModelContext {
    /// The entities this context holds.
    public let schema: Schema
    /// Where saves are recorded; `nil` keeps the graph in memory only.
    ///
    /// Always `nil` for an ``ObjectStore``'s context, which saves to the store's journal:
    /// setting it there changes nothing (the journal stays where the saves go).
    public var backend: (any PersistenceBackend)? {
        get { (door as? BackendDoor)?.backend }
        set {
            guard !(door is JournalDoor) else { return }
            door = newValue.map { BackendDoor($0) }
        }
    }
    /// Where saves go: an ``ObjectStore``'s journal, or ``backend``; `nil` for a context in
    /// memory only. The context's only reference to its persistence.
    var door: (any PersistenceDoor)?
    /// Who observes this context's saves; created on the first registration (Observation/).
    var observers: ContextObservers?

    var tables: [EntityTable] = []
    /// One table per relationship stored as links (many-to-many and ordered), in the order of
    /// ``Schema/links``.
    var links: [LinkTable] = []
    /// How many savepoints are open (imports, transactions, a save in progress).
    var savepointDepth = 0
    /// How many of the context's loops over rows are calling application code (lifecycle hooks)
    /// right now: while any is, a compaction keeps the row numbers they hold
    /// (``releaseFreedRows()``).
    var rowsInUse = 0
    /// Whether the context keeps the JSON parser's buffers between mapping runs (default
    /// `false`, as the context keeps only what it must: Docs/Semantics.md, rule 1).
    ///
    /// Kept, the next document parses into memory already allocated, its tape and strings
    /// already paged in: a second 34 MiB document parsed in about 0.04 s instead of 0.07–0.11 s.
    /// The cost is that memory, about 1.6 times the largest document's size, held for the
    /// context's life, and through each sync's save: the real job's first sync peaked at
    /// 179–182 MiB with the buffers kept and 161–162 MiB without. A daemon that maps large
    /// documents often and has the memory to spare sets `true`. The parser's working buffers
    /// (the padded copy of the input and its structural indexes) give their pages back after
    /// every parse either way. Setting `false` releases what is kept.
    public var keepsJSONBuffers = false {
        didSet { if !keepsJSONBuffers { jsonParser = nil } }
    }
    /// The parser kept for the next mapping run's JSON.
    var jsonParser: JSONParser?
    /// Whether the context keeps every instance it created for as long as it lives (Core
    /// Data's `retainsRegisteredObjects`). Default `false`: the context holds strongly only the
    /// instances of objects with pending changes that still need them (a save hook, or state
    /// of their own: Docs/Semantics.md, rule 1); an instance of any other object that nothing
    /// else holds is let go, and the next access to that object creates a fresh instance,
    /// awoken by `awakeFromFetch`, its `@Transient` properties at their initial values
    /// (Docs/Semantics.md, rule 1). An instance the application holds is never let go, so the
    /// same `ObjectID` gives the same instance for as long as the application holds it.
    ///
    /// Instances are let go in sweeps, each run when the context has created as many instances
    /// since the last sweep as that sweep kept (at least 4,096): reading every object of a
    /// large store one at a time holds a bounded number of instances, at an amortized constant
    /// cost per instance. Set `true` to keep every instance, as before.
    public var retainsRegisteredObjects = false {
        didSet { for t in tables { t.retainsInstances = retainsRegisteredObjects } }
    }
    /// The `Codable` attributes (``codableSlotKey(table:slot:)``) that a schema record replayed
    /// into this context declared with another Swift type than the model does: their stored
    /// values may be of that other type, so opening decodes them whatever the type
    /// (`CodableValueCheck`).
    var codableSlotsWrittenAsOtherTypes: Set<Int> = []
    /// The sync running on this context, which marks what mapping runs touch.
    var activeSync: SyncOperation?
    /// Publishes a snapshot of the committed state after each save (``AsyncStore``); nil when
    /// nobody reads snapshots.
    var snapshotPublisher: SnapshotPublisher?
    private var lastTypeID: ObjectIdentifier?
    private var lastTable: EntityTable?

    /// Creates an empty context for `schema`.
    ///
    /// - Parameters:
    ///   - schema: The entities the context holds.
    ///   - backend: Where saves go; `nil` for an in-memory graph.
    public init(schema: Schema, backend: (any PersistenceBackend)? = nil) {
        self.schema = schema
        self.door = backend.map { BackendDoor($0) }
        tables = schema.entities.enumerated().map { EntityTable(entity: $1, index: $0, context: self) }
        makeLinkTables()
    }

    /// Creates a link table per relationship stored as links and tells each side's table.
    func makeLinkTables() {
        links = schema.links.enumerated().map { LinkTable(index: $0, link: $1, context: self) }
        for l in links {
            for side in 0..<2 { tables[l.link.entities[side]].linkSides.append((l, side)) }
        }
    }

    deinit {
        // Instances and their table reference each other; detach the instances that outlive
        // the context (they keep their last values as standalone objects) and break the cycle.
        for t in tables {
            for row in 0..<t.instances.stored.count where t.instances[row] != nil {
                if isKnownUniquelyReferenced(&t.instances[row]) {
                    t.instances.clear(row)
                } else {
                    t.detachInstance(row: row)
                }
            }
        }
    }

    // MARK: Tables

    func table<T: Entity>(for type: T.Type) throws(ObjectGraphError) -> EntityTable {
        let id = ObjectIdentifier(type)
        if id == lastTypeID, let t = lastTable { return t }
        guard let index = schema.indexByType[id] else {
            throw ObjectGraphError(
                .unknownEntity, "\(type) is not an entity of this context's schema", entity: "\(type)")
        }
        lastTypeID = id
        lastTable = tables[index]
        return tables[index]
    }

    func table(named name: String) -> EntityTable? {
        schema.indexByName[name].map { tables[$0] }
    }

    func owns(_ backing: ObjectBacking) -> EntityTable? {
        guard let t = backing.managedTable, t.context === self else { return nil }
        return t
    }

    // MARK: Insert

    /// Inserts a new object of `type` with its attributes' default values, calls
    /// `awakeFromInsert`, and returns it.
    ///
    /// - Throws: ``ObjectGraphError`` with code `unknownEntity` when `type` is not in the schema.
    @discardableResult
    public func insert<T: Entity>(_ type: T.Type) throws(ObjectGraphError) -> T {
        let table = try table(for: type)
        let row = table.insertRow()
        let object = T(_backing: ObjectBacking(table: table, row: Int32(row)))
        table.register(object, row: row)
        if table.hooks.contains(.awakeFromInsert) { object.awakeFromInsert() }
        return object
    }

    /// Inserts a new object of `type`, lets `configure` set it up, and returns it.
    ///
    /// `awakeFromInsert` runs before `configure`. If `configure` throws, the object is removed
    /// again (it was never saved) and the error is rethrown.
    @discardableResult
    public func insert<T: Entity>(_ type: T.Type, _ configure: (T) throws -> Void) throws -> T {
        let object = try insert(type)
        do {
            try configure(object)
        } catch {
            delete(object)
            throw error
        }
        return object
    }

    /// Inserts an object created with its own initializer (SwiftData style): the values set
    /// on it so far become the new object's values, and it gets its permanent ``ObjectID``.
    ///
    /// Inserting an object already in this context does nothing.
    ///
    /// - Throws: ``ObjectGraphError`` with code `unknownEntity` when its type is not in the
    ///   schema, or `wrongContext` when it belongs to another context or was read from a
    ///   ``StoreSnapshot`` (it is already in the store: look it up by its ``ObjectID``).
    public func insert<T: Entity>(_ object: T) throws(ObjectGraphError) {
        switch object._backing.storage {
        case .snapshot(let o):
            throw ObjectGraphError(
                .wrongContext,
                "\(o.layout.entity.name)/\(o.serial) was read from a snapshot: it is in the store already; "
                    + "look it up with object(with:) to change it", entity: o.layout.entity.name)
        case .managed(let t):
            if t.context === self { return }
            throw ObjectGraphError(
                .wrongContext,
                "\(T.entityDescription.name) object \(object.objectID.map { "\($0)" } ?? "") belongs to another context",
                entity: T.entityDescription.name)
        case .unmanaged, .standalone:
            let storage = object._backing.storage
            let table = try table(for: T.self)
            let row = table.insertRow()
            if case .standalone(let s) = storage {
                for (slot, v) in s.values.enumerated() {
                    if case .some(let value) = v { table.set(row: row, slot: slot, value: value) }
                }
            }
            object._backing = ObjectBacking(table: table, row: Int32(row))
            table.register(object, row: row)
            if case .standalone(let s) = storage, !s.relations.isEmpty {
                applyRelations(s.relations, to: table, row: row)
            }
            if table.hooks.contains(.awakeFromInsert) { object.awakeFromInsert() }
        }
    }

    // MARK: Delete

    /// Marks `object` deleted; the next save removes it, ``rollback()`` restores it.
    ///
    /// Deleting an object inserted since the last save removes it at once: it is never
    /// persisted (Docs/Semantics.md, rule 7). Deleting a standalone object does nothing.
    ///
    /// `prepareForDeletion` runs first, while the object's relationships are intact; then the
    /// delete rules of its relationships apply at once: `cascade` deletes the destination objects
    /// the same way (each gets `prepareForDeletion`), `nullify` clears their inverse, `deny` is
    /// checked by the next save's validation (Docs/Semantics.md, rules 5 and 6).
    ///
    /// - Precondition: `object` does not belong to another context.
    public func delete<T: Entity>(_ object: T) {
        guard let table = object._backing.managedTable else { return }
        precondition(
            table.context === self, "\(object.objectID.map { "\($0)" } ?? "object") belongs to another context")
        let row = object._backing.rowIndex
        guard table.isVisible(row: row) else { return }
        deleteApplyingRules(table, row: row)
    }

    // MARK: Lookup

    /// The object with `id`, or `nil` when no live object has it. O(1).
    public func object(with id: ObjectID) -> (any Entity)? {
        guard let table = table(named: id.entityName), let row = table.row(ofSerial: id.serial) else { return nil }
        return table.instance(row: row)
    }

    /// The object with `id` as a `T`, or `nil` when there is none or it is not a `T`. O(1).
    public func object<T: Entity>(with id: ObjectID, as type: T.Type) -> T? {
        object(with: id) as? T
    }

    /// Every object of `type` not deleted in this transaction, pending inserts included, in
    /// storage order.
    ///
    /// - Throws: ``ObjectGraphError`` with code `unknownEntity`.
    public func objects<T: Entity>(of type: T.Type) throws(ObjectGraphError) -> [T] {
        let table = try table(for: type)
        // Written in place: this function is generic, and called from another module it runs
        // unspecialized, where each `append` was a call into the generic array code.
        return table.buildingResult {
            [T](unsafeUninitializedCapacity: table.identity.liveCount) { buffer, count in
                count = 0
                guard let base = buffer.baseAddress else { return }
                for row in 0..<table.rowCount where count < buffer.count && table.isVisible(row: row) {
                    (base + count).initialize(to: table.object(row: row, as: T.self))  // `T`'s own table: no cast
                    count += 1
                }
            }
        }
    }

    /// The number of objects of `type` not deleted in this transaction, pending inserts included.
    ///
    /// - Throws: ``ObjectGraphError`` with code `unknownEntity`.
    public func count<T: Entity>(of type: T.Type) throws(ObjectGraphError) -> Int {
        let table = try table(for: type)
        return table.identity.liveCount - table.changes.deletedRows.count - table.changes.vanishedRows.count
    }

    // MARK: Pending changes

    /// Whether anything was inserted, updated or deleted since the last save.
    public var hasChanges: Bool { tables.contains { $0.hasPendingChanges } || links.contains { $0.hasChanges } }

    /// The objects inserted since the last save, in insertion order per entity.
    public var insertedObjects: [any Entity] {
        tables.flatMap { t in
            t.pendingInserts.map { t.instance(row: $0) }
        }
    }

    /// The objects with changed attribute values since the last save (not inserted, not deleted).
    public var updatedObjects: [any Entity] {
        tables.flatMap { t in
            t.pendingUpdates.map { t.instance(row: $0) }
        }
    }

    /// The objects deleted since the last save (not those inserted and deleted before a save).
    public var deletedObjects: [any Entity] {
        tables.flatMap { t in
            t.pendingDeletes.map { t.instance(row: $0) }
        }
    }

    // MARK: Rollback and reset

    /// Discards every change since the last save: inserted objects are removed (and detached),
    /// deleted objects restored, attribute values restored (Docs/Semantics.md, rule 8).
    public func rollback() {
        // Links first: their undo needs the rows a table rollback frees.
        for l in links { l.rollback() }
        for t in tables { t.rollback() }
        savepointDepth = 0
    }

    /// Discards pending changes like ``rollback()`` and forgets every object instance: each
    /// instance is detached (keeping its last values as a standalone object), and the next lookup
    /// creates a fresh instance. The committed data stays.
    public func reset() {
        rollback()
        for t in tables {
            for row in 0..<t.rowCount where t.instances[row] != nil { t.detachInstance(row: row) }
            t.sweepRows = []
            t.sweepThreshold = t.sweepFloor
        }
    }

    // MARK: Save

    /// Makes the pending changes the committed state.
    ///
    /// Validation runs first and reports every failure at once; then the changes go to the
    /// context's persistence: its ``ObjectStore``'s journal (one record), or its ``backend``
    /// (one ``ChangeSet``), if any. If either throws, nothing changes: the context keeps its
    /// pending changes and the save can be retried (Docs/Semantics.md, rule 12). Deleted
    /// objects are detached afterwards (rule 9).
    ///
    /// - Throws: ``ValidationError`` listing every failure, a ``StoreError`` from the store
    ///   (code `closed` once the store was closed or released, `readOnly` for a replica), or
    ///   the backend's error; all with nothing changed. The one exception: an error thrown by
    ///   the store's ``StoreOptions/saveConfirmation`` (a replica's acknowledgement that did not
    ///   come) is thrown after the save committed, and the save stands.
    public func save() throws {
        guard let instruments = door?.storeInstruments else {
            try commitSave()
            return
        }
        let start = ContinuousClock.now
        let span = instruments.span("objectgraph.save")
        defer { span.end() }
        do {
            let counts = try commitSave()
            span.attributes["objectgraph.inserted"] = counts.inserted
            span.attributes["objectgraph.updated"] = counts.updated
            span.attributes["objectgraph.deleted"] = counts.deleted
            span.attributes["objectgraph.record_bytes"] = counts.bytes
            // Under group commit the save is acknowledged once the shared sync covered it: the
            // ``AsyncStore`` counts it then.
            if !(door is GroupCommitDoor) { instruments.saved(since: start) }
        } catch {
            span.fail(error)
            instruments.saveFailed(error)
            throw error
        }
    }

    /// What a save committed: its objects and the bytes of its journal record.
    struct SaveCounts {
        var inserted = 0
        var updated = 0
        var deleted = 0
        var bytes = 0
    }

    /// The save itself (``save()`` wraps it in its span and metrics).
    @discardableResult
    private func commitSave() throws -> SaveCounts {
        // Everything save itself changes (merged collisions) is undone if the save fails.
        beginSavepoint()
        // The pending rows, listed once when willSave settled and collisions merged; listed
        // again only if validation ran code that could change them (validateFor… hooks).
        var pending: [PendingRows]
        do {
            try runWillSave()
            mergeUniqueCollisions()
            pending = tables.map(\.pendingRows)
            if try validate(pending) { pending = tables.map(\.pendingRows) }
            try door?.persist(PendingChanges(self, pending))
        } catch {
            rollbackToSavepoint()
            throw error
        }
        let observed = changesForObservers(pending)
        let saved = changedRows(pending)
        for l in links { l.commit() }
        for t in tables { t.commit(deferringDeleted: true) }
        savepointDepth = 0
        // Before didSave, which may start the next transaction: the snapshot is the save's state.
        snapshotPublisher?.publish(self, pending: pending)
        rowsInUse += 1
        for (t, rows) in saved {
            for row in rows {
                guard t.hooks.contains(.didSave) else { break }  // learned: the class has none
                t.instance(row: row).didSave()
            }
        }
        rowsInUse -= 1
        for t in tables { t.releaseDeleted() }
        door?.didCommit(self)
        deliverToObservers(observed)
        var counts = SaveCounts()
        for rows in pending {
            counts.inserted += rows.inserts.count
            counts.updated += rows.updates.count
            counts.deleted += rows.deletes.count
        }
        counts.bytes = door?.lastRecordBytes ?? 0
        try door?.confirmSave()
        return counts
    }

    /// How many `willSave` passes a save runs before giving up (Docs/Semantics.md, rule 4).
    /// Default 100.
    public var willSavePassLimit = 100

    /// Per table whose class implements (or may implement) `didSave`, the rows of the pending
    /// transaction's inserted, updated and deleted objects.
    func changedRows(_ pending: [PendingRows]) -> [(EntityTable, [Int])] {
        zip(tables, pending).compactMap { t, p in
            t.hooks.contains(.didSave) ? (t, p.inserts.map { Int($0) } + p.updates + p.deletes) : nil
        }
    }

    /// Runs `willSave` on every changed object, then again on the objects the previous pass
    /// changed with normal sets, until a pass changes nothing.
    ///
    /// Only entities that implement `willSave` take part: for the others the hook is empty, so
    /// calling it on their objects (or tracking what changes them) changes nothing.
    ///
    /// - Throws: ``ObjectGraphError`` with code `willSaveDidNotSettle`, naming the objects still
    ///   changing, when ``willSavePassLimit`` passes do not reach that point.
    func runWillSave() throws(ObjectGraphError) {
        guard tables.contains(where: { $0.hooks.contains(.willSave) }) else { return }
        // Per table, the rows whose objects get willSave in the next pass. Listed in full even
        // when the first call may show that the class has no willSave: the pass is defined on
        // the rows pending when it starts.
        var pending: [[Int32]] = tables.map { t in t.hooks.contains(.willSave) ? t.pendingRowList : [] }
        var pass = 0
        while pending.contains(where: { !$0.isEmpty }) {
            guard pass < willSavePassLimit else {
                for t in tables { t.changes.willSaveTouched = nil }
                let ids = zip(tables, pending).flatMap { t, rows in
                    rows.map { "\(t.entity.name)/\(t.serial(ofRow: Int($0)))" }
                }
                throw ObjectGraphError(
                    .willSaveDidNotSettle,
                    "willSave still changed objects after \(willSavePassLimit) passes: "
                        + ids.prefix(10).joined(separator: ", ") + (ids.count > 10 ? ", …" : ""))
            }
            pass += 1
            for t in tables where t.hooks.contains(.willSave) { t.changes.willSaveTouched = [] }
            for (t, rows) in zip(tables, pending) {
                for r in rows
                where t.flags[Int(r)] & (EntityTable.Flags.live | EntityTable.Flags.vanished) == EntityTable.Flags.live
                {
                    guard t.hooks.contains(.willSave) else { break }  // learned: the class has none
                    t.instance(row: Int(r)).willSave()
                }
            }
            pending = tables.map { t in
                defer { t.changes.willSaveTouched = nil }
                guard t.hooks.contains(.willSave) else { return [] }
                return (t.changes.willSaveTouched ?? []).filter {
                    t.isVisible(row: Int($0)) || t.isDeleted(row: Int($0))
                }.sorted()
            }
        }
    }

    // MARK: Savepoints

    /// Starts a savepoint: ``rollbackToSavepoint()`` undoes everything after it, keeping the
    /// pending changes made before it. Savepoints nest; a save releases them all.
    func beginSavepoint() {
        for t in tables { t.beginSavepoint() }
        for l in links { l.beginSavepoint() }
        savepointDepth += 1
    }

    /// Undoes everything since the innermost savepoint, and ends it.
    func rollbackToSavepoint() {
        guard savepointDepth > 0 else { return }
        for l in links { l.rollbackToSavepoint() }
        for t in tables { t.rollbackToSavepoint() }
        savepointDepth -= 1
    }

    /// Ends the innermost savepoint, keeping its changes.
    func releaseSavepoint() {
        guard savepointDepth > 0 else { return }
        for t in tables { t.releaseSavepoint() }
        for l in links { l.releaseSavepoint() }
        savepointDepth -= 1
    }

    /// Checks the pending changes (`pending` lists each table's pending rows): required values,
    /// declared validators, unique constraints, deny rules, then the `validateFor…` hooks.
    ///
    /// Returns whether an object's own validation hook ran (a `validateFor…` its class
    /// implements), which may have changed what is pending. A class without them costs one
    /// call to learn it, and the pending rows are not listed again: listing 1M inserts again
    /// held a second 8 MB list at a bulk save's peak.
    @discardableResult
    func validate(_ pending: [PendingRows]) throws(ValidationError) -> Bool {
        var failures: [ValidationError.Failure] = []
        for (t, p) in zip(tables, pending) {
            func check(_ row: Int) {
                for w in 0..<t.maskWords where t.nulls[row * t.maskWords + w] & t.requiredMask[w] != 0 {
                    let missing = t.nulls[row * t.maskWords + w] & t.requiredMask[w]
                    for bit in 0..<64 where missing & (1 << UInt64(bit)) != 0 {
                        let slot = w * 64 + bit
                        failures.append(
                            .init(
                                entity: t.entity.name,
                                objectID: ObjectID(entityName: t.entity.name, serial: t.serial(ofRow: row)),
                                key: t.entity.attributes[slot].name, reason: "a required attribute has no value"))
                    }
                }
            }
            for row in p.inserts { check(Int(row)) }
            for row in p.updates { check(row) }
        }
        failures += validatorFailures(pending)
        failures += uniqueFailures()
        failures += denyFailures(pending)
        failures += hookFailures(pending)
        guard failures.isEmpty else { throw ValidationError(failures: failures) }
        // A hook still listed after being called on an object is the class's own.
        return zip(tables, pending).contains { t, p in
            !p.inserts.isEmpty && t.hooks.contains(.validateForInsert)
                || !p.updates.isEmpty && t.hooks.contains(.validateForUpdate)
                || !p.deletes.isEmpty && t.hooks.contains(.validateForDelete)
        }
    }

    /// Runs the attributes' declared validators on every inserted and updated object.
    func validatorFailures(_ pending: [PendingRows]) -> [ValidationError.Failure] {
        var failures: [ValidationError.Failure] = []
        for (t, p) in zip(tables, pending) {
            guard !t.validatedSlots.isEmpty else { continue }
            for row in p.inserts.map({ Int($0) }) + p.updates {
                for slot in t.validatedSlots {
                    guard let value = t.value(row: row, slot: slot) else { continue }
                    for validator in t.entity.attributes[slot].validators {
                        guard let reason = validator.check(value) else { continue }
                        failures.append(
                            .init(
                                entity: t.entity.name,
                                objectID: ObjectID(entityName: t.entity.name, serial: t.serial(ofRow: row)),
                                key: t.entity.attributes[slot].name, reason: reason))
                    }
                }
            }
        }
        return failures
    }

    /// Runs `validateForInsert/Update/Delete` on every changed object whose entity implements
    /// the hook, collecting every failure.
    func hookFailures(_ pending: [PendingRows]) -> [ValidationError.Failure] {
        var failures: [ValidationError.Failure] = []
        func check(_ t: EntityTable, _ row: Int, _ hook: (any Entity) throws -> Void) {
            let object = t.instance(row: row)
            do {
                try hook(object)
            } catch {
                let id = ObjectID(entityName: t.entity.name, serial: t.serial(ofRow: row))
                let key = (error as? ObjectValidationError)?.key
                let reason = (error as? ObjectValidationError)?.reason ?? "\(error)"
                failures.append(.init(entity: t.entity.name, objectID: id, key: key, reason: reason))
            }
        }
        for (t, p) in zip(tables, pending) {
            for row in p.inserts {
                guard t.hooks.contains(.validateForInsert) else { break }
                check(t, Int(row)) { try $0.validateForInsert() }
            }
            for row in p.updates {
                guard t.hooks.contains(.validateForUpdate) else { break }; check(t, row) { try $0.validateForUpdate() }
            }
            for row in p.deletes {
                guard t.hooks.contains(.validateForDelete) else { break }; check(t, row) { try $0.validateForDelete() }
            }
        }
        return failures
    }

    /// The pending changes as a change set (what the next save would persist).
    public func makeChangeSet() -> ChangeSet {
        makeChangeSet(tables.map(\.pendingRows))
    }

    /// The change set of the pending rows `pending` lists per table.
    func makeChangeSet(_ pending: [PendingRows]) -> ChangeSet {
        var result = ChangeSet()
        for (t, p) in zip(tables, pending) {
            var c = EntityChanges(entityName: t.entity.name, attributeNames: t.entity.attributes.map(\.name))
            for r in p.inserts {
                let row = Int(r)
                c.insertedSerials.append(t.serial(ofRow: row))
                for slot in 0..<t.stride { c.insertedValues.append(t.value(row: row, slot: slot)) }
            }
            for row in p.updates {
                for slot in 0..<t.stride where t.slotDiffers(row: row, slot: slot) {
                    c.updates.append(
                        .init(serial: t.serial(ofRow: row), attribute: slot, value: t.value(row: row, slot: slot)))
                }
            }
            c.deletedSerials = p.deletes.map { t.serial(ofRow: $0) }
            if !c.isEmpty { result.entities.append(c) }
        }
        result.links = TransactionCodec.pendingLinkBlocks(self).map { linkChanges($0) }
        return result
    }
}
