import Foundation

/// A mapping definition resolved against one context for one run: slots, indexes, the run's
/// identification table and what the run did, per entity mapping.
final class MappingPlan {
    /// One attribute mapping, with what the hot path needs of its attribute read out once (a
    /// class: iterating a struct of this size copied, retained and released every field per
    /// record, a fifth of a run's time in perf).
    final class AttributeStep {
        let keys: [MappingKey]
        let keyPath: String
        let slot: Int
        let attribute: AttributeDescription
        /// Where this step's keys start in the plan's `hints`.
        let hintBase: Int
        let type: AttributeType
        let isOptional: Bool
        let isCodable: Bool
        /// Non-optional without a default: a new object must get a value from the source.
        let needsValue: Bool
        let rawValueCheck: AttributeValidator?

        init(keys: [MappingKey], keyPath: String, slot: Int, attribute: AttributeDescription, hintBase: Int) {
            self.keys = keys
            self.keyPath = keyPath
            self.slot = slot
            self.attribute = attribute
            self.hintBase = hintBase
            type = attribute.type
            isOptional = attribute.isOptional
            isCodable = attribute.valueKind == .codable
            needsValue = !attribute.isOptional && attribute.defaultValue == nil
            rawValueCheck = attribute.rawValueCheck
        }
    }
    struct RelationshipStep {
        let keys: [MappingKey]
        let keyPath: String
        let relationship: ResolvedRelationship
        let plan: MappingPlan
        let hintBase: Int
        /// Whether the nested mapping maps the source object itself (a `nil` key path):
        /// `keys` is then empty.
        var isFromOwnFields = false
    }
    struct Connection {
        let relationship: ResolvedRelationship
        let mySlots: [Int]
        let destination: EntityTable
        let destinationSlots: [Int]
        /// The destination's unique index on exactly `destinationSlots`, in its slot order.
        let index: UniqueIndex?
        /// Whether this object's one connection attribute holds a collection (a native list,
        /// ``AttributeType/stringList`` or ``AttributeType/intList``, or a `Codable` array
        /// stored as JSON) whose elements each name a destination (RestKit's connection by a
        /// collection attribute): a to-many takes every match, in the array's order.
        var isCollection = false
    }

    let definition: MappingDefinition
    let table: EntityTable
    let attributes: [AttributeStep]
    private(set) var relationships: [RelationshipStep] = []
    /// Whether a relationship step maps the source object itself: those are mapped for an
    /// object skipped as unmodified too.
    private(set) var mapsFromOwnFields = false
    private(set) var connections: [Connection] = []
    /// Positions in `attributes` of the identification attributes, in the index's slot order
    /// when `index` is set.
    let identification: [Int]
    /// The unique index whose keys are exactly the identification attributes, if any.
    let index: UniqueIndex?
    /// Position in `attributes` of the modification attribute.
    let modification: Int?
    /// The positions in `attributes` read before the lookup (identification and modification),
    /// and the others, read only for a source that is mapped.
    private(set) var earlySteps: [Int] = []
    private(set) var lateSteps: [Int] = []
    let transformer: ValueTransformer
    // Read and written per record: without `@exclusivity(unchecked)` each access paid the
    // dynamic exclusivity check (6% of a run in perf, with its thread-local lookups).
    @exclusivity(unchecked) var hints: [Int]

    // What the run did.
    /// Per row: 0 untouched, else an ``Outcome``.
    @exclusivity(unchecked) var outcome: [UInt8] = []
    /// The rows to connect, each once: the rows mapped, and with connections the rows skipped
    /// as unmodified too (a skipped object's destinations may have appeared or come back since).
    @exclusivity(unchecked) var mappedRows: [Int32] = []
    /// The rows whose relationships the run changed (nested mappings, connections): counted as
    /// updated whatever their attributes say (``MappingRun`` drops phantom updates by the
    /// attributes' saved state only).
    var relationshipUpdates: [Int32] = []
    /// The rows this run inserted, with the top-level source that created each.
    @exclusivity(unchecked) var insertedRows: [(row: Int32, source: Int32)] = []
    @exclusivity(unchecked) var counts = MappingCounts()
    /// The row identification found last, for the guess that the next source names the next
    /// row.
    @exclusivity(unchecked) var lastFound = -2
    /// How well that guess has been doing lately: up by one for a hit, down by four for a miss
    /// (a source whose object was not at the guessed row, or no guess), within 0...32. A run
    /// prefetches the identification's index lines for the sources ahead only while it is low
    /// (``IdentificationLookahead``).
    @exclusivity(unchecked) var guessScore = 0
    /// Identification without a unique index: key → row, built on first use.
    var identities: [IdentityKey: Int32]?

    enum Outcome: UInt8 {
        case inserted = 1
        case updated, unchanged, skipped
    }

    /// Resolves `definition` against `context`'s schema, appending this plan and the plans of
    /// its nested mappings to `plans`.
    init(_ definition: MappingDefinition, context: ModelContext, plans: inout [MappingPlan]) throws(MappingError) {
        let entity = definition.entity
        // The same class, not the same description: a schema rebuilds the description of an
        // entity whose to-one is stored as links (the inverse of an ordered to-many).
        guard let table = context.table(named: entity.name),
            ObjectIdentifier(table.entity.type) == ObjectIdentifier(entity.type)
        else {
            throw MappingError(
                .unknownEntity, "\(entity.name) is not an entity of this context's schema", entity: entity.name)
        }
        self.definition = definition
        self.table = table
        var hintCount = 0
        let steps = try Self.attributeSteps(definition, hintCount: &hintCount)
        attributes = steps
        transformer = ValueTransformer(dateFormats: definition.dateFormats)
        (index, identification) = try Self.identification(definition, steps: steps, table: table)
        modification = try Self.modification(definition, steps: steps)
        let early = Set(identification + (modification.map { [$0] } ?? []))
        earlySteps = steps.indices.filter { early.contains($0) }
        lateSteps = steps.indices.filter { !early.contains($0) }
        hints = []
        plans.append(self)
        relationships = try Self.relationshipSteps(
            definition, table: table, context: context, plans: &plans, hintCount: &hintCount)
        mapsFromOwnFields = relationships.contains(where: \.isFromOwnFields)
        connections = try Self.connections(definition, table: table, context: context)
        hints = [Int](repeating: 0, count: hintCount)
    }

    /// The attribute mappings resolved to slots; each key path takes `keys.count` hints.
    private static func attributeSteps(
        _ definition: MappingDefinition, hintCount: inout Int
    ) throws(MappingError) -> [AttributeStep] {
        let entity = definition.entity
        var steps: [AttributeStep] = []
        for a in definition.attributes {
            guard let slot = entity.slot(forKey: a.attribute) else {
                throw MappingError(
                    .unknownAttribute, "\(entity.name) has no attribute '\(a.attribute)'", entity: entity.name,
                    attribute: a.attribute)
            }
            let keys = a.sourceKeyPath.split(separator: ".", omittingEmptySubsequences: false).map {
                MappingKey(String($0))
            }
            steps.append(
                AttributeStep(
                    keys: keys, keyPath: a.sourceKeyPath, slot: slot, attribute: entity.attributes[slot],
                    hintBase: hintCount))
            hintCount += keys.count
        }
        return steps
    }

    /// The identification attributes (declared, or inferred from a unique attribute) as
    /// positions in `steps`, and the unique index on exactly them if there is one (then in the
    /// index's slot order).
    private static func identification(
        _ definition: MappingDefinition, steps: [AttributeStep], table: EntityTable
    ) throws(MappingError) -> (UniqueIndex?, [Int]) {
        let entity = definition.entity
        let inferred = definition.infersIdentification ?? MappingDefaults.infersIdentification.load(ordering: .relaxed)
        let names = definition.identification ?? (inferred ? MappingDefinition.inferIdentification(of: entity) : [])
        var positions: [Int] = []
        for name in names {
            guard let p = steps.firstIndex(where: { $0.attribute.name == name }) else {
                let how = definition.identification == nil ? "inferred" : "declared"
                throw MappingError(
                    .invalidIdentification,
                    "\(entity.name) is identified by '\(name)' (\(how)), which the mapping does not map from the source; map it, identify by another attribute, or turn inference off",
                    entity: entity.name, attribute: name)
            }
            positions.append(p)
        }
        let idSlots = positions.map { steps[$0].slot }
        guard !idSlots.isEmpty,
            let index = table.indexes.uniqueIndexes.first(where: {
                Set($0.slots) == Set(idSlots) && $0.slots.count == idSlots.count
            })
        else { return (nil, positions) }
        return (index, index.slots.compactMap { s in idSlots.firstIndex(of: s).map { positions[$0] } })
    }

    /// The modification attribute's position in `steps`, if the mapping names one.
    private static func modification(
        _ definition: MappingDefinition, steps: [AttributeStep]
    ) throws(MappingError) -> Int? {
        guard let m = definition.modificationAttribute else { return nil }
        guard let p = steps.firstIndex(where: { $0.attribute.name == m }) else {
            throw MappingError(
                .invalidIdentification,
                "\(definition.entity.name)'s modification attribute '\(m)' is not mapped from the source",
                entity: definition.entity.name, attribute: m)
        }
        return p
    }

    /// The entity's relationship named `name`, or the error a mapping naming a missing one gets.
    private static func relationship(
        named name: String, of definition: MappingDefinition, table: EntityTable, context: ModelContext
    ) throws(MappingError) -> ResolvedRelationship {
        guard let rel = context.schema.relationships[table.entityIndex].first(where: { $0.name == name }) else {
            let entity = definition.entity.name
            throw MappingError(
                .unknownAttribute, "\(entity) has no relationship '\(name)'", entity: entity, attribute: name)
        }
        return rel
    }

    /// The nested mappings of relationships, each resolved to a plan of its own.
    private static func relationshipSteps(
        _ definition: MappingDefinition, table: EntityTable, context: ModelContext, plans: inout [MappingPlan],
        hintCount: inout Int
    ) throws(MappingError) -> [RelationshipStep] {
        var steps: [RelationshipStep] = []
        for r in definition.relationships {
            let rel = try relationship(named: r.relationship, of: definition, table: table, context: context)
            let keys =
                r.sourceKeyPath?.split(separator: ".", omittingEmptySubsequences: false).map {
                    MappingKey(String($0))
                } ?? []
            let nested = try MappingPlan(r.mapping, context: context, plans: &plans)
            if r.sourceKeyPath == nil && nested.identification.isEmpty {
                // Checked when the mapping was built too, unless identification was inferred
                // then and inference has been turned off since.
                let name = nested.table.entity.name
                throw MappingError(
                    .invalidIdentification,
                    "\(name), mapped from \(definition.entity.name)'s own fields into '\(r.relationship)', has no identification attributes; identify it (each run would insert a new \(name) per source)",
                    entity: name, attribute: r.relationship)
            }
            var step = RelationshipStep(
                keys: keys, keyPath: r.sourceKeyPath ?? "", relationship: rel, plan: nested, hintBase: hintCount)
            step.isFromOwnFields = r.sourceKeyPath == nil
            steps.append(step)
            hintCount += keys.count
        }
        return steps
    }

    /// The connections by attribute, each with the destination's unique index on exactly the
    /// connected attributes when there is one (both sides then in the index's slot order).
    private static func connections(
        _ definition: MappingDefinition, table: EntityTable, context: ModelContext
    ) throws(MappingError) -> [Connection] {
        let entity = definition.entity
        var connections: [Connection] = []
        for c in definition.connections {
            let rel = try relationship(named: c.relationship, of: definition, table: table, context: context)
            let destination = context.tables[rel.destination]
            var mine: [Int] = []
            var theirs: [Int] = []
            for (a, b) in c.pairs {
                guard let s = entity.slot(forKey: a), let d = destination.entity.slot(forKey: b) else {
                    throw MappingError(
                        .unknownAttribute,
                        "the connection of \(entity.name).\(c.relationship) names an unknown attribute",
                        entity: entity.name, attribute: c.relationship)
                }
                mine.append(s)
                theirs.append(d)
            }
            var index: UniqueIndex?
            if let i = destination.indexes.uniqueIndexes.first(where: {
                $0.slots.count == theirs.count && Set($0.slots) == Set(theirs)
            }) {
                // Order both sides as the index orders its keys.
                let order = i.slots.compactMap { s in theirs.firstIndex(of: s) }
                mine = order.map { mine[$0] }
                theirs = order.map { theirs[$0] }
                index = i
            }
            var connection = Connection(
                relationship: rel, mySlots: mine, destination: destination, destinationSlots: theirs, index: index)
            connection.isCollection =
                rel.isToMany && mine.count == 1
                && (table.entity.attributes[mine[0]].valueKind == .codable
                    || table.entity.attributes[mine[0]].type.isList)
                && destination.entity.attributes[theirs[0]].valueKind != .codable
                && !destination.entity.attributes[theirs[0]].type.isList
            connections.append(connection)
        }
        return connections
    }

    /// Pre-sizes the table and the identification index for `count` new objects, when the
    /// entity holds none: then most sources will be inserts, and growing the rows and the index
    /// as they come copied every row and rehashed every key several times.
    func prepare(count: Int) {
        guard table.identity.liveCount == 0, count > 0 else { return }
        table.prepareForInserts(count: count)
        outcome.reserveCapacity(table.rowCount + count)
        mappedRows.reserveCapacity(count)
        insertedRows.reserveCapacity(count)
    }

    /// Takes back the count of an object the run mapped and then deleted (a tombstone or a
    /// discarded object): `inserted`, `updated` and `unchanged` count the objects that remain,
    /// and the deletion is counted as such.
    func forget(_ row: Int) {
        guard row < outcome.count, let o = Outcome(rawValue: outcome[row]) else { return }
        counts.remove(o)
        outcome[row] = 0
    }

    /// The counts of each entity the plans map. Plans of one entity (a top-level mapping and a
    /// nested one, say) may map the same object: it counts once, with the strongest outcome
    /// (inserted, then updated, then unchanged, then skipped); the other counts add up.
    static func countsByEntity(_ plans: [MappingPlan]) -> [String: MappingCounts] {
        var byEntity: [String: MappingCounts] = [:]
        var shared: [String: [MappingPlan]] = [:]
        for plan in plans { shared[plan.table.entity.name, default: []].append(plan) }
        for (name, group) in shared {
            var total = group.reduce(MappingCounts()) { $0 + $1.counts }
            if group.count > 1 {
                total.inserted = 0
                total.updated = 0
                total.unchanged = 0
                total.skippedUnmodified = 0
                var strongest: [UInt8] = []
                for plan in group {
                    if strongest.count < plan.outcome.count {
                        strongest.append(contentsOf: repeatElement(0, count: plan.outcome.count - strongest.count))
                    }
                    // Outcome raw values rise from inserted (1) to skipped (4); 0 is none.
                    for (row, o) in plan.outcome.enumerated()
                    where o != 0 && (strongest[row] == 0 || o < strongest[row]) {
                        strongest[row] = o
                    }
                }
                for o in strongest where o != 0 { if let outcome = Outcome(rawValue: o) { total.add(outcome) } }
            }
            byEntity[name] = total
        }
        return byEntity
    }

    /// Records what happened to `row`.
    @inline(__always)
    func note(_ row: Int, _ new: Outcome) {
        if row >= outcome.count {
            outcome.append(contentsOf: repeatElement(0, count: max(row + 1, table.rowCount) - outcome.count))
        }
        let old = outcome[row]
        if old == 0 {
            outcome[row] = new.rawValue
            if new != .skipped || !connections.isEmpty { mappedRows.append(Int32(row)) }
            counts.add(new)
            return
        }
        // A second source for the same object: an unchanged or skipped object that this source
        // changes counts as updated; an inserted one stays inserted.
        guard let previous = Outcome(rawValue: old), previous != .inserted, previous != new,
            new == .updated || previous == .skipped
        else { return }
        counts.remove(previous)
        counts.add(new)
        outcome[row] = new.rawValue
        if previous == .skipped && connections.isEmpty { mappedRows.append(Int32(row)) }
    }

    /// Counts as unchanged the objects counted as updated whose saved state the run did not
    /// change after all: a document that lists one object twice with different values (the
    /// last one wins) and ends where the store already was. Their attribute changes cancelled
    /// out, and no relationship of theirs changed.
    func dropPhantomUpdates() {
        guard counts.updated > 0 else { return }
        let relationshipChanged = Set(relationshipUpdates)
        for r in mappedRows {
            let row = Int(r)
            guard row < outcome.count, outcome[row] == Outcome.updated.rawValue, !relationshipChanged.contains(r),
                table.isVisible(row: row), !table.isInserted(row: row), !table.isUpdated(row: row)
            else { continue }
            outcome[row] = Outcome.unchanged.rawValue
            counts.remove(.updated)
            counts.add(.unchanged)
        }
    }
}

/// An identity made of stored cells compared by their bytes, as unique indexes compare keys.
struct IdentityKey: Hashable {
    enum Part: Hashable {
        case fixed(UInt64)
        case bytes([UInt8])
    }
    var parts: [Part]

    init(_ cells: [RawCell]) {
        parts = cells.map { cell in
            switch cell {
            case .fixed(let bits): .fixed(bits)
            case .bytes(let b): .bytes(Array(b))
            }
        }
    }
}

/// What a run did to the objects of one entity.
public struct MappingCounts: Sendable, Hashable, CustomStringConvertible {
    /// Objects created.
    public var inserted = 0
    /// Existing objects whose values or relationships the run changed.
    public var updated = 0
    /// Existing objects the run mapped without changing anything.
    public var unchanged = 0
    /// Existing objects skipped because their modification attribute showed them up to date.
    public var skippedUnmodified = 0
    /// Objects deleted by the deletion predicate (tombstones).
    public var tombstoned = 0
    /// New objects removed because they failed insert validation.
    public var discarded = 0
    /// Objects with a connection key that named no destination, summed over the mapping's
    /// connections (an object whose list names three packages, one of them unknown, counts
    /// once). Objects that gave no key are not in it: see ``connections``.
    public var unresolvedConnections = 0
    /// Sources skipped because their identification values were missing or `null`.
    public var skippedWithoutIdentification = 0
    /// Per connection, by relationship name: objects that gave no key, and keys that named
    /// nothing (``ConnectionCounts``).
    public var connections: [String: ConnectionCounts] = [:]

    public init() {}

    mutating func add(_ o: MappingPlan.Outcome) { change(o, by: 1) }
    mutating func remove(_ o: MappingPlan.Outcome) { change(o, by: -1) }
    private mutating func change(_ o: MappingPlan.Outcome, by d: Int) {
        switch o {
        case .inserted: inserted += d
        case .updated: updated += d
        case .unchanged: unchanged += d
        case .skipped: skippedUnmodified += d
        }
    }

    static func + (a: MappingCounts, b: MappingCounts) -> MappingCounts {
        var r = a
        r.inserted += b.inserted
        r.updated += b.updated
        r.unchanged += b.unchanged
        r.skippedUnmodified += b.skippedUnmodified
        r.tombstoned += b.tombstoned
        r.discarded += b.discarded
        r.unresolvedConnections += b.unresolvedConnections
        r.skippedWithoutIdentification += b.skippedWithoutIdentification
        r.connections.merge(b.connections) { $0 + $1 }
        return r
    }

    public var description: String {
        "inserted \(inserted), updated \(updated), unchanged \(unchanged), skipped as unmodified \(skippedUnmodified), "
            + "tombstoned \(tombstoned), discarded \(discarded), unresolved connections \(unresolvedConnections)"
            + (skippedWithoutIdentification > 0
                ? ", skipped without identification \(skippedWithoutIdentification)" : "")
    }
}

/// What one connection (``EntityMapping/connect(_:by:)-(String,String)``) of a mapping run found: a missing key
/// told apart from a key that matches nothing.
///
/// ```swift
/// let r = try context.map(json, with: packages)
/// if let depends = r.counts.connections["depends"], depends.unresolved > 0 {
///     // Packages whose Depends name a package the index does not have (not those without any).
///     log.warning("\(depends.unresolved) packages name unknown dependencies: \(depends.sampleUnmatchedKeys)")
/// }
/// ```
public struct ConnectionCounts: Sendable, Hashable, CustomStringConvertible {
    /// How many of ``sampleUnmatchedKeys`` a count keeps.
    public static let sampleLimit = 10

    /// Objects connected to at least one destination.
    public var resolved = 0
    /// Objects whose connection attribute gave no key: `nil`, or an empty list. Their
    /// relationship is emptied; nothing is wrong with them.
    public var withoutKey = 0
    /// Objects with at least one key that named no destination (a list whose other keys
    /// matched counts here too).
    public var unresolved = 0
    /// Keys that named no destination: one per object for a connection by attributes, one per
    /// element for a list.
    public var unmatchedKeys = 0
    /// The first of those keys, as text (at most ``sampleLimit``), to tell a typo from a
    /// missing object.
    public var sampleUnmatchedKeys: [String] = []

    public init() {}

    /// Counts one key that named nothing.
    mutating func noteUnmatched(_ key: @autoclosure () -> String) {
        unmatchedKeys += 1
        if sampleUnmatchedKeys.count < Self.sampleLimit { sampleUnmatchedKeys.append(key()) }
    }

    static func + (a: ConnectionCounts, b: ConnectionCounts) -> ConnectionCounts {
        var r = a
        r.resolved += b.resolved
        r.withoutKey += b.withoutKey
        r.unresolved += b.unresolved
        r.unmatchedKeys += b.unmatchedKeys
        r.sampleUnmatchedKeys = Array((a.sampleUnmatchedKeys + b.sampleUnmatchedKeys).prefix(sampleLimit))
        return r
    }

    public var description: String {
        "resolved \(resolved), without a key \(withoutKey), unresolved \(unresolved) (\(unmatchedKeys) keys"
            + (sampleUnmatchedKeys.isEmpty
                ? ")"
                : ": " + sampleUnmatchedKeys.joined(separator: ", ")
                    + (unmatchedKeys > sampleUnmatchedKeys.count ? ", …)" : ")"))
    }
}
