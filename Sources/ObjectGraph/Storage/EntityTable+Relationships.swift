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
        if r.isLinked {
            // A link to a deleted object reads as absent at once, whatever `visibleOnly`.
            let d = destinationTable(r)
            for m in context.links[r.link].members(r.linkSide, row) where d.isVisible(row: Int(m)) { return Int(m) }
            return nil
        }
        guard let serial = reference(row: row, slot: r.slot) else { return nil }
        let d = destinationTable(r)
        guard let target = d.row(ofSerial: serial),
            visibleOnly ? d.isVisible(row: target) : d.flags[target] & (Flags.live | Flags.vanished) == Flags.live
        else { return nil }
        return target
    }

    /// The visible destination rows of the to-many `r` of `row`, in storage order.
    func toManyDestinations(row: Int, _ r: ResolvedRelationship) -> [Int] {
        if r.isLinked { return context.links[r.link].visibleMembers(r.linkSide, row) }
        let d = destinationTable(r)
        guard let index = d.indexes.referenceIndexOfSlot[r.inverseSlot] else { return [] }
        return d.referencingRows(index, serial: identity.serialOfRow[row]).map(Int.init).sorted()
    }

    /// Whether the to-many `r` of `row` holds exactly `targets` (distinct rows), in that order
    /// when `r` is ordered.
    func toManyHolds(row: Int, _ r: ResolvedRelationship, exactly targets: [Int]) -> Bool {
        // A few targets are searched for in the list; more get the sorted comparison, so that the
        // check stays O(n log n).
        if r.isLinked, targets.count <= 32 {
            return context.links[r.link].visibleMembersAre(r.linkSide, row, targets, ordered: r.isOrdered)
        }
        let current = toManyDestinations(row: row, r)
        if r.isOrdered { return current == targets }
        return current.count == targets.count && current.sorted() == targets.sorted()
    }

    /// Whether the to-one `r` of `row` holds nothing at all (not even a deleted destination).
    func toOneIsEmpty(row: Int, _ r: ResolvedRelationship) -> Bool {
        r.isLinked ? context.links[r.link].listCount(r.linkSide, row) == 0 : isNull(row: row, slot: r.slot)
    }

    /// Points the to-one `r` of `row` at `target` (a visible row of the destination table) or at
    /// nothing, keeping a to-one inverse consistent: the old destination's inverse and the new
    /// destination's previous partner are cleared. A to-many inverse follows by itself.
    ///
    /// With `primitive: true` only this side changes (Core Data's primitive accessors).
    func setToOne(row: Int, _ r: ResolvedRelationship, to target: Int?, primitive: Bool = false) {
        if r.isLinked {
            let l = context.links[r.link]
            if let target {
                addLink(row: row, r, target)
            } else {
                for m in l.members(r.linkSide, row) { removeLink(row: row, r, Int(m)) }
            }
            return
        }
        let d = destinationTable(r)
        let old = toOneDestination(row: row, r)
        if old == target && (target != nil || isNull(row: row, slot: r.slot)) { return }
        if !primitive && !r.inverseIsToMany {
            let mySerial = identity.serialOfRow[row]
            if let old, d.reference(row: old, slot: r.inverseSlot) == mySerial {
                d.set(row: old, slot: r.inverseSlot, value: nil)
            }
            if let target {
                let inverse = d.relationships[r.inverse]
                if let partner = d.toOneDestination(row: target, inverse),
                    !(partner == row && d.destinationTable(inverse) === self)
                {
                    set(row: partner, slot: r.slot, value: nil)
                }
                d.setCell(row: target, slot: r.inverseSlot, .fixed(mySerial))
            }
        }
        if let target {
            setCell(row: row, slot: r.slot, .fixed(d.identity.serialOfRow[target]), primitive: primitive)
        } else {
            set(row: row, slot: r.slot, value: nil, primitive: primitive)
        }
    }

    /// Makes the to-many `r` of `row` hold exactly `targets`: objects that leave it get `nil` in
    /// their to-one inverse, objects that join it point at `row` (leaving their previous owner).
    func setToMany(row: Int, _ r: ResolvedRelationship, to targets: [Int]) {
        if r.isLinked { return context.links[r.link].setMembers(r.linkSide, row, to: targets) }
        let d = destinationTable(r)
        let current = Set(toManyDestinations(row: row, r))
        let wanted = Set(targets)
        let inverse = d.relationships[r.inverse]
        for leaving in current.subtracting(wanted).sorted() { d.setToOne(row: leaving, inverse, to: nil) }
        for joining in targets where !current.contains(joining) { d.setToOne(row: joining, inverse, to: row) }
    }
}

// MARK: Relationships stored as links

extension EntityTable {
    /// Links `row` to `target` (a row of the destination table) through the linked relationship
    /// `r`, at `position` among `row`'s objects when `r` is ordered (the end when `nil`).
    /// Returns `false` when they were linked already.
    @discardableResult
    func addLink(row: Int, _ r: ResolvedRelationship, _ target: Int, at position: Int? = nil) -> Bool {
        let l = context.links[r.link]
        return r.linkSide == 0 ? l.link(row, target, atA: position) : l.link(target, row, atB: position)
    }

    /// Unlinks `row` and `target`. Returns `false` when they were not linked.
    @discardableResult
    func removeLink(row: Int, _ r: ResolvedRelationship, _ target: Int) -> Bool {
        let l = context.links[r.link]
        return r.linkSide == 0 ? l.unlink(row, target) : l.unlink(target, row)
    }

    /// The raw position in `row`'s list of its `index`-th visible member (or the list's end).
    func rawLinkPosition(row: Int, _ r: ResolvedRelationship, visibleIndex index: Int) -> Int {
        let l = context.links[r.link]
        let d = destinationTable(r)
        var seen = 0
        let list = l.members(r.linkSide, row)
        for (i, m) in list.enumerated() where d.isVisible(row: Int(m)) {
            if seen == index { return i }
            seen += 1
        }
        return list.count
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
        let serials = toManyDestinations(row: row, r).map { d.identity.serialOfRow[$0] }
        return r.isOrdered ? serials : serials.sorted()
    }

    /// The serials of the linked relationship `r`'s members of `row` as last saved: in order
    /// when `r` is ordered, else ascending.
    func committedLinkedMembers(row: Int, _ r: ResolvedRelationship) -> [UInt64] {
        let d = destinationTable(r)
        let serials = context.links[r.link].committedMembers(r.linkSide, row).map { d.identity.serialOfRow[Int($0)] }
        return r.isOrdered ? serials : serials.sorted()
    }

    /// The current members of the linked relationship `r` of `row`, as they compare with
    /// ``committedLinkedMembers(row:_:)``.
    func currentLinkedMembers(row: Int, _ r: ResolvedRelationship) -> [UInt64] {
        if r.isToMany { return currentMembers(row: row, r) }
        return toOneDestination(row: row, r, visibleOnly: true).map { [destinationTable(r).identity.serialOfRow[$0]] }
            ?? []
    }

    /// The serials of the to-many `r`'s members of `row` as last saved, ascending: the saved
    /// objects whose saved to-one inverse names `row`.
    func committedMembers(row: Int, _ r: ResolvedRelationship) -> [UInt64] {
        if r.isLinked { return committedLinkedMembers(row: row, r) }
        let d = destinationTable(r)
        let mine = identity.serialOfRow[row]
        var candidates = Set(toManyDestinations(row: row, r))
        candidates.formUnion(d.changes.dirtyRows.map(Int.init))
        candidates.formUnion(d.changes.deletedRows.map(Int.init))
        var serials: [UInt64] = []
        for c in candidates where d.flags[c] & (Flags.inserted | Flags.vanished) == 0 && d.flags[c] & Flags.live != 0 {
            if case .uint(let s)? = d.committedValue(row: c, slot: r.inverseSlot), s == mine {
                serials.append(d.identity.serialOfRow[c])
            }
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
            if r.isLinked {
                let current = currentLinkedMembers(row: row, r)
                let changed =
                    flags[row] & Flags.inserted != 0 ? !current.isEmpty : committedLinkedMembers(row: row, r) != current
                guard changed else { continue }
                if r.isToMany {
                    result[r.name] = .some(objectsValue(current, r))
                } else {
                    result[r.name] = .some(
                        current.first.map { .object(ObjectID(entityName: destinationTable(r).entity.name, serial: $0)) }
                    )
                }
                continue
            }
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
    func committedValuesWithRelationships(
        row: Int, keys: [String]?
    ) throws(ObjectGraphError) -> [String: AttributeValue?] {
        let unslotted = relationships.filter { $0.isToMany || $0.isLinked }
        let slotKeys = keys?.filter { key in !unslotted.contains { $0.name == key } }
        var result = committedValues(row: row, slots: try slots(forKeys: slotKeys))
        guard row >= 0, flags[row] & Flags.inserted == 0 else { return result }
        for r in relationships where !r.isToMany && !r.isLinked {
            if let value = result[r.name] { result[r.name] = .some(objectValue(value, r)) }
        }
        for r in unslotted where keys?.contains(r.name) ?? true {
            let members = committedMembers(row: row, r)
            if r.isToMany {
                result[r.name] = .some(objectsValue(members, r))
            } else {
                result[r.name] = .some(
                    members.first.map { .object(ObjectID(entityName: destinationTable(r).entity.name, serial: $0)) })
            }
        }
        return result
    }
}
