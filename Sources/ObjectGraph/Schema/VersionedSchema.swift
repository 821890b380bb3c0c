/// One version of an application's model: an identifier and the entity types of that version.
///
/// Keep every version the stores in the field may hold in code, each in its own namespace, so
/// that a migration can read the old objects with the old classes. An entity keeps its name
/// across versions (the class's name), whatever namespace holds it:
///
/// ```swift
/// enum PackagesV1: VersionedSchema {
///     static let versionIdentifier = "1"
///     static var models: [any Entity.Type] { [DebianPackage.self] }
///
///     @Entity final class DebianPackage {
///         var name = ""
///         var installedSize = 0          // kilobytes
///     }
/// }
///
/// enum PackagesV2: VersionedSchema {
///     static let versionIdentifier = "2"
///     static var models: [any Entity.Type] { [DebianPackage.self] }
///
///     @Entity final class DebianPackage {
///         var name = ""
///         var installedSize = "0 kB"     // a different type: needs a custom stage
///     }
/// }
/// ```
///
/// The journal records the version identifier with the schema, so that opening with a
/// ``SchemaMigrationPlan`` knows which version a store holds (`Docs/Migrations.md`).
public protocol VersionedSchema: Sendable {
    /// The version's identifier, unique within a plan: "1", "2024-06", "1.4.0". The journal
    /// records it; compare versions by their order in ``SchemaMigrationPlan/schemas``, never
    /// by this string.
    static var versionIdentifier: String { get }
    /// The entity types of this version.
    static var models: [any Entity.Type] { get }
}

extension Schema {
    /// The schema of one version of a model: its entity types, and its identifier, which the
    /// journal records with the schema.
    ///
    /// ```swift
    /// let store = try ObjectStore.open(at: url, schema: try Schema(versioned: PackagesV2.self))
    /// ```
    ///
    /// - Throws: ``SchemaError`` as `Schema(_:)` does, or for an empty identifier.
    public init(versioned version: any VersionedSchema.Type) throws(SchemaError) {
        guard !version.versionIdentifier.isEmpty else {
            throw SchemaError(message: "\(version) has an empty version identifier")
        }
        try self.init(version.models)
        versionIdentifier = version.versionIdentifier
    }
}

/// The versions a model went through, oldest first, and the stages that migrate a store from
/// each version to the next (SwiftData's `SchemaMigrationPlan`).
///
/// ```swift
/// enum PackagesMigrationPlan: SchemaMigrationPlan {
///     static var schemas: [any VersionedSchema.Type] { [PackagesV1.self, PackagesV2.self] }
///     static var stages: [MigrationStage] {
///         [
///             .custom(fromVersion: PackagesV1.self, toVersion: PackagesV2.self) { migration in
///                 for old in try migration.old.fetch(FetchDescriptor<PackagesV1.DebianPackage>()) {
///                     let new = try migration.counterpart(of: old, as: PackagesV2.DebianPackage.self)
///                     new?.installedSize = "\(old.installedSize) kB"
///                 }
///             }
///         ]
///     }
/// }
///
/// let store = try ObjectStore.open(at: url, migrationPlan: PackagesMigrationPlan.self)
/// ```
///
/// A store at an earlier version is migrated at open, stage after stage, up to the last
/// version of ``schemas``. Consecutive versions without a listed stage are migrated as a
/// lightweight stage would be.
public protocol SchemaMigrationPlan: Sendable {
    /// Every version a store may hold, oldest first; the last one is the version the code uses.
    static var schemas: [any VersionedSchema.Type] { get }
    /// The stages between consecutive versions of ``schemas``, one at most per pair.
    static var stages: [MigrationStage] { get }
}

/// How a store moves from one version of its model to the next.
///
/// - A **lightweight** stage is what `ObjectStore.open` does for any compatible change:
///   added attributes take their default, removed ones are dropped, renames map through
///   `@Attribute(originalName:)`, integers widen, added entities start empty. It costs nothing
///   at open: nothing is rewritten.
/// - A **custom** stage runs your code with the old objects and the new ones
///   (``Migration``): it can change an attribute's type, split or merge attributes, fill a new
///   attribute from old values, turn a to-one into a to-many, resolve duplicates of a new
///   unique constraint, delete objects, or move objects to a renamed entity. The result is
///   written as a new base of the journal, atomically.
public struct MigrationStage: Sendable {
    /// What a stage is.
    enum Kind: Sendable {
        case lightweight
        case custom(@Sendable (Migration) throws -> Void)
    }

    /// The version the stage starts from.
    public let fromVersion: any VersionedSchema.Type
    /// The version the stage ends at.
    public let toVersion: any VersionedSchema.Type
    let kind: Kind

    /// Whether the stage runs code (a custom stage) rather than mapping by names.
    public var isCustom: Bool {
        if case .custom = kind { return true }
        return false
    }

    /// A stage that maps the stored objects onto the new model by names, as any open does.
    ///
    /// - Parameters:
    ///   - fromVersion: the version the stage starts from.
    ///   - toVersion: the version after it in the plan's ``SchemaMigrationPlan/schemas``.
    public static func lightweight(
        fromVersion: any VersionedSchema.Type, toVersion: any VersionedSchema.Type
    ) -> MigrationStage {
        MigrationStage(fromVersion: fromVersion, toVersion: toVersion, kind: .lightweight)
    }

    /// A stage that runs `migrate` with the store's objects at `fromVersion`
    /// (``Migration/old``) and their copies at `toVersion` (``Migration/new``).
    ///
    /// The new context starts as a lightweight stage would leave it: every object of an
    /// entity that still exists, with the same ``ObjectID``, its attributes copied where the
    /// name (or `@Attribute(originalName:)`) and a compatible type match, and the rest at their
    /// defaults. `migrate` changes the new objects (inserts, deletes, sets), reading the old
    /// ones. What it leaves pending in ``Migration/new`` is saved after it returns; an error
    /// it throws, or a failed validation, abandons the migration with nothing written.
    ///
    /// - Parameters:
    ///   - fromVersion: the version the stage starts from.
    ///   - toVersion: the version after it in the plan's ``SchemaMigrationPlan/schemas``.
    ///   - migrate: the stage's code; it runs once, on the opening thread.
    public static func custom(
        fromVersion: any VersionedSchema.Type, toVersion: any VersionedSchema.Type,
        migrate: @escaping @Sendable (Migration) throws -> Void
    ) -> MigrationStage {
        MigrationStage(fromVersion: fromVersion, toVersion: toVersion, kind: .custom(migrate))
    }
}

/// What a custom ``MigrationStage`` works with: the store's objects at the stage's
/// `fromVersion` and their copies at its `toVersion`.
///
/// ```swift
/// .custom(fromVersion: V1.self, toVersion: V2.self) { migration in
///     for old in try migration.old.fetch(FetchDescriptor<V1.Person>()) {
///         guard let new = try migration.counterpart(of: old, as: V2.Person.self) else { continue }
///         let parts = old.fullName.split(separator: " ", maxSplits: 1)
///         new.firstName = parts.first.map(String.init) ?? ""
///         new.lastName = parts.count > 1 ? String(parts[1]) : ""
///     }
/// }
/// ```
///
/// Both contexts live in memory only. Changes made to ``old`` are discarded; ``new`` is
/// saved (validated, its hooks run) once the stage returns, and becomes the next stage's old
/// context or the store's new base.
public final class Migration {
    /// The objects as the store holds them, with the classes of the stage's `fromVersion`.
    public let old: ModelContext
    /// The objects of the stage's `toVersion`: every old object of an entity that still
    /// exists, with the same ``ObjectID``, its compatible attributes copied.
    public let new: ModelContext
    /// The version identifiers the stage goes from and to.
    public let fromVersion: String, toVersion: String

    init(old: ModelContext, new: ModelContext, fromVersion: String, toVersion: String) {
        self.old = old
        self.new = new
        self.fromVersion = fromVersion
        self.toVersion = toVersion
    }

    /// The object of ``new`` with the same ``ObjectID`` as `object` (an object of ``old``), as
    /// `type`; nil when there is none (its entity was removed or renamed, or the stage deleted
    /// it).
    ///
    /// - Throws: ``ObjectGraphError`` when `object` has no ID (it is not in a context) or the
    ///   object with that ID is not a `T`.
    public func counterpart<T: Entity>(of object: some Entity, as type: T.Type) throws(ObjectGraphError) -> T? {
        guard let id = object.objectID else {
            throw ObjectGraphError(.notInContext, "\(object) is not in a context: it has no ObjectID")
        }
        return try counterpart(id, in: new, as: type)
    }

    /// The object of ``old`` with the same ``ObjectID`` as `object` (an object of ``new``), as
    /// `type`; nil when there is none (`object` was inserted by the stage).
    ///
    /// - Throws: ``ObjectGraphError`` as ``counterpart(of:as:)``.
    public func original<T: Entity>(of object: some Entity, as type: T.Type) throws(ObjectGraphError) -> T? {
        guard let id = object.objectID else {
            throw ObjectGraphError(.notInContext, "\(object) is not in a context: it has no ObjectID")
        }
        return try counterpart(id, in: old, as: type)
    }

    private func counterpart<T: Entity>(
        _ id: ObjectID, in context: ModelContext, as type: T.Type
    ) throws(ObjectGraphError) -> T? {
        guard let found = context.object(with: id) else { return nil }
        guard let typed = found as? T else {
            throw ObjectGraphError(
                .typeMismatch,
                "\(id) is a \(Swift.type(of: found)) in the \(context === old ? "old" : "new") model, not a \(T.self)",
                entity: id.entityName)
        }
        return typed
    }
}
