// `@Transient` and `@Attribute(originalName:)`: markers that `@Entity` reads.

public import SwiftSyntax
public import SwiftSyntaxMacros

/// Implements `@Transient`. It expands to nothing; `@Entity` skips the
/// properties that carry it.
public struct TransientMacro: PeerMacro {
    public static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        []
    }
}

/// Implements `@Attribute(originalName:)`. It expands to nothing; `@Entity`
/// copies its options into the entity description.
public struct AttributeMacro: PeerMacro {
    public static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        []
    }
}

/// Implements `#Unique<T>([\.a, \.b])`. It expands to nothing; `@Entity` reads the key paths
/// and adds the constraint to the entity description.
public struct UniqueMacro: DeclarationMacro {
    public static func expansion(
        of node: some FreestandingMacroExpansionSyntax,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        []
    }
}

/// Implements `#Index<T>([\.a], [\.b, \.c])`. It expands to nothing; `@Entity` reads the key
/// paths and adds the indexes to the entity description.
public struct IndexMacro: DeclarationMacro {
    public static func expansion(
        of node: some FreestandingMacroExpansionSyntax,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        []
    }
}

/// Implements `@Relationship(deleteRule:inverse:)`. It expands to nothing; `@Entity` reads its
/// arguments into the entity description and attaches the accessors.
public struct RelationshipMacro: PeerMacro {
    public static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        []
    }
}
