// The macros that turn plain Swift classes into ObjectGraph entities.

/// Turns a class into an ObjectGraph entity whose stored properties are persisted.
///
/// Every stored instance `var` of the class becomes a persisted attribute: its
/// value lives in the object's ``ObjectBacking`` rather than in the instance,
/// and the class's ``EntityDescription`` lists it. Attributes are numbered in
/// declaration order; that order, with their names and types, is the entity's
/// schema.
///
/// These members are not persisted and stay as written:
/// - computed properties and `static`/`class` properties;
/// - `lazy` properties;
/// - properties marked ``Transient()``.
///
/// The macro adds to the class:
/// - `_backing`, the ``ObjectBacking`` that holds the attribute values;
/// - `static let entityDescription`, the ``EntityDescription`` built from the attributes;
/// - `required init(_backing:)`, which the object graph uses to materialize
///   stored objects;
/// - conformance to ``Entity``.
///
/// Each attribute needs an explicit type annotation and must be declared with
/// `var`, one per declaration, without `willSet`/`didSet` observers; the macro
/// reports an error otherwise. An attribute's initializer (`= 0`) becomes its
/// default value. An optional type (`T?`, `T!`, `Optional<T>`) makes the
/// attribute optional. `@Entity` applies only to classes; they need not be
/// `final`.
///
/// ```swift
/// @Entity
/// final class Person {
///     var name: String
///     var age: Int = 0
///     var email: String?
///     @Attribute(originalName: "nick") var nickname: String?
///     @Transient var cachedGreeting: String? = nil
///     var greeting: String { "Hello, \(name)" }
///
///     init(name: String) {
///         self.name = name
///     }
/// }
/// ```
@attached(
    member, names: named(_backing), named(entityDescription), named(init(_backing:)), named(init()),
    named(hasTransientState))
@attached(memberAttribute)
@attached(extension, conformances: Entity)
public macro Entity() = #externalMacro(module: "ObjectGraphMacros", type: "EntityMacro")

/// Routes a persisted attribute's storage through slot `slot` of the entity's backing.
///
/// ``Entity()`` attaches this macro to each persisted attribute, numbering the
/// slots in declaration order; it is public only because the expansion must
/// name it. Do not write it yourself.
///
/// The attribute gets a getter and setter that read and write `_backing`, and,
/// when it has an initial value, an `init` accessor that stores that value.
///
/// ```swift
/// // `var age: Int = 0` in an @Entity class expands to:
/// var age: Int = 0 {
///     @storageRestrictions(accesses: _backing)
///     init(initialValue) { _backing.initialize(1, initialValue) }
///     get { _backing.get(1, as: Int.self) }
///     set { _backing.set(1, newValue) }
/// }
/// ```
@attached(accessor, names: named(init), named(get), named(set))
public macro _PersistedAttribute(slot: Int) =
    #externalMacro(module: "ObjectGraphMacros", type: "PersistedAttributeMacro")

/// Keeps a stored property of an entity out of the object graph.
///
/// A transient property stays an ordinary stored property of the instance: it
/// has no slot, is not part of the ``EntityDescription``, is not saved, and
/// starts from its initial value whenever an object is materialized. It
/// expands to nothing; ``Entity()`` reads it.
///
/// ```swift
/// @Entity
/// final class Document {
///     var text: String = ""
///     @Transient var renderedHTML: String? = nil
/// }
/// ```
@attached(peer)
public macro Transient() = #externalMacro(module: "ObjectGraphMacros", type: "TransientMacro")

/// Sets options on one persisted attribute of an entity.
///
/// It expands to nothing; ``Entity()`` copies the options into the attribute's
/// entry in the ``EntityDescription``.
///
/// - Parameter options: ``AttributeOption/unique`` (or `.unique(onCollision: .merge)`) makes
///   the attribute a unique key with an O(1) index.
/// - Parameter originalName: The name the attribute had in an earlier version
///   of the schema, so that stored data written under that name is read into
///   this attribute after a rename.
///
/// ```swift
/// @Entity
/// final class Person {
///     @Attribute(.unique) var email: String
///     @Attribute(originalName: "nick") var nickname: String?
/// }
/// ```
@attached(peer)
public macro Attribute(_ options: AttributeOption..., originalName: String? = nil) =
    #externalMacro(module: "ObjectGraphMacros", type: "AttributeMacro")

/// Declares a compound unique constraint: no two objects of the entity may share the values of
/// all the listed attributes (SwiftData's `#Unique`). Write it inside an `@Entity` class; each
/// array is one constraint.
///
/// ```swift
/// @Entity final class Release {
///     #Unique<Release>([\.package, \.version])
///     var package: String
///     var version: String
/// }
/// ```
///
/// - Parameters:
///   - keyPaths: One array of attribute key paths per constraint.
///   - onCollision: What a save does when two objects collide: `.fail` (default) or `.merge`.
@freestanding(declaration)
public macro Unique<T>(_ keyPaths: [PartialKeyPath<T>]..., onCollision: UniqueConstraint.CollisionPolicy = .fail) =
    #externalMacro(module: "ObjectGraphMacros", type: "UniqueMacro")

/// Declares non-unique indexes that fetches use (SwiftData's `#Index`): each array is one index,
/// ordered by its attributes, most significant first. Write it inside an `@Entity` class.
///
/// ```swift
/// @Entity final class Package {
///     #Index<Package>([\.section], [\.maintainer, \.version])
///     var section: String
///     var maintainer: String
///     var version: Int
/// }
/// ```
///
/// A fetch whose predicate compares indexed attributes with constants (`==`, `<`, `<=`, `>`,
/// `>=`, joined by `&&`; for a compound index, its leading attributes), or that is sorted by an
/// indexed number or date with a `fetchLimit`, reads the index instead of every object. Results
/// are the same as without it. Indexes live in memory only: adding or removing one needs no
/// migration (``IndexDescription``, Docs/Indexes.md).
///
/// - Parameter keyPaths: One array of attribute key paths per index.
@freestanding(declaration)
public macro Index<T>(_ keyPaths: [PartialKeyPath<T>]...) =
    #externalMacro(module: "ObjectGraphMacros", type: "IndexMacro")

/// Generates the accessors of a relationship property; `@Entity` attaches it to each
/// `@Relationship` property. Not for direct use.
@attached(accessor, names: named(init), named(get), named(set))
public macro _PersistedRelationship(index: Int) =
    #externalMacro(module: "ObjectGraphMacros", type: "PersistedRelationshipMacro")

/// Declares a relationship of an `@Entity` class: `T?` is a to-one, `[T]` a to-many (set
/// semantics, or an ordered list with `ordered: true`), and `inverse` names the property on
/// `T` that points back. Setting either side updates the other. Both sides may be to-manys
/// (a many-to-many relationship).
///
/// ```swift
/// @Entity final class Folder {
///     var name: String
///     @Relationship(deleteRule: .cascade, inverse: "folder") var files: [File]
/// }
/// @Entity final class File {
///     var name: String
///     @Relationship(inverse: "files") var folder: Folder?
/// }
/// @Entity final class Package {
///     var name: String
///     @Relationship(inverse: "dependents") var depends: [Package]     // many-to-many
///     @Relationship(inverse: "depends") var dependents: [Package]
/// }
/// @Entity final class Playlist {
///     @Relationship(inverse: "playlists", ordered: true) var tracks: [Track]
/// }
/// ```
///
/// To add, remove or move one member of a large to-many without reading the whole list, use
/// ``ModelContext/add(_:to:of:at:)``, ``ModelContext/remove(_:from:of:)`` and
/// ``ModelContext/move(in:of:from:to:)``.
///
/// A relationship set on an object not inserted yet is applied when it is inserted (SwiftData
/// style); an object assigned to a relationship of an inserted object joins its context. See
/// ``RelationshipDescription`` for how relationships are stored and ``DeleteRule`` for what
/// deleting does.
@attached(peer)
public macro Relationship(deleteRule: DeleteRule = .nullify, inverse: String, ordered: Bool = false) =
    #externalMacro(module: "ObjectGraphMacros", type: "RelationshipMacro")
