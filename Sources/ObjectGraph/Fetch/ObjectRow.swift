import Foundation

/// One fetched object's chosen attributes, read where they are stored: what
/// ``ModelContext/forEachRow(_:columns:_:)-(FetchDescriptor<T>,[PartialKeyPath<T>],_)``
/// and ``StoreSnapshot/forEachRow(_:columns:_:)-(FetchDescriptor<T>,[PartialKeyPath<T>],_)``
/// hand their body, as GRDB's cursors hand a `Row`.
///
/// Column `i` is the attribute the loop's `columns[i]` names. A read builds the value and
/// nothing else: no object instance, no `Decoder`. The row cannot be copied, so it cannot
/// outlive the call it is handed to.
///
/// ```swift
/// try context.forEachRow(FetchDescriptor<Person>(), columns: [\.id, \.name, \.city]) { row in
///     people.append(PersonRow(id: try row[0], name: try row[1], city: try row[2]))
/// }
/// ```
///
/// A column reads as the Swift type it is stored as (``PrimitiveAttribute/attributeType``),
/// or as another integer type the value fits, or as `Double` from `Float`: what an attribute
/// of that type could be assigned. An enum attribute reads as its raw value; a `Codable` one
/// is read through ``ModelContext/forEach(_:as:_:)``.
public struct ObjectRow: ~Copyable {
    @usableFromInline let backing: ObjectBacking
    @usableFromInline let columns: RowColumns

    init(backing: ObjectBacking, columns: RowColumns) {
        self.backing = backing
        self.columns = columns
    }

    /// The number of columns.
    public var count: Int { columns.slots.count }

    /// The ID of the object the row holds: what ``ModelContext/object(with:)`` (or the
    /// snapshot's) takes to make its instance, for a loop that finds the objects to change.
    public var objectID: ObjectID {
        // A row loop hands out rows of a table or of a snapshot's pages, which always have one.
        backing.objectID ?? ObjectID(entityName: columns.entity.name, serial: 0)
    }

    // The reads are inlined into the caller, where `V` is a concrete type: an unspecialized
    // generic read made the runtime look up the metadata of `V?` on every call, which was
    // half the time of reading every attribute of a million rows (perf). What they call here
    // is not generic.

    /// The value of column `column`, or `nil` when the attribute has none.
    ///
    /// - Throws: ``ObjectGraphError`` `unknownKey` for a column past the last, `typeMismatch`
    ///   for a stored value that `V` cannot hold.
    @inlinable
    public subscript<V: PrimitiveAttribute>(_ column: Int) -> V? {
        get throws(ObjectGraphError) {
            switch try columns.cell(backing, column, V.attributeType) {
            case .null: return nil
            case .stored(let cell): return V._decode(cell)
            case .other:
                guard let value = columns.value(backing, column) else { return nil }
                guard let converted = V(value) else { throw columns.mismatch(column, value, "\(V.self)") }
                return converted
            }
        }
    }

    /// The value of column `column`.
    ///
    /// - Throws: ``ObjectGraphError`` `unknownKey` for a column past the last, `typeMismatch`
    ///   for a stored value that `V` cannot hold or an attribute without a value (read an
    ///   optional attribute as `V?`).
    @inlinable
    public subscript<V: PrimitiveAttribute>(_ column: Int) -> V {
        get throws(ObjectGraphError) {
            guard let value: V = try self[column] else { throw columns.missing(column, "\(V.self)") }
            return value
        }
    }
}

/// What a row's column holds, as ``ObjectRow``'s reads take it: nothing, the stored cell of
/// the type asked for (valid until the row's storage next changes), or a value of another type
/// (read with ``RowColumns/value(_:_:)``). No reference counted payload: returning one was a
/// retain and a release per read.
@usableFromInline
enum RowCell {
    case null
    case stored(RawCell)
    case other
}

/// The attributes a row loop reads, resolved once before its first row.
@usableFromInline
final class RowColumns {
    let entity: EntityDescription
    let slots: [Int]
    let types: [AttributeType]

    /// The columns `keyPaths` name, each an attribute of `T` (not a relationship).
    convenience init<T: Entity>(
        keyPaths: [PartialKeyPath<T>], entity: EntityDescription, probing table: EntityTable?
    ) throws(ObjectGraphError) {
        var slots: [Int] = []
        for (i, keyPath) in keyPaths.enumerated() {
            let slot =
                entity.slot(for: keyPath)
                ?? KeyPathResolver.resolve(keyPath, entity: entity, probing: table, as: T.self)?.slot
            guard let slot else {
                throw ObjectGraphError(
                    .unknownKey,
                    "column \(i) (\(keyPath)) is no stored attribute of \(entity.name) (a row holds attributes, not relationships; a hand-written model passes keyPaths: to EntityDescription, or names its columns)",
                    entity: entity.name)
            }
            slots.append(slot)
        }
        try self.init(slots: slots, entity: entity)
    }

    /// The columns `names` name, each an attribute of `entity` (not a relationship).
    convenience init(names: [String], entity: EntityDescription) throws(ObjectGraphError) {
        try self.init(slots: try entity.slots(forKeys: names), entity: entity)
    }

    private init(slots: [Int], entity: EntityDescription) throws(ObjectGraphError) {
        for slot in slots where entity.attributes[slot].isRelationship {
            let name = entity.attributes[slot].name
            throw ObjectGraphError(
                .unknownKey, "'\(name)' is a relationship of \(entity.name); a row holds attributes",
                entity: entity.name, key: name)
        }
        self.entity = entity
        self.slots = slots
        types = slots.map { entity.attributes[$0].type }
    }

    /// Column `column` of the object `backing` stands for: its cell when it is stored as
    /// `type`, else its value.
    @usableFromInline
    func cell(_ backing: ObjectBacking, _ column: Int, _ type: AttributeType) throws(ObjectGraphError) -> RowCell {
        guard column >= 0 && column < slots.count else {
            throw ObjectGraphError(
                .unknownKey, "column \(column) of a row of \(slots.count) columns of \(entity.name)",
                entity: entity.name)
        }
        let slot = slots[column]
        if types[column] == type, let cell = backing.storedCell(slot) { return cell }
        return .other
    }

    /// The value of column `column` (checked by ``cell(_:_:_:)``) of the object `backing`
    /// stands for.
    @usableFromInline
    func value(_ backing: ObjectBacking, _ column: Int) -> AttributeValue? {
        backing.dynamicValue(slots[column])
    }

    /// The error for column `column`, whose `value` is no `typeName`.
    @usableFromInline
    func mismatch(_ column: Int, _ value: AttributeValue, _ typeName: String) -> ObjectGraphError {
        error(.typeMismatch, column, "holds \(value), which a \(typeName) cannot hold")
    }

    /// The error for column `column`, without a value, read as the non-optional `typeName`.
    @usableFromInline
    func missing(_ column: Int, _ typeName: String) -> ObjectGraphError {
        error(.typeMismatch, column, "has no value; read it as \(typeName)?")
    }

    /// The error for `column` of type `code`, its message ending in `problem`.
    func error(_ code: ObjectGraphError.Code, _ column: Int, _ problem: String) -> ObjectGraphError {
        let name = entity.attributes[slots[column]].name
        return ObjectGraphError(
            code, "\(entity.name).\(name) (column \(column)) \(problem)", entity: entity.name, key: name)
    }
}
