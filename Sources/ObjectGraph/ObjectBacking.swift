import Foundation

/// The storage handle inside every entity instance. Generated code reads and writes attributes
/// through it; applications do not use it directly.
///
/// An instance is in one of four states: *unmanaged* (created by its own initializer, no value
/// set yet: attributes read as the entity's defaults), *standalone* (values set before
/// insertion, held in a small side buffer), *managed* (a row of its context's entity table), or
/// *read from a snapshot* (a row of a ``StoreSnapshot``, which never changes; setting a value
/// detaches the instance into a standalone copy).
/// A handle is 16 bytes, so an instance costs one small allocation.
public struct ObjectBacking {
    enum Storage {
        case unmanaged(EntityDescription)
        case standalone(StandaloneValues)
        case managed(EntityTable)
        case snapshot(SnapshotObject)
    }

    /// What the state's data is: the `EntityTable` of a managed object (`row` ≥ 0), the
    /// `StandaloneValues` of a standalone one (`row` is ``standaloneRow``), or the
    /// `EntityDescription` of an unmanaged one (``unmanagedRow``).
    ///
    /// One reference and the row, rather than an enum with a payload: getting the table out
    /// of the enum copied it, a retain and a release around every attribute read and write
    /// (two atomic operations each, perf). The reference can be borrowed instead
    /// (``withTable(_:)``).
    @usableFromInline var owner: AnyObject
    @usableFromInline var row: Int32

    static let unmanagedRow: Int32 = -1
    static let standaloneRow: Int32 = -2
    static let snapshotRow: Int32 = -3

    /// The state, as an enum.
    var storage: Storage {
        if row >= 0 { return .managed(unsafeDowncast(owner, to: EntityTable.self)) }
        if row == Self.standaloneRow { return .standalone(unsafeDowncast(owner, to: StandaloneValues.self)) }
        if row == Self.snapshotRow { return .snapshot(unsafeDowncast(owner, to: SnapshotObject.self)) }
        return .unmanaged(unsafeDowncast(owner, to: EntityDescription.self))
    }

    /// A handle for a new, not yet inserted instance of the entity `entity`.
    public init(entity: EntityDescription) {
        owner = entity
        row = Self.unmanagedRow
    }

    init(table: EntityTable, row: Int32) {
        owner = table
        self.row = row
    }

    init(standalone: StandaloneValues) {
        owner = standalone
        row = Self.standaloneRow
    }

    init(snapshot: SnapshotObject) {
        owner = snapshot
        row = Self.snapshotRow
    }

    private init(owner: AnyObject, row: Int32) {
        self.owner = owner
        self.row = row
    }

    /// The owner, not retained: what a read passes on, so that reading an attribute does not
    /// retain and release it.
    ///
    /// An attribute's getter reads `_backing`, a stored property of a class. Passing the
    /// handle to a function of this module copies it out of the instance first (the callee
    /// could, as far as the caller knows, replace the property meanwhile): a retain and a
    /// release of the owner around every read, two atomic operations that were a tenth of
    /// the time of reading every attribute of a million objects (perf). The getter of each
    /// primitive type is inlined into the model's code and passes this and ``row`` instead,
    /// two plain words. Safe for a read: the getter's instance holds the handle, the handle
    /// holds its owner, and no read replaces an instance's handle.
    @inlinable @inline(__always)
    var unretainedOwner: Unmanaged<AnyObject> { Unmanaged.passUnretained(owner) }

    /// Calls `body` with the table of a managed object, borrowed: not retained and released.
    /// Nil when the object is not managed.
    ///
    /// Safe because the object holds its table for as long as it lives, the caller holds the
    /// object, and nothing `body` does to the table changes which table the object has.
    @inline(__always)
    func withTable<R>(_ body: (EntityTable) -> R) -> R? {
        guard row >= 0 else { return nil }
        return Unmanaged.passUnretained(unsafeDowncast(owner, to: EntityTable.self))._withUnsafeGuaranteedRef(body)
    }

    /// Calls `body` with the row of an object read from a snapshot, borrowed as in
    /// ``withTable(_:)``. Nil when the object was not read from a snapshot.
    @inline(__always)
    func withSnapshot<R>(_ body: (SnapshotObject) -> R) -> R? {
        guard row == Self.snapshotRow else { return nil }
        return Unmanaged.passUnretained(unsafeDowncast(owner, to: SnapshotObject.self))._withUnsafeGuaranteedRef(body)
    }

    var managedTable: EntityTable? {
        if case .managed(let t) = storage { return t }
        return nil
    }

    var rowIndex: Int { Int(row) }

    var objectID: ObjectID? {
        switch storage {
        case .managed(let t): ObjectID(entityName: t.entity.name, serial: t.serial(ofRow: Int(row)))
        case .snapshot(let o): ObjectID(entityName: o.layout.entity.name, serial: o.serial)
        case .standalone, .unmanaged: nil
        }
    }

    var entity: EntityDescription {
        switch storage {
        case .unmanaged(let d): d
        case .standalone(let s): s.entity
        case .managed(let t): t.entity
        case .snapshot(let o): o.layout.entity
        }
    }

    /// Called by the empty default of a lifecycle hook: the object's context stops calling that
    /// hook on the entity's objects (``EntityHooks``).
    func noteDefaultHook(_ hook: EntityHooks) {
        if case .managed(let t) = storage { t.hooks.remove(hook) }
    }

    // MARK: Dynamic access

    /// The value of `slot` as a dynamic value (`nil` when unset).
    func dynamicValue(_ slot: Int) -> AttributeValue? {
        switch storage {
        case .managed(let t): t.value(row: Int(row), slot: slot)
        case .standalone(let s): s.values[slot] ?? nil
        case .unmanaged(let d): d.attributes[slot].defaultValue
        case .snapshot(let o): o.page.value(o.r, slot)
        }
    }

    /// The stored cell of `slot`, for a read that decodes it as the attribute's own type; nil
    /// when the object's values are not held as cells (a standalone or new object). The bytes
    /// of a variable-length value are valid until the object's storage next changes.
    func storedCell(_ slot: Int) -> RowCell? {
        let cell: RawCell?
        switch storage {
        case .managed(let t): cell = t.rawCell(row: Int(row), slot: slot)
        case .snapshot(let o): cell = o.page.rawCell(o.r, slot)
        case .standalone, .unmanaged: return nil
        }
        return cell.map { .stored($0) } ?? .null
    }

    /// Sets `slot` from an already type-checked dynamic value.
    mutating func setDynamic(_ slot: Int, _ value: AttributeValue?, primitive: Bool = false) {
        switch storage {
        case .managed(let t):
            t.set(row: Int(row), slot: slot, value: value, primitive: primitive)
        case .standalone(let s):
            s.values[slot] = .some(value)
        case .unmanaged(let d):
            let s = StandaloneValues(entity: d)
            s.values[slot] = .some(value)
            owner = s
            row = Self.standaloneRow
        case .snapshot(let o):
            let s = o.detachedValues()
            s.values[slot] = .some(value)
            owner = s
            row = Self.standaloneRow
        }
    }

    // MARK: Primitive types

    /// Reads a non-optional attribute of a primitive type.
    public func get<T: PrimitiveAttribute>(_ slot: Int, as type: T.Type) -> T { get(slot, as: type, generic: ()) }
    /// Reads an optional attribute of a primitive type.
    public func getOptional<T: PrimitiveAttribute>(_ slot: Int, as type: T.Type) -> T? {
        getOptional(slot, as: type, generic: ())
    }
    /// Writes a non-optional attribute of a primitive type.
    public mutating func set<T: PrimitiveAttribute>(_ slot: Int, _ value: T) { set(slot, value, generic: ()) }
    /// Writes an optional attribute of a primitive type.
    public mutating func setOptional<T: PrimitiveAttribute>(_ slot: Int, _ value: T?) {
        setOptional(slot, value, generic: ())
    }

    func get<T: PrimitiveAttribute>(_ slot: Int, as type: T.Type, generic: Void) -> T {
        Self.getOptional(unretainedOwner, row, slot, as: type, generic: ()) ?? T._zero
    }

    func getOptional<T: PrimitiveAttribute>(_ slot: Int, as type: T.Type, generic: Void) -> T? {
        Self.getOptional(unretainedOwner, row, slot, as: type, generic: ())
    }

    /// Reads `slot` of the object whose handle has `owner` (``unretainedOwner``) and `row`.
    /// The caller keeps the handle alive. Inlined, with the table's read, into each concrete
    /// getter, so that reading an attribute is one call.
    @inline(__always)
    static func getOptional<T: PrimitiveAttribute>(
        _ owner: Unmanaged<AnyObject>, _ row: Int32, _ slot: Int, as type: T.Type, generic: Void
    ) -> T? {
        owner._withUnsafeGuaranteedRef { object in
            if row >= 0 {
                return unsafeDowncast(object, to: EntityTable.self).read(row: Int(row), slot: slot, as: T.self)
            }
            if row == snapshotRow {
                let snapshot = unsafeDowncast(object, to: SnapshotObject.self)
                return snapshot.page.read(snapshot.r, slot, as: T.self)
            }
            return ObjectBacking(owner: object, row: row).dynamicValue(slot).flatMap(T.init)
        }
    }

    mutating func set<T: PrimitiveAttribute>(_ slot: Int, _ value: T, generic: Void) {
        let row = Int(self.row)
        if withTable({ $0.write(row: row, slot: slot, value) }) != nil { return }
        setDynamic(slot, value.attributeValue)
    }

    mutating func setOptional<T: PrimitiveAttribute>(_ slot: Int, _ value: T?, generic: Void) {
        let row = Int(self.row)
        let written: Void? = withTable { t in
            if let value { t.write(row: row, slot: slot, value) } else { t.set(row: row, slot: slot, value: nil) }
        }
        if written != nil { return }
        setDynamic(slot, value?.attributeValue)
    }

    // MARK: RawRepresentable

    /// Reads a non-optional `RawRepresentable` attribute.
    ///
    /// The stored raw value is always one of `T`'s cases: ``Entity/setValue(_:forKey:)``
    /// refuses any other, and opening a store refuses a journal that holds one, naming the
    /// entity, attribute, object and value. Reaching the trap below therefore means a model
    /// declared the attribute with another type than the one it reads it as.
    public func get<T: RawRepresentable>(_ slot: Int, as type: T.Type) -> T where T.RawValue: PrimitiveAttribute {
        let raw = get(slot, as: T.RawValue.self)
        guard let value = T(rawValue: raw) else {
            preconditionFailure(
                "\(entity.name).\(entity.attributes[slot].name): stored raw value \(raw) is not a valid \(T.self)")
        }
        return value
    }

    /// Reads an optional `RawRepresentable` attribute; an unknown raw value reads as `nil`.
    public func getOptional<T: RawRepresentable>(_ slot: Int, as type: T.Type) -> T?
    where T.RawValue: PrimitiveAttribute {
        getOptional(slot, as: T.RawValue.self).flatMap(T.init(rawValue:))
    }

    /// Writes a non-optional `RawRepresentable` attribute as its raw value.
    public mutating func set<T: RawRepresentable>(_ slot: Int, _ value: T) where T.RawValue: PrimitiveAttribute {
        set(slot, value.rawValue)
    }

    /// Writes an optional `RawRepresentable` attribute as its raw value.
    public mutating func setOptional<T: RawRepresentable>(_ slot: Int, _ value: T?)
    where T.RawValue: PrimitiveAttribute {
        setOptional(slot, value?.rawValue)
    }

    // Disambiguation for types that are both RawRepresentable and Codable: the raw value wins.

    /// Reads a non-optional `RawRepresentable & Codable` attribute, stored as its raw value.
    public func get<T: RawRepresentable & Codable>(_ slot: Int, as type: T.Type) -> T
    where T.RawValue: PrimitiveAttribute {
        let raw = get(slot, as: T.RawValue.self)
        guard let value = T(rawValue: raw) else {
            preconditionFailure(
                "\(entity.name).\(entity.attributes[slot].name): stored raw value \(raw) is not a valid \(T.self)")
        }
        return value
    }

    /// Reads an optional `RawRepresentable & Codable` attribute, stored as its raw value.
    public func getOptional<T: RawRepresentable & Codable>(_ slot: Int, as type: T.Type) -> T?
    where T.RawValue: PrimitiveAttribute {
        getOptional(slot, as: T.RawValue.self).flatMap(T.init(rawValue:))
    }

    /// Writes a non-optional `RawRepresentable & Codable` attribute as its raw value.
    public mutating func set<T: RawRepresentable & Codable>(_ slot: Int, _ value: T)
    where T.RawValue: PrimitiveAttribute {
        set(slot, value.rawValue)
    }

    /// Writes an optional `RawRepresentable & Codable` attribute as its raw value.
    public mutating func setOptional<T: RawRepresentable & Codable>(_ slot: Int, _ value: T?)
    where T.RawValue: PrimitiveAttribute {
        setOptional(slot, value?.rawValue)
    }

    // MARK: Codable

    /// Reads a non-optional `Codable` attribute, decoding its JSON.
    ///
    /// The stored JSON always decodes as `T`: the typed setter encodes a `T`; every other way
    /// a value enters a context checks it against the attribute's
    /// ``AttributeDescription/codableCheck`` first: opening a store checks every live object's
    /// value (after replay) and refuses the store (`StoreError` code `incompatibleSchema`,
    /// naming the entity, attribute, object and decoding error) when one does not decode; a
    /// replica refuses a shipped record, and ``ModelContext/apply(_:)`` a change set, storing
    /// one; ``Entity/setValue(_:forKey:)``, mapping and import refuse one. Reaching the trap
    /// below therefore means a model declared the attribute with another type than the one it
    /// reads it as.
    public func get<T: Codable>(_ slot: Int, as type: T.Type) -> T {
        let data = get(slot, as: Data.self)
        do {
            return try CodableAttributeCoder.decode(T.self, from: data)
        } catch {
            preconditionFailure(
                "\(entity.name).\(entity.attributes[slot].name): stored JSON is not a valid \(T.self): \(error)")
        }
    }

    /// Reads an optional `Codable` attribute.
    ///
    /// A stored value always decodes as `T`, for the reasons the non-optional getter gives
    /// (an undecodable non-nil value is refused on the way in, not read as `nil`); `nil` for
    /// JSON that does not decode is only the getter staying total should a model read the
    /// attribute as another type than it declared.
    public func getOptional<T: Codable>(_ slot: Int, as type: T.Type) -> T? {
        guard let data = getOptional(slot, as: Data.self) else { return nil }
        return try? CodableAttributeCoder.decode(T.self, from: data)
    }

    /// Writes a non-optional `Codable` attribute as JSON with sorted keys.
    public mutating func set<T: Codable>(_ slot: Int, _ value: T) {
        do {
            set(slot, try CodableAttributeCoder.encode(value))
        } catch {
            preconditionFailure(
                "\(entity.name).\(entity.attributes[slot].name): \(T.self) cannot be encoded as JSON: \(error)")
        }
    }

    /// Writes an optional `Codable` attribute as JSON with sorted keys.
    public mutating func setOptional<T: Codable>(_ slot: Int, _ value: T?) {
        guard let value else { return setOptional(slot, Data?.none) }
        set(slot, value)
    }

    // MARK: Declaration defaults

    /// Called by the init accessor of an attribute declared with a default. The default is
    /// recorded once in the entity description (like a Core Data model default) and applied from
    /// there, so this does nothing; use `awakeFromInsert` for per-object values such as dates.
    @inlinable public func initialize<T>(_ slot: Int, _ initialValue: T) {}

    /// The optional counterpart of ``initialize(_:_:)``.
    @inlinable public func initializeOptional<T>(_ slot: Int, _ initialValue: T?) {}
}

/// Values set on an instance before it is inserted into a context.
final class StandaloneValues {
    let entity: EntityDescription
    /// `.none`: never set (reads as the default); `.some(nil)`: set to nil.
    var values: [AttributeValue??]
    /// Relationships set before insertion, by relationship number: the destination objects
    /// (at most one for a to-one). Applied, with their inverses, when the object is inserted.
    var relations: [Int: [any Entity]] = [:]

    init(entity: EntityDescription) {
        self.entity = entity
        values = Array(repeating: .none, count: entity.attributes.count)
        for (i, a) in entity.attributes.enumerated() where a.defaultValue != nil {
            values[i] = .some(a.defaultValue)
        }
    }
}
