import Foundation

extension StoreSnapshot {
    /// The objects of the snapshot that match `descriptor`: filtered, sorted, then windowed by
    /// offset and limit, as ``ModelContext/fetch(_:)-(FetchDescriptor<T>)`` does on a context.
    ///
    /// ```swift
    /// let recent = try snapshot.fetch(FetchDescriptor<Package>(
    ///     predicate: #Predicate { $0.section == "libs" }, sortBy: [SortDescriptor(\.installedSize, order: .reverse)]))
    /// ```
    ///
    /// Predicates of the shapes the context evaluates on storage are evaluated on the snapshot's
    /// pages the same way, creating instances only for the results; others are evaluated by
    /// Foundation on instances read from the snapshot. ``FetchDescriptor/includePendingChanges``
    /// means nothing here: a snapshot holds saved state only.
    ///
    /// - Throws: ``ObjectGraphError`` with code `unknownEntity`, or what the predicate throws.
    public func fetch<T: Entity>(_ descriptor: FetchDescriptor<T>) throws -> [T] {
        let t = try table(for: T.self)
        var result: [T] = []
        let serials = try fetchedSerials(descriptor, table: t)
        result.reserveCapacity(serials.count)
        for serial in serials {
            if let o = instance(table: t, serial: serial) as? T { result.append(o) }
        }
        return result
    }

    /// The serials of the objects ``fetch(_:)`` returns, in its order.
    private func fetchedSerials<T: Entity>(_ descriptor: FetchDescriptor<T>, table t: Int) throws -> ArraySlice<UInt64>
    {
        let window = FetchWindow(descriptor)
        var serials = try matchingSerials(descriptor, table: t, stopAfter: descriptor.sortBy.isEmpty ? window.end : nil)
        if !descriptor.sortBy.isEmpty { serials = sorted(serials, by: descriptor, table: t) }
        return serials[window.range(in: serials.count)]
    }

    /// The objects ``fetch(_:)`` would return, each converted to a `Decodable` value
    /// (``Entity/decode(as:)``): what a reader sends to another task or encodes as a response.
    ///
    /// ```swift
    /// struct PackageRecord: Codable, Sendable { var name: String; var version: String }
    /// let records = try snapshot.fetch(FetchDescriptor<Package>(), as: PackageRecord.self)
    /// ```
    ///
    /// The values are read from the snapshot's pages: no instance of `T` is created for them
    /// (a predicate or sort key evaluated on instances creates the ones it needs to decide).
    ///
    /// - Throws: what ``fetch(_:)`` throws, or the `DecodingError` of a value that does not
    ///   decode.
    public func fetch<T: Entity, V: Decodable>(_ descriptor: FetchDescriptor<T>, as type: V.Type) throws -> [V] {
        var result: [V] = []
        try forEach(descriptor, as: type) { result.append($0) }
        return result
    }

    /// Reads the objects ``fetch(_:as:)`` would return one at a time, calling `body` with each
    /// value as it is decoded and keeping none (GRDB's cursors): a read that looks at each value
    /// once holds one at a time.
    ///
    /// ```swift
    /// var bytes = 0
    /// try snapshot.forEach(FetchDescriptor<Package>(), as: PackageRecord.self) { bytes += $0.name.utf8.count }
    /// ```
    ///
    /// - Throws: What ``fetch(_:as:)`` throws, or what `body` throws; the loop stops at the
    ///   first error.
    public func forEach<T: Entity, V: Decodable>(
        _ descriptor: FetchDescriptor<T>, as type: V.Type, _ body: (V) throws -> Void
    ) throws {
        let t = try table(for: T.self)
        let serials = try fetchedSerials(descriptor, table: t)
        // One decoder, moved from object to object.
        var decoder: AttributeDecoder?
        for serial in serials {
            guard let (page, r) = tables[t].locate(serial) else { continue }
            let backing = ObjectBacking(snapshot: SnapshotObject(snapshot: self, serial: serial, page: page, row: r))
            let current = decoder ?? AttributeDecoder(backing: backing)
            current.reading(backing)
            decoder = current
            try body(try V(from: current))
        }
    }

    /// Reads the chosen attributes of the objects ``fetch(_:)`` would return, one
    /// ``ObjectRow`` at a time, with no instance and no `Decoder` per object: as
    /// ``ModelContext/forEachRow(_:columns:_:)-(FetchDescriptor<T>,[PartialKeyPath<T>],_)``
    /// does on a context.
    ///
    /// ```swift
    /// var bytes = 0
    /// try snapshot.forEachRow(FetchDescriptor<Person>(), columns: [\.name]) { row in
    ///     bytes += (try row[0] as String).utf8.count
    /// }
    /// ```
    ///
    /// - Throws: ``ObjectGraphError`` `unknownKey` for a key path that names no stored
    ///   attribute of `T`, what ``fetch(_:)`` throws, or what `body` throws; the loop stops at
    ///   the first error.
    public func forEachRow<T: Entity>(
        _ descriptor: FetchDescriptor<T>, columns: [PartialKeyPath<T>], _ body: (borrowing ObjectRow) throws -> Void
    ) throws {
        let t = try table(for: T.self)
        try forEachRow(
            descriptor, try RowColumns(keyPaths: columns, entity: tables[t].layout.entity, probing: nil), table: t, body
        )
    }

    /// As ``forEachRow(_:columns:_:)-(FetchDescriptor<T>,[PartialKeyPath<T>],_)``, the
    /// columns named by their attributes' names.
    ///
    /// - Throws: ``ObjectGraphError`` `unknownKey` for a name that is no attribute of `T`, or
    ///   what the key-path form throws.
    public func forEachRow<T: Entity>(
        _ descriptor: FetchDescriptor<T>, columns: [String], _ body: (borrowing ObjectRow) throws -> Void
    ) throws {
        let t = try table(for: T.self)
        try forEachRow(descriptor, try RowColumns(names: columns, entity: tables[t].layout.entity), table: t, body)
    }

    private func forEachRow<T: Entity>(
        _ descriptor: FetchDescriptor<T>, _ columns: RowColumns, table t: Int,
        _ body: (borrowing ObjectRow) throws -> Void
    ) throws {
        for serial in try fetchedSerials(descriptor, table: t) {
            guard let (page, r) = tables[t].locate(serial) else { continue }
            let object = SnapshotObject(snapshot: self, serial: serial, page: page, row: r)
            try body(ObjectRow(backing: ObjectBacking(snapshot: object), columns: columns))
        }
    }

    /// The number of objects ``fetch(_:)`` would return. Sorting is skipped; with a predicate
    /// evaluated on storage, no instance is created.
    ///
    /// - Throws: Like ``fetch(_:)``.
    public func fetchCount<T: Entity>(_ descriptor: FetchDescriptor<T>) throws -> Int {
        let t = try table(for: T.self)
        let window = FetchWindow(descriptor)
        if descriptor.predicate == nil { return window.range(in: tables[t].count).count }
        return window.range(in: try matchingSerials(descriptor, table: t, stopAfter: window.end).count).count
    }

    /// The serials matching the descriptor's predicate, in serial order, stopping after
    /// `stopAfter` matches.
    private func matchingSerials<T: Entity>(_ d: FetchDescriptor<T>, table t: Int, stopAfter: Int?) throws -> [UInt64] {
        let table = tables[t]
        let limit = stopAfter ?? Int.max
        var result: [UInt64] = []
        guard limit > 0 else { return result }
        guard let predicate = d.predicate else {
            table.forEachRow { serial, _, _ in
                result.append(serial)
                return result.count < limit
            }
            return result
        }
        let translation =
            d.allowsStorageEvaluation ? PredicateTranslator<T>(entity: table.layout.entity).translate(predicate) : nil
        try table.forEachRow { serial, page, r in
            if let translation, !page.withRowCells(r, { translation.condition.matches($0) }) { return true }
            if translation?.exact != true {
                guard let object = instance(table: t, serial: serial, page: page, row: r) as? T,
                    try predicate.evaluate(object)
                else {
                    return true
                }
            }
            result.append(serial)
            return result.count < limit
        }
        return result
    }

    /// `serials` in the descriptor's order, ties by serial.
    private func sorted<T: Entity>(_ serials: [UInt64], by d: FetchDescriptor<T>, table t: Int) -> [UInt64] {
        let table = tables[t]
        var columns: [SortColumn<T>] = []
        var needsObjects = false
        for sd in d.sortBy {
            let column =
                d.allowsStorageEvaluation
                ? SortColumn(sd, rows: serials, entity: table.layout.entity, probing: nil) { serial, slot in
                    guard let (page, r) = table.locate(serial) else { return (0, true) }
                    return (page.cell(r, slot), page.isNull(r, slot))
                } : nil
            if let column {
                columns.append(column)
            } else {
                columns.append(.objects(sd))
                needsObjects = true
            }
        }
        let objects: [T] = needsObjects ? serials.compactMap { instance(table: t, serial: $0) as? T } : []
        guard objects.count == serials.count || !needsObjects else { return serials }
        return SortColumn.sort(serials, by: columns, objects: objects)
    }
}
