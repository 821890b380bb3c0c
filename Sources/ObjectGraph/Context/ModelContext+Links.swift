// Changing one member of a to-many without reading and writing the whole list: Core Data's
// `addTagsObject:`, `removeTagsObject:` and `insertObject:inTracksAtIndex:`.

extension ModelContext {
    /// Adds `member` to the to-many relationship `key` of `owner`, maintaining the inverse; on
    /// an ordered relationship at `index` among the current members (the end when `nil`).
    ///
    /// O(1) for a relationship stored as links (a many-to-many or an ordered to-many), whatever
    /// the number of members; an ordered insert before the end shifts the members after it
    /// below 2,048 members and costs O(log n) from there (Docs/Relationships.md, "Costs"). Adding a member already there changes nothing (use
    /// ``move(in:of:from:to:)`` to reorder). A `member` not in a context yet is inserted.
    ///
    /// ```swift
    /// try context.add(tag, to: "tags", of: article)
    /// try context.add(track, to: "tracks", of: playlist, at: 0)
    /// ```
    ///
    /// - Throws: ``ObjectGraphError``: `notInContext` or `wrongContext` for `owner`,
    ///   `unknownKey` when `key` is not a to-many of its entity, `typeMismatch` when `member`
    ///   is not of its destination entity, `typeMismatch` for an index out of range.
    public func add<Owner: Entity, Member: Entity>(
        _ member: Member, to key: String, of owner: Owner, at index: Int? = nil
    ) throws(ObjectGraphError) {
        let (t, r) = try toMany(key, of: owner)
        let d = t.destinationTable(r)
        if member._backing.managedTable == nil { try insert(member) }
        guard let dt = member._backing.managedTable, dt === d else {
            throw ObjectGraphError(
                .typeMismatch,
                "\(t.entity.name).\(key) relates \(d.entity.name) objects of this context; got \(Member.self)",
                entity: t.entity.name, key: key)
        }
        let row = owner._backing.rowIndex
        let target = member._backing.rowIndex
        guard d.isVisible(row: target) else { return }
        if let index {
            let count = t.toManyDestinations(row: row, r).count
            guard index >= 0, index <= count else {
                throw ObjectGraphError(
                    .typeMismatch, "index \(index) is outside 0...\(count) for \(t.entity.name).\(key)",
                    entity: t.entity.name, key: key)
            }
        }
        if r.isLinked {
            let position = index.flatMap { r.isOrdered ? t.rawLinkPosition(row: row, r, visibleIndex: $0) : nil }
            t.addLink(row: row, r, target, at: position)
        } else {
            d.setToOne(row: target, d.relationships[r.inverse], to: row)
        }
    }

    /// Removes `member` from the to-many relationship `key` of `owner`, maintaining the
    /// inverse. O(1) for an unordered relationship stored as links, whatever the number of
    /// members; on an ordered one it shifts the members after it below 2,048 members and costs
    /// O(log n) from there. Removing an object that is not a member changes nothing.
    ///
    /// - Throws: ``ObjectGraphError`` as ``add(_:to:of:at:)``.
    public func remove<Owner: Entity, Member: Entity>(
        _ member: Member, from key: String, of owner: Owner
    ) throws(ObjectGraphError) {
        let (t, r) = try toMany(key, of: owner)
        let d = t.destinationTable(r)
        guard let dt = member._backing.managedTable, dt === d else { return }
        let row = owner._backing.rowIndex
        let target = member._backing.rowIndex
        if r.isLinked {
            t.removeLink(row: row, r, target)
        } else if d.toOneDestination(row: target, d.relationships[r.inverse]) == row {
            d.setToOne(row: target, d.relationships[r.inverse], to: nil)
        }
    }

    /// Moves the member at `from` to `to` in the ordered to-many relationship `key` of `owner`
    /// (both indexes among the current members; `to` is where the member ends up).
    ///
    /// - Throws: ``ObjectGraphError``: as ``add(_:to:of:at:)``; `typeMismatch` when the
    ///   relationship is not ordered or an index is out of range.
    public func move<Owner: Entity>(in key: String, of owner: Owner, from: Int, to: Int) throws(ObjectGraphError) {
        let (t, r) = try toMany(key, of: owner)
        guard r.isOrdered else {
            throw ObjectGraphError(
                .typeMismatch, "\(t.entity.name).\(key) is not ordered", entity: t.entity.name, key: key)
        }
        let row = owner._backing.rowIndex
        let visible = t.toManyDestinations(row: row, r)
        guard visible.indices.contains(from), visible.indices.contains(to) else {
            throw ObjectGraphError(
                .typeMismatch, "move from \(from) to \(to) is outside 0..<\(visible.count) for \(t.entity.name).\(key)",
                entity: t.entity.name, key: key)
        }
        guard from != to else { return }
        let l = links[r.link]
        let d = t.destinationTable(r)
        let moving = Int32(visible[from])
        let raw = l.members(r.linkSide, row)
        guard let rawFrom = raw.firstIndex(of: moving) else { return }
        // The raw position, in the list without the moving member, of the `to`-th visible one.
        var rest = raw
        rest.remove(at: rawFrom)
        var rawTo = rest.count
        var seen = 0
        for (i, m) in rest.enumerated() where d.isVisible(row: Int(m)) {
            if seen == to { rawTo = i; break }
            seen += 1
        }
        l.move(side: r.linkSide, owner: row, from: rawFrom, to: rawTo)
    }

    /// The managed table and to-many relationship `key` of `owner`.
    private func toMany<Owner: Entity>(
        _ key: String, of owner: Owner
    ) throws(ObjectGraphError) -> (EntityTable, ResolvedRelationship) {
        guard let t = owner._backing.managedTable else {
            throw ObjectGraphError(
                .notInContext, "insert the \(Owner.entityDescription.name) object before relating it",
                entity: Owner.entityDescription.name, key: key)
        }
        guard t.context === self else {
            throw ObjectGraphError(
                .wrongContext, "the \(t.entity.name) object belongs to another context", entity: t.entity.name, key: key
            )
        }
        guard let r = t.relationships.first(where: { $0.name == key && $0.isToMany }) else {
            throw ObjectGraphError(
                .unknownKey, "\(t.entity.name) has no to-many relationship '\(key)'", entity: t.entity.name, key: key)
        }
        return (t, r)
    }
}
