import Foundation

extension ModelContext {
    /// The row of `object` in `table`'s destination context, inserting an object that is not in
    /// any context yet (SwiftData does the same when an unmanaged object joins a relationship).
    func managedRow<T: Entity>(
        of object: T, expecting table: EntityTable, relationship: @autoclosure () -> String
    ) -> Int {
        if object._backing.managedTable == nil {
            do {
                try insert(object)
            } catch {
                preconditionFailure("\(relationship()): cannot insert \(T.self): \(error)")
            }
        }
        guard let t = object._backing.managedTable, t === table else {
            preconditionFailure(
                "\(relationship()): the object belongs to another context or entity than \(table.entity.name)")
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
            if t.hooks.contains(.prepareForDeletion) {
                rowsInUse += 1
                t.instance(row: r).prepareForDeletion()
                rowsInUse -= 1
            }
            guard t.isVisible(row: r) else { continue }  // the hook may have deleted it itself
            for rel in t.relationships {
                let d = t.destinationTable(rel)
                if rel.isLinked {
                    // Links to a deleted object read as absent at once and go when the deletion
                    // is saved; only a cascade has work to do now.
                    if rel.deleteRule == .cascade {
                        for member in t.toManyDestinations(row: r, rel) { work.append((d, member)) }
                    }
                } else if rel.isToMany {
                    switch rel.deleteRule {
                    case .cascade:
                        for child in t.toManyDestinations(row: r, rel) { work.append((d, child)) }
                    case .nullify:
                        for child in t.toManyDestinations(row: r, rel) {
                            d.set(row: child, slot: rel.inverseSlot, value: nil)
                        }
                    case .deny, .noAction:
                        break
                    }
                } else if let target = t.toOneDestination(row: r, rel, visibleOnly: true) {
                    switch rel.deleteRule {
                    case .cascade:
                        work.append((d, target))
                    case .nullify:
                        // A to-many inverse loses the row when it is deleted below.
                        if !rel.inverseIsToMany,
                            d.reference(row: target, slot: rel.inverseSlot) == t.identity.serialOfRow[r]
                        {
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
                    let count =
                        rel.isToMany
                        ? t.toManyDestinations(row: row, rel).count
                        : (t.toOneDestination(row: row, rel, visibleOnly: true) == nil ? 0 : 1)
                    guard count > 0 else { continue }
                    let destination = tables[rel.destination].entity.name
                    failures.append(
                        .init(
                            entity: t.entity.name,
                            objectID: ObjectID(entityName: t.entity.name, serial: t.serial(ofRow: row)),
                            key: rel.name,
                            reason:
                                "delete rule deny: still related to \(count) \(destination) object\(count == 1 ? "" : "s")"
                        ))
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
        guard let t = _backing.managedTable, let r = t.relationships.first(where: { $0.name == key }) else {
            return nil
        }
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
                throw ObjectGraphError(
                    .typeMismatch, "\(name) is a to-many: set it to an array of objects", entity: t.entity.name,
                    key: key)
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
            throw ObjectGraphError(
                .typeMismatch, "\(name) is a to-one: set it to an object or nil", entity: t.entity.name, key: key)
        }
        t.setToOne(row: _backing.rowIndex, r, to: try row(object), primitive: primitive)
        return true
    }
}
