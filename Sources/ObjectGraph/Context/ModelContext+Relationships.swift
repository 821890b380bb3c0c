import Foundation

// Relationships: reading and setting both sides, and the delete rules.

extension EntityTable {
    /// The table of a relationship's destination entity.
    @inline(__always)
    func destinationTable(_ r: ResolvedRelationship) -> EntityTable { context.tables[r.destination] }

    /// The serial a to-one slot holds, or `nil` when it is null.
    @inline(__always)
    func reference(row: Int, slot: Int) -> UInt64? {
        isNull(row: row, slot: slot) ? nil : values[row * stride + slot]
    }

    /// The destination row of the to-one `r` of `row`, if any. A destination deleted in this
    /// transaction is still returned (Core Data does the same: its `isDeleted` is true) unless
    /// `visibleOnly`; one released by a save, or never saved, reads as `nil`.
    func toOneDestination(row: Int, _ r: ResolvedRelationship, visibleOnly: Bool = false) -> Int? {
        guard let serial = reference(row: row, slot: r.slot) else { return nil }
        let d = destinationTable(r)
        guard let target = d.row(ofSerial: serial),
              visibleOnly ? d.isVisible(row: target) : d.flags[target] & (Flags.live | Flags.vanished) == Flags.live
        else { return nil }
        return target
    }

    /// The visible destination rows of the to-many `r` of `row`, in storage order.
    func toManyDestinations(row: Int, _ r: ResolvedRelationship) -> [Int] {
        let d = destinationTable(r)
        guard let index = d.referenceIndexOfSlot[r.inverseSlot] else { return [] }
        return d.referencingRows(index, serial: serialOfRow[row]).map(Int.init).sorted()
    }

    /// Points the to-one `r` of `row` at `target` (a visible row of the destination table) or at
    /// nothing, keeping a to-one inverse consistent: the old destination's inverse and the new
    /// destination's previous partner are cleared. A to-many inverse follows by itself.
    ///
    /// With `primitive: true` only this side changes (Core Data's primitive accessors).
    func setToOne(row: Int, _ r: ResolvedRelationship, to target: Int?, primitive: Bool = false) {
        let d = destinationTable(r)
        let old = toOneDestination(row: row, r)
        if old == target && (target != nil || isNull(row: row, slot: r.slot)) { return }
        if !primitive && !r.inverseIsToMany {
            let mySerial = serialOfRow[row]
            if let old, d.reference(row: old, slot: r.inverseSlot) == mySerial {
                d.set(row: old, slot: r.inverseSlot, value: nil)
            }
            if let target {
                let inverse = d.relationships[r.inverse]
                if let partner = d.toOneDestination(row: target, inverse), !(partner == row && d.destinationTable(inverse) === self) {
                    set(row: partner, slot: r.slot, value: nil)
                }
                d.setCell(row: target, slot: r.inverseSlot, .fixed(mySerial))
            }
        }
        if let target {
            setCell(row: row, slot: r.slot, .fixed(d.serialOfRow[target]), primitive: primitive)
        } else {
            set(row: row, slot: r.slot, value: nil, primitive: primitive)
        }
    }

    /// Makes the to-many `r` of `row` hold exactly `targets`: objects that leave it get `nil` in
    /// their to-one inverse, objects that join it point at `row` (leaving their previous owner).
    func setToMany(row: Int, _ r: ResolvedRelationship, to targets: [Int]) {
        let d = destinationTable(r)
        let current = Set(toManyDestinations(row: row, r))
        let wanted = Set(targets)
        let inverse = d.relationships[r.inverse]
        for leaving in current.subtracting(wanted).sorted() { d.setToOne(row: leaving, inverse, to: nil) }
        for joining in targets where !current.contains(joining) { d.setToOne(row: joining, inverse, to: row) }
    }
}

extension ModelContext {
    /// The row of `object` in `table`'s destination context, inserting an object that is not in
    /// any context yet (SwiftData does the same when an unmanaged object joins a relationship).
    func managedRow<T: Entity>(of object: T, expecting table: EntityTable, relationship: String) -> Int {
        if object._backing.managedTable == nil {
            do {
                try insert(object)
            } catch {
                preconditionFailure("\(relationship): cannot insert \(T.self): \(error)")
            }
        }
        guard let t = object._backing.managedTable, t === table else {
            preconditionFailure("\(relationship): the object belongs to another context or entity than \(table.entity.name)")
        }
        return object._backing.rowIndex
    }

    /// Deletes `row` of `table` and applies the delete rules, with an explicit worklist rather
    /// than recursion (a cascade down a long chain must not exhaust the stack). Each object
    /// reached gets `prepareForDeletion` before its relationships are torn down
    /// (Docs/Semantics.md, rule 6).
    func deleteApplyingRules(_ table: EntityTable, row: Int) {
        var work: [(EntityTable, Int)] = [(table, row)]
        while let (t, r) = work.popLast() {
            guard t.isVisible(row: r) else { continue }
            if t.hooks.contains(.prepareForDeletion) { t.instance(row: r).prepareForDeletion() }
            guard t.isVisible(row: r) else { continue }  // the hook may have deleted it itself
            for rel in t.relationships {
                let d = t.destinationTable(rel)
                if rel.isToMany {
                    switch rel.deleteRule {
                    case .cascade:
                        for child in t.toManyDestinations(row: r, rel) { work.append((d, child)) }
                    case .nullify:
                        for child in t.toManyDestinations(row: r, rel) { d.set(row: child, slot: rel.inverseSlot, value: nil) }
                    case .deny, .noAction:
                        break
                    }
                } else if let target = t.toOneDestination(row: r, rel, visibleOnly: true) {
                    switch rel.deleteRule {
                    case .cascade:
                        work.append((d, target))
                    case .nullify:
                        // A to-many inverse loses the row when it is deleted below.
                        if !rel.inverseIsToMany, d.reference(row: target, slot: rel.inverseSlot) == t.serialOfRow[r] {
                            d.set(row: target, slot: rel.inverseSlot, value: nil)
                        }
                    case .deny, .noAction:
                        break
                    }
                }
            }
            t.delete(row: r)
        }
    }

    /// The `deny` delete rules the pending deletions break: a deleted object whose deny
    /// relationship still has a live destination.
    func denyFailures(_ pending: [PendingRows]) -> [ValidationError.Failure] {
        var failures: [ValidationError.Failure] = []
        for (t, p) in zip(tables, pending) where t.relationships.contains(where: { $0.deleteRule == .deny }) {
            for row in p.deletes {
                for rel in t.relationships where rel.deleteRule == .deny {
                    let count = rel.isToMany ? t.toManyDestinations(row: row, rel).count : (t.toOneDestination(row: row, rel, visibleOnly: true) == nil ? 0 : 1)
                    guard count > 0 else { continue }
                    let destination = tables[rel.destination].entity.name
                    failures.append(.init(
                        entity: t.entity.name, objectID: ObjectID(entityName: t.entity.name, serial: t.serial(ofRow: row)),
                        key: rel.name,
                        reason: "delete rule deny: still related to \(count) \(destination) object\(count == 1 ? "" : "s")"))
                }
            }
        }
        return failures
    }
}

extension Entity {
    /// The managed table and resolved relationship called `key`, if this object is in a context
    /// and its entity has such a relationship.
    func relationship(forKey key: String) -> (EntityTable, ResolvedRelationship)? {
        guard let t = _backing.managedTable, let r = t.relationships.first(where: { $0.name == key }) else { return nil }
        return (t, r)
    }

    /// The value of the relationship `key` (`any Entity`, `nil`, or `[any Entity]` for a
    /// to-many), or `.none` when `key` is no relationship of a managed object.
    func relatedValue(forKey key: String) -> Any?? {
        guard let (t, r) = relationship(forKey: key) else { return .none }
        let d = t.destinationTable(r)
        if r.isToMany { return .some(t.toManyDestinations(row: _backing.rowIndex, r).map { d.instance(row: $0) }) }
        return .some(t.toOneDestination(row: _backing.rowIndex, r).map { d.instance(row: $0) })
    }

    /// Sets the relationship `key` from `value` (an entity, `nil`, or an array of entities for a
    /// to-many). Returns `false` when `key` is no relationship of a managed object.
    func setRelated(_ value: Any?, forKey key: String, primitive: Bool) throws(ObjectGraphError) -> Bool {
        guard let (t, r) = relationship(forKey: key) else { return false }
        let d = t.destinationTable(r)
        let name = "\(t.entity.name).\(r.name)"
        func row(_ object: any Entity) throws(ObjectGraphError) -> Int {
            guard let dt = object._backing.managedTable, dt === d else {
                throw ObjectGraphError(
                    .typeMismatch, "\(name) relates \(d.entity.name) objects of this context; got \(type(of: object))",
                    entity: t.entity.name, key: key)
            }
            return object._backing.rowIndex
        }
        if r.isToMany {
            guard let objects = (value ?? [any Entity]()) as? [any Entity] else {
                throw ObjectGraphError(.typeMismatch, "\(name) is a to-many: set it to an array of objects", entity: t.entity.name, key: key)
            }
            var rows: [Int] = []
            var seen = Set<Int>()
            for o in objects { let r = try row(o); if seen.insert(r).inserted { rows.append(r) } }
            t.setToMany(row: _backing.rowIndex, r, to: rows)
            return true
        }
        guard let value, !(value is NSNull) else {
            t.setToOne(row: _backing.rowIndex, r, to: nil, primitive: primitive)
            return true
        }
        guard let object = value as? any Entity else {
            throw ObjectGraphError(.typeMismatch, "\(name) is a to-one: set it to an object or nil", entity: t.entity.name, key: key)
        }
        t.setToOne(row: _backing.rowIndex, r, to: try row(object), primitive: primitive)
        return true
    }
}

// MARK: Relationships in changedValues() and committedValues(forKeys:)

extension EntityTable {
    /// A to-one slot's stored serial as the destination's ID.
    func objectValue(_ value: AttributeValue?, _ r: ResolvedRelationship) -> AttributeValue? {
        guard case .uint(let serial)? = value else { return value }
        return .object(ObjectID(entityName: destinationTable(r).entity.name, serial: serial))
    }

    /// The serials of the to-many `r`'s current members of `row`, ascending.
    func currentMembers(row: Int, _ r: ResolvedRelationship) -> [UInt64] {
        let d = destinationTable(r)
        return toManyDestinations(row: row, r).map { d.serialOfRow[$0] }.sorted()
    }

    /// The serials of the to-many `r`'s members of `row` as last saved, ascending: the saved
    /// objects whose saved to-one inverse names `row`.
    func committedMembers(row: Int, _ r: ResolvedRelationship) -> [UInt64] {
        let d = destinationTable(r)
        let mine = serialOfRow[row]
        var candidates = Set(toManyDestinations(row: row, r))
        candidates.formUnion(d.dirtyRows.map(Int.init))
        candidates.formUnion(d.deletedRows.map(Int.init))
        var serials: [UInt64] = []
        for c in candidates where d.flags[c] & (Flags.inserted | Flags.vanished) == 0 && d.flags[c] & Flags.live != 0 {
            if case .uint(let s)? = d.committedValue(row: c, slot: r.inverseSlot), s == mine { serials.append(d.serialOfRow[c]) }
        }
        return serials.sorted()
    }

    func objectsValue(_ serials: [UInt64], _ r: ResolvedRelationship) -> AttributeValue {
        let name = destinationTable(r).entity.name
        return .objects(serials.map { ObjectID(entityName: name, serial: $0) })
    }

    /// `changedValues(row:)` with relationships as objects: a changed to-one as `.object`, a
    /// to-many whose members changed (or, for an inserted object, that has members) as
    /// `.objects` of its current members.
    func changedValuesWithRelationships(row: Int) -> [String: AttributeValue?] {
        var result = changedValues(row: row)
        guard row >= 0 else { return result }
        for r in relationships {
            if !r.isToMany {
                if let value = result[r.name] { result[r.name] = .some(objectValue(value, r)) }
                continue
            }
            let current = currentMembers(row: row, r)
            if flags[row] & Flags.inserted != 0 {
                if !current.isEmpty { result[r.name] = .some(objectsValue(current, r)) }
            } else if committedMembers(row: row, r) != current {
                result[r.name] = .some(objectsValue(current, r))
            }
        }
        return result
    }

    /// `committedValues(row:slots:)` for `keys` (every attribute and relationship when `nil`),
    /// relationships as `.object` / `.objects`.
    func committedValuesWithRelationships(row: Int, keys: [String]?) throws(ObjectGraphError) -> [String: AttributeValue?] {
        let toMany = relationships.filter(\.isToMany)
        let slotKeys = keys?.filter { key in !toMany.contains { $0.name == key } }
        var result = committedValues(row: row, slots: try slots(forKeys: slotKeys))
        guard row >= 0, flags[row] & Flags.inserted == 0 else { return result }
        for r in relationships where !r.isToMany {
            if let value = result[r.name] { result[r.name] = .some(objectValue(value, r)) }
        }
        for r in toMany where keys?.contains(r.name) ?? true {
            result[r.name] = .some(objectsValue(committedMembers(row: row, r), r))
        }
        return result
    }
}
