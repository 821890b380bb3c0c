extension ModelContext {
    /// Applies a change set recorded by an earlier save as committed state (replay).
    ///
    /// Attributes are matched by name: a change set may come from an older model as long as
    /// each of its attributes still exists (schema evolution proper is the store's job). No
    /// lifecycle hook runs and nothing is sent to the backend.
    ///
    /// - Throws: ``ObjectGraphError`` with code `inconsistentChangeSet` when the context has
    ///   pending changes, or the change set names an unknown entity or attribute, inserts a serial
    ///   that exists, updates or deletes one that does not, or carries a value of the wrong type.
    ///   The context is unchanged when it throws.
    public func apply(_ changes: ChangeSet) throws(ObjectGraphError) {
        guard !hasChanges else {
            throw ObjectGraphError(.inconsistentChangeSet, "cannot apply a change set over pending changes")
        }
        do {
            try applyUnchecked(changes)
        } catch {
            rollback()
            throw error
        }
        // Replayed changes are committed state: no before-images, no pending lists.
        for t in tables { t.commit() }
        snapshotPublisher?.publish(self, changes: changes)
    }

    private func applyUnchecked(_ changes: ChangeSet) throws(ObjectGraphError) {
        for c in changes.entities {
            guard let t = table(named: c.entityName) else {
                throw ObjectGraphError(.inconsistentChangeSet, "change set names unknown entity '\(c.entityName)'", entity: c.entityName)
            }
            var slots: [Int] = []
            for name in c.attributeNames {
                guard let s = t.entity.slot(forKey: name) else {
                    throw ObjectGraphError(
                        .inconsistentChangeSet, "change set names unknown attribute \(c.entityName).\(name)",
                        entity: c.entityName, key: name)
                }
                slots.append(s)
            }
            let width = c.attributeNames.count
            guard c.insertedValues.count == c.insertedSerials.count * width else {
                throw ObjectGraphError(
                    .inconsistentChangeSet,
                    "\(c.entityName): \(c.insertedValues.count) inserted values for \(c.insertedSerials.count) objects of \(width) attributes",
                    entity: c.entityName)
            }
            t.reserve(c.insertedSerials.count)
            for (i, serial) in c.insertedSerials.enumerated() {
                guard serial >= 1, t.row(ofSerial: serial) == nil else {
                    throw ObjectGraphError(
                        .inconsistentChangeSet, "\(c.entityName)/\(serial) is inserted but already exists", entity: c.entityName)
                }
                let row = t.allocateRow(serial: serial)
                t.flags[row] |= EntityTable.Flags.inserted
                t.insertedRows.append(Int32(row))
                for (j, slot) in slots.enumerated() {
                    try store(c.insertedValues[i * width + j], table: t, row: row, slot: slot)
                }
            }
            for u in c.updates {
                guard let row = t.row(ofSerial: u.serial), u.attribute >= 0, u.attribute < width else {
                    throw ObjectGraphError(
                        .inconsistentChangeSet, "\(c.entityName)/\(u.serial) is updated but does not exist", entity: c.entityName)
                }
                try store(u.value, table: t, row: row, slot: slots[u.attribute])
            }
            for serial in c.deletedSerials {
                guard let row = t.row(ofSerial: serial) else {
                    throw ObjectGraphError(
                        .inconsistentChangeSet, "\(c.entityName)/\(serial) is deleted but does not exist", entity: c.entityName)
                }
                t.delete(row: row)
            }
        }
    }

    private func store(_ value: AttributeValue?, table t: EntityTable, row: Int, slot: Int) throws(ObjectGraphError) {
        let a = t.entity.attributes[slot]
        guard let value else {
            t.set(row: row, slot: slot, value: nil)
            return
        }
        guard let v = AttributeValue.coerce(attributeValue: value, to: a.type) else {
            throw ObjectGraphError(
                .inconsistentChangeSet, "\(t.entity.name).\(a.name) holds \(a.type.rawValue); change set has \(value)",
                entity: t.entity.name, key: a.name)
        }
        t.set(row: row, slot: slot, value: v)
    }
}
