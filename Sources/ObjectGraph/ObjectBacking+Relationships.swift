// The accessors generated code uses for relationships (`@Relationship` properties).

extension ObjectBacking {
    /// Reads the to-one relationship number `relationship` (its index in the entity's
    /// ``EntityDescription/relationships``): the destination object, or `nil` when there is none,
    /// when it was deleted, or when this object is not in a context. On an object read from a
    /// snapshot, the destination in the same snapshot.
    public func getToOne<T: Entity>(_ relationship: Int, as type: T.Type) -> T? {
        switch storage {
        case .standalone(let s): return s.relations[relationship]?.first as? T
        case .snapshot(let o): return o.toOne(relationship) as? T
        case .managed, .unmanaged: break
        }
        guard let t = managedTable else { return nil }
        let r = t.relationships[relationship]
        guard let target = t.toOneDestination(row: Int(row), r) else { return nil }
        return t.destinationTable(r).instance(row: target) as? T
    }

    /// Sets the to-one relationship number `relationship`, maintaining its inverse: a to-many
    /// inverse gains (and the previous destination's loses) this object; a to-one inverse is
    /// pointed back here and its previous partner cleared.
    ///
    /// A destination not yet in a context is inserted into this object's context (SwiftData
    /// does the same).
    ///
    /// - Precondition: this object is in a context (insert it before relating it); the
    ///   destination is not in another context.
    public func setToOne<T: Entity>(_ relationship: Int, _ value: T?) {
        let t = relationshipTable(relationship)
        let r = t.relationships[relationship]
        let target = value.map {
            t.context.managedRow(of: $0, expecting: t.destinationTable(r), relationship: "\(t.entity.name).\(r.name)")
        }
        t.setToOne(row: Int(row), r, to: target)
    }

    /// Reads the to-many relationship number `relationship`: the destination objects, in storage
    /// order (set semantics: no object twice). Empty when this object is not in a context. On an
    /// object read from a snapshot, the destinations in the same snapshot, by serial.
    public func getToMany<T: Entity>(_ relationship: Int, as type: T.Type) -> [T] {
        switch storage {
        case .standalone(let s): return (s.relations[relationship] ?? []).compactMap { $0 as? T }
        case .snapshot(let o): return o.toMany(relationship).compactMap { $0 as? T }
        case .managed, .unmanaged: break
        }
        guard let t = managedTable else { return [] }
        let r = t.relationships[relationship]
        let d = t.destinationTable(r)
        return t.toManyDestinations(row: Int(row), r).compactMap { d.instance(row: $0) as? T }
    }

    /// Makes the to-many relationship number `relationship` hold exactly `value` (duplicates
    /// count once): objects that leave get `nil` in their to-one inverse, objects that join point
    /// here, leaving their previous owner. Objects not yet in a context are inserted.
    ///
    /// - Precondition: as for ``setToOne(_:_:)`` (generated code calls `Entity._setToMany(_:_:)`).
    public func setToMany<T: Entity>(_ relationship: Int, _ value: [T]) {
        let t = relationshipTable(relationship)
        let r = t.relationships[relationship]
        let d = t.destinationTable(r)
        var rows: [Int] = []
        rows.reserveCapacity(value.count)
        for object in value {
            rows.append(t.context.managedRow(of: object, expecting: d, relationship: "\(t.entity.name).\(r.name)"))
        }
        if rows.count > 1 {
            // Duplicates count once; a short list is checked without hashing.
            if rows.count <= 16 {
                var unique: [Int] = []
                for row in rows where !unique.contains(row) { unique.append(row) }
                rows = unique
            } else {
                var seen = Set<Int>(minimumCapacity: rows.count)
                rows = rows.filter { seen.insert($0).inserted }
            }
        }
        t.setToMany(row: Int(row), r, to: rows)
    }

    private func relationshipTable(_ relationship: Int) -> EntityTable {
        guard let t = managedTable else {
            let name =
                entity.relationships.indices.contains(relationship)
                ? entity.relationships[relationship].name : "#\(relationship)"
            preconditionFailure(
                "\(entity.name).\(name): insert the object into a context before setting its relationships")
        }
        return t
    }
}

extension Entity {
    /// The setter generated code uses for a to-one relationship. On an object in a context it
    /// is ``ObjectBacking/setToOne(_:_:)``; on an object not inserted yet it records the
    /// destination, and inserting the object applies it (SwiftData style: build a graph, then
    /// insert it).
    public func _setToOne<T: Entity>(_ relationship: Int, _ value: T?) {
        if _backing.managedTable != nil { return _backing.setToOne(relationship, value) }
        _standaloneValues().relations[relationship] = value.map { [$0] } ?? []
    }

    /// The setter generated code uses for a to-many relationship; see ``_setToOne(_:_:)``.
    public func _setToMany<T: Entity>(_ relationship: Int, _ value: [T]) {
        if _backing.managedTable != nil { return _backing.setToMany(relationship, value) }
        var seen = Set<ObjectIdentifier>()
        _standaloneValues().relations[relationship] = value.filter { seen.insert(ObjectIdentifier($0)).inserted }
    }

    /// The side buffer of an object not in a context, created on first use.
    private func _standaloneValues() -> StandaloneValues {
        switch _backing.storage {
        case .standalone(let s):
            return s
        case .unmanaged(let d):
            let s = StandaloneValues(entity: d)
            _backing = ObjectBacking(standalone: s)
            return s
        case .snapshot(let o):
            let s = o.detachedValues()
            _backing = ObjectBacking(standalone: s)
            return s
        case .managed(let t):
            preconditionFailure("\(t.entity.name): managed objects have no standalone values")
        }
    }
}

extension ModelContext {
    /// Sets the relationships recorded on an object before its insertion (`relations`, by
    /// relationship number) on its new row, inverses included; destinations not in a context
    /// yet are inserted too.
    func applyRelations(_ relations: [Int: [any Entity]], to table: EntityTable, row: Int) {
        for (number, objects) in relations.sorted(by: { $0.key < $1.key })
        where table.relationships.indices.contains(number) {
            let r = table.relationships[number]
            let d = table.destinationTable(r)
            let name = "\(table.entity.name).\(r.name)"
            let rows = objects.map { managedRow(of: $0, expecting: d, relationship: name) }
            if r.isToMany {
                table.setToMany(row: row, r, to: rows)
            } else {
                table.setToOne(row: row, r, to: rows.first)
            }
        }
    }
}
