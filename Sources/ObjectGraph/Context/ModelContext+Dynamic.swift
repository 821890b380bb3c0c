// Access by entity name, for code that has no model class (tools, DynamicObject stores).

extension ModelContext {
    /// Every object of the entity named `name` not deleted in this transaction (pending inserts
    /// included), as dynamic objects or the model's own class, in storage order.
    ///
    /// - Throws: ``ObjectGraphError`` with code `unknownEntity`.
    public func objects(ofEntityNamed name: String) throws(ObjectGraphError) -> [any Entity] {
        guard let table = table(named: name) else {
            throw ObjectGraphError(.unknownEntity, "no entity named '\(name)' in this context's schema", entity: name)
        }
        var result: [any Entity] = []
        result.reserveCapacity(table.identity.liveCount)
        for row in 0..<table.rowCount where table.isVisible(row: row) { result.append(table.instance(row: row)) }
        return result
    }
}
