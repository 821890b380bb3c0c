/// A schema that cannot be used: an empty schema, a duplicate entity or attribute name, an
/// unencodable default value. Thrown by ``Schema``'s initializers.
public struct SchemaError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong, naming the entity and attribute.
    public let message: String
    public var description: String { "invalid schema: \(message)" }
}

/// An error from a context operation, naming the entity, object and attribute involved.
///
/// Catch a specific ``Code`` to react to one kind of failure:
///
/// ```swift
/// do { try person.setValue("x", forKey: "age") }
/// catch let error as ObjectGraphError where error.code == .typeMismatch { … }
/// ```
public struct ObjectGraphError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure.
    public enum Code: String, Sendable, Hashable {
        /// A key names no attribute of the entity.
        case unknownKey
        /// A value does not fit the attribute's type.
        case typeMismatch
        /// An entity type is not part of the context's schema.
        case unknownEntity
        /// An object belongs to another context.
        case wrongContext
        /// The object is not (or no longer) in a context.
        case notInContext
        /// A change set does not match the schema or the context's state.
        case inconsistentChangeSet
        /// The persistence backend failed to record a save.
        case persistenceFailed
        /// A unique lookup names attributes that form no unique constraint.
        case noUniqueIndex
        /// A transaction was cancelled with ``Transaction/cancel()``.
        case cancelled
        /// `willSave` kept changing objects for ``ModelContext/willSavePassLimit`` passes.
        case willSaveDidNotSettle
    }

    /// The kind of failure.
    public let code: Code
    /// A message naming the entity, object and attribute.
    public let message: String
    /// The entity concerned, when there is one.
    public let entity: String?
    /// The attribute or key concerned, when there is one.
    public let key: String?

    init(_ code: Code, _ message: String, entity: String? = nil, key: String? = nil) {
        self.code = code
        self.message = message
        self.entity = entity
        self.key = key
    }

    public var description: String { message }
}

/// Why a save was refused: every failure found, not only the first (Docs/Semantics.md, rule 5).
public struct ValidationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// One failed check.
    public struct Failure: Sendable, Hashable, CustomStringConvertible {
        /// The entity's name.
        public let entity: String
        /// The object that failed.
        public let objectID: ObjectID
        /// The attribute concerned, if the failure is about one.
        public let key: String?
        /// What is wrong.
        public let reason: String

        public var description: String {
            "\(objectID)" + (key.map { ".\($0)" } ?? "") + ": \(reason)"
        }
    }

    /// Every failure, in a stable order (entity, then object, then attribute).
    public let failures: [Failure]

    public var description: String {
        "save refused, \(failures.count) validation failure\(failures.count == 1 ? "" : "s"):\n"
            + failures.map { "  - \($0)" }.joined(separator: "\n")
    }
}
