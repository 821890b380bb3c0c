public import Foundation

/// One sync of a daemon's mirror with its API: the objects the sync's mappings create,
/// update or find unchanged are marked *not deprecated*; when the sync's body returns, the
/// unmarked objects of the sync's entities are swept (DKDBManager's deprecated-entity
/// removal), and everything is saved as one journal record.
///
/// Created by ``ModelContext/sync(_:sweepLimit:progress:_:)``; see `Docs/Sync.md` for every rule.
///
/// ```swift
/// let result = try context.sync([Package.self, Maintainer.self]) { sync in
///     try sync.map(maintainersJSON, with: maintainers)
///     try sync.map(packagesJSON, with: packages)
/// }
/// print(result.counts["Package"]?.swept ?? 0)   // the packages the API no longer lists
/// ```
///
/// When the package records carry their maintainer's fields, one document and one run do: the
/// packages' mapping maps the maintainer from each record (``EntityMapping/map(to:with:)``), and
/// the sync marks both.
public final class SyncOperation {
    /// The context the sync works on.
    public let context: ModelContext
    /// Per table (by schema index): whether the sync sweeps it.
    let isSwept: [Bool]
    /// Per table: one bit per row, set for the objects marked not deprecated.
    var marks: [[UInt64]]
    /// Per table: the scope predicate, when the sync is scoped for that entity.
    var scopes: [((any Entity) throws -> Bool)?]
    /// Per table: whether an empty sync may sweep every object in scope.
    var emptyAllowed: [Bool]
    /// What the mappings of the sync reported, per entity name.
    var mapping: [String: MappingCounts] = [:]
    var discarded: [DiscardedObject] = []
    /// The sync's progress reports (operation `sync`, unit `records`).
    var progress: _WorkReporter
    /// The top-level sources the sync's finished mapping runs mapped.
    var recordsMapped = 0

    init(context: ModelContext, entities: [Int], progress: ProgressHandler? = nil) {
        self.context = context
        self.progress = _WorkReporter(progress, .sync, unit: .records, total: nil)
        let n = context.tables.count
        var isSwept = [Bool](repeating: false, count: n)
        for e in entities { isSwept[e] = true }
        self.isSwept = isSwept
        marks = context.tables.map { [UInt64](repeating: 0, count: $0.rowCount / 64 + 1) }
        scopes = [((any Entity) throws -> Bool)?](repeating: nil, count: n)
        emptyAllowed = [Bool](repeating: false, count: n)
    }

    // MARK: Mapping inside the sync

    /// Maps a JSON document as ``ModelContext/map(_:with:progress:)-(Data,_,_)`` does, and
    /// marks every object the run inserted, updated, found unchanged or skipped as unmodified.
    /// The run reports its progress to the sync's handler, counting the records of every run of
    /// the sync, and checks whether the sync's task was cancelled.
    ///
    /// A mapping that throws (`CancellationError` included) makes the whole sync throw: nothing
    /// is swept and the context is left as it was before the sync.
    @discardableResult
    public func map<T: Entity>(_ json: Data, with mapping: EntityMapping<T>) throws -> MappingResult<T> {
        try record(context.map(json, with: mapping))
    }

    /// Maps Foundation values, marking as ``map(_:with:)-(Data,_)`` does.
    @discardableResult
    public func map<T: Entity>(jsonObject: Any, with mapping: EntityMapping<T>) throws -> MappingResult<T> {
        try record(context.map(jsonObject: jsonObject, with: mapping))
    }

    /// Maps an array of dictionaries, marking as ``map(_:with:)-(Data,_)`` does.
    @discardableResult
    public func map<T: Entity>(_ sources: [[String: Any]], with mapping: EntityMapping<T>) throws -> MappingResult<T> {
        try record(context.map(sources, with: mapping))
    }

    private func record<T: Entity>(_ result: MappingResult<T>) -> MappingResult<T> {
        for (name, counts) in result.countsByEntity { mapping[name] = (mapping[name] ?? MappingCounts()) + counts }
        discarded += result.discarded
        return result
    }

    /// Marks `object` not deprecated, as if a mapping had found it (for objects a daemon keeps
    /// by its own logic). Marks forward along relationships when the sync ends.
    public func markNotDeprecated(_ object: some Entity) {
        guard let table = context.owns(object._backing) else { return }
        mark(table.entityIndex, row: object._backing.rowIndex)
    }

    /// Limits the sweep of `type` to the objects matching `predicate` (a page, a parent, a
    /// region): objects outside the scope are never swept, marked or not.
    public func scope<T: Entity>(_ type: T.Type, to predicate: Predicate<T>) throws(ObjectGraphError) {
        let table = try context.table(for: type)
        scopes[table.entityIndex] = { object in
            guard let object = object as? T else { return false }
            return try predicate.evaluate(object)
        }
    }

    /// Lets a sync that marked no object of `type` sweep every object of `type` in scope.
    /// Without it such a sync refuses: an empty response is more often a bug than a truth.
    public func allowEmptySync(of type: any Entity.Type) {
        guard let index = context.schema.indexByType[ObjectIdentifier(type)] else { return }
        emptyAllowed[index] = true
    }

    /// Abandons the sync: nothing is swept or saved, every change it made is undone, and
    /// ``ModelContext/sync(_:sweepLimit:progress:_:)`` throws an ``ObjectGraphError`` with code `cancelled`.
    public func cancel() throws -> Never {
        throw ObjectGraphError(.cancelled, "the sync was cancelled")
    }

    // MARK: Progress

    /// Reports `completed` records mapped out of `total` known so far (those of the finished
    /// runs and of the run going on).
    func reportMapped(_ completed: Int, total: Int) {
        progress.total = total
        progress.report(completed)
    }

    /// Objects the sweep and the invalid-object checks examined so far.
    private var examined = 0

    /// Counts one object examined after the mappings; every 4,096 of them, throws when the
    /// sync's task was cancelled.
    @inline(__always)
    func examine() throws(CancellationError) {
        examined &+= 1
        if examined & (_WorkReporter.itemStride - 1) == 0 { try progress.checkCancellation() }
    }

    // MARK: Marks

    @inline(__always)
    func mark(_ table: Int, row: Int) {
        let w = row >> 6
        if w >= marks[table].count {
            marks[table].append(contentsOf: repeatElement(0, count: w + 1 - marks[table].count))
        }
        marks[table][w] |= 1 << UInt64(row & 63)
    }

    @inline(__always)
    func isMarked(_ table: Int, row: Int) -> Bool {
        let w = row >> 6
        return w < marks[table].count && marks[table][w] & (1 << UInt64(row & 63)) != 0
    }

    @inline(__always)
    func unmark(_ table: Int, row: Int) {
        let w = row >> 6
        if w < marks[table].count { marks[table][w] &= ~(1 << UInt64(row & 63)) }
    }

    /// Marks the rows a finished mapping run touched (every row with an outcome).
    func noteMapped(_ plans: [MappingPlan]) {
        for plan in plans {
            let t = plan.table.entityIndex
            for (row, outcome) in plan.outcome.enumerated() where outcome != 0 { mark(t, row: row) }
        }
    }
}

/// An entity whose objects forward their *not deprecated* mark to related objects in a sync
/// sync (DKDBManager's `saveEntityAsNotDeprecated` override): a parent that arrives
/// unchanged keeps its children too. Without it, marks follow the relationships whose delete
/// rule is `cascade`.
public protocol SyncMarkForwarding: Entity {
    /// The relationships along which this entity's objects forward their mark.
    static var relationshipsForwardingSyncMarks: [String] { get }
}

/// An entity that can tell, in a sync, that one of its objects is invalid and must go
/// (DKDBManager's `deleteIfInvalid`): invalid objects are deleted and not marked, and after the
/// sweep the check runs again until nothing changes (an object whose required parent was swept).
public protocol SyncValidated: Entity {
    /// Whether this object is invalid and is to be deleted by the sync.
    var isInvalidForSync: Bool { get }
}

/// Why a sync refused to sweep. Nothing was swept or saved; the context is as it was
/// before the sync.
public struct SyncError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of refusal.
    public enum Code: String, Sendable, Hashable {
        /// The sync marked no object of an entity that has objects in scope, and
        /// ``SyncOperation/allowEmptySync(of:)`` was not called for it.
        case emptySync
        /// The sweep would remove more objects than the sync's sweep limit allows.
        case sweepLimitExceeded
    }

    /// The kind of refusal.
    public let code: Code
    /// The entity concerned.
    public let entity: String
    /// How many objects the sweep would have removed.
    public let wouldRemove: Int
    /// What happened, in words.
    public let message: String

    public var description: String { message }
}

extension SyncError.Code {
    /// Whether `error` is a ``SyncError`` with this code (`catch SyncError.Code.emptySync`).
    public static func ~= (code: Self, error: any Error) -> Bool {
        (error as? SyncError)?.code == code
    }
}

/// The most a sync's sweep may remove per entity before it refuses.
///
/// A sync given no limit uses ``default``: its sweep may remove at most half of each entity's
/// saved objects in scope. Objects the sync itself inserted are never swept, and do not count.
///
/// ```swift
/// try context.sync([Package.self]) { ... }                           // at most half
/// try context.sync([Package.self], sweepLimit: .count(100)) { ... }  // at most 100
/// try context.sync([Package.self], sweepLimit: .unlimited) { ... }   // whatever the API dropped
/// ```
public enum SweepLimit: Sendable, Hashable {
    /// At most this many objects per entity.
    case count(Int)
    /// At most this fraction (0…1, clamped; NaN counts as 0) of the entity's saved objects in
    /// scope, rounded down.
    case fraction(Double)
    /// No limit: the sweep removes every unmarked object in scope.
    case unlimited

    /// The limit of a sync given none: `.fraction(0.5)`, at most half of an entity's saved
    /// objects in scope. Removing more than that is far more often a truncated or misread
    /// response than the truth.
    public static let `default` = SweepLimit.fraction(0.5)

    /// How many objects the sweep may remove out of `saved` saved objects in scope; nil for no limit.
    func allowed(saved: Int) -> Int? {
        switch self {
        case .count(let n): n
        case .fraction(let f): f.isNaN ? 0 : Int((Double(saved) * min(max(f, 0), 1)).rounded(.down))
        case .unlimited: nil
        }
    }
}

/// What a sync did to the objects of one entity.
public struct SyncCounts: Sendable, Hashable, CustomStringConvertible {
    /// Objects the sync's mappings created.
    public var inserted = 0
    /// Existing objects the mappings changed.
    public var updated = 0
    /// Existing objects the mappings found unchanged, or skipped as unmodified.
    public var unchanged = 0
    /// Objects deleted by a mapping's deletion predicate (tombstones).
    public var tombstoned = 0
    /// Objects swept: in scope and not marked not deprecated.
    public var swept = 0
    /// Objects deleted because they were invalid (``SyncValidated``).
    public var invalid = 0
    /// New objects the mappings discarded for failing insert validation.
    public var discarded = 0
    /// Objects with a connection key that named no destination
    /// (``MappingCounts/unresolvedConnections``), summed over the sync's mappings.
    public var unresolvedConnections = 0
    /// Per connection, by relationship name: what the sync's mappings' connections found
    /// (``MappingCounts/connections``).
    public var connections: [String: ConnectionCounts] = [:]

    public init() {}

    public var description: String {
        "inserted \(inserted), updated \(updated), unchanged \(unchanged), tombstoned \(tombstoned), swept \(swept), invalid \(invalid), discarded \(discarded)"
            + (unresolvedConnections > 0 ? ", unresolved connections \(unresolvedConnections)" : "")
    }
}

/// What a sync did, per entity name (every entity of the sync, and any other entity
/// a mapping of the sync touched).
public struct SyncResult: Sendable {
    /// Per entity name.
    public let counts: [String: SyncCounts]
    /// New objects the mappings discarded, with their reasons.
    public let discarded: [DiscardedObject]
}
