// Expansion tests for @Entity and the macros it relies on. The expected
// expansions are the contract the ObjectGraph runtime is written against.

import ObjectGraphMacros
import SwiftSyntax
import SwiftSyntaxMacrosGenericTestSupport
import Testing

// Note: the swift-syntax test harness drops the `= initialValue` of a property
// that gains get/set accessors (the compiler keeps it and routes it through the
// init accessor), so expected sources show such properties without it. The
// default still appears in the init accessor and in the entity description.

/// Expands `source` with the ObjectGraph macros and records an issue for every mismatch.
private func assertExpansion(
    _ source: String,
    expandedSource: String,
    diagnostics: [DiagnosticSpec] = [],
    sourceLocation: Testing.SourceLocation = #_sourceLocation
) {
    assertMacroExpansion(
        source,
        expandedSource: expandedSource,
        diagnostics: diagnostics,
        macroSpecs: [
            "Entity": .init(
                type: EntityMacro.self,
                conformances: [TypeSyntax(IdentifierTypeSyntax(name: .identifier("Entity")))]
            ),
            "_PersistedAttribute": .init(type: PersistedAttributeMacro.self),
            "Transient": .init(type: TransientMacro.self),
            "Attribute": .init(type: AttributeMacro.self),
            "Relationship": .init(type: RelationshipMacro.self),
            "_PersistedRelationship": .init(type: PersistedRelationshipMacro.self),
        ],
        failureHandler: { Issue.record("\($0.message)", sourceLocation: sourceLocation) }
    )
}

/// The members `@Entity` adds to a class called `name` with the given attribute entries.
/// A class that declares no initializer also gets `public init() {}` back.
private func entityMembers(
    _ name: String, attributes: [String], declaresInit: Bool = false, transientState: Bool = false
) -> String {
    let list =
        attributes.isEmpty
        ? "[]"
        : "[\n" + attributes.map { "            .attribute(\($0)),\n" }.joined() + "        ]"
    // Each entry starts with the quoted attribute name.
    let names = attributes.map { $0.split(separator: "\"", maxSplits: 2, omittingEmptySubsequences: false)[1] }
    let keyPaths =
        names.isEmpty
        ? "[]"
        : "[\n" + names.map { "            \\\(name).\($0),\n" }.joined() + "        ]"
    return """

            @exclusivity(unchecked) public var _backing = ObjectGraph.ObjectBacking(entity: \(name).entityDescription)

            public static let entityDescription = ObjectGraph.EntityDescription(
                name: "\(name)",
                type: \(name).self,
                attributes: \(list),
                keyPaths: \(keyPaths),
                uniqueConstraints: []
            )

            public required init(_backing: ObjectGraph.ObjectBacking) {
                self._backing = _backing
            }
        """
            + (transientState
                ? ""
                : """


                    public static var hasTransientState: Bool {
                        false
                    }
                """)
            + (declaresInit
                ? ""
                : """


                    public init() {
                    }
                """)
}

@Suite struct EntityMacroTests {
    @Test func fullExampleMatchesTheRuntimeContract() {
        assertExpansion(
            """
            @Entity final class Person {
                var name: String
                var age: Int = 0
                var email: String?
                var kind: Kind = .a
                @Attribute(originalName: "nick") var nickname: String?
                @Transient var cache: Int = 0
                static var count = 0
                var display: String { name }
                init(name: String) { self.name = name }
            }
            """,
            expandedSource: """
                final class Person {
                    var name: String {
                        get {
                            _backing.get(0, as: String.self)
                        }
                        set {
                            _backing.set(0, newValue)
                        }
                    }
                    var age: Int {
                        @storageRestrictions(accesses: _backing)
                        init(initialValue) {
                            _backing.initialize(1, initialValue)
                        }
                        get {
                            _backing.get(1, as: Int.self)
                        }
                        set {
                            _backing.set(1, newValue)
                        }
                    }
                    var email: String? {
                        get {
                            _backing.getOptional(2, as: String.self)
                        }
                        set {
                            _backing.setOptional(2, newValue)
                        }
                    }
                    var kind: Kind {
                        @storageRestrictions(accesses: _backing)
                        init(initialValue) {
                            _backing.initialize(3, initialValue)
                        }
                        get {
                            _backing.get(3, as: Kind.self)
                        }
                        set {
                            _backing.set(3, newValue)
                        }
                    }
                    var nickname: String? {
                        get {
                            _backing.getOptional(4, as: String.self)
                        }
                        set {
                            _backing.setOptional(4, newValue)
                        }
                    }
                    var cache: Int = 0
                    static var count = 0
                    var display: String { name }
                    init(name: String) { self.name = name }
                \(entityMembers("Person", attributes: [
                    #""name", String.self"#,
                    #""age", Int.self, default: 0"#,
                    #""email", String.self, optional: true"#,
                    #""kind", Kind.self, default: .a"#,
                    #""nickname", String.self, optional: true, originalName: "nick""#,
                ], declaresInit: true, transientState: true))
                }

                extension Person: ObjectGraph.Entity {
                }
                """
        )
    }

    @Test func slotsCountPersistedAttributesOnlyInDeclarationOrder() {
        assertExpansion(
            """
            @Entity class Note {
                @Transient var a: Int = 0
                var b: Int
                static let c = 1
                var d: Int { 1 }
                var e: Int
            }
            """,
            expandedSource: """
                class Note {
                    var a: Int = 0
                    var b: Int {
                        get {
                            _backing.get(0, as: Int.self)
                        }
                        set {
                            _backing.set(0, newValue)
                        }
                    }
                    static let c = 1
                    var d: Int { 1 }
                    var e: Int {
                        get {
                            _backing.get(1, as: Int.self)
                        }
                        set {
                            _backing.set(1, newValue)
                        }
                    }
                \(entityMembers("Note", attributes: [#""b", Int.self"#, #""e", Int.self"#], transientState: true))
                }

                extension Note: ObjectGraph.Entity {
                }
                """
        )
    }

    @Test func optionalAttributeUsesGetOptional() {
        assertExpansion(
            """
            @Entity final class Contact {
                var email: String?
            }
            """,
            expandedSource: """
                final class Contact {
                    var email: String? {
                        get {
                            _backing.getOptional(0, as: String.self)
                        }
                        set {
                            _backing.setOptional(0, newValue)
                        }
                    }
                \(entityMembers("Contact", attributes: [#""email", String.self, optional: true"#]))
                }

                extension Contact: ObjectGraph.Entity {
                }
                """
        )
    }

    @Test func optionalSpellingsAllUnwrapToTheWrappedType() {
        assertExpansion(
            """
            @Entity final class Box {
                var a: Optional<[Int]>
                var b: Double!
                var c: Swift.Optional<Date>
            }
            """,
            expandedSource: """
                final class Box {
                    var a: Optional<[Int]> {
                        get {
                            _backing.getOptional(0, as: [Int].self)
                        }
                        set {
                            _backing.setOptional(0, newValue)
                        }
                    }
                    var b: Double! {
                        get {
                            _backing.getOptional(1, as: Double.self)
                        }
                        set {
                            _backing.setOptional(1, newValue)
                        }
                    }
                    var c: Swift.Optional<Date> {
                        get {
                            _backing.getOptional(2, as: Date.self)
                        }
                        set {
                            _backing.setOptional(2, newValue)
                        }
                    }
                \(entityMembers("Box", attributes: [
                    #""a", [Int].self, optional: true"#,
                    #""b", Double.self, optional: true"#,
                    #""c", Date.self, optional: true"#,
                ]))
                }

                extension Box: ObjectGraph.Entity {
                }
                """
        )
    }

    @Test func defaultValueGetsInitAccessorAndDescriptionDefault() {
        assertExpansion(
            """
            @Entity final class Counter {
                var count: Int = 10 * 2
            }
            """,
            expandedSource: """
                final class Counter {
                    var count: Int {
                        @storageRestrictions(accesses: _backing)
                        init(initialValue) {
                            _backing.initialize(0, initialValue)
                        }
                        get {
                            _backing.get(0, as: Int.self)
                        }
                        set {
                            _backing.set(0, newValue)
                        }
                    }
                \(entityMembers("Counter", attributes: [#""count", Int.self, default: 10 * 2"#]))
                }

                extension Counter: ObjectGraph.Entity {
                }
                """
        )
    }

    @Test func optionalDefaultUsesInitializeOptional() {
        assertExpansion(
            """
            @Entity final class Profile {
                var bio: String? = "none"
            }
            """,
            expandedSource: """
                final class Profile {
                    var bio: String? {
                        @storageRestrictions(accesses: _backing)
                        init(initialValue) {
                            _backing.initializeOptional(0, initialValue)
                        }
                        get {
                            _backing.getOptional(0, as: String.self)
                        }
                        set {
                            _backing.setOptional(0, newValue)
                        }
                    }
                \(entityMembers("Profile", attributes: [#""bio", String.self, optional: true, default: "none""#]))
                }

                extension Profile: ObjectGraph.Entity {
                }
                """
        )
    }

    @Test func attributeOriginalNameIsCopiedAndNilIsLeftOut() {
        assertExpansion(
            """
            @Entity final class Item {
                @Attribute(originalName: "label") var title: String
                @Attribute(originalName: nil) var note: String
                @ObjectGraph.Attribute(originalName: "qty") var count: Int
            }
            """,
            expandedSource: """
                final class Item {
                    var title: String {
                        get {
                            _backing.get(0, as: String.self)
                        }
                        set {
                            _backing.set(0, newValue)
                        }
                    }
                    var note: String {
                        get {
                            _backing.get(1, as: String.self)
                        }
                        set {
                            _backing.set(1, newValue)
                        }
                    }
                    @ObjectGraph.Attribute(originalName: "qty")
                    var count: Int {
                        get {
                            _backing.get(2, as: Int.self)
                        }
                        set {
                            _backing.set(2, newValue)
                        }
                    }
                \(entityMembers("Item", attributes: [
                    #""title", String.self, originalName: "label""#,
                    #""note", String.self"#,
                    #""count", Int.self, originalName: "qty""#,
                ]))
                }

                extension Item: ObjectGraph.Entity {
                }
                """
        )
    }

    @Test func transientPropertyIsNotPersisted() {
        assertExpansion(
            """
            @Entity final class Doc {
                @Transient var cache: [String] = []
                @Transient let id = 1
            }
            """,
            expandedSource: """
                final class Doc {
                    var cache: [String] = []
                    let id = 1
                \(entityMembers("Doc", attributes: [], transientState: true))
                }

                extension Doc: ObjectGraph.Entity {
                }
                """
        )
    }

    @Test func computedAndStaticPropertiesAreIgnored() {
        assertExpansion(
            """
            @Entity final class Shape {
                static var count = 0
                class var kind: String { "shape" }
                static let unit = "cm"
                lazy var area: Double = 1
                var twice: Int { 2 }
                var proxy: Int {
                    get { 1 }
                    set { }
                }
                func f() {}
            }
            """,
            expandedSource: """
                final class Shape {
                    static var count = 0
                    class var kind: String { "shape" }
                    static let unit = "cm"
                    lazy var area: Double = 1
                    var twice: Int { 2 }
                    var proxy: Int {
                        get { 1 }
                        set { }
                    }
                    func f() {}
                \(entityMembers("Shape", attributes: [], transientState: true))
                }

                extension Shape: ObjectGraph.Entity {
                }
                """
        )
    }

    @Test func metatypesOfCompositeTypesAreParenthesized() {
        assertExpansion(
            """
            @Entity final class Misc {
                var handler: (any Codable & Sendable)?
                var pair: (Int, String)
                var table: [String: Int]
            }
            """,
            expandedSource: """
                final class Misc {
                    var handler: (any Codable & Sendable)? {
                        get {
                            _backing.getOptional(0, as: (any Codable & Sendable).self)
                        }
                        set {
                            _backing.setOptional(0, newValue)
                        }
                    }
                    var pair: (Int, String) {
                        get {
                            _backing.get(1, as: (Int, String).self)
                        }
                        set {
                            _backing.set(1, newValue)
                        }
                    }
                    var table: [String: Int] {
                        get {
                            _backing.get(2, as: [String: Int].self)
                        }
                        set {
                            _backing.set(2, newValue)
                        }
                    }
                \(entityMembers("Misc", attributes: [
                    #""handler", (any Codable & Sendable).self, optional: true"#,
                    #""pair", (Int, String).self"#,
                    #""table", [String: Int].self"#,
                ]))
                }

                extension Misc: ObjectGraph.Entity {
                }
                """
        )
    }

    /// A final class with no `@Transient` or `lazy` property gets `hasTransientState` false
    /// (the tests above); one that answers itself keeps its answer.
    @Test func aClassThatSaysWhetherItHoldsStateKeepsItsAnswer() {
        assertExpansion(
            """
            @Entity final class Cache {
                static var hasTransientState: Bool { true }
            }
            """,
            expandedSource: """
                final class Cache {
                    static var hasTransientState: Bool { true }
                \(entityMembers("Cache", attributes: [], transientState: true))
                }

                extension Cache: ObjectGraph.Entity {
                }
                """
        )
    }

    @Test func nonFinalClassIsAllowed() {
        assertExpansion(
            """
            @Entity class Animal {
                var legs: Int = 4
            }
            """,
            expandedSource: """
                class Animal {
                    var legs: Int {
                        @storageRestrictions(accesses: _backing)
                        init(initialValue) {
                            _backing.initialize(0, initialValue)
                        }
                        get {
                            _backing.get(0, as: Int.self)
                        }
                        set {
                            _backing.set(0, newValue)
                        }
                    }
                \(entityMembers("Animal", attributes: [#""legs", Int.self, default: 4"#], transientState: true))
                }

                extension Animal: ObjectGraph.Entity {
                }
                """
        )
    }

    @Test func existingEntityConformanceIsNotRepeated() {
        assertExpansion(
            """
            @Entity final class Tag: Entity {
            }
            """,
            expandedSource: """
                final class Tag: Entity {
                \(entityMembers("Tag", attributes: []))
                }
                """
        )
    }

    @Test func structIsRejectedWithDiagnostic() {
        assertExpansion(
            """
            @Entity struct Point {
                var x: Int
            }
            """,
            expandedSource: """
                struct Point {
                    var x: Int
                }
                """,
            diagnostics: [
                DiagnosticSpec(message: "@Entity can only be applied to a class", line: 1, column: 1)
            ]
        )
    }

    @Test func enumAndActorAreRejected() {
        assertExpansion(
            """
            @Entity enum E {
                case a
            }
            @Entity actor A {
            }
            """,
            expandedSource: """
                enum E {
                    case a
                }
                actor A {
                }
                """,
            diagnostics: [
                DiagnosticSpec(message: "@Entity can only be applied to a class", line: 1, column: 1),
                DiagnosticSpec(message: "@Entity can only be applied to a class", line: 4, column: 1),
            ]
        )
    }

    @Test func letPropertyIsRejected() {
        assertExpansion(
            """
            @Entity final class Account {
                let id: Int
            }
            """,
            expandedSource: """
                final class Account {
                    let id: Int
                \(entityMembers("Account", attributes: []))
                }

                extension Account: ObjectGraph.Entity {
                }
                """,
            diagnostics: [
                DiagnosticSpec(message: "entity attributes must be declared with var", line: 2, column: 5)
            ]
        )
    }

    /// CoreStore's trap: an import hook written as an instance method is silently never called.
    @Test func instanceImportHookIsRejected() {
        assertExpansion(
            """
            @Entity final class Feed {
                func shouldInsert(from source: String, in context: ModelContext) -> Bool { true }
                static func shouldUpdate(from source: String, in context: ModelContext) -> Bool { true }
            }
            """,
            expandedSource: """
                final class Feed {
                    func shouldInsert(from source: String, in context: ModelContext) -> Bool { true }
                    static func shouldUpdate(from source: String, in context: ModelContext) -> Bool { true }
                \(entityMembers("Feed", attributes: []))
                }

                extension Feed: ObjectGraph.Entity {
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message:
                        "'shouldInsert(from:in:)' must be declared 'static func': as an instance method the import never calls it",
                    line: 2, column: 10)
            ]
        )
    }

    @Test func missingTypeAnnotationIsRejected() {
        assertExpansion(
            """
            @Entity final class Settings {
                var volume = 5
            }
            """,
            expandedSource: """
                final class Settings {
                    var volume = 5
                \(entityMembers("Settings", attributes: []))
                }

                extension Settings: ObjectGraph.Entity {
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message: "add an explicit type to 'volume'; the entity description needs it",
                    line: 2,
                    column: 9
                )
            ]
        )
    }

    @Test func multipleBindingsInOneVarAreRejected() {
        assertExpansion(
            """
            @Entity final class Size {
                var width: Int, height: Int
            }
            """,
            expandedSource: """
                final class Size {
                    var width: Int, height: Int
                \(entityMembers("Size", attributes: []))
                }

                extension Size: ObjectGraph.Entity {
                }
                """,
            diagnostics: [
                DiagnosticSpec(message: "declare one attribute per var", line: 2, column: 9)
            ]
        )
    }

    @Test func propertyObserversAreRejected() {
        assertExpansion(
            """
            @Entity final class Meter {
                var watched: Int = 0 { didSet { } }
            }
            """,
            expandedSource: """
                final class Meter {
                    var watched: Int = 0 { didSet { } }
                \(entityMembers("Meter", attributes: []))
                }

                extension Meter: ObjectGraph.Entity {
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message: "property observers are not supported on entity attributes",
                    line: 2,
                    column: 26
                )
            ]
        )
    }

    @Test func backtickedNamesAreUnescapedInTheDescription() {
        assertExpansion(
            """
            @Entity final class `Class` {
                var `default`: Int
            }
            """,
            expandedSource: """
                final class `Class` {
                    var `default`: Int {
                        get {
                            _backing.get(0, as: Int.self)
                        }
                        set {
                            _backing.set(0, newValue)
                        }
                    }

                    @exclusivity(unchecked) public var _backing = ObjectGraph.ObjectBacking(entity: `Class`.entityDescription)

                    public static let entityDescription = ObjectGraph.EntityDescription(
                        name: "Class",
                        type: `Class`.self,
                        attributes: [
                            .attribute("default", Int.self),
                        ],
                        keyPaths: [
                            \\`Class`.default,
                        ],
                        uniqueConstraints: []
                    )

                    public required init(_backing: ObjectGraph.ObjectBacking) {
                        self._backing = _backing
                    }

                    public static var hasTransientState: Bool {
                        false
                    }

                    public init() {
                    }
                }

                extension `Class`: ObjectGraph.Entity {
                }
                """
        )
    }

    @Test func relationshipsGetAccessorsAndDescriptions() {
        assertExpansion(
            """
            @Entity final class Folder {
                var name: String
                @Relationship(deleteRule: .cascade, inverse: "folder") var files: [File] = []
                @Relationship(inverse: "children") var parent: Folder?
            }
            """,
            expandedSource: """
                final class Folder {
                    var name: String {
                        get {
                            _backing.get(0, as: String.self)
                        }
                        set {
                            _backing.set(0, newValue)
                        }
                    }
                    var files: [File] {
                        @storageRestrictions(accesses: _backing)
                        init(initialValue) {
                            _backing.initialize(0, initialValue)
                        }
                        get {
                            _backing.getToMany(0, as: File.self)
                        }
                        set {
                            _setToMany(0, newValue)
                        }
                    }
                    var parent: Folder? {
                        get {
                            _backing.getToOne(1, as: Folder.self)
                        }
                        set {
                            _setToOne(1, newValue)
                        }
                    }

                    @exclusivity(unchecked) public var _backing = ObjectGraph.ObjectBacking(entity: Folder.entityDescription)

                    public static let entityDescription = ObjectGraph.EntityDescription(
                        name: "Folder",
                        type: Folder.self,
                        attributes: [
                            .attribute("name", String.self),
                        ],
                        keyPaths: [
                            \\Folder.name,
                        ],
                        uniqueConstraints: [],
                        relationships: [
                            .toMany("files", File.self, inverse: "folder", deleteRule: .cascade),
                            .toOne("parent", Folder.self, inverse: "children"),
                        ]
                    )

                    public required init(_backing: ObjectGraph.ObjectBacking) {
                        self._backing = _backing
                    }

                    public static var hasTransientState: Bool {
                        false
                    }

                    public init() {
                    }
                }

                extension Folder: ObjectGraph.Entity {
                }
                """
        )
    }

    @Test func relationshipsWithoutInverseOrWithAnotherTypeAreRejected() {
        assertExpansion(
            """
            @Entity final class Folder {
                @Relationship(deleteRule: .cascade) var files: [File]
                @Relationship(inverse: "x") var owner: Owner
            }
            """,
            expandedSource: """
                final class Folder {
                    var files: [File]
                    var owner: Owner

                    @exclusivity(unchecked) public var _backing = ObjectGraph.ObjectBacking(entity: Folder.entityDescription)

                    public static let entityDescription = ObjectGraph.EntityDescription(
                        name: "Folder",
                        type: Folder.self,
                        attributes: [],
                        keyPaths: [],
                        uniqueConstraints: []
                    )

                    public required init(_backing: ObjectGraph.ObjectBacking) {
                        self._backing = _backing
                    }

                    public static var hasTransientState: Bool {
                        false
                    }

                    public init() {
                    }
                }

                extension Folder: ObjectGraph.Entity {
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message:
                        "@Relationship needs the name of its inverse on the destination: @Relationship(inverse: \"property\")",
                    line: 2, column: 5),
                DiagnosticSpec(
                    message: "a relationship is declared as T? (to-one) or [T] (to-many)", line: 3, column: 44),
            ]
        )
    }

    @Test func orderedOnAToOneIsRejected() {
        assertExpansion(
            """
            @Entity final class Chapter {
                @Relationship(inverse: "chapters", ordered: true) var book: Book?
            }
            """,
            expandedSource: """
                final class Chapter {
                    var book: Book?

                    @exclusivity(unchecked) public var _backing = ObjectGraph.ObjectBacking(entity: Chapter.entityDescription)

                    public static let entityDescription = ObjectGraph.EntityDescription(
                        name: "Chapter",
                        type: Chapter.self,
                        attributes: [],
                        keyPaths: [],
                        uniqueConstraints: []
                    )

                    public required init(_backing: ObjectGraph.ObjectBacking) {
                        self._backing = _backing
                    }

                    public static var hasTransientState: Bool {
                        false
                    }

                    public init() {
                    }
                }

                extension Chapter: ObjectGraph.Entity {
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message: "ordered: applies to a to-many ([T]); a to-one follows the order its inverse keeps",
                    line: 2, column: 40)
            ]
        )
    }
}
