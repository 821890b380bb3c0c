/// An object of an entity known only from a journal's recorded schema, with no Swift class of
/// its own: read and write it by key (`attributeValue(forKey:)`, `setValue(_:forKey:)`).
///
/// Tools open a store with ``ObjectStore/openDynamic(at:options:)`` to get these.
public final class DynamicObject: Entity {
    /// A placeholder: each dynamic object's real description is that of its own entity
    /// (``entity``).
    public static let entityDescription = EntityDescription(name: "DynamicObject", type: DynamicObject.self, attributes: [])
    /// None: a dynamic object has no code of its own.
    public static var implementedHooks: EntityHooks { [] }
    /// The object's storage handle.
    public var _backing: ObjectBacking
    /// Creates an instance over existing storage (materialization).
    public init(_backing: ObjectBacking) { self._backing = _backing }

    /// The description of the entity this object belongs to.
    public var entity: EntityDescription { _backing.entity }
}

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
        result.reserveCapacity(table.liveCount)
        for row in 0..<table.rowCount where table.isVisible(row: row) { result.append(table.instance(row: row)) }
        return result
    }
}

extension StoredSchema {
    /// Decodes a transaction or base record's payload written with this schema.
    ///
    /// - Throws: ``StoreError`` with code `corruptPayload`, naming the byte offset.
    public func decodeTransaction(_ payload: [UInt8]) throws(StoreError) -> ChangeSet {
        let result: Result<ChangeSet, StoreError> = payload.withUnsafeBytes { buffer in
            do throws(StoreError) { return .success(try TransactionCodec.decodeChangeSet(buffer, stored: self)) } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Checks a transaction or base record's payload written with this schema without
    /// building its values, and lists the serials it inserts, updates and deletes in
    /// `outline`: what `graph-journal verify` needs, several times faster than
    /// ``decodeTransaction(_:)``.
    ///
    /// It throws exactly when ``decodeTransaction(_:)`` would, with the same message: every
    /// entity and attribute index must exist in this schema, every value must be well-formed
    /// for its attribute's type, and every length must stay inside the payload.
    ///
    /// ```swift
    /// var outline = TransactionOutline()
    /// try schema.validateTransaction(payload, into: &outline)
    /// let inserted = outline.blocks.reduce(0) { $0 + $1.inserted.count }
    /// ```
    ///
    /// - Parameter payload: the decompressed payload.
    /// - Parameter outline: emptied (its storage kept), then filled with the payload's serials.
    /// - Throws: ``StoreError`` with code `corruptPayload`, naming the byte offset.
    public func validateTransaction(_ payload: UnsafeRawBufferPointer, into outline: inout TransactionOutline) throws(StoreError) {
        try TransactionCodec.validate(payload, stored: self, into: &outline)
    }
}
