// Error messages the ObjectGraph macros report.

import SwiftDiagnostics

/// An error an ObjectGraph macro reports at the offending node.
struct EntityDiagnostic: DiagnosticMessage {
    let id: String
    let message: String

    var diagnosticID: MessageID { MessageID(domain: "ObjectGraphMacros", id: id) }
    var severity: DiagnosticSeverity { .error }

    /// `@Entity` was attached to a struct, enum, actor, protocol or extension.
    static let notAClass = EntityDiagnostic(
        id: "notAClass",
        message: "@Entity can only be applied to a class"
    )

    /// `@Relationship` without `inverse: "property"`.
    static let relationshipInverse = EntityDiagnostic(
        id: "relationshipInverse",
        message: "@Relationship needs the name of its inverse on the destination: @Relationship(inverse: \"property\")"
    )

    /// `@Relationship` on a type that is neither `T?` nor `[T]`.
    static let relationshipType = EntityDiagnostic(
        id: "relationshipType",
        message: "a relationship is declared as T? (to-one) or [T] (to-many)"
    )

    /// `@Relationship(ordered:)` on a to-one.
    static let orderedToOne = EntityDiagnostic(
        id: "orderedToOne",
        message: "ordered: applies to a to-many ([T]); a to-one follows the order its inverse keeps"
    )

    /// A persisted attribute was declared with `let`.
    static let letAttribute = EntityDiagnostic(
        id: "letAttribute",
        message: "entity attributes must be declared with var"
    )

    /// `var a: Int, b: Int` declares two attributes in one declaration.
    static let multipleBindings = EntityDiagnostic(
        id: "multipleBindings",
        message: "declare one attribute per var"
    )

    /// A persisted attribute has `willSet` or `didSet`.
    static let propertyObservers = EntityDiagnostic(
        id: "propertyObservers",
        message: "property observers are not supported on entity attributes"
    )

    /// A persisted attribute has no type annotation.
    static func missingType(_ name: String) -> EntityDiagnostic {
        EntityDiagnostic(
            id: "missingType",
            message: "add an explicit type to '\(name)'; the entity description needs it"
        )
    }

    /// `#Unique` takes arrays of simple key paths (`[\.a, \.b]`).
    static let uniqueKeyPaths = EntityDiagnostic(
        id: "uniqueKeyPaths",
        message: "#Unique takes arrays of key paths to attributes, like [\\.firstName, \\.lastName]"
    )

    /// `#Index` takes arrays of simple key paths (`[\.a, \.b]`).
    static let indexKeyPaths = EntityDiagnostic(
        id: "indexKeyPaths",
        message: "#Index takes arrays of key paths to attributes, like [\\.section] or [\\.maintainer, \\.version]"
    )

    /// An `#Index` key path names a property that is no persisted attribute.
    static func indexKeyNotAttribute(_ name: String) -> EntityDiagnostic {
        EntityDiagnostic(
            id: "indexKeyNotAttribute",
            message:
                "#Index names '\(name)', which is not a persisted attribute of this entity (an index key is a stored property that is not @Transient or a relationship)"
        )
    }

    /// An import hook that must be static was declared as an instance method.
    static func instanceImportHook(_ name: String) -> EntityDiagnostic {
        EntityDiagnostic(
            id: "instanceImportHook",
            message:
                "'\(name)(from:in:)' must be declared 'static func': as an instance method the import never calls it"
        )
    }
}
