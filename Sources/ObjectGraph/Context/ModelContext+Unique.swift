extension ModelContext {
    /// The object of `type` whose unique attribute at `keyPath` equals `value`, pending inserts
    /// and changes included. O(1): a hash lookup in the constraint's index.
    ///
    /// ```swift
    /// let p = try context.object(Person.self, where: \.email, equals: "ada@example.com")
    /// ```
    ///
    /// - Throws: ``ObjectGraphError`` with code `unknownKey` when the key path names no
    ///   attribute, or `noUniqueIndex` when no unique constraint consists of exactly that attribute.
    public func object<T: Entity, V: PrimitiveAttribute>(
        _ type: T.Type, where keyPath: KeyPath<T, V>, equals value: V
    ) throws(ObjectGraphError) -> T? {
        let table = try table(for: type)
        let slot = try table.slot(for: keyPath)
        guard let index = table.uniqueIndex(slot: slot) else {
            return try object(type, table: table, slots: [slot], cells: [value.attributeValue])  // throws noUniqueIndex
        }
        let row = value._withCell { table.owner(ofCell: $0, in: index) }
        guard let row, table.isVisible(row: row) else { return nil }
        return table.instance(row: row) as? T
    }

    /// The object of `type` whose unique key (one or several attributes, by name) has the given
    /// values, pending inserts and changes included. O(1).
    ///
    /// - Throws: ``ObjectGraphError``: `unknownKey`, `typeMismatch` (a value that does not fit
    ///   its attribute) or `noUniqueIndex` (no unique constraint has exactly these keys).
    public func object<T: Entity>(_ type: T.Type, uniqueKey key: [String: Any]) throws(ObjectGraphError) -> T? {
        let table = try table(for: type)
        var slots: [Int] = []
        var values: [AttributeValue] = []
        for (name, raw) in key.sorted(by: { $0.key < $1.key }) {
            guard let slot = table.entity.slot(forKey: name) else {
                throw ObjectGraphError(
                    .unknownKey, "\(table.entity.name) has no attribute '\(name)'", entity: table.entity.name, key: name
                )
            }
            guard let v = AttributeValue.coerce(raw, to: table.types[slot]) else {
                throw ObjectGraphError(
                    .typeMismatch, "\(table.entity.name).\(name) holds \(table.types[slot].rawValue); got \(raw)",
                    entity: table.entity.name, key: name)
            }
            slots.append(slot)
            values.append(v)
        }
        return try object(type, table: table, slots: slots, cells: values)
    }

    /// Fetches the object whose unique attribute at `keyPath` equals `value`, or inserts one
    /// with that value; then lets `update` change it. O(1) whatever the store's size, and finds
    /// objects inserted earlier in the same unsaved transaction.
    ///
    /// ```swift
    /// let p = try context.upsert(Person.self, where: \.id, equals: 42) { $0.name = "Ada" }
    /// ```
    ///
    /// - Throws: what ``object(_:where:equals:)`` throws, or what `update` throws (the object,
    ///   if it was inserted here, is then removed again).
    @discardableResult
    public func upsert<T: Entity, V: PrimitiveAttribute>(
        _ type: T.Type, where keyPath: ReferenceWritableKeyPath<T, V>, equals value: V,
        _ update: (T) throws -> Void = { _ in }
    ) throws -> T {
        if let existing = try object(type, where: keyPath, equals: value) {
            try update(existing)
            return existing
        }
        return try insert(type) { object in
            object[keyPath: keyPath] = value
            try update(object)
        }
    }

    func object<T: Entity>(
        _ type: T.Type, table: EntityTable, slots: [Int], cells values: [AttributeValue]
    ) throws(ObjectGraphError) -> T? {
        guard let index = table.uniqueIndex(slots: slots) else {
            let names = slots.map { table.entity.attributes[$0].name }.joined(separator: ", ")
            throw ObjectGraphError(
                .noUniqueIndex,
                "\(table.entity.name)(\(names)) is not a unique constraint, so it has no index to look up",
                entity: table.entity.name, key: names)
        }
        // Order the probe's values as the index orders its slots.
        var ordered: [AttributeValue] = []
        for s in index.slots {
            guard let i = slots.firstIndex(of: s) else { return nil }
            guard let v = AttributeValue.coerce(attributeValue: values[i], to: table.types[s]) else {
                throw ObjectGraphError(
                    .typeMismatch,
                    "\(table.entity.name).\(table.entity.attributes[s].name) holds \(table.types[s].rawValue); got \(values[i])",
                    entity: table.entity.name, key: table.entity.attributes[s].name)
            }
            ordered.append(v)
        }
        let row = withCells(ordered) { cells in table.owner(ofCells: cells, in: index) }
        guard let row, table.isVisible(row: row) else { return nil }
        return table.instance(row: row) as? T
    }

    // MARK: Save-time checks

    /// Merges colliding inserts into the objects they collide with, for constraints whose
    /// policy is `.merge`. Runs inside the save's savepoint.
    func mergeUniqueCollisions() {
        for t in tables {
            for index in t.indexes.uniqueIndexes
            where index.constraint.onCollision == .merge && !index.duplicates.isEmpty {
                for r in index.duplicates.sorted() {
                    let row = Int(r)
                    guard t.isVisible(row: row), t.isInserted(row: row),
                        let owner = t.owner(ofKeyOf: row, in: index), owner != row
                    else { continue }
                    // A merge never changes the existing object's other unique keys: that would
                    // change an identity another constraint guarantees. Such an insert stays a
                    // collision, which validation reports.
                    guard t.otherUniqueKeyThatDiffers(row, owner, besides: index) == nil else { continue }
                    for slot in 0..<t.stride
                    where !t.isNull(row: row, slot: slot) && !t.entity.attributes[slot].isRelationship {
                        t.set(row: owner, slot: slot, value: t.value(row: row, slot: slot))
                    }
                    // Relationships move over with their inverses: the merged object's to-one
                    // destinations and to-many members now belong to the existing object.
                    for r in t.relationships {
                        let d = t.destinationTable(r)
                        if r.isLinked {
                            for member in t.toManyDestinations(row: row, r) { t.addLink(row: owner, r, member) }
                        } else if r.isToMany {
                            for member in t.toManyDestinations(row: row, r) {
                                d.setToOne(row: member, d.relationships[r.inverse], to: owner)
                            }
                        } else if let target = t.toOneDestination(row: row, r, visibleOnly: true) {
                            t.setToOne(row: owner, r, to: target)
                        }
                    }
                    t.delete(row: row)
                }
            }
        }
    }

    /// Every unique collision left, one failure naming both objects, the constraint and the key.
    func uniqueFailures() -> [ValidationError.Failure] {
        var failures: [ValidationError.Failure] = []
        for t in tables {
            for index in t.indexes.uniqueIndexes where !index.duplicates.isEmpty {
                for r in index.duplicates.sorted() {
                    let row = Int(r)
                    guard t.isVisible(row: row) else {
                        index.duplicates.remove(r)
                        continue
                    }
                    guard let owner = t.owner(ofKeyOf: row, in: index) else {
                        index.duplicates.remove(r)
                        t.indexInsert(row: row, into: index)  // the key's owner left: this row owns it now
                        continue
                    }
                    if owner == row {
                        index.duplicates.remove(r)
                        continue
                    }
                    // Only collisions a pending change caused fail the save.
                    let pending = { (x: Int) in t.flags[x] & (EntityTable.Flags.inserted | EntityTable.Flags.dirty) != 0
                    }
                    guard pending(row) || pending(owner) else { continue }
                    let key = index.slots.map {
                        "\(t.entity.attributes[$0].name) = \(t.value(row: row, slot: $0).map { "\($0)" } ?? "nil")"
                    }
                    .joined(separator: ", ")
                    let me = ObjectID(entityName: t.entity.name, serial: t.serial(ofRow: row))
                    let other = ObjectID(entityName: t.entity.name, serial: t.serial(ofRow: owner))
                    var reason =
                        "unique constraint \(index.constraint.name(in: t.entity.name)) violated: \(me) and \(other) both have \(key)"
                    if index.constraint.onCollision == .merge, t.isInserted(row: row),
                        let differing = t.otherUniqueKeyThatDiffers(row, owner, besides: index)
                    {
                        reason +=
                            "; not merged, because the merge would change \(other)'s \(differing.constraint.keys.joined(separator: ", ")), which unique constraint \(differing.constraint.name(in: t.entity.name)) guarantees"
                    }
                    failures.append(
                        .init(
                            entity: t.entity.name, objectID: me, key: index.constraint.keys.joined(separator: ", "),
                            reason: reason))
                }
            }
        }
        return failures
    }
}

/// Calls `body` with the cells of `values` (kept alive for the call).
func withCells<R>(_ values: [AttributeValue], _ body: ([RawCell]) -> R) -> R {
    func step(_ i: Int, _ acc: [RawCell]) -> R {
        if i == values.count { return body(acc) }
        return values[i].withCell { cell in step(i + 1, acc + [cell]) }
    }
    return step(0, [])
}
