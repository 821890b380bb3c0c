// Expansion tests for `#Index` as read by @Entity.

import ObjectGraphMacros
import SwiftSyntax
import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacrosGenericTestSupport
import Testing

private let specs: [String: MacroSpec] = [
    "Entity": .init(
        type: EntityMacro.self, conformances: [TypeSyntax(IdentifierTypeSyntax(name: .identifier("Entity")))]),
    "_PersistedAttribute": .init(type: PersistedAttributeMacro.self),
    "Index": .init(type: IndexMacro.self),
]

private let accessors = """
        var section: String {
            get {
                _backing.get(0, as: String.self)
            }
            set {
                _backing.set(0, newValue)
            }
        }
        var version: Int {
            get {
                _backing.get(1, as: Int.self)
            }
            set {
                _backing.set(1, newValue)
            }
        }
    """

private func members(indexes: String?) -> String {
    """

        @exclusivity(unchecked) public var _backing = ObjectGraph.ObjectBacking(entity: Package.entityDescription)

        public static let entityDescription = ObjectGraph.EntityDescription(
            name: "Package",
            type: Package.self,
            attributes: [
                .attribute("section", String.self),
                .attribute("version", Int.self),
            ],
            keyPaths: [
                \\Package.section,
                \\Package.version,
            ],
            uniqueConstraints: []\(indexes.map { ",\n        indexes: \($0)" } ?? "")
        )

        public required init(_backing: ObjectGraph.ObjectBacking) {
            self._backing = _backing
        }

        public static var hasTransientState: Bool {
            false
        }

        public init() {
        }
    """
}

@Suite struct IndexMacroTests {
    @Test func eachIndexArrayBecomesOneIndexDescription() {
        assertMacroExpansion(
            """
            @Entity final class Package {
                #Index<Package>([\\.section], [\\.section, \\.version])
                var section: String
                var version: Int
            }
            """,
            expandedSource: """
                final class Package {
                \(accessors)
                \(members(indexes: """
                [
                            ObjectGraph.IndexDescription(["section"]),
                            ObjectGraph.IndexDescription(["section", "version"]),
                        ]
                """))
                }

                extension Package: ObjectGraph.Entity {
                }
                """,
            macroSpecs: specs,
            failureHandler: { Issue.record("\($0.message)") })
    }

    @Test func indexKeyThatIsNoPersistedAttributeOrNoKeyPathIsADiagnostic() {
        assertMacroExpansion(
            """
            @Entity final class Package {
                #Index<Package>([\\.section], [\\.size], [section])
                var section: String
                var version: Int
            }
            """,
            expandedSource: """
                final class Package {
                \(accessors)
                \(members(indexes: """
                [
                            ObjectGraph.IndexDescription(["section"]),
                        ]
                """))
                }

                extension Package: ObjectGraph.Entity {
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message:
                        "#Index takes arrays of key paths to attributes, like [\\.section] or [\\.maintainer, \\.version]",
                    line: 2, column: 44),
                DiagnosticSpec(
                    message:
                        "#Index names 'size', which is not a persisted attribute of this entity (an index key is a stored property that is not @Transient or a relationship)",
                    line: 2, column: 35),
            ],
            macroSpecs: specs,
            failureHandler: { Issue.record("\($0.message)") })
    }
}
