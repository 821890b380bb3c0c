import Foundation

extension ModelContext {
    // MARK: Fetch descriptors

    /// The objects that match `descriptor`: filtered, sorted, then windowed by offset and limit.
    ///
    /// ```swift
    /// let descriptor = FetchDescriptor<Person>(
    ///     predicate: #Predicate { $0.age > 30 && $0.city == "City 7" },
    ///     sortBy: [SortDescriptor(\.name)])
    /// let people = try context.fetch(descriptor)
    /// ```
    ///
    /// Common predicate shapes are evaluated on the compact storage, and only the returned
    /// objects get instances (see ``FetchDescriptor``); other predicates are evaluated by
    /// Foundation on each object in view, which creates its instance. Sorting by a numeric or
    /// `Date` attribute reads the storage too; other sort keys (strings included) are compared by
    /// the `SortDescriptor` on instances.
    ///
    /// - Parameter descriptor: What to fetch.
    /// - Returns: The matching objects, in the descriptor's order.
    /// - Throws: ``ObjectGraphError`` with code `unknownEntity` when `T` is not in the schema, or
    ///   the error the predicate throws (for example Foundation's `PredicateError` from a
    ///   force-unwrap of `nil`), **as is**, not wrapped. A throwing fetch returns nothing.
    public func fetch<T: Entity>(_ descriptor: FetchDescriptor<T>) throws -> [T] {
        let table = try table(for: T.self)
        let rows = try fetchedRows(descriptor, in: table)
        var result: [T] = []
        result.reserveCapacity(rows.count)
        table.buildingResult {
            for row in rows { result.append(table.object(row: Int(row), as: T.self)) }
        }
        return result
    }

    /// The objects ``fetch(_:)-(FetchDescriptor<T>)`` would return, as `Decodable` values read
    /// straight from storage: Core Data's dictionary result type, GRDB's records. No instance is
    /// created, registered or awoken for them (``Entity/decode(as:)`` on each fetched object
    /// gives the same values, and keeps every instance), so reading every attribute of a million
    /// objects holds no million objects afterwards.
    ///
    /// ```swift
    /// struct PackageRow: Decodable { var name: String; var version: String; var dependsNames: [String] }
    /// let rows = try context.fetch(FetchDescriptor<Package>(sortBy: [SortDescriptor(\.name)]), as: PackageRow.self)
    /// ```
    ///
    /// Each key of `V` reads the attribute of its name, as ``Entity/decode(as:)`` describes;
    /// relationships are not decoded. Pending changes are read as they stand, as the objects
    /// would be. The filtering and sorting are the object fetch's: a predicate or a sort key
    /// that is evaluated on instances creates the instances it needs to decide.
    ///
    /// - Throws: What ``fetch(_:)-(FetchDescriptor<T>)`` throws, or the `DecodingError` of a
    ///   value that does not decode as `V` (nothing is returned then).
    public func fetch<T: Entity, V: Decodable>(_ descriptor: FetchDescriptor<T>, as type: V.Type) throws -> [V] {
        var result: [V] = []
        try forEach(descriptor, as: type) { result.append($0) }
        return result
    }

    /// Reads the objects ``fetch(_:as:)`` would return one at a time, calling `body` with each
    /// value as it is decoded and keeping none: GRDB's cursors, for a read that looks at each
    /// value once (a sum, an export, a checksum). Nothing is collected, so reading a million
    /// values holds one at a time, and their strings are freed as the loop goes.
    ///
    /// ```swift
    /// var bytes = 0
    /// try context.forEach(FetchDescriptor<Package>(), as: PackageRow.self) { row in
    ///     bytes += row.name.utf8.count + row.dependsNames.count
    /// }
    /// ```
    ///
    /// The rows are chosen, filtered and sorted before the first call, as ``fetch(_:as:)``
    /// chooses them. `body` must not insert, delete or save in this context (the loop reads
    /// rows it chose before); an object deleted meanwhile is skipped.
    ///
    /// - Throws: What ``fetch(_:as:)`` throws, or what `body` throws; the loop stops at the
    ///   first error.
    public func forEach<T: Entity, V: Decodable>(
        _ descriptor: FetchDescriptor<T>, as type: V.Type, _ body: (V) throws -> Void
    ) throws {
        let table = try table(for: T.self)
        let rows = try fetchedRows(descriptor, in: table)
        guard let first = rows.first else { return }
        // One decoder, moved from row to row.
        let decoder = AttributeDecoder(backing: ObjectBacking(table: table, row: first))
        for row in rows where table.isVisible(row: Int(row)) {
            decoder.reading(ObjectBacking(table: table, row: row))
            try body(try V(from: decoder))
        }
    }

    /// Reads the chosen attributes of the objects ``fetch(_:)-(FetchDescriptor<T>)`` would
    /// return, one ``ObjectRow`` at a time, as GRDB's row cursors do: no instance and no
    /// `Decoder` per object, the fastest way to read many objects' values.
    ///
    /// ```swift
    /// struct PersonRow { var id: Int64; var name: String; var city: String? }
    /// var rows: [PersonRow] = []
    /// try context.forEachRow(FetchDescriptor<Person>(), columns: [\.id, \.name, \.city]) { row in
    ///     rows.append(PersonRow(id: try row[0], name: try row[1], city: try row[2]))
    /// }
    /// ```
    ///
    /// Column `i` of each row is the attribute `columns[i]` names; ``ObjectRow`` says which
    /// types a column reads as. The rows are chosen, filtered and sorted before the first call,
    /// as ``forEach(_:as:_:)`` chooses them, and pending changes are read as they stand.
    /// `body` must not insert, delete or save in this context; an object deleted meanwhile is
    /// skipped.
    ///
    /// - Throws: ``ObjectGraphError`` `unknownKey` for a key path that names no stored
    ///   attribute of `T`, what ``fetch(_:)-(FetchDescriptor<T>)`` throws, or what `body`
    ///   throws (a row's read errors included); the loop stops at the first error.
    public func forEachRow<T: Entity>(
        _ descriptor: FetchDescriptor<T>, columns: [PartialKeyPath<T>], _ body: (borrowing ObjectRow) throws -> Void
    ) throws {
        let table = try table(for: T.self)
        let resolved = try RowColumns(keyPaths: columns, entity: table.entity, probing: table)
        try forEachRow(descriptor, resolved, in: table, body)
    }

    /// As ``forEachRow(_:columns:_:)-(FetchDescriptor<T>,[PartialKeyPath<T>],_)``, the
    /// columns named by their attributes' names (for code that knows the model only by name).
    ///
    /// - Throws: ``ObjectGraphError`` `unknownKey` for a name that is no attribute of `T`, or
    ///   what the key-path form throws.
    public func forEachRow<T: Entity>(
        _ descriptor: FetchDescriptor<T>, columns: [String], _ body: (borrowing ObjectRow) throws -> Void
    ) throws {
        let table = try table(for: T.self)
        try forEachRow(descriptor, try RowColumns(names: columns, entity: table.entity), in: table, body)
    }

    private func forEachRow<T: Entity>(
        _ descriptor: FetchDescriptor<T>, _ columns: RowColumns, in table: EntityTable,
        _ body: (borrowing ObjectRow) throws -> Void
    ) throws {
        let rows = try fetchedRows(descriptor, in: table)
        // No renumbering while the loop holds row numbers (a save in `body` despite the rule).
        rowsInUse += 1
        defer { rowsInUse -= 1 }
        for row in rows where Int(row) < table.rowCount && table.isVisible(row: Int(row)) {
            try body(ObjectRow(backing: ObjectBacking(table: table, row: row), columns: columns))
        }
    }

    /// The rows ``fetch(_:)-(FetchDescriptor<T>)`` returns the objects of, in its order.
    private func fetchedRows<T: Entity>(
        _ descriptor: FetchDescriptor<T>, in table: EntityTable
    ) throws -> ArraySlice<Int32> {
        let window = FetchWindow(descriptor)
        var rows: [Int32]
        if let end = window.end, let first = descriptor.sortBy.first,
            let walked = indexWalk(descriptor, first, end: end, in: table)
        {
            rows = sortedRows(walked, by: descriptor.sortBy, in: table, descriptor: descriptor)
        } else {
            rows = try matchingRows(descriptor, in: table, stopAfter: descriptor.sortBy.isEmpty ? window.end : nil)
            if !descriptor.sortBy.isEmpty {
                rows = sortedRows(rows, by: descriptor.sortBy, in: table, descriptor: descriptor)
            }
        }
        return rows[window.range(in: rows.count)]
    }

    /// The number of objects ``fetch(_:)-(FetchDescriptor<T>)`` would return for `descriptor`
    /// (the matches, less ``FetchDescriptor/fetchOffset``, at most ``FetchDescriptor/fetchLimit``).
    ///
    /// Sorting is skipped. With a predicate that translates to storage, no instance is created.
    ///
    /// ```swift
    /// let adults = try context.fetchCount(FetchDescriptor<Person>(predicate: #Predicate { $0.age >= 18 }))
    /// ```
    ///
    /// - Parameter descriptor: What to count.
    /// - Throws: Like ``fetch(_:)-(FetchDescriptor<T>)``.
    public func fetchCount<T: Entity>(_ descriptor: FetchDescriptor<T>) throws -> Int {
        let table = try table(for: T.self)
        let window = FetchWindow(descriptor)
        return window.range(in: try matchingRows(descriptor, in: table, stopAfter: window.end).count).count
    }

    // MARK: Closure filters

    /// The objects of `type` for which `isIncluded` returns `true`, pending inserts included and
    /// pending deletes excluded, in storage order: the fast path for filters written in Swift.
    ///
    /// ```swift
    /// let adults = try context.fetch(Person.self) { $0.age >= 18 }
    /// ```
    ///
    /// Every object in view is passed to `isIncluded`, so each gets its instance (created once
    /// and kept by the context, like ``object(with:)``).
    ///
    /// - Parameters:
    ///   - type: The entity type.
    ///   - isIncluded: The filter. It must not insert or delete objects of this context.
    /// - Throws: ``ObjectGraphError`` with code `unknownEntity`, or the error `isIncluded`
    ///   throws, as is.
    public func fetch<T: Entity>(_ type: T.Type, where isIncluded: (T) throws -> Bool) throws -> [T] {
        let table = try table(for: type)
        var result: [T] = []
        let hidden = EntityTable.hiddenFlags(committedOnly: false)
        for row in 0..<table.rowCount
        where table.flags[row] & (EntityTable.Flags.live | hidden) == EntityTable.Flags.live {
            let object = table.object(row: row, as: T.self)
            if try isIncluded(object) { result.append(object) }
        }
        return result
    }

    /// The number of objects of `type` for which `isIncluded` returns `true` (pending inserts
    /// included, pending deletes excluded).
    ///
    /// ```swift
    /// let adults = try context.count(Person.self) { $0.age >= 18 }
    /// ```
    ///
    /// - Parameters:
    ///   - type: The entity type.
    ///   - isIncluded: The filter. It must not insert or delete objects of this context.
    /// - Throws: ``ObjectGraphError`` with code `unknownEntity`, or the error `isIncluded`
    ///   throws, as is.
    public func count<T: Entity>(_ type: T.Type, where isIncluded: (T) throws -> Bool) throws -> Int {
        let table = try table(for: type)
        var count = 0
        let hidden = EntityTable.hiddenFlags(committedOnly: false)
        for row in 0..<table.rowCount
        where table.flags[row] & (EntityTable.Flags.live | hidden) == EntityTable.Flags.live {
            if try isIncluded(table.object(row: row, as: T.self)) { count += 1 }
        }
        return count
    }

    // MARK: Engine

    /// The rows in view matching the descriptor's predicate, in storage order, stopping after
    /// `stopAfter` matches.
    func matchingRows<T: Entity>(_ d: FetchDescriptor<T>, in table: EntityTable, stopAfter: Int?) throws -> [Int32] {
        let committedOnly = !d.includePendingChanges
        guard let predicate = d.predicate else {
            return table.scanRows(committedOnly: committedOnly, condition: nil, limit: stopAfter)
        }
        let translation = d.allowsStorageEvaluation ? PredicateTranslator<T>(table: table).translate(predicate) : nil
        // An index narrows the rows a condition can match; it is checked on each of them.
        let indexed = translation.flatMap { t in
            d.allowsIndexes
                ? table.indexPlan(for: t.condition).flatMap {
                    table.indexedRows($0, condition: t.condition, committedOnly: committedOnly)
                } : nil
        }
        if let translation, translation.exact {
            if var rows = indexed {
                if let stopAfter, rows.count > stopAfter { rows.removeSubrange(max(0, stopAfter)...) }
                return rows
            }
            return table.scanRows(committedOnly: committedOnly, condition: translation.condition, limit: stopAfter)
        }
        // Storage prefilter first (runs no user code), then Foundation on the survivors.
        let candidates = indexed ?? table.scanRows(committedOnly: committedOnly, condition: translation?.condition)
        var result: [Int32] = []
        let limit = stopAfter ?? Int.max
        guard limit > 0 else { return result }
        for row in candidates {
            let object = table.evaluationObject(row: Int(row), committedOnly: committedOnly, as: T.self)
            if try predicate.evaluate(object) {
                result.append(row)
                if result.count >= limit { break }
            }
        }
        return result
    }

    /// For a fetch that needs only its first `end` objects in the order of `first` (its first
    /// sort descriptor): rows containing them, read in the order of an index on that attribute
    /// (``EntityTable/indexWalk(sortSlot:reverse:condition:end:committedOnly:)``); nil when no
    /// index can answer, and the fetch sorts every match.
    func indexWalk<T: Entity>(
        _ d: FetchDescriptor<T>, _ first: SortDescriptor<T>, end: Int, in table: EntityTable
    ) -> [Int32]? {
        guard d.allowsStorageEvaluation, d.allowsIndexes, !table.indexes.secondaryIndexes.isEmpty,
            let keyPath = first.keyPath,
            let a = KeyPathResolver.resolve(keyPath, in: table, as: T.self), !a.isOptional, a.type.cellOrder != nil,
            !table.indexes.secondaryBySlot[a.slot].isEmpty
        else { return nil }
        var condition: StorageCondition?
        if let predicate = d.predicate {
            guard let t = PredicateTranslator<T>(table: table).translate(predicate), t.exact else { return nil }
            condition = t.condition
        }
        return table.indexWalk(
            sortSlot: a.slot, reverse: first.order == .reverse, condition: condition, end: end,
            committedOnly: !d.includePendingChanges)
    }

    /// `rows` sorted by `descriptors`, ties in storage order.
    func sortedRows<T: Entity>(
        _ rows: [Int32], by descriptors: [SortDescriptor<T>], in table: EntityTable, descriptor d: FetchDescriptor<T>
    ) -> [Int32] {
        let committedOnly = !d.includePendingChanges
        var columns: [SortColumn<T>] = []
        var needsObjects = false
        for sd in descriptors {
            if d.allowsStorageEvaluation,
                let column = SortColumn(sd, rows: rows, table: table, committedOnly: committedOnly)
            {
                columns.append(column)
            } else {
                columns.append(.objects(sd))
                needsObjects = true
            }
        }
        let objects: [T] =
            needsObjects
            ? rows.map { table.evaluationObject(row: Int($0), committedOnly: committedOnly, as: T.self) } : []
        return SortColumn.sort(rows, by: columns, objects: objects)
    }
}

extension SortColumn {
    /// `rows` ordered by `columns` (one entry per row each; `objects`, one per row, for the
    /// columns compared on instances), ties in the order of `rows`' values.
    static func sort<Row: Comparable>(_ rows: [Row], by columns: [SortColumn<T>], objects: [T]) -> [Row] {
        var order = Array(0..<rows.count)
        order.sort { i, j in
            for column in columns {
                switch column {
                case .int(let k, let reverse):
                    if k[i] != k[j] { return (k[i] < k[j]) != reverse }
                case .uint(let k, let reverse):
                    if k[i] != k[j] { return (k[i] < k[j]) != reverse }
                case .double(let k, let reverse):
                    if k[i] < k[j] { return !reverse }
                    if k[j] < k[i] { return reverse }
                case .objects(let sd):
                    switch sd.compare(objects[i], objects[j]) {
                    case .orderedAscending: return true
                    case .orderedDescending: return false
                    case .orderedSame: break
                    }
                }
            }
            return rows[i] < rows[j]
        }
        return order.map { rows[$0] }
    }
}

/// Offset and limit of a fetch.
struct FetchWindow {
    let offset: Int
    let limit: Int?

    init<T>(_ d: FetchDescriptor<T>) {
        offset = max(0, d.fetchOffset ?? 0)
        limit = d.fetchLimit.map { max(0, $0) }
    }

    /// How many matches (in order) are needed to fill the window; `nil` for all.
    var end: Int? { limit.map { offset.addingReportingOverflow($0).overflow ? Int.max : offset + $0 } }

    /// The positions of `count` matches that the window keeps.
    func range(in count: Int) -> Range<Int> {
        let start = min(offset, count)
        let stop = limit.map { min(count, start + $0) } ?? count
        return start..<stop
    }
}

/// One sort key, read from storage for all rows at once, or compared on instances.
enum SortColumn<T: Entity> {
    case int([Int64], reverse: Bool)
    case uint([UInt64], reverse: Bool)
    case double([Double], reverse: Bool)
    case objects(SortDescriptor<T>)

    /// A storage column for `descriptor` when its key path reads a non-optional numeric or
    /// `Date` attribute (whose comparator can only be `<`); `nil` otherwise.
    init?(_ descriptor: SortDescriptor<T>, rows: [Int32], table: EntityTable, committedOnly: Bool) {
        self.init(descriptor, rows: rows, entity: table.entity, probing: table) { row, slot in
            table.cell(row: Int(row), slot: slot, committedOnly: committedOnly)
        }
    }

    /// A storage column for `descriptor` over `rows`, whose cells `cell(row, slot)` reads.
    /// `probing`: the table a key path the entity description does not list may be probed on.
    init?<Row>(
        _ descriptor: SortDescriptor<T>, rows: [Row], entity: EntityDescription, probing table: EntityTable?,
        cell: (Row, Int) -> (bits: UInt64, isNull: Bool)
    ) {
        guard let keyPath = descriptor.keyPath,
            let a = KeyPathResolver.resolve(keyPath, entity: entity, probing: table, as: T.self), !a.isOptional
        else { return nil }
        let reverse = descriptor.order == .reverse
        switch a.type.cellOrder {
        case .signed:
            self = .int(
                rows.map {
                    let c = cell($0, a.slot); return c.isNull ? 0 : Int64(bitPattern: c.bits)
                }, reverse: reverse)
        case .unsigned:
            self = .uint(
                rows.map {
                    let c = cell($0, a.slot); return c.isNull ? 0 : c.bits
                }, reverse: reverse)
        case .double:
            self = .double(
                rows.map {
                    let c = cell($0, a.slot); return c.isNull ? 0 : Double(bitPattern: c.bits)
                }, reverse: reverse)
        case .float:
            self = .double(
                rows.map {
                    let c = cell($0, a.slot);
                    return c.isNull ? 0 : Double(Float(bitPattern: UInt32(truncatingIfNeeded: c.bits)))
                },
                reverse: reverse)
        case nil:
            return nil
        }
    }
}
