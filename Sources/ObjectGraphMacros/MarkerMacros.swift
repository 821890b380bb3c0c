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
