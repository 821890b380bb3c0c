import Foundation

/// The committed state of a store as of one save: immutable, `Sendable`, readable from any
/// task while the writer goes on (GRDB's `DatabaseSnapshot`, Realm's frozen objects).
///
/// ```swift
/// let snapshot = store.snapshot                      // no waiting: the last published save
/// if let zlib = try snapshot.object(Package.self, where: \.name, equals: "zlib1g") {
///     print(zlib.version, zlib.maintainer?.name ?? "-")
/// }
/// let libs = try snapshot.fetch(FetchDescriptor<Package>(
///     predicate: #Predicate { $0.section == "libs" }, sortBy: [SortDescriptor(\.name)]))
/// let records = try libs.map { try $0.decode(as: PackageRecord.self) }   // Sendable values
/// ```
///
/// A snapshot shows exactly one save: every object as that save left it, never part of a later
/// one. It is published by ``AsyncStore`` after each save, at a cost that grows with what the
/// save changed, not with the store's size (`Docs/Concurrency.md`).
///
/// The objects a snapshot returns are instances of the model classes *read from the snapshot*:
/// their attributes and relationships read the snapshot's state (relationships lead to objects
/// of the same snapshot), they have an ``Entity/objectID``, and no ``Entity/modelContext``.
/// Like every model instance they are not `Sendable`: use them in the task that fetched them,
/// and convert them to values (``Entity/decode(as:)``) to send them elsewhere. Setting an
/// attribute on one detaches that instance into a standalone copy and changes nothing in the
/// store; to change the store, use ``AsyncStore/perform(_:)``.
public final class StoreSnapshot: Sendable {
    /// The number of saves published before this snapshot since the store opened: 0 for the
    /// state found at open, then one more per save that changed something.
    public let version: UInt64
    /// The schema of the store.
    public let schema: Schema
    let tables: [SnapshotTable]
    /// Per link table of the schema: its lists.
    let links: [SnapshotLinks]

    init(version: UInt64, schema: Schema, tables: [SnapshotTable], links: [SnapshotLinks] = []) {
        self.version = version
        self.schema = schema
        self.tables = tables
        self.links = links
    }

    func table<T: Entity>(for type: T.Type) throws(ObjectGraphError) -> Int {
        guard let index = schema.indexByType[ObjectIdentifier(type)] else {
            throw ObjectGraphError(.unknownEntity, "\(type) is not an entity of this store's schema", entity: "\(type)")
        }
        return index
    }

    func tableIndex(named name: String) -> Int? {
        schema.entities.firstIndex { $0.name == name }
    }

    /// The instance of row `r` of `page`, serial `serial`, of table `t`.
    func instance(table t: Int, serial: UInt64, page: RowPage, row r: Int) -> any Entity {
        let layout = tables[t].layout
        return layout.entity.type.init(
            _backing: ObjectBacking(snapshot: SnapshotObject(snapshot: self, serial: serial, page: page, row: r)))
    }

    func instance(table t: Int, serial: UInt64) -> (any Entity)? {
        tables.withUnsafeBufferPointer { tables -> (any Entity)? in
            guard let (page, r) = tables[t].locate(serial) else { return nil }
            return tables[t].layout.entity.type.init(
                _backing: ObjectBacking(snapshot: SnapshotObject(snapshot: self, serial: serial, page: page, row: r)))
        }
    }

    // MARK: Reading

    /// The number of objects of `type`.
    ///
    /// - Throws: ``ObjectGraphError`` with code `unknownEntity` when `type` is not in the schema.
    public func count<T: Entity>(of type: T.Type) throws(ObjectGraphError) -> Int {
        tables[try table(for: type)].count
    }

    /// The object with `id`, or `nil` when the snapshot has none.
    public func object(with id: ObjectID) -> (any Entity)? {
        guard let t = tableIndex(named: id.entityName) else { return nil }
        return instance(table: t, serial: id.serial)
    }

    /// The object of `type` with `id`, or `nil` when the snapshot has none of that type.
    public func object<T: Entity>(with id: ObjectID, as type: T.Type) -> T? {
        object(with: id) as? T
    }

    /// Every object of `type`, in serial (insertion) order.
    ///
    /// - Throws: ``ObjectGraphError`` with code `unknownEntity`.
    public func objects<T: Entity>(of type: T.Type) throws(ObjectGraphError) -> [T] {
        let t = try table(for: type)
        var result: [T] = []
        result.reserveCapacity(tables[t].count)
        tables[t].forEachRow { serial, page, r in
            if let o = instance(table: t, serial: serial, page: page, row: r) as? T { result.append(o) }
            return true
        }
        return result
    }

    /// The object of `type` whose unique attribute at `keyPath` equals `value`. O(1): a hash
    /// lookup in the snapshot's copy of the constraint's index, with the same byte equality as
    /// ``ModelContext/object(_:where:equals:)``.
    ///
    /// - Throws: ``ObjectGraphError``: `unknownEntity`, `unknownKey` when the key path names no
    ///   attribute, `noUniqueIndex` when no unique constraint is exactly that attribute.
    public func object<T: Entity, V: PrimitiveAttribute>(
        _ type: T.Type, where keyPath: KeyPath<T, V>, equals value: V
    ) throws(ObjectGraphError) -> T? {
        let t = try table(for: type)
        let entity = tables[t].layout.entity
        guard let slot = entity.slot(for: keyPath) else {
            throw ObjectGraphError(
                .unknownKey,
                "\(keyPath) is not an attribute of \(entity.name) (hand-written models pass keyPaths: to EntityDescription)",
                entity: entity.name)
        }
        guard entity.attributes[slot].type == V.attributeType else {
            return try object(table: t, slots: [slot], values: [value.attributeValue]) as? T
        }
        // The value's own cell, as the context's lookup takes it.
        let key: SnapshotKeyCell = value._withCell { cell in
            switch cell {
            case .fixed(let bits): .fixed(bits)
            case .bytes(let buffer): .bytes(Array(buffer))
            }
        }
        // In place: copying the table would retain and release each of its parts, counts that
        // readers on other cores write too.
        let found = tables.withUnsafeBufferPointer { $0[t].findUnique(slot: slot, key: key) }
        guard let found else {
            return try object(table: t, slots: [slot], values: [value.attributeValue]) as? T  // throws noUniqueIndex
        }
        guard let serial = found else { return nil }
        return instance(table: t, serial: serial) as? T
    }

    /// The object of `type` whose unique key (one or several attributes, by name) has the given
    /// values. O(1).
    ///
    /// - Throws: ``ObjectGraphError``: `unknownEntity`, `unknownKey`, `typeMismatch` (a value
    ///   that does not fit its attribute) or `noUniqueIndex`.
    public func object<T: Entity>(_ type: T.Type, uniqueKey key: [String: any Sendable]) throws(ObjectGraphError) -> T?
    {
        let t = try table(for: type)
        let entity = tables[t].layout.entity
        var slots: [Int] = []
        var values: [AttributeValue] = []
        for (name, raw) in key.sorted(by: { $0.key < $1.key }) {
            guard let slot = entity.slot(forKey: name) else {
                throw ObjectGraphError(
                    .unknownKey, "\(entity.name) has no attribute '\(name)'", entity: entity.name, key: name)
            }
            slots.append(slot)
            values.append(try coerce(raw, entity: entity, slot: slot))
        }
        return try object(table: t, slots: slots, values: values) as? T
    }

    private func coerce(_ raw: Any, entity: EntityDescription, slot: Int) throws(ObjectGraphError) -> AttributeValue {
        let type = entity.attributes[slot].type
        guard let v = AttributeValue.coerce(raw, to: type) else {
            throw ObjectGraphError(
                .typeMismatch, "\(entity.name).\(entity.attributes[slot].name) holds \(type.rawValue); got \(raw)",
                entity: entity.name, key: entity.attributes[slot].name)
        }
        return v
    }

    private func object(table t: Int, slots: [Int], values: [AttributeValue]) throws(ObjectGraphError) -> (any Entity)?
    {
        let table = tables[t]
        let entity = table.layout.entity
        // The constraint with exactly these attributes, in its own order.
        guard let k = table.uniques.firstIndex(where: { Set($0.slots) == Set(slots) && $0.slots.count == slots.count })
        else {
            let names = slots.map { entity.attributes[$0].name }.joined(separator: ", ")
            throw ObjectGraphError(
                .noUniqueIndex, "\(entity.name)(\(names)) is not a unique constraint, so it has no index to look up",
                entity: entity.name, key: names)
        }
        var key: [SnapshotKeyCell] = []
        for slot in table.uniques[k].slots {
            guard let i = slots.firstIndex(of: slot),
                let v = AttributeValue.coerce(attributeValue: values[i], to: entity.attributes[slot].type)
            else {
                throw ObjectGraphError(
                    .typeMismatch,
                    "\(entity.name).\(entity.attributes[slot].name) holds \(entity.attributes[slot].type.rawValue)",
                    entity: entity.name, key: entity.attributes[slot].name)
            }
            key.append(
                v.withCell { cell in
                    switch cell {
                    case .fixed(let bits): .fixed(bits)
                    case .bytes(let buffer): .bytes(Array(buffer))
                    }
                })
        }
        guard let serial = table.uniques[k].find(key, in: table.rows) else { return nil }
        return instance(table: t, serial: serial)
    }
}

/// Where an instance read from a snapshot keeps its row: the snapshot (for its relationships),
/// the page and the row on it. Immutable.
final class SnapshotObject {
    let snapshot: StoreSnapshot
    let serial: UInt64
    let page: RowPage
    let r: Int

    init(snapshot: StoreSnapshot, serial: UInt64, page: RowPage, row: Int) {
        self.snapshot = snapshot
        self.serial = serial
        self.page = page
        self.r = row
    }

    var layout: RowLayout { page.layout }

    /// A standalone copy of the values, for an instance that is being changed.
    func detachedValues() -> StandaloneValues {
        let s = StandaloneValues(entity: layout.entity)
        for slot in 0..<layout.stride { s.values[slot] = .some(page.value(r, slot)) }
        return s
    }

    private var resolved: [ResolvedRelationship] {
        let all = snapshot.schema.relationships
        return all.indices.contains(layout.entityIndex) ? all[layout.entityIndex] : []
    }

    /// The destination of to-one number `relationship`, in the same snapshot.
    func toOne(_ relationship: Int) -> (any Entity)? {
        let rs = resolved
        guard rs.indices.contains(relationship) else { return nil }
        let r = rs[relationship]
        if r.isLinked {
            guard snapshot.links.indices.contains(r.link),
                let first = snapshot.links[r.link].sides[r.linkSide][serial]?.first
            else { return nil }
            return snapshot.instance(table: r.destination, serial: first)
        }
        guard r.slot >= 0, !page.isNull(self.r, r.slot) else { return nil }
        return snapshot.instance(table: r.destination, serial: page.cell(self.r, r.slot))
    }

    /// The destinations of to-many number `relationship`, in the same snapshot, by serial.
    func toMany(_ relationship: Int) -> [any Entity] {
        let rs = resolved
        guard rs.indices.contains(relationship) else { return [] }
        let r = rs[relationship]
        if r.isLinked {
            guard snapshot.links.indices.contains(r.link),
                let members = snapshot.links[r.link].sides[r.linkSide][serial]
            else { return [] }
            return members.compactMap { snapshot.instance(table: r.destination, serial: $0) }
        }
        let destination = snapshot.tables[r.destination]
        guard r.inverseSlot >= 0, let k = destination.layout.referenceSlots.firstIndex(of: r.inverseSlot),
            let sources = destination.references[k][serial]
        else { return [] }
        return sources.sorted().compactMap { snapshot.instance(table: r.destination, serial: $0) }
    }
}
