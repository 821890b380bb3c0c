import Foundation

/// One mapping run over one source document: maps every source, then makes the connections,
/// applies the tombstones and discards invalid new objects. Runs inside a savepoint of its
/// context (``ModelContext/map(_:with:progress:)-(Data,_,_)``), so a throw undoes all of it.
struct MappingRun<Source: MappingSource> {
    let source: Source
    let context: ModelContext
    /// Every plan of the run, the top-level one first, nested ones in declaration order.
    var plans: [MappingPlan] = []
    let top: MappingPlan
    /// The top-level source being mapped, for error messages.
    var sourceIndex = 0
    /// The run's progress reports and cancellation checks, made every few thousand top-level
    /// sources; ``mapTopLevel(_:)`` counts them.
    var progress = RunProgress(nil, sync: nil)
    /// Reused per record: the node of each attribute step, per nesting depth.
    private var nodeBuffers: [[Source.Node?]] = []
    private var depth = 0

    init(source: Source, definition: MappingDefinition, context: ModelContext) throws(MappingError) {
        self.source = source
        self.context = context
        var plans: [MappingPlan] = []
        top = try MappingPlan(definition, context: context, plans: &plans)
        self.plans = plans
    }

    // MARK: Sources

    /// The sources the document holds at the mapping's root key path: the elements of an array,
    /// or one object.
    func sources(in root: Source.Node) throws(MappingError) -> Source.Node? {
        guard let path = top.definition.rootKeyPath, !path.isEmpty else { return root }
        let keys = path.split(separator: ".", omittingEmptySubsequences: false).map { MappingKey(String($0)) }
        var hints = [Int](repeating: 0, count: keys.count)
        guard let node = source.node(root, at: keys, hints: &hints, base: 0) else {
            throw MappingError(
                .rootKeyPathNotFound, "the document has nothing at the root key path '\(path)'", keyPath: path,
                entity: top.table.entity.name)
        }
        return node
    }

    /// How many top-level sources `node` holds: the elements of an array, none for null, else
    /// one object.
    func topLevelCount(_ node: Source.Node?) -> Int {
        guard let node else { return 0 }
        switch source.kind(node) {
        case .null: return 0
        case .array: return source.count(node)
        default: return 1
        }
    }

    /// Maps every source under `node` (an array, one object, or null for none) and returns the
    /// rows of the top-level objects in source order (-1 where a source was skipped).
    ///
    /// Every 4,096 sources it reports its progress and stops, throwing `CancellationError`, when
    /// its task was cancelled; the run's savepoint then undoes it.
    mutating func mapTopLevel(_ node: Source.Node) throws -> [Int32] {
        var rows: [Int32] = []
        switch source.kind(node) {
        case .null:
            break
        case .array:
            let count = source.count(node)
            rows.reserveCapacity(count)
            top.prepare(count: count)
            var i = 0
            if let ahead = IdentificationLookahead(top, source: source) {
                // Each source is mapped `distance` places behind the walk, which prefetches
                // for the sources entering its window.
                try source.forEachElement(node) { element in
                    guard let due = ahead.enter(element) else { return }
                    try progress.advance(to: i)
                    sourceIndex = i
                    rows.append(Int32(try map(due, with: top, keyPath: "")))
                    i += 1
                }
                while let due = ahead.drain() {
                    try progress.advance(to: i)
                    sourceIndex = i
                    rows.append(Int32(try map(due, with: top, keyPath: "")))
                    i += 1
                }
            } else {
                try source.forEachElement(node) { element in
                    try progress.advance(to: i)
                    sourceIndex = i
                    rows.append(Int32(try map(element, with: top, keyPath: "")))
                    i += 1
                }
            }
        default:
            sourceIndex = 0
            rows.append(Int32(try map(node, with: top, keyPath: "")))
        }
        return rows
    }

    // MARK: One object

    /// Maps one source object with `plan` and returns its row, or -1 for a source skipped
    /// because it lacks its identification values.
    mutating func map(_ node: Source.Node, with plan: MappingPlan, keyPath prefix: String) throws -> Int {
        guard source.kind(node) == .object else {
            if source.nestsTooDeep(node) {
                throw tooDeep(keyPath: prefix.isEmpty ? nil : prefix, entity: plan.table.entity.name)
            }
            throw MappingError(
                .notAnObject, "expected an object for \(plan.table.entity.name), found \(source.text(node))",
                sourceIndex: sourceIndex, keyPath: prefix.isEmpty ? nil : prefix, value: source.text(node),
                entity: plan.table.entity.name)
        }
        let table = plan.table
        if nodeBuffers.count <= depth { nodeBuffers.append([]) }
        var nodes = nodeBuffers[depth]
        nodeBuffers[depth] = []
        defer { nodeBuffers[depth] = nodes }
        // The identification and modification values first: a source skipped as unmodified
        // reads no other key.
        nodes.removeAll(keepingCapacity: true)
        nodes.append(contentsOf: repeatElement(nil, count: plan.attributes.count))
        for p in plan.earlySteps {
            let step = plan.attributes[p]
            nodes[p] = source.node(node, at: step.keys, hints: &plan.hints, base: step.hintBase)
        }

        // Identification: transformed values first, then the lookup.
        var row: Int?
        if !plan.identification.isEmpty {
            // A source without its identification values is skipped, as an import skips a
            // source without an ID: inserting it would make an object with a default key.
            for p in plan.identification {
                guard let n = nodes[p], source.kind(n) != .null else {
                    plan.counts.skippedWithoutIdentification += 1
                    return -1
                }
            }
            row = try identify(nodes, plan, prefix)
        }
        if let existing = row, let filter = plan.definition.identificationFilter,
            !(try filter(table.instance(row: existing)))
        {
            row = nil
        }

        if let existing = row {
            if let m = plan.modification, let n = nodes[m],
                try isUpToDate(n, step: plan.attributes[m], row: existing, plan, prefix)
            {
                // The destinations mapped from the object's own fields are objects of their own,
                // which the modification attribute does not vouch for: they are mapped (found,
                // compared, and so marked in a sync) as for a mapped object.
                var relationshipChanged = false
                if plan.mapsFromOwnFields {
                    depth += 1
                    defer { depth -= 1 }
                    for step in plan.relationships where step.isFromOwnFields {
                        relationshipChanged =
                            try mapRelationship(node, step, row: existing, plan, prefix) || relationshipChanged
                    }
                }
                if relationshipChanged {
                    plan.relationshipUpdates.append(Int32(existing))
                    plan.note(existing, .updated)
                } else {
                    plan.note(existing, .skipped)
                }
                return existing
            }
            resolveLateSteps(node, plan, &nodes)
            var changed = false
            for (i, step) in plan.attributes.enumerated() {
                changed = try assign(nodes[i], step, row: existing, new: false, plan, prefix) || changed
            }
            depth += 1
            defer { depth -= 1 }
            var relationshipChanged = false
            for step in plan.relationships {
                relationshipChanged =
                    try mapRelationship(node, step, row: existing, plan, prefix) || relationshipChanged
            }
            if relationshipChanged { plan.relationshipUpdates.append(Int32(existing)) }
            plan.note(existing, changed || relationshipChanged ? .updated : .unchanged)
            return existing
        }

        resolveLateSteps(node, plan, &nodes)
        let new = try insert(nodes, plan, prefix)
        plan.note(new, .inserted)
        plan.insertedRows.append((Int32(new), Int32(sourceIndex)))
        if plan.index == nil && !plan.identification.isEmpty, plan.identities != nil {
            if let key = identityKey(row: new, plan) { plan.identities?[key] = Int32(new) }
        }
        depth += 1
        defer { depth -= 1 }
        for step in plan.relationships {
            _ = try mapRelationship(node, step, row: new, plan, prefix)
        }
        return new
    }

    /// Finds the nodes of the steps that are neither identification nor modification.
    @inline(__always)
    private func resolveLateSteps(_ node: Source.Node, _ plan: MappingPlan, _ nodes: inout [Source.Node?]) {
        for p in plan.lateSteps {
            let step = plan.attributes[p]
            nodes[p] = source.node(node, at: step.keys, hints: &plan.hints, base: step.hintBase)
        }
    }

    /// The existing object the identification attributes' values name, if any.
    private func identify(_ nodes: [Source.Node?], _ plan: MappingPlan, _ prefix: String) throws -> Int? {
        if plan.identification.count == 1, let index = plan.index {
            // The usual case, one unique attribute: no array of values per record.
            let p = plan.identification[0]
            guard let n = nodes[p] else { return nil }
            let t = try transform(n, plan.attributes[p], plan, prefix)
            let table = plan.table
            let row = t.withCell { cell -> Int? in
                guard let cell else { return nil }
                // A document that lists objects in the order they were stored (an API's stable
                // order, as in a re-sync) names the row after the last one found: checked first,
                // it spares the probe's cache misses into the index. With no pending duplicate,
                // a visible row holding the key is the key's owner.
                let guess = plan.lastFound &+ 1
                if guess >= 0, guess < table.rowCount, index.duplicates.isEmpty, table.isVisible(row: guess),
                    table.holds(cell, row: guess, slot: index.slots[0])
                {
                    plan.guessScore = min(plan.guessScore + 1, 32)
                    return guess
                }
                plan.guessScore = max(plan.guessScore - 4, 0)
                return table.owner(ofCell: cell, in: index)
            }
            guard let row, table.isVisible(row: row) else { return nil }
            plan.lastFound = row
            return row
        }
        var values: [Transformed] = []
        values.reserveCapacity(plan.identification.count)
        for p in plan.identification {
            guard let n = nodes[p] else { return nil }
            let t = try transform(n, plan.attributes[p], plan, prefix)
            if case .null = t { return nil }
            values.append(t)
        }
        let table = plan.table
        if let index = plan.index {
            let row: Int?
            if values.count == 1 {
                row = values[0].withCell { cell in cell.flatMap { table.owner(ofCell: $0, in: index) } }
            } else {
                row = withTransformedCells(values) { table.owner(ofCells: $0, in: index) }
            }
            guard let row, table.isVisible(row: row) else { return nil }
            return row
        }
        if plan.identities == nil { buildIdentities(plan) }
        let key = withTransformedCells(values) { IdentityKey($0) }
        guard let r = plan.identities?[key], table.isVisible(row: Int(r)) else { return nil }
        return Int(r)
    }

    /// Every visible object of the plan's entity by its identification attributes: the lookup
    /// table of a run whose identification has no unique index (built once, then kept up to
    /// date with the run's inserts).
    private func buildIdentities(_ plan: MappingPlan) {
        var identities: [IdentityKey: Int32] = [:]
        for row in 0..<plan.table.rowCount where plan.table.isVisible(row: row) {
            if let key = identityKey(row: row, plan), identities[key] == nil { identities[key] = Int32(row) }
        }
        plan.identities = identities
    }

    private func identityKey(row: Int, _ plan: MappingPlan) -> IdentityKey? {
        let slots = plan.identification.map { plan.attributes[$0].slot }
        guard !slots.contains(where: { plan.table.isNull(row: row, slot: $0) }) else { return nil }
        return withRowCells(plan.table, row: row, slots: slots) { IdentityKey($0) }
    }

    /// Whether the existing object is already as new as the source says (modification attribute).
    private func isUpToDate(
        _ node: Source.Node, step: MappingPlan.AttributeStep, row: Int, _ plan: MappingPlan, _ prefix: String
    ) throws -> Bool {
        let t = try transform(node, step, plan, prefix)
        if step.type == .string {
            // A string is as new only when it is the same: its bytes compared where they lie,
            // with no `String` made of either side.
            return t.withCell { cell in cell.map { plan.table.holds($0, row: row, slot: step.slot) } ?? false }
        }
        guard let incoming = t.attributeValue(as: step.type),
            let stored = plan.table.value(row: row, slot: step.slot)
        else { return false }
        switch (incoming, stored) {
        case (.string(let a), .string(let b)): return a.utf8.elementsEqual(b.utf8)
        case (.int(let a), .int(let b)): return a <= b
        case (.uint(let a), .uint(let b)): return a <= b
        case (.double(let a), .double(let b)): return a <= b
        case (.float(let a), .float(let b)): return a <= b
        case (.date(let a), .date(let b)): return a <= b
        default: return incoming == stored
        }
    }

    /// Transforms the value at `node` for `step`'s attribute, or throws naming the source.
    @inline(__always)
    private func transform(
        _ node: Source.Node, _ step: MappingPlan.AttributeStep, _ plan: MappingPlan, _ prefix: String
    ) throws(MappingError) -> Transformed {
        if step.type.isList { return try transformList(node, step, plan, prefix) }
        if step.isCodable {
            if source.kind(node) == .null { return .null }
            guard let data = source.json(node) else { throw untransformable(node, step, plan, prefix) }
            // The document's JSON is stored as it is: it must decode as the attribute's type, or
            // reading the attribute would meet a value it cannot read. An array of strings is
            // a `[String]` as it stands in the parsed document, without parsing it again.
            if let check = step.attribute.codableCheck,
                !(check.decodedType == ObjectIdentifier([String].self) && isArrayOfStrings(node)),
                let problem = check.check(.data(data))
            {
                let name = step.attribute.name
                throw MappingError(
                    .untransformableValue,
                    "\(plan.table.entity.name).\(name): the JSON does not decode as \(step.attribute.swiftTypeName): \(problem)",
                    sourceIndex: sourceIndex, keyPath: joined(prefix, step.keyPath), value: source.text(node),
                    entity: plan.table.entity.name, attribute: name)
            }
            return .value(.data(data))
        }
        guard let t = plan.transformer.transform(source.scalar(node), to: step.type) else {
            throw untransformable(node, step, plan, prefix)
        }
        if let check = step.rawValueCheck, let v = t.attributeValue(as: step.type), let problem = check.check(v) {
            let name = step.attribute.name
            throw MappingError(
                .untransformableValue, "\(plan.table.entity.name).\(name): \(problem)", sourceIndex: sourceIndex,
                keyPath: joined(prefix, step.keyPath), value: source.text(node), entity: plan.table.entity.name,
                attribute: name)
        }
        return t
    }

    /// The native list (``AttributeType/stringList``, ``AttributeType/intList``) a JSON array
    /// maps to: every element a string, or every element an integer within `Int64`'s range
    /// (a whole number written with a fraction or an exponent, `3.0`, `1e3`, counts). Anything
    /// else is refused, naming the first element that is not, so that nothing is stored in part.
    private func transformList(
        _ node: Source.Node, _ step: MappingPlan.AttributeStep, _ plan: MappingPlan, _ prefix: String
    ) throws(MappingError) -> Transformed {
        switch source.kind(node) {
        case .null: return .null
        case .array: break
        default:
            // A dynamic source may hold the list as a Swift value.
            if case .native(let v) = source.scalar(node),
                let list = AttributeValue.coerce(attributeValue: v, to: step.type)
            {
                return .value(list)
            }
            throw untransformable(node, step, plan, prefix)
        }
        let wantsStrings = step.type == .stringList
        var strings: [String] = []
        var integers: [Int64] = []
        var problem: String?
        var index = 0
        let count = source.count(node)
        if wantsStrings { strings.reserveCapacity(count) } else { integers.reserveCapacity(count) }
        source.forEachElement(node) { element in
            guard problem == nil else { return }
            defer { index += 1 }
            let scalar = source.scalar(element)
            if wantsStrings {
                switch scalar {
                case .utf8(let bytes): strings.append(String(decoding: bytes, as: UTF8.self))
                case .string(let s): strings.append(s)
                default: problem = "element \(index) (\(source.text(element))) is not a string"
                }
                return
            }
            let integer: Int64? =
                switch scalar {
                case .int(let v): v
                case .uint(let v): Int64(exactly: v)
                case .double(let v): Int64(exactly: v)
                default: nil
                }
            guard let integer else {
                problem = "element \(index) (\(source.text(element))) is not an integer within Int's range"
                return
            }
            integers.append(integer)
        }
        if let problem {
            let name = step.attribute.name
            let text = source.text(node)
            throw MappingError(
                .untransformableValue,
                "\(plan.table.entity.name).\(name) holds \(step.attribute.swiftTypeName): \(problem)",
                sourceIndex: sourceIndex, keyPath: joined(prefix, step.keyPath),
                value: text.count > 200 ? String(text.prefix(200)) + "…" : text,
                entity: plan.table.entity.name, attribute: name)
        }
        return .value(wantsStrings ? .stringList(strings) : .intList(integers))
    }

    /// Whether `node` is an array whose elements are all strings.
    private func isArrayOfStrings(_ node: Source.Node) -> Bool {
        guard source.kind(node) == .array else { return false }
        var strings = true
        source.forEachElement(node) { element in
            if strings && source.kind(element) != .string { strings = false }
        }
        return strings
    }

    private func untransformable(
        _ node: Source.Node, _ step: MappingPlan.AttributeStep, _ plan: MappingPlan, _ prefix: String
    ) -> MappingError {
        let a = step.attribute
        if source.nestsTooDeep(node) {
            return tooDeep(keyPath: joined(prefix, step.keyPath), entity: plan.table.entity.name, attribute: a.name)
        }
        let text = source.text(node)
        return MappingError(
            .untransformableValue,
            "\(text) cannot become \(plan.table.entity.name).\(a.name), which holds \(a.swiftTypeName)",
            sourceIndex: sourceIndex, keyPath: joined(prefix, step.keyPath), value: text,
            entity: plan.table.entity.name, attribute: a.name)
    }

    /// Sets one attribute of an existing object from its node (or its absence); returns whether
    /// the stored value changed.
    private func assign(
        _ node: Source.Node?, _ step: MappingPlan.AttributeStep, row: Int, new: Bool, _ plan: MappingPlan,
        _ prefix: String
    ) throws -> Bool {
        let table = plan.table
        let t: Transformed
        if let node {
            t = try transform(node, step, plan, prefix)
        } else if plan.definition.assignsDefaultValueForMissingAttributes {
            t = step.attribute.defaultValue.map { .value($0) } ?? .null
        } else {
            return false
        }
        if case .null = t, !step.isOptional {
            if new && plan.definition.discardsInvalidObjectsOnInsert { return false }
            throw missingRequired(step, plan, prefix, present: node != nil)
        }
        return t.withCell { cell in
            guard let cell else {
                guard !table.isNull(row: row, slot: step.slot) else { return false }
                table.set(row: row, slot: step.slot, value: nil)
                return true
            }
            guard !table.holds(cell, row: row, slot: step.slot) else { return false }
            table.setCell(row: row, slot: step.slot, cell)
            return true
        }
    }

    /// The error for a source value nested deeper than ``mappingMaxDepth``.
    private func tooDeep(keyPath: String?, entity: String, attribute: String? = nil) -> MappingError {
        MappingError(
            .tooDeeplyNested,
            "a value nests arrays and objects deeper than \(mappingMaxDepth) levels; a mapping reads at most that many",
            sourceIndex: sourceIndex, keyPath: keyPath, entity: entity, attribute: attribute)
    }

    private func missingRequired(
        _ step: MappingPlan.AttributeStep, _ plan: MappingPlan, _ prefix: String, present: Bool
    ) -> MappingError {
        MappingError(
            .missingRequiredValue,
            "\(plan.table.entity.name).\(step.attribute.name) is required, and the source's '\(step.keyPath)' is \(present ? "null" : "missing")",
            sourceIndex: sourceIndex, keyPath: joined(prefix, step.keyPath), value: present ? "null" : nil,
            entity: plan.table.entity.name, attribute: step.attribute.name)
    }

    /// Inserts a new object from the nodes of its attribute steps.
    private mutating func insert(_ nodes: [Source.Node?], _ plan: MappingPlan, _ prefix: String) throws -> Int {
        let table = plan.table
        // An entity whose awakeFromInsert may set values gets the ordinary insert and sets; the
        // rest are written straight into the new row, which is indexed once afterwards (as the
        // bulk import does).
        if table.hooks.contains(.awakeFromInsert) {
            let row = table.insertRow()
            table.instance(row: row).awakeFromInsert()
            for (i, step) in plan.attributes.enumerated() {
                if let n = nodes[i] {
                    _ = try assign(n, step, row: row, new: true, plan, prefix)
                } else if step.needsValue && table.isNull(row: row, slot: step.slot)
                    && !plan.definition.discardsInvalidObjectsOnInsert
                {
                    throw missingRequired(step, plan, prefix, present: false)
                }
            }
            return row
        }
        var cells: [Transformed] = []
        cells.reserveCapacity(nodes.count)
        for (i, step) in plan.attributes.enumerated() {
            guard let n = nodes[i] else {
                if step.needsValue && !plan.definition.discardsInvalidObjectsOnInsert {
                    throw missingRequired(step, plan, prefix, present: false)
                }
                cells.append(.null)
                continue
            }
            let t = try transform(n, step, plan, prefix)
            if case .null = t, !step.isOptional, !plan.definition.discardsInvalidObjectsOnInsert {
                throw missingRequired(step, plan, prefix, present: true)
            }
            cells.append(t)
        }
        let row = table.insertRow(indexed: false)
        for (i, step) in plan.attributes.enumerated() {
            if nodes[i] == nil { continue }
            cells[i].withCell { cell in
                if let cell {
                    table.writeFresh(row: row, slot: step.slot, cell)
                } else {
                    table.nulls[row * table.maskWords + step.slot / 64] |= 1 << UInt64(step.slot % 64)
                }
            }
        }
        table.touchIndexes(row: row)
        if !table.indexes.uniqueIndexes.isEmpty { table.indexAll(row: row) }
        return row
    }

    // MARK: Relationships

    /// Maps a nested object or array into a relationship of `row`; returns whether it changed.
    private mutating func mapRelationship(
        _ node: Source.Node, _ step: MappingPlan.RelationshipStep, row: Int, _ plan: MappingPlan, _ prefix: String
    ) throws -> Bool {
        let value: Source.Node
        let path: String
        if step.isFromOwnFields {
            // The object itself, when it names its destination: every identifying field present
            // and not null. A null one says there is none (cleared, as a null nested object); a
            // missing one says nothing (left, as a missing nested object).
            var isNull = false
            var isMissing = false
            for p in step.plan.identification {
                let a = step.plan.attributes[p]
                guard let n = source.node(node, at: a.keys, hints: &step.plan.hints, base: a.hintBase) else {
                    isMissing = true
                    continue
                }
                if source.kind(n) == .null { isNull = true }
            }
            if isNull { return clear(step.relationship, row: row, plan.table) }
            if isMissing { return false }
            value = node
            path = prefix
        } else {
            guard let found = source.node(node, at: step.keys, hints: &plan.hints, base: step.hintBase) else {
                return false
            }
            value = found
            path = joined(prefix, step.keyPath)
        }
        let table = plan.table
        let r = step.relationship
        if r.isToMany {
            var targets: [Int] = []
            switch source.kind(value) {
            case .null: break
            case .array:
                var i = 0
                try source.forEachElement(value) { element in
                    targets.append(try map(element, with: step.plan, keyPath: "\(path)[\(i)]"))
                    i += 1
                }
            default:
                targets.append(try map(value, with: step.plan, keyPath: path))
            }
            var seen = Set<Int>()
            targets = targets.filter { $0 >= 0 && seen.insert($0).inserted }
            guard !table.toManyHolds(row: row, r, exactly: targets) else { return false }
            table.setToMany(row: row, r, to: targets)
            return true
        }
        let target: Int?
        switch source.kind(value) {
        case .null: target = nil
        default:
            let mapped = try map(value, with: step.plan, keyPath: path)
            guard mapped >= 0 else { return false }  // skipped: the relationship stays as it is
            target = mapped
        }
        if table.toOneDestination(row: row, r) == target && (target != nil || table.toOneIsEmpty(row: row, r)) {
            return false
        }
        table.setToOne(row: row, r, to: target)
        return true
    }

    // MARK: After the sources

    /// Connections, tombstones and discarded objects, in that order, for every plan.
    mutating func finish() throws -> [DiscardedObject] {
        for plan in plans { connect(plan) }
        for plan in plans { plan.dropPhantomUpdates() }
        for plan in plans where plan.definition.deletionFetch != nil {
            guard let fetch = plan.definition.deletionFetch else { continue }
            for object in try fetch(context) {
                guard let t = object._backing.managedTable, t === plan.table else { continue }
                let row = object._backing.rowIndex
                guard t.isVisible(row: row) else { continue }
                context.deleteApplyingRules(t, row: row)
                plan.counts.tombstoned += 1
                plan.forget(row)
            }
        }
        var discarded: [DiscardedObject] = []
        for plan in plans where plan.definition.discardsInvalidObjectsOnInsert {
            discarded += discardInvalid(plan)
        }
        return discarded
    }

    private func connect(_ plan: MappingPlan) {
        guard !plan.connections.isEmpty else { return }
        let table = plan.table
        // One parser for the key lists of every object (its buffers grow to the longest list).
        let parser =
            plan.connections.contains { $0.isCollection && !table.types[$0.mySlots[0]].isList } ? JSONParser() : nil
        for c in plan.connections {
            var lookup: [IdentityKey: [Int32]]?
            var counts = ConnectionCounts()
            // Into a link table that holds nothing yet (a first sync), the lists are gathered
            // and set at once, at the end.
            let freshLinks =
                c.relationship.isToMany && c.relationship.isLinked
                ? context.links[c.relationship.link].acceptsFreshLists : false
            var fresh = LinkRuns()
            var lookahead = ConnectionLookahead(c, source: table, rows: plan.mappedRows)
            for (position, r) in plan.mappedRows.enumerated() {
                lookahead?.advance(to: position)
                let row = Int(r)
                guard table.isVisible(row: row) else { continue }
                if c.mySlots.contains(where: { table.isNull(row: row, slot: $0) }) {
                    counts.withoutKey += 1
                    if clear(c, row: row, table) { noteRelationshipChanged(row, plan) }
                    continue
                }
                var targets: [Int] = []
                var unmatched = false
                if c.isCollection {
                    let before = counts.unmatchedKeys
                    guard
                        let found = collectionTargets(
                            c, row: row, table: table, lookup: &lookup, counts: &counts, parser: parser)
                    else {
                        counts.withoutKey += 1
                        if clear(c, row: row, table) { noteRelationshipChanged(row, plan) }
                        continue
                    }
                    targets = found
                    unmatched = counts.unmatchedKeys > before
                } else {
                    if let index = c.index {
                        let owner = withRowCells(table, row: row, slots: c.mySlots) { cells in
                            cells.count == 1
                                ? c.destination.owner(ofCell: cells[0], in: index, prefetchingRowState: false)
                                : c.destination.owner(ofCells: cells, in: index)
                        }
                        if let owner, c.destination.isVisible(row: owner) { targets = [owner] }
                    } else {
                        if lookup == nil { lookup = destinations(c) }
                        let key = withRowCells(table, row: row, slots: c.mySlots) { IdentityKey($0) }
                        targets = (lookup?[key] ?? []).map(Int.init)
                    }
                    if targets.isEmpty {
                        unmatched = true
                        counts.noteUnmatched(
                            c.mySlots.map { slot in
                                switch table.value(row: row, slot: slot) {
                                case .string(let text)?: text
                                case let value?: "\(value)"
                                case nil: "nil"
                                }
                            }.joined(separator: ", "))
                    }
                }
                if unmatched { counts.unresolved += 1 }
                if !targets.isEmpty { counts.resolved += 1 }
                // A connection that changes an object's relationship counts it as updated.
                if targets.isEmpty {
                    if clear(c, row: row, table) { noteRelationshipChanged(row, plan) }
                } else if freshLinks {
                    for t in targets { fresh.append(Int32(row), Int32(t)) }
                    noteRelationshipChanged(row, plan)
                } else if c.relationship.isToMany {
                    if !table.toManyHolds(row: row, c.relationship, exactly: targets) {
                        table.setToMany(row: row, c.relationship, to: targets)
                        noteRelationshipChanged(row, plan)
                    }
                } else if table.toOneDestination(row: row, c.relationship) != targets[0] {
                    table.setToOne(row: row, c.relationship, to: targets[0])
                    noteRelationshipChanged(row, plan)
                }
            }
            if freshLinks { context.links[c.relationship.link].linkFresh(side: c.relationship.linkSide, fresh) }
            plan.counts.unresolvedConnections += counts.unresolved
            plan.counts.connections[c.relationship.name] =
                (plan.counts.connections[c.relationship.name] ?? ConnectionCounts()) + counts
        }
    }

    /// Counts `row` as updated because one of its relationships changed.
    private func noteRelationshipChanged(_ row: Int, _ plan: MappingPlan) {
        plan.relationshipUpdates.append(Int32(row))
        plan.note(row, .updated)
    }

    /// The destinations named by the elements of `row`'s collection attribute (a JSON array of
    /// strings or numbers), in the array's order, each once; elements that name nothing are
    /// skipped and counted in `counts`. Nil when the attribute holds no key: an empty list, or
    /// no list.
    ///
    /// The list is parsed where the arena holds it, by simdjson into `parser`'s buffers, and a
    /// string element is looked up by its bytes: a resync connects every object again, so this
    /// runs once per object and connection (Foundation's parser and its bridged values were
    /// most of a no-op resync).
    private func collectionTargets(
        _ c: MappingPlan.Connection, row: Int, table: EntityTable, lookup: inout [IdentityKey: [Int32]]?,
        counts: inout ConnectionCounts, parser: JSONParser?
    ) -> [Int]? {
        let slot = c.mySlots[0]
        guard table.types[slot].isVariableLength, !table.isNull(row: row, slot: slot) else { return nil }
        let type = c.destination.entity.attributes[c.destinationSlots[0]].type
        if table.types[slot].isList {
            return nativeCollectionTargets(c, row: row, slot: slot, table: table, lookup: &lookup, counts: &counts)
        }
        guard let parser else { return nil }
        return table.arena.withBytes(ArenaRef(table.values[row * table.stride + slot])) { bytes -> [Int]? in
            guard let document = try? JSONDocument(parsing: bytes, reusing: parser) else { return nil }
            let list = document.root
            guard document.kind(list) == .array, document.count(list) > 0 else { return nil }
            var targets: [Int] = []
            var seen = Set<Int>()
            func find(_ cell: RawCell) -> [Int] {
                if let index = c.index {
                    return c.destination.owner(ofCell: cell, in: index, prefetchingRowState: false).map { [$0] } ?? []
                }
                if lookup == nil { lookup = destinations(c) }
                return (lookup?[IdentityKey([cell])] ?? []).map(Int.init)
            }
            document.forEachElement(list) { element in
                let found: [Int]
                switch document.kind(element) {
                case .string where type == .string:
                    found = find(.bytes(document.stringBytes(element)))
                case .string, .number:
                    let raw: AttributeValue
                    if document.kind(element) == .string {
                        raw = .string(document.string(element))
                    } else {
                        switch document.number(element) {
                        case .int(let i): raw = .int(i)
                        case .uint(let u): raw = Int64(exactly: u).map(AttributeValue.int) ?? .double(Double(u))
                        case .double(let d): raw = Int64(exactly: d).map(AttributeValue.int) ?? .double(d)
                        }
                    }
                    guard let key = AttributeValue.coerce(attributeValue: raw, to: type) else {
                        counts.noteUnmatched(document.jsonText(element))
                        return
                    }
                    found = key.withCell { find($0) }
                default:
                    counts.noteUnmatched(document.jsonText(element))
                    return
                }
                let visible = found.filter { c.destination.isVisible(row: $0) }
                if visible.isEmpty {
                    counts.noteUnmatched(
                        document.kind(element) == .string ? document.string(element) : document.jsonText(element))
                }
                for t in visible where seen.insert(t).inserted { targets.append(t) }
            }
            return targets
        }
    }

    /// ``collectionTargets(_:row:table:lookup:counts:parser:)`` for a native list attribute
    /// (``AttributeType/stringList``, ``AttributeType/intList``): its elements are read where
    /// the arena holds them, a string looked up by its bytes, with the same matches, order and
    /// counts as the JSON array of the same elements.
    private func nativeCollectionTargets(
        _ c: MappingPlan.Connection, row: Int, slot: Int, table: EntityTable,
        lookup: inout [IdentityKey: [Int32]]?, counts: inout ConnectionCounts
    ) -> [Int]? {
        let type = c.destination.entity.attributes[c.destinationSlots[0]].type
        let listType = table.types[slot]
        if let index = c.index, listType == .stringList, type == .string {
            return stringListTargets(c, index: index, row: row, slot: slot, table: table, counts: &counts)
        }
        return table.arena.withBytes(ArenaRef(table.values[row * table.stride + slot])) { bytes -> [Int]? in
            var targets: [Int] = []
            var seen = Set<Int>()
            var any = false
            func find(_ cell: RawCell) -> [Int] {
                if let index = c.index {
                    return c.destination.owner(ofCell: cell, in: index, prefetchingRowState: false).map { [$0] } ?? []
                }
                if lookup == nil { lookup = destinations(c) }
                return (lookup?[IdentityKey([cell])] ?? []).map(Int.init)
            }
            /// Takes the rows `found` names for an element (`unmatched`: how it is reported).
            func take(_ found: [Int], unmatched: @autoclosure () -> String) {
                let visible = found.filter { c.destination.isVisible(row: $0) }
                if visible.isEmpty { counts.noteUnmatched(unmatched()) }
                for t in visible where seen.insert(t).inserted { targets.append(t) }
            }
            if listType == .stringList {
                ListCoding.forEachString(bytes) { utf8 in
                    any = true
                    if type == .string {
                        take(find(.bytes(utf8)), unmatched: String(decoding: utf8, as: UTF8.self))
                        return
                    }
                    let s = String(decoding: utf8, as: UTF8.self)
                    guard let key = AttributeValue.coerce(attributeValue: .string(s), to: type) else {
                        counts.noteUnmatched(ListCoding.jsonString(s))
                        return
                    }
                    take(key.withCell { find($0) }, unmatched: s)
                }
            } else {
                for i in ListCoding.integers(bytes) {
                    any = true
                    guard let key = AttributeValue.coerce(attributeValue: .int(i), to: type) else {
                        counts.noteUnmatched("\(i)")
                        continue
                    }
                    take(key.withCell { find($0) }, unmatched: "\(i)")
                }
            }
            return any ? targets : nil
        }
    }

    /// How many targets ``stringListTargets(_:index:row:slot:table:counts:)`` deduplicates by
    /// searching them before it keeps a set.
    static var searchedTargets: Int { 32 }

    /// ``nativeCollectionTargets(_:row:slot:table:lookup:counts:)`` for the common case, names
    /// looked up in the destination's unique index of one string attribute (a package's
    /// dependencies by name), with nothing allocated but the result. The connection's
    /// ``ConnectionLookahead`` prefetched what the lookups read.
    private func stringListTargets(
        _ c: MappingPlan.Connection, index: UniqueIndex, row: Int, slot: Int, table: EntityTable,
        counts: inout ConnectionCounts
    ) -> [Int]? {
        let destination = c.destination
        return table.arena.withBytes(ArenaRef(table.values[row * table.stride + slot])) { bytes -> [Int]? in
            var targets: [Int] = []
            var seen = Set<Int>()
            var any = false
            ListCoding.forEachString(bytes) { utf8 in
                any = true
                guard let t = destination.owner(ofCell: .bytes(utf8), in: index, prefetchingRowState: false),
                    destination.isVisible(row: t)
                else {
                    counts.noteUnmatched(String(decoding: utf8, as: UTF8.self))
                    return
                }
                // A list names a few destinations, where a search beats a set; a long one (any
                // length can be stored) gets the set, so that it costs no more than linear time.
                if targets.count < Self.searchedTargets {
                    if !targets.contains(t) { targets.append(t) }
                } else {
                    if seen.isEmpty { seen = Set(targets) }
                    if seen.insert(t).inserted { targets.append(t) }
                }
            }
            return any ? targets : nil
        }
    }

    /// Empties the connection's relationship of `row`; returns whether it held anything.
    private func clear(_ c: MappingPlan.Connection, row: Int, _ table: EntityTable) -> Bool {
        clear(c.relationship, row: row, table)
    }

    /// Empties `relationship` of `row`; returns whether it held anything.
    private func clear(_ relationship: ResolvedRelationship, row: Int, _ table: EntityTable) -> Bool {
        if relationship.isToMany {
            guard !table.toManyDestinations(row: row, relationship).isEmpty else { return false }
            table.setToMany(row: row, relationship, to: [])
            return true
        }
        guard !table.toOneIsEmpty(row: row, relationship) else { return false }
        table.setToOne(row: row, relationship, to: nil)
        return true
    }

    /// The visible destination rows by their connection attributes (a connection without a
    /// unique index on them), built once per connection and run.
    private func destinations(_ c: MappingPlan.Connection) -> [IdentityKey: [Int32]] {
        var result: [IdentityKey: [Int32]] = [:]
        let d = c.destination
        for row in 0..<d.rowCount where d.isVisible(row: row) {
            guard !c.destinationSlots.contains(where: { d.isNull(row: row, slot: $0) }) else { continue }
            result[withRowCells(d, row: row, slots: c.destinationSlots) { IdentityKey($0) }, default: []].append(
                Int32(row))
        }
        return result
    }

    /// Removes the plan's new objects that fail insert validation.
    private func discardInvalid(_ plan: MappingPlan) -> [DiscardedObject] {
        let table = plan.table
        let rows = plan.insertedRows.filter { table.isVisible(row: Int($0.row)) && table.isInserted(row: Int($0.row)) }
        guard !rows.isEmpty else { return [] }
        var reasons: [Int: [String]] = [:]
        for (r, _) in rows {
            let row = Int(r)
            for w in 0..<table.maskWords where table.nulls[row * table.maskWords + w] & table.requiredMask[w] != 0 {
                let missing = table.nulls[row * table.maskWords + w] & table.requiredMask[w]
                for bit in 0..<64 where missing & (1 << UInt64(bit)) != 0 {
                    reasons[row, default: []].append(
                        "\(table.entity.attributes[w * 64 + bit].name): a required attribute has no value")
                }
            }
        }
        var pending = context.tables.map { _ in PendingRows(inserts: [], updates: [], deletes: []) }
        pending[table.entityIndex].inserts = rows.map { Int32($0.row) }
        for f in context.validatorFailures(pending) + context.hookFailures(pending) {
            guard let row = table.row(ofSerial: f.objectID.serial) else { continue }
            reasons[row, default: []].append(
                f.description.split(separator: ": ", maxSplits: 1).last.map(String.init) ?? f.reason)
        }
        var result: [DiscardedObject] = []
        for (r, source) in rows {
            guard let why = reasons[Int(r)] else { continue }
            result.append(DiscardedObject(sourceIndex: Int(source), entity: table.entity.name, reasons: why))
            context.deleteApplyingRules(table, row: Int(r))
            plan.counts.discarded += 1
            plan.forget(Int(r))
        }
        return result
    }
}

@inline(__always)
private func joined(_ prefix: String, _ keyPath: String) -> String {
    prefix.isEmpty ? keyPath : prefix + "." + keyPath
}

/// Calls `body` with the cells of `values` (none null).
private func withTransformedCells<R>(_ values: [Transformed], _ body: ([RawCell]) -> R) -> R {
    func step(_ i: Int, _ acc: [RawCell]) -> R {
        if i == values.count { return body(acc) }
        return values[i].withCell { cell in step(i + 1, cell.map { acc + [$0] } ?? acc) }
    }
    return step(0, [])
}

/// Calls `body` with the stored cells of `slots` of `row` (none null).
func withRowCells<R>(_ table: EntityTable, row: Int, slots: [Int], _ body: ([RawCell]) -> R) -> R {
    withCells(slots.compactMap { table.value(row: row, slot: $0) }, body)
}
