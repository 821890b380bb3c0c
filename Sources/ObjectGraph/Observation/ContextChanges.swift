/// What one successful save changed, by object ID: the notification form of a save (Core Data's
/// `NSManagedObjectContextDidSave` user info, without the objects).
///
/// Observers receive one after each save that changed something, once the save has committed
/// (see ``ModelContext/observe(_:)`` and ``ModelContext/changes``). It holds IDs and key names
/// only, so it is `Sendable` and can cross to any isolation domain; look objects up again
/// with ``ModelContext/object(with:)``. (``ChangeSet`` is the persistence form, with values.)
///
/// ```swift
/// let token = context.observe { changes in
///     for update in changes.updated where update.changedKeys.contains("age") { … }
/// }
/// ```
///
/// Lists are ordered by entity (schema order), then by the order the objects were inserted,
/// first changed, or deleted in the transaction.
public struct ContextChanges: Sendable, Hashable {
    /// One updated object and the attributes whose saved values changed.
    public struct Update: Sendable, Hashable {
        /// The object.
        public let objectID: ObjectID
        /// The names of the attributes whose saved value differs from the previous save's.
        public let changedKeys: Set<String>

        /// Creates an update record.
        public init(objectID: ObjectID, changedKeys: Set<String>) {
            self.objectID = objectID
            self.changedKeys = changedKeys
        }
    }

    /// The objects the save inserted.
    public let inserted: [ObjectID]
    /// The objects whose saved attribute values changed (not inserted, not deleted), with the
    /// changed keys. Setting a value and setting it back before the save is no change. An
    /// object whose to-many gained or lost members is listed with the to-many's key (after the
    /// objects whose own values changed, when it has none of its own).
    public let updated: [Update]
    /// The objects the save deleted (objects inserted and deleted before the save never appear).
    public let deleted: [ObjectID]

    /// Creates a change record.
    public init(inserted: [ObjectID] = [], updated: [Update] = [], deleted: [ObjectID] = []) {
        self.inserted = inserted
        self.updated = updated
        self.deleted = deleted
    }

    /// Whether the save changed nothing (observers are never sent an empty record).
    public var isEmpty: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty }

    /// The IDs of the updated objects, in order.
    public var updatedIDs: [ObjectID] { updated.map(\.objectID) }

    /// The changed keys of `id` if the save updated it, else `nil`. O(number of updates).
    public func changedKeys(of id: ObjectID) -> Set<String>? {
        updated.first { $0.objectID == id }?.changedKeys
    }
}

extension ContextChanges {
    /// The pending changes of `tables`, captured before they commit; `pending` lists each
    /// table's pending rows.
    init(pendingChangesOf tables: [EntityTable], _ pending: [PendingRows]) {
        var inserted: [ObjectID] = []
        var updated: [Update] = []
        var deleted: [ObjectID] = []
        for (t, p) in zip(tables, pending) {
            let name = t.entity.name
            inserted += p.inserts.map { ObjectID(entityName: name, serial: t.serial(ofRow: Int($0))) }
            for row in p.updates {
                var keys: Set<String> = []
                // saved, not reported (Docs/Semantics.md, rule 3)
                let primitiveOnly = t.changes.primitiveOnly[Int32(row)] ?? 0
                for slot in 0..<t.stride where t.slotDiffers(row: row, slot: slot) {
                    if slot < 64 && primitiveOnly & (1 << UInt64(slot)) != 0 { continue }
                    keys.insert(t.entity.attributes[slot].name)
                }
                if !keys.isEmpty {
                    updated.append(
                        Update(objectID: ObjectID(entityName: name, serial: t.serial(ofRow: row)), changedKeys: keys))
                }
            }
            deleted += p.deletes.map { ObjectID(entityName: name, serial: t.serial(ofRow: $0)) }
        }
        // A to-many is derived from its inverse to-one: report the saved objects whose to-many
        // gained or lost members as updated with the to-many's key, as Core Data does.
        var extra: [ObjectID: Set<String>] = [:]
        for (t, p) in zip(tables, pending) {
            for r in t.relationships where r.slot >= 0 && r.inverseIsToMany {
                let d = t.destinationTable(r)
                let key = d.relationships[r.inverse].name
                func touch(_ value: AttributeValue?) {
                    guard case .uint(let serial)? = value, let row = d.row(ofSerial: serial),
                        d.flags[row]
                            & (EntityTable.Flags.inserted | EntityTable.Flags.deleted | EntityTable.Flags.vanished) == 0
                    else { return }
                    extra[ObjectID(entityName: d.entity.name, serial: serial), default: []].insert(key)
                }
                for row in p.inserts { touch(t.value(row: Int(row), slot: r.slot)) }
                for row in p.deletes { touch(t.committedValue(row: row, slot: r.slot)) }
                for row in p.updates where t.slotDiffers(row: row, slot: r.slot) {
                    if r.slot < 64, (t.changes.primitiveOnly[Int32(row)] ?? 0) & (1 << UInt64(r.slot)) != 0 { continue }
                    touch(t.committedValue(row: row, slot: r.slot))
                    touch(t.value(row: row, slot: r.slot))
                }
            }
        }
        // Relationships stored as links: the saved objects whose lists the transaction changed,
        // and the partners of deleted objects (whose links go with them).
        if let context = tables.first?.context {
            for l in context.links {
                for side in 0..<2 {
                    let t = l.table(side)
                    let key = l.link.names[side]
                    func touch(_ row: Int) {
                        guard
                            t.flags[row]
                                & (EntityTable.Flags.inserted | EntityTable.Flags.deleted | EntityTable.Flags.vanished)
                                == 0,
                            t.flags[row] & EntityTable.Flags.live != 0
                        else { return }
                        extra[ObjectID(entityName: t.entity.name, serial: t.serial(ofRow: row)), default: []].insert(
                            key)
                    }
                    for row in l.changedOwners(side) { touch(row) }
                    let other = l.table(1 - side)
                    for row in pending[other.entityIndex].deletes {
                        for m in l.members(1 - side, row) { touch(Int(m)) }
                    }
                }
            }
        }
        if !extra.isEmpty {
            for i in updated.indices {
                if let keys = extra.removeValue(forKey: updated[i].objectID) {
                    updated[i] = Update(objectID: updated[i].objectID, changedKeys: updated[i].changedKeys.union(keys))
                }
            }
            for (id, keys) in extra.sorted(by: {
                ($0.key.entityName, $0.key.serial) < ($1.key.entityName, $1.key.serial)
            }) {
                updated.append(Update(objectID: id, changedKeys: keys))
            }
        }
        self.init(inserted: inserted, updated: updated, deleted: deleted)
    }
}
