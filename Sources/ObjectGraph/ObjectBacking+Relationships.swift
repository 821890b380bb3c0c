// The accessors generated code uses for relationships (`@Relationship` properties).

extension ObjectBacking {
    /// Reads the to-one relationship number `relationship` (its index in the entity's
    /// ``EntityDescription/relationships``): the destination object, or `nil` when there is none,
    /// when it was deleted, or when this object is not in a context.
    public func getToOne<T: Entity>(_ relationship: Int, as type: T.Type) -> T? {
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
        let target = value.map { t.context.managedRow(of: $0, expecting: t.destinationTable(r), relationship: "\(t.entity.name).\(r.name)") }
        t.setToOne(row: Int(row), r, to: target)
    }

    /// Reads the to-many relationship number `relationship`: the destination objects, in storage
    /// order (set semantics: no object twice). Empty when this object is not in a context.
    public func getToMany<T: Entity>(_ relationship: Int, as type: T.Type) -> [T] {
        guard let t = managedTable else { return [] }
        let r = t.relationships[relationship]
        let d = t.destinationTable(r)
        return t.toManyDestinations(row: Int(row), r).compactMap { d.instance(row: $0) as? T }
    }

    /// Makes the to-many relationship number `relationship` hold exactly `value` (duplicates
    /// count once): objects that leave get `nil` in their to-one inverse, objects that join point
    /// here, leaving their previous owner. Objects not yet in a context are inserted.
    ///
    /// - Precondition: as for ``setToOne(_:_:)``.
    public func setToMany<T: Entity>(_ relationship: Int, _ value: [T]) {
        let t = relationshipTable(relationship)
        let r = t.relationships[relationship]
        let d = t.destinationTable(r)
        let rows = value.map { t.context.managedRow(of: $0, expecting: d, relationship: "\(t.entity.name).\(r.name)") }
        var seen = Set<Int>()
        t.setToMany(row: Int(row), r, to: rows.filter { seen.insert($0).inserted })
    }

    private func relationshipTable(_ relationship: Int) -> EntityTable {
        guard let t = managedTable else {
            let name = entity.relationships.indices.contains(relationship) ? entity.relationships[relationship].name : "#\(relationship)"
            preconditionFailure("\(entity.name).\(name): insert the object into a context before setting its relationships")
        }
        return t
    }
}
