// `@Entity`: turns a class into an ObjectGraph entity.

import SwiftDiagnostics
public import SwiftSyntax
public import SwiftSyntaxMacros

/// Implements `@Entity`.
///
/// - member role: adds `_backing`, the static `entityDescription` and
///   `init(_backing:)`, and reports the members that cannot be attributes;
/// - member-attribute role: marks each persisted attribute with
///   `@_PersistedAttribute(slot: N)`, slots numbered in declaration order;
/// - extension role: adds the `ObjectGraph.Entity` conformance.
public struct EntityMacro: MemberMacro, MemberAttributeMacro, ExtensionMacro {
    // MARK: member

    public static func expansion(
        of node: AttributeSyntax,
        providingMembersOf declaration: some DeclGroupSyntax,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard let classDecl = declaration.as(ClassDeclSyntax.self) else {
            context.diagnose(Diagnostic(node: node, message: EntityDiagnostic.notAClass))
            return []
        }
        let members = EntityMembers(classDecl.memberBlock.members)
        for diagnostic in members.diagnostics {
            context.diagnose(diagnostic)
        }

        let className = classDecl.name.trimmed.text
        let entityName = classDecl.name.identifier?.name ?? className
        let entityDescription = Make.member(Make.ref(className), "entityDescription")
        var result = [
            DeclSyntax(backingDecl(entityDescription)),
            DeclSyntax(entityDescriptionDecl(className: className, entityName: entityName, members: members)),
            DeclSyntax(backingInitializer()),
        ]
        // A final class without stored state of its own: a fresh instance is as good as any, so
        // the context need not keep the instances of its pending objects.
        let isFinal = classDecl.modifiers.contains { $0.name.tokenKind == .keyword(.final) }
        if isFinal && !members.hasInstanceState && !members.declaresTransientState {
            result.append("public static var hasTransientState: Bool { false }")
        }
        // A class that declares no initializer of its own would lose its implicit `init()` to
        // `init(_backing:)`; give it back, so `Tag()` keeps working as in plain Swift.
        let declaresInit = classDecl.memberBlock.members.contains { $0.decl.is(InitializerDeclSyntax.self) }
        if !declaresInit {
            result.append(
                DeclSyntax(
                    InitializerDeclSyntax(
                        modifiers: [DeclModifierSyntax(name: .keyword(.public))],
                        signature: FunctionSignatureSyntax(
                            parameterClause: FunctionParameterClauseSyntax(parameters: [])),
                        body: CodeBlockSyntax(statements: [])
                    )))
        }
        return result
    }

    /// `@exclusivity(unchecked) public var _backing = ObjectGraph.ObjectBacking(entity: Person.entityDescription)`
    ///
    /// Unchecked: every attribute access goes through `_backing`, and the dynamic exclusivity
    /// check of a class's stored property (swift_beginAccess) was about 4% of a bulk import's
    /// instructions (callgrind). The accesses cannot overlap: the handle's mutating methods
    /// run no application code (a set writes a table cell or a side buffer), and the ones that
    /// can (relationship setters inserting an object, whose awakeFromInsert may set this
    /// object's attributes) are non-mutating and do not replace the handle.
    static func backingDecl(_ entityDescription: ExprSyntax) -> VariableDeclSyntax {
        let exclusivity = AttributeSyntax(
            attributeName: TypeSyntax(IdentifierTypeSyntax(name: .identifier("exclusivity"))),
            leftParen: .leftParenToken(),
            arguments: .argumentList([LabeledExprSyntax(expression: Make.ref("unchecked"))]),
            rightParen: .rightParenToken()
        )
        return VariableDeclSyntax(
            attributes: [.attribute(exclusivity)],
            modifiers: [DeclModifierSyntax(name: .keyword(.public))],
            bindingSpecifier: .keyword(.var),
            bindings: [
                PatternBindingSyntax(
                    pattern: IdentifierPatternSyntax(identifier: .identifier("_backing")),
                    initializer: InitializerClauseSyntax(
                        value: Make.call(Make.objectGraph("ObjectBacking"), [("entity", entityDescription)])
                    )
                )
            ]
        )
    }

    /// `public static let entityDescription = ObjectGraph.EntityDescription(name:type:attributes:…)`
    static func entityDescriptionDecl(
        className: String, entityName: String, members: EntityMembers
    ) -> VariableDeclSyntax {
        VariableDeclSyntax(
            modifiers: [DeclModifierSyntax(name: .keyword(.public)), DeclModifierSyntax(name: .keyword(.static))],
            bindingSpecifier: .keyword(.let),
            bindings: [
                PatternBindingSyntax(
                    pattern: IdentifierPatternSyntax(identifier: .identifier("entityDescription")),
                    initializer: InitializerClauseSyntax(
                        value: Make.call(
                            Make.objectGraph("EntityDescription"),
                            [
                                ("name", Make.string(entityName)),
                                ("type", Make.member(Make.ref(className), "self")),
                                ("attributes", Make.array(members.attributes.map(attributeDescription))),
                                ("keyPaths", Make.array(members.attributes.map { keyPath(className, $0.name) })),
                                ("uniqueConstraints", Make.array(members.uniqueConstraints.map(uniqueConstraint))),
                            ]
                                + (members.relationships.isEmpty
                                    ? []
                                    : [
                                        (
                                            "relationships",
                                            Make.array(members.relationships.map(relationshipDescription))
                                        )
                                    ])
                                + (members.indexes.isEmpty
                                    ? []
                                    : [
                                        ("indexes", Make.array(members.indexes.map(indexDescription)))
                                    ]),
                            multiline: true
                        )
                    )
                )
            ]
        )
    }

    /// `public required init(_backing: ObjectGraph.ObjectBacking) { self._backing = _backing }`
    static func backingInitializer() -> InitializerDeclSyntax {
        let assignment = InfixOperatorExprSyntax(
            leftOperand: Make.member(ExprSyntax(DeclReferenceExprSyntax(baseName: .keyword(.self))), "_backing"),
            operator: AssignmentExprSyntax(),
            rightOperand: Make.ref("_backing")
        )
        return InitializerDeclSyntax(
            modifiers: [DeclModifierSyntax(name: .keyword(.public)), DeclModifierSyntax(name: .keyword(.required))],
            signature: FunctionSignatureSyntax(
                parameterClause: FunctionParameterClauseSyntax(
                    parameters: [
                        FunctionParameterSyntax(
                            firstName: .identifier("_backing"),
                            type: MemberTypeSyntax(
                                baseType: IdentifierTypeSyntax(name: .identifier("ObjectGraph")),
                                name: .identifier("ObjectBacking")
                            )
                        )
                    ]
                )
            ),
            body: Make.block(ExprSyntax(assignment))
        )
    }

    /// `.attribute("name", T.self, optional: true, default: expr, originalName: "old")`,
    /// leaving out the arguments that do not apply.
    static func attributeDescription(_ attribute: PersistedAttribute) -> ExprSyntax {
        var arguments: [(String?, ExprSyntax)] = [
            (nil, Make.string(attribute.name)),
            (nil, Make.metatype(attribute.valueType)),
        ]
        if attribute.isOptional {
            arguments.append(("optional", Make.bool(true)))
        }
        if let defaultValue = attribute.defaultValue {
            arguments.append(("default", defaultValue))
        }
        if let originalName = attribute.originalName {
            arguments.append(("originalName", originalName))
        }
        if !attribute.options.isEmpty {
            arguments.append(("options", Make.inlineArray(attribute.options)))
        }
        return Make.call(Make.member(nil, "attribute"), arguments)
    }

    /// `.toMany("name", T.self, inverse: "other", deleteRule: rule)` or `.toOne(...)`.
    static func relationshipDescription(_ r: PersistedRelationship) -> ExprSyntax {
        var arguments: [(String?, ExprSyntax)] = [
            (nil, Make.string(r.name)),
            (nil, Make.metatype(r.destinationType)),
            ("inverse", Make.string(r.inverse)),
        ]
        if let rule = r.deleteRule { arguments.append(("deleteRule", rule)) }
        if let ordered = r.ordered, r.isToMany { arguments.append(("ordered", ordered)) }
        return Make.call(Make.member(nil, r.isToMany ? "toMany" : "toOne"), arguments)
    }

    /// `\Class.name`
    static func keyPath(_ className: String, _ name: String) -> ExprSyntax {
        ExprSyntax(
            KeyPathExprSyntax(
                root: TypeSyntax(IdentifierTypeSyntax(name: .identifier(className))),
                components: [
                    KeyPathComponentSyntax(
                        period: .periodToken(),
                        component: .property(
                            KeyPathPropertyComponentSyntax(
                                declName: DeclReferenceExprSyntax(baseName: .identifier(name))))
                    )
                ]
            ))
    }

    /// `ObjectGraph.IndexDescription(["a", "b"])`
    static func indexDescription(_ keys: [String]) -> ExprSyntax {
        Make.call(Make.objectGraph("IndexDescription"), [(nil, Make.inlineArray(keys.map(Make.string)))])
    }

    /// `ObjectGraph.UniqueConstraint(["a", "b"], onCollision: policy)`
    static func uniqueConstraint(_ constraint: (keys: [String], onCollision: ExprSyntax?)) -> ExprSyntax {
        var arguments: [(String?, ExprSyntax)] = [(nil, Make.inlineArray(constraint.keys.map(Make.string)))]
        if let policy = constraint.onCollision { arguments.append(("onCollision", policy)) }
        return Make.call(Make.objectGraph("UniqueConstraint"), arguments)
    }

    // MARK: member attribute

    public static func expansion(
        of node: AttributeSyntax,
        attachedTo declaration: some DeclGroupSyntax,
        providingAttributesFor member: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [AttributeSyntax] {
        guard declaration.is(ClassDeclSyntax.self),
            let variable = member.as(VariableDeclSyntax.self),
            !variable.attributes.hasAttribute(named: "_PersistedAttribute"),
            !variable.attributes.hasAttribute(named: "_PersistedRelationship")
        else { return [] }
        switch EntityMembers.role(of: variable) {
        case .persisted(let attribute):
            guard let slot = EntityMembers(declaration.memberBlock.members).slot(of: attribute.name) else { return [] }
            return [Make.attribute("_PersistedAttribute", label: "slot", value: Make.int(slot))]
        case .relationship(let relationship):
            guard let index = EntityMembers(declaration.memberBlock.members).relationshipIndex(of: relationship.name)
            else { return [] }
            return [Make.attribute("_PersistedRelationship", label: "index", value: Make.int(index))]
        case .ignored, .invalid:
            return []
        }
    }

    // MARK: extension

    public static func expansion(
        of node: AttributeSyntax,
        attachedTo declaration: some DeclGroupSyntax,
        providingExtensionsOf type: some TypeSyntaxProtocol,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [ExtensionDeclSyntax] {
        // The compiler leaves `Entity` out of `protocols` when the class already conforms.
        guard let classDecl = declaration.as(ClassDeclSyntax.self), !protocols.isEmpty else { return [] }
        let alreadyListed =
            classDecl.inheritanceClause?.inheritedTypes.contains { inherited in
                let text = inherited.type.trimmedDescription
                return text == "Entity" || text == "ObjectGraph.Entity"
            } ?? false
        guard !alreadyListed else { return [] }
        return [
            ExtensionDeclSyntax(
                extendedType: type.trimmed,
                inheritanceClause: InheritanceClauseSyntax(
                    inheritedTypes: [
                        InheritedTypeSyntax(
                            type: MemberTypeSyntax(
                                baseType: IdentifierTypeSyntax(name: .identifier("ObjectGraph")),
                                name: .identifier("Entity")
                            )
                        )
                    ]
                ),
                memberBlock: MemberBlockSyntax(members: [])
            )
        ]
    }
}
