extension ModelContext {
    /// Applies a change set recorded by an earlier save as committed state (replay).
    ///
    /// Attributes are matched by name: a change set may come from an older model as long as
    /// each of its attributes still exists (schema evolution proper is the store's job). No
    /// lifecycle hook runs and nothing is sent to the backend. Every change is held to the
    /// journal's rules as open's replay holds a record to them (`RecordRules`).
    ///
    /// - Throws: ``ObjectGraphError`` with code `inconsistentChangeSet` when the context has
    ///   pending changes, or the change set names an unknown entity or attribute, inserts a serial
    ///   that exists or one past the largest a table holds, updates or deletes one that does not
    ///   exist, carries a value of the wrong type, an enum raw value that is not a case or
    ///   `Codable` JSON that does not decode as the model's type, or
    ///   links, unlinks or orders objects as the links do not allow. The context is unchanged
    ///   when it throws.
    public func apply(_ changes: ChangeSet) throws(ObjectGraphError) {
        guard !hasChanges else {
            throw ObjectGraphError(.inconsistentChangeSet, "cannot apply a change set over pending changes")
        }
        do throws(RecordViolation) {
            try applyCommitted(changes)
        } catch {
            throw ObjectGraphError(.inconsistentChangeSet, error.reason, entity: error.entity, key: error.key)
        }
    }

    /// ``apply(_:)`` on a context without pending changes, failing with the rule the change set
    /// broke (what a follower reports for a shipped record). The context is unchanged when it
    /// throws.
    func applyCommitted(_ changes: ChangeSet) throws(RecordViolation) {
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
                    LinkChanges.Order(
                        side: side, owner: o.owner, placements: o.placements.map { .init(member: $0.0, index: $0.1) })
                }
            })
    }

    /// Applies one relationship's link changes (after the entities' changes, before commit).
    private func applyLinks(_ c: LinkChanges) throws(RecordViolation) {
        guard c.entityNames.count == 2, c.relationshipNames.count == 2 else {
            throw RecordViolation(
                .unknownName, "link changes name \(c.entityNames.count) sides", entity: c.entityNames.first)
        }
        var found: (LinkTable, Bool)?
        for l in links {
            let names = (0..<2).map { tables[l.link.entities[$0]].entity.name }
            if names == c.entityNames && l.link.names == c.relationshipNames { found = (l, false) }
            if names == c.entityNames.reversed() && l.link.names == c.relationshipNames.reversed() { found = (l, true) }
        }
        guard let (l, swapped) = found else {
            throw RecordViolation(
                .unknownName,
                "change set names the links \(c.entityNames[0]).\(c.relationshipNames[0]) ↔ \(c.entityNames[1]).\(c.relationshipNames[1]), "
                    + "which this schema does not store as links", entity: c.entityNames[0], key: c.relationshipNames[0]
            )
        }
        func row(_ side: Int, _ serial: UInt64) throws(RecordViolation) -> Int {
            let t = l.table(side)
            guard let r = t.row(ofSerial: serial), t.isVisible(row: r) else {
                throw RecordRules.linkOfMissingObject(t.entity.name, serial)
            }
            return r
        }
        let names = (0..<2).map { l.table($0).entity.name }
        for (pairs, removing) in [(c.removed, true), (c.added, false)] {
            for p in pairs {
                let (s0, s1) = swapped ? (p.serial1, p.serial0) : (p.serial0, p.serial1)
                let a = try row(0, s0), b = try row(1, s1)
                let pair = "\(names[0])/\(s0) and \(names[1])/\(s1)"
                if removing {
                    if let v = RecordRules.unlink(pair, linked: l.unlink(a, b)) { throw v }
                } else {
                    let holding = (0..<2).first { side in
                        l.link.toOne[side] && !l.visibleMembers(side, side == 0 ? a : b).isEmpty
                    }
                    if let v = RecordRules.link(
                        pair, linked: l.contains(a, b),
                        toOneHolding: holding.map { (entity: names[$0], name: l.link.names[$0]) })
                    {
                        throw v
                    }
                    _ = l.link(a, b)
                }
            }
        }
        for o in c.orders {
            guard o.side == 0 || o.side == 1 else {
                throw RecordViolation(.unknownName, "order edit of side \(o.side)", entity: c.entityNames[0])
            }
            let side = swapped ? 1 - o.side : o.side
            guard l.link.ordered[side] else { continue }
            let owner = try row(side, o.owner)
            var placing: [(Int32, Int)] = []
            for p in o.placements { placing.append((Int32(try row(1 - side, p.member)), p.index)) }
            if let v = RecordRules.order(names[side], o.owner, applies: l.reorderLogged(side, owner, placing: placing))
            {
                throw v
            }
        }
    }

    private func applyUnchecked(_ changes: ChangeSet) throws(RecordViolation) {
        for c in changes.entities {
            guard let t = table(named: c.entityName) else {
                throw RecordViolation(
                    .unknownName, "change set names unknown entity '\(c.entityName)'", entity: c.entityName)
            }
            var slots: [Int] = []
            for name in c.attributeNames {
                guard let s = t.entity.slot(forKey: name) else {
                    throw RecordViolation(
                        .unknownName, "change set names unknown attribute \(c.entityName).\(name)",
                        entity: c.entityName, key: name)
                }
                slots.append(s)
            }
            let width = c.attributeNames.count
            guard c.insertedValues.count == c.insertedSerials.count * width else {
                throw RecordViolation(
                    .unknownName,
                    "\(c.entityName): \(c.insertedValues.count) inserted values for \(c.insertedSerials.count) objects of \(width) attributes",
                    entity: c.entityName)
            }
            // Every serial within the bound before a row is allocated: the serial map is dense.
            if let s = c.insertedSerials.first(where: { !RecordRules.isValidSerial($0) }) {
                throw RecordViolation(
                    .serialOutOfBounds, "\(c.entityName): " + RecordRules.serialOutOfBounds(s).reason,
                    entity: c.entityName)
            }
            t.reserve(c.insertedSerials.count)
            for (i, serial) in c.insertedSerials.enumerated() {
                if let v = RecordRules.insert(c.entityName, serial, isLive: t.row(ofSerial: serial) != nil) { throw v }
                let row = t.allocateRow(serial: serial)
                t.flags[row] |= EntityTable.Flags.inserted
                t.changes.insertedRows.append(Int32(row))
                for (j, slot) in slots.enumerated() {
                    try store(c.insertedValues[i * width + j], table: t, row: row, slot: slot)
                }
            }
            for u in c.updates {
                guard u.attribute >= 0, u.attribute < width else {
                    throw RecordViolation(
                        .unknownName, "\(c.entityName)/\(u.serial): an update of attribute \(u.attribute) of \(width)",
                        entity: c.entityName)
                }
                guard let row = liveRow(t, u.serial) else {
                    throw RecordRules.updateOfMissingSerial(c.entityName, u.serial)
                }
                try store(u.value, table: t, row: row, slot: slots[u.attribute])
            }
            for serial in c.deletedSerials {
                guard let row = liveRow(t, serial) else {
                    throw RecordRules.deleteOfMissingSerial(c.entityName, serial)
                }
                t.delete(row: row)
            }
        }
        for c in changes.links where !c.isEmpty { try applyLinks(c) }
    }

    /// The row of `serial` when the object is live at this point of the change set. A committed
    /// object deleted earlier in it keeps its row (and serial) until the commit, but is gone
    /// for what follows, as open's replay, which frees the row at once, sees it: a second
    /// delete of it, or an update after it, is refused alike.
    private func liveRow(_ t: EntityTable, _ serial: UInt64) -> Int? {
        guard let row = t.row(ofSerial: serial), !t.isDeleted(row: row) else { return nil }
        return row
    }

    private func store(_ value: AttributeValue?, table t: EntityTable, row: Int, slot: Int) throws(RecordViolation) {
        let a = t.entity.attributes[slot]
        guard let value else {
            t.set(row: row, slot: slot, value: nil)
            return
        }
        let coerced = AttributeValue.coerce(attributeValue: value, to: a.type)
        if let v = RecordRules.value(t.entity.name, attribute: a.name, type: a.type, value, fits: coerced != nil) {
            throw v
        }
        guard let coerced else { return }
        if let v = RecordRules.rawValue(
            t.entity.name, attribute: a.name, serial: t.identity.serialOfRow[row], coerced,
            check: t.rawValueChecks[slot])
        {
            throw v
        }
        if let v = RecordRules.codableValue(
            t.entity.name, attribute: a, serial: t.identity.serialOfRow[row], coerced, check: t.codableChecks[slot])
        {
            throw v
        }
        t.set(row: row, slot: slot, value: coerced)
    }
}
