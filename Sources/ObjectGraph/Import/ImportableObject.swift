/// An entity that can be created from an external source (CoreStore's `ImportableObject`).
///
/// ```swift
/// extension Tag: ImportableObject {
///     typealias ImportSource = [String: Any]
///     func didInsert(from source: ImportSource, in context: ModelContext) throws {
///         label = source["label"] as? String ?? ""
///     }
/// }
/// let tags = try context.importObjects(Tag.self, sourceArray: json)
/// ```
///
/// The `should…` hooks and `uniqueID(from:in:)` are **static**: they decide before any object
/// exists. An instance method of the same name is never called (the CoreStore trap), so the
/// `@Entity` macro rejects one.
public protocol ImportableObject: Entity {
    /// What one object is imported from: a JSON dictionary, a struct, a row.
    associatedtype ImportSource

    /// Whether to create an object from `source`. Default: `true`.
    static func shouldInsert(from source: ImportSource, in context: ModelContext) -> Bool

    /// Fills a newly inserted object from `source`. Throwing stops the import, which is then
    /// undone as a whole.
    func didInsert(from source: ImportSource, in context: ModelContext) throws
}

extension ImportableObject {
    public static func shouldInsert(from source: ImportSource, in context: ModelContext) -> Bool { true }
}

/// An entity imported by a unique ID, updating the existing object with that ID or inserting a
/// new one (CoreStore's `ImportableUniqueObject`). The ID attribute must be a unique constraint
/// (`@Attribute(.unique)`), so that finding the existing object is O(1).
///
/// ```swift
/// extension Person: ImportableUniqueObject {
///     typealias ImportSource = PersonRecord
///     static var uniqueIDKeyPath: ReferenceWritableKeyPath<Person, Int64> { \.id }
///     static func uniqueID(from source: PersonRecord, in context: ModelContext) throws -> Int64? { source.id }
///     func update(from source: PersonRecord, in context: ModelContext) throws {
///         name = source.name
///     }
/// }
/// let people = try context.importUniqueObjects(Person.self, sourceArray: records)
/// ```
public protocol ImportableUniqueObject: ImportableObject {
    /// The type of the unique ID.
    associatedtype UniqueIDType: PrimitiveAttribute & Hashable

    /// The attribute holding the unique ID.
    static var uniqueIDKeyPath: ReferenceWritableKeyPath<Self, UniqueIDType> { get }

    /// The unique ID `source` describes, or `nil` to skip the source. Throwing stops the
    /// import before anything is created.
    static func uniqueID(from source: ImportSource, in context: ModelContext) throws -> UniqueIDType?

    /// Whether to update the existing object with this ID from `source`. Default: `true`.
    /// When `false`, the object is skipped and not returned.
    static func shouldUpdate(from source: ImportSource, in context: ModelContext) -> Bool

    /// Updates an existing object (and, by default, a new one) from `source`.
    func update(from source: ImportSource, in context: ModelContext) throws
}

extension ImportableUniqueObject {
    public static func shouldUpdate(from source: ImportSource, in context: ModelContext) -> Bool { true }

    /// Default: as ``shouldUpdate(from:in:)``.
    public static func shouldInsert(from source: ImportSource, in context: ModelContext) -> Bool {
        shouldUpdate(from: source, in: context)
    }

    /// Default: calls ``update(from:in:)``. The unique ID is already set when this runs.
    public func didInsert(from source: ImportSource, in context: ModelContext) throws {
        try update(from: source, in: context)
    }
}

/// An import that failed, naming the source that failed. The import's changes were undone;
/// changes made before it in the same transaction stay.
public struct ImportError: Error, CustomStringConvertible {
    /// The position of the failing source in the source sequence.
    public let sourceIndex: Int
    /// The error the hook threw.
    public let underlying: any Error

    /// Creates an import error for the source at `sourceIndex`.
    public init(sourceIndex: Int, underlying: any Error) {
        self.sourceIndex = sourceIndex
        self.underlying = underlying
    }

    public var description: String { "import failed at source \(sourceIndex): \(underlying)" }
}
