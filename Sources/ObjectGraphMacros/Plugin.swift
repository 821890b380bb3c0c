// The compiler plugin entry point for ObjectGraph's macros.

import SwiftCompilerPlugin
import SwiftSyntaxMacros

/// Registers every macro that `ObjectGraph/Macros.swift` declares.
@main
struct ObjectGraphMacrosPlugin: CompilerPlugin {
    let providingMacros: [any Macro.Type] = [
        EntityMacro.self,
        PersistedAttributeMacro.self,
        PersistedRelationshipMacro.self,
        RelationshipMacro.self,
        TransientMacro.self,
        AttributeMacro.self,
        UniqueMacro.self,
        IndexMacro.self,
    ]
}
