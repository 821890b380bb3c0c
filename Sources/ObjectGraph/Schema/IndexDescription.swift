/// A non-unique (secondary) index of an entity: its objects ordered by the values of one or more
/// attributes, so that fetches comparing those attributes with constants, or sorted by them,
/// read only the objects they need instead of every object (Core Data's fetch indexes,
/// SwiftData's `#Index`).
///
/// Declared with `#Index<T>([\.a], [\.b, \.c])` inside an `@Entity` class, or in the `indexes:`
/// of a hand-written ``EntityDescription``:
///
/// ```swift
/// EntityDescription(
///     name: "Package", type: Package.self, attributes: [...],
///     indexes: [IndexDescription(["section"]), IndexDescription(["maintainer", "version"])])
/// ```
///
/// A compound index orders by its first attribute, then by the second among equal firsts, and so
/// on; it answers predicates on its leading attributes (equality on the first `k`, then
/// optionally a range on the next one). Keys may be integers, floating-point numbers, dates,
/// booleans and strings, optional or not.
///
/// An index is derived data: it is built in memory from the stored objects and never written to
/// the journal, so adding or removing an index needs no migration. Fetch results are the same
/// with or without it; only their cost changes (Docs/Indexes.md).
public struct IndexDescription: Sendable, Hashable {
    /// The attribute names the index orders by, most significant first.
    public let keys: [String]

    /// Creates an index over `keys`, most significant first.
    public init(_ keys: [String]) {
        self.keys = keys
    }

    /// `Entity(a, b)`, for messages.
    func name(in entity: String) -> String { "\(entity)(\(keys.joined(separator: ", ")))" }
}
