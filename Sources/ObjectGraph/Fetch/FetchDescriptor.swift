public import Foundation

/// What to fetch: the objects of one entity that match a predicate, in a sort order, with an
/// optional window (SwiftData's `FetchDescriptor`, Core Data's `NSFetchRequest`).
///
/// The steps apply in a fixed order: filter by ``predicate``, sort by ``sortBy``, skip
/// ``fetchOffset`` objects, then keep at most ``fetchLimit``.
///
/// ```swift
/// var adults = FetchDescriptor<Person>(
///     predicate: #Predicate { $0.age >= 18 },
///     sortBy: [SortDescriptor(\.age, order: .reverse)])
/// adults.fetchLimit = 10
/// let oldestTen = try context.fetch(adults)
/// ```
///
/// Predicates of the common shapes — an attribute compared with a constant (`==`, `!=`, `<`,
/// `<=`, `>`, `>=`), a `Bool` attribute, an optional attribute compared with `nil`, and `&&`,
/// `||`, `!` of those — are evaluated directly on the context's compact storage without
/// creating object instances. Any other predicate is evaluated by Foundation on each object;
/// the results are the same either way.
///
/// With a secondary index on the compared attributes (`#Index`, ``IndexDescription``), the
/// comparisons joined by `&&` are looked up in the index, and a fetch with a ``fetchLimit``
/// sorted first by an indexed number or date reads the index in order; the results are the
/// same as a scan's (Docs/Indexes.md).
public struct FetchDescriptor<T: Entity>: Sendable {
    /// The condition an object must meet; `nil` matches every object.
    public var predicate: Predicate<T>?
    /// The sort order, most significant first. Objects that compare equal under every
    /// descriptor keep their storage order. Empty: storage order (stable between fetches while
    /// nothing is inserted or deleted, otherwise unspecified).
    public var sortBy: [SortDescriptor<T>]
    /// The maximum number of objects to return (after ``fetchOffset``); `nil` for no limit.
    public var fetchLimit: Int?
    /// The number of matching, sorted objects to skip; `nil` or 0 skips none.
    public var fetchOffset: Int?
    /// Whether the fetch sees the pending (unsaved) changes. Default `true`.
    ///
    /// `true`: objects inserted since the last save are included, objects deleted since the
    /// last save are excluded, and the predicate and sort see current values.
    /// `false` (Core Data's `includesPendingChanges = NO`): the fetch sees the last saved state:
    /// pending inserts are excluded, pending deletes are included, and the predicate and sort
    /// see each object's committed values. The returned objects are still the context's
    /// instances, so reading them shows their current values.
    public var includePendingChanges: Bool = true

    /// Creates a fetch descriptor.
    ///
    /// - Parameters:
    ///   - predicate: The condition objects must meet; `nil` for all objects.
    ///   - sortBy: The sort order, most significant first.
    public init(predicate: Predicate<T>? = nil, sortBy: [SortDescriptor<T>] = []) {
        self.predicate = predicate
        self.sortBy = sortBy
    }

    /// Internal switch for tests: `false` forces Foundation's evaluation of every predicate and
    /// sort key, so the direct storage paths can be checked against it.
    var allowsStorageEvaluation = true

    /// Internal switch for tests: `false` keeps the fetch from using secondary indexes, so the
    /// indexed paths can be checked against the scan.
    var allowsIndexes = true
}
