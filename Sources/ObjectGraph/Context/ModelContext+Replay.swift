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
        for l in links { l.commit() }
        for t in tables { t.commit() }
        snapshotPublisher?.publish(self, changes: changes)
    }

    /// A link block as the public ``LinkChanges``.
    func linkChanges(_ b: LinkBlock) -> LinkChanges {
        let l = schema.links[b.link]
        return LinkChanges(
            entityNames: l.entities.map { schema.entities[$0].name }, relationshipNames: l.names,
            removed: b.removed.map { .init($0.0, $0.1) }, added: b.added.map { .init($0.0, $0.1) },
            orders: (0..<2).flatMap { side in
                b.orders[side].map { o in
                    LinkChanges.Order(side: side, owner: o.owner, placements: o.placements.map { .init(member: $0.0, index: $0.1) })
                }
            })
    }

    /// Applies one relationship's link changes (after the entities' changes, before commit).
    private func applyLinks(_ c: LinkChanges) throws(ObjectGraphError) {
        func fail(_ message: String) -> ObjectGraphError {
            ObjectGraphError(.inconsistentChangeSet, message, entity: c.entityNames.first, key: c.relationshipNames.first)
        }
        guard c.entityNames.count == 2, c.relationshipNames.count == 2 else { throw fail("link changes name \(c.entityNames.count) sides") }
        var found: (LinkTable, Bool)?
        for l in links {
            let names = (0..<2).map { tables[l.link.entities[$0]].entity.name }
            if names == c.entityNames && l.link.names == c.relationshipNames { found = (l, false) }
            if names == c.entityNames.reversed() && l.link.names == c.relationshipNames.reversed() { found = (l, true) }
        }
        guard let (l, swapped) = found else {
            throw fail(
                "change set names the links \(c.entityNames[0]).\(c.relationshipNames[0]) ↔ \(c.entityNames[1]).\(c.relationshipNames[1]), "
                    + "which this schema does not store as links")
        }
        func row(_ side: Int, _ serial: UInt64) throws(ObjectGraphError) -> Int {
            let t = l.table(side)
            guard let r = t.row(ofSerial: serial), t.isVisible(row: r) else { throw fail("link of \(t.entity.name)/\(serial), which does not exist") }
            return r
        }
        for (pairs, removing) in [(c.removed, true), (c.added, false)] {
            for p in pairs {
                let (s0, s1) = swapped ? (p.serial1, p.serial0) : (p.serial0, p.serial1)
                let a = try row(0, s0), b = try row(1, s1)
                if removing {
                    guard l.unlink(a, b) else { throw fail("unlink of \(s0) and \(s1), which are not linked") }
                } else {
                    for side in 0..<2 where l.link.toOne[side] && !l.visibleMembers(side, side == 0 ? a : b).isEmpty {
                        throw fail("link of \(s0) and \(s1): \(l.link.names[side]) is a to-one that holds a link already")
                    }
                    guard l.link(a, b) else { throw fail("link of \(s0) and \(s1), which are linked already") }
                }
            }
        }
        for o in c.orders {
            guard o.side == 0 || o.side == 1 else { throw fail("order edit of side \(o.side)") }
            let side = swapped ? 1 - o.side : o.side
            guard l.link.ordered[side] else { continue }
            let owner = try row(side, o.owner)
            var placing: [(Int32, Int)] = []
            for p in o.placements { placing.append((Int32(try row(1 - side, p.member)), p.index)) }
            guard l.reorderLogged(side, owner, placing: placing) else {
                throw fail("order edit of \(l.table(side).entity.name)/\(o.owner) names a member it does not have or an index past its end")
            }
        }
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
        for c in changes.links where !c.isEmpty { try applyLinks(c) }
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
