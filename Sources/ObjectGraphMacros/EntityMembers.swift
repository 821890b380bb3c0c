// Decides which members of an `@Entity` class are persisted attributes.
//
// All three roles of `@Entity` and the `@_PersistedAttribute` accessor macro
// go through this one analysis, so the slot numbers the member-attribute role
// hands out always match the order of the generated entity description.

import SwiftDiagnostics
import SwiftSyntax

/// A stored instance property of an entity class that is persisted.
struct PersistedAttribute {
    /// The property's name as written in source, without backticks.
    let name: String
    /// The declared type with any `Optional` wrapping removed.
    let valueType: TypeSyntax
    /// Whether the declared type is `T?`, `T!` or `Optional<T>`.
    let isOptional: Bool
    /// The initializer expression (`= expr`), copied verbatim.
    let defaultValue: ExprSyntax?
    /// The `originalName:` argument of `@Attribute`, if one was given and is not `nil`.
    let originalName: ExprSyntax?
    /// The unlabeled arguments of `@Attribute` (options such as `.unique`).
    let options: [ExprSyntax]
}

/// A stored instance property of an entity class marked `@Relationship`.
struct PersistedRelationship {
    /// The property's name as written in source, without backticks.
    let name: String
    /// The destination class: `T` of `T?` (to-one) or of `[T]` (to-many).
    let destinationType: TypeSyntax
    /// Whether the declared type is `[T]`.
    let isToMany: Bool
    /// The name of the inverse: the last component of `inverse: \T.name`.
    let inverse: String
    /// The `deleteRule:` argument, if given.
    let deleteRule: ExprSyntax?
    /// Whether the declaration has an initializer (`= []`, `= nil`), which the accessors ignore.
    let hasInitializer: Bool
    /// The `ordered:` argument, if given.
    var ordered: ExprSyntax? = nil
}

/// What one member declaration of an entity class means to the macros.
enum MemberRole {
    /// Not persisted: static, computed, lazy, `@Transient`, or not a property at all.
    case ignored
    /// A persisted attribute.
    case persisted(PersistedAttribute)
    /// A relationship.
    case relationship(PersistedRelationship)
    /// Looks like an attribute but cannot be one; the diagnostics say why.
    case invalid([Diagnostic])
}

/// The persisted attributes of an entity class in slot order, plus the
/// diagnostics for the members that cannot be attributes.
struct EntityMembers {
    /// Persisted attributes; an attribute's index here is its slot.
    var attributes: [PersistedAttribute] = []
    /// Relationships in declaration order; the index here is the accessors' relationship number.
    var relationships: [PersistedRelationship] = []
    /// Errors for the members that look like attributes but are not valid ones.
    var diagnostics: [Diagnostic] = []
    /// Whether an instance stores values of its own: a `@Transient` or `lazy` stored property.
    var hasInstanceState = false
    /// Whether the class declares `hasTransientState` itself.
    var declaresTransientState = false

    /// `#Unique<T>([\.a, \.b], onCollision: …)` declarations: key names and the policy argument.
    var uniqueConstraints: [(keys: [String], onCollision: ExprSyntax?)] = []
    /// `#Index<T>([\.a], [\.b, \.c])` declarations: the key names of each index.
    var indexes: [[String]] = []
    /// Each `#Index` array's key names with their syntax, checked against the attributes once
    /// all members are read.
    private var indexKeys: [(name: String, node: Syntax)] = []

    init(_ members: MemberBlockItemListSyntax) {
        for item in members {
            if let expansion = item.decl.as(MacroExpansionDeclSyntax.self), expansion.macroName.text == "Unique" {
                var policy: ExprSyntax?
                for argument in expansion.arguments {
                    if argument.label?.text == "onCollision" {
                        policy = argument.expression.trimmed
                        continue
                    }
                    guard let array = argument.expression.as(ArrayExprSyntax.self) else { continue }
                    let keys = array.elements.compactMap { element -> String? in
                        guard let keyPath = element.expression.as(KeyPathExprSyntax.self),
                            keyPath.components.count == 1,
                            case .property(let property) = keyPath.components.first?.component
                        else { return nil }
                        return property.declName.baseName.identifier?.name ?? property.declName.baseName.text
                    }
                    if keys.count != array.elements.count || keys.isEmpty {
                        diagnostics.append(Diagnostic(node: argument, message: EntityDiagnostic.uniqueKeyPaths))
                    } else {
                        uniqueConstraints.append((keys, nil))
                    }
                }
                if let policy {
                    for i in uniqueConstraints.indices where uniqueConstraints[i].onCollision == nil {
                        uniqueConstraints[i].onCollision = policy
                    }
                }
                continue
            }
            if let expansion = item.decl.as(MacroExpansionDeclSyntax.self), expansion.macroName.text == "Index" {
                for argument in expansion.arguments {
                    guard let array = argument.expression.as(ArrayExprSyntax.self) else {
                        diagnostics.append(Diagnostic(node: argument, message: EntityDiagnostic.indexKeyPaths))
                        continue
                    }
                    var keys: [String] = []
                    for element in array.elements {
                        guard let keyPath = element.expression.as(KeyPathExprSyntax.self),
                            keyPath.components.count == 1,
                            case .property(let property) = keyPath.components.first?.component
                        else { continue }
                        let name = property.declName.baseName.identifier?.name ?? property.declName.baseName.text
                        keys.append(name)
                        indexKeys.append((name, Syntax(element)))
                    }
                    if keys.count != array.elements.count || keys.isEmpty {
                        diagnostics.append(Diagnostic(node: argument, message: EntityDiagnostic.indexKeyPaths))
                    } else {
                        indexes.append(keys)
                    }
                }
                continue
            }
            if let function = item.decl.as(FunctionDeclSyntax.self) {
                let name = function.name.text
                let labels = function.signature.parameterClause.parameters.map { $0.firstName.text }
                let isStatic = function.modifiers.contains {
                    $0.name.tokenKind == .keyword(.static) || $0.name.tokenKind == .keyword(.class)
                }
                if !isStatic, ["shouldInsert", "shouldUpdate", "uniqueID"].contains(name), labels == ["from", "in"] {
                    diagnostics.append(
                        Diagnostic(node: function.name, message: EntityDiagnostic.instanceImportHook(name)))
                }
                continue
            }
            guard let variable = item.decl.as(VariableDeclSyntax.self) else { continue }
            if variable.bindings.contains(where: { $0.identifierName == "hasTransientState" }) {
                declaresTransientState = true
            }
            switch Self.role(of: variable) {
            case .ignored:
                if Self.storesInstanceState(variable) { hasInstanceState = true }
            case .persisted(let attribute):
                attributes.append(attribute)
            case .relationship(let relationship):
                relationships.append(relationship)
            case .invalid(let found):
                diagnostics.append(contentsOf: found)
            }
        }
        let names = Set(attributes.map(\.name))
        for key in indexKeys where !names.contains(key.name) {
            diagnostics.append(Diagnostic(node: key.node, message: EntityDiagnostic.indexKeyNotAttribute(key.name)))
        }
        indexes.removeAll { $0.contains { !names.contains($0) } }
    }

    /// The slot of the persisted attribute called `name`, if there is one.
    func slot(of name: String) -> Int? {
        attributes.firstIndex { $0.name == name }
    }

    /// The number of the relationship called `name`, if there is one.
    func relationshipIndex(of name: String) -> Int? {
        relationships.firstIndex { $0.name == name }
    }

    /// Whether `variable` is an instance property with storage of its own (`@Transient` or
    /// `lazy`), which a fresh instance would not have.
    static func storesInstanceState(_ variable: VariableDeclSyntax) -> Bool {
        let isStatic = variable.modifiers.contains {
            $0.name.tokenKind == .keyword(.static) || $0.name.tokenKind == .keyword(.class)
        }
        return !isStatic && !variable.bindings.contains(where: \.isComputed)
    }

    /// Classifies one property declaration of an entity class.
    static func role(of variable: VariableDeclSyntax) -> MemberRole {
        // Names added by the `@Entity` member role itself are never attributes.
        if variable.bindings.count == 1, let name = variable.bindings.first?.identifierName,
            name == "_backing" || name == "entityDescription"
        {
            return .ignored
        }
        let staticOrLazy = variable.modifiers.contains { modifier in
            switch modifier.name.tokenKind {
            case .keyword(.static), .keyword(.class), .keyword(.lazy): true
            default: false
            }
        }
        if staticOrLazy || variable.attributes.hasAttribute(named: "Transient") {
            return .ignored
        }
        if variable.bindings.contains(where: \.isComputed) {
            return .ignored
        }

        var diagnostics: [Diagnostic] = []
        if variable.bindingSpecifier.tokenKind != .keyword(.var) {
            diagnostics.append(Diagnostic(node: variable.bindingSpecifier, message: EntityDiagnostic.letAttribute))
        }
        guard variable.bindings.count == 1, let binding = variable.bindings.first,
            let name = binding.identifierName
        else {
            diagnostics.append(Diagnostic(node: variable.bindings, message: EntityDiagnostic.multipleBindings))
            return .invalid(diagnostics)
        }
        if let accessors = binding.accessorBlock {
            // Not computed (checked above), so the accessors are observers.
            diagnostics.append(Diagnostic(node: accessors, message: EntityDiagnostic.propertyObservers))
        }
        guard let declaredType = binding.typeAnnotation?.type.trimmed else {
            diagnostics.append(Diagnostic(node: binding.pattern, message: EntityDiagnostic.missingType(name)))
            return .invalid(diagnostics)
        }
        guard diagnostics.isEmpty else { return .invalid(diagnostics) }

        let (valueType, isOptional) = declaredType.unwrappingOptional()
        if let relationship = variable.attributes.attribute(named: "Relationship") {
            return relationshipRole(
                relationship, name: name, declaredType: declaredType, valueType: valueType, isOptional: isOptional,
                hasInitializer: binding.initializer != nil,
                typeNode: Syntax(binding.typeAnnotation?.type ?? declaredType))
        }
        return .persisted(
            PersistedAttribute(
                name: name,
                valueType: valueType,
                isOptional: isOptional,
                defaultValue: binding.initializer?.value.trimmed,
                originalName: variable.attributes.argument(labeled: "originalName", inAttribute: "Attribute"),
                options: variable.attributes.unlabeledArguments(inAttribute: "Attribute")
            )
        )
    }
}

extension EntityMembers {
    /// Classifies a `@Relationship(deleteRule:inverse:)` property: `T?` is a to-one, `[T]` a to-many.
    static func relationshipRole(
        _ attribute: AttributeSyntax, name: String, declaredType: TypeSyntax, valueType: TypeSyntax, isOptional: Bool,
        hasInitializer: Bool, typeNode: Syntax
    ) -> MemberRole {
        var inverse: String?
        var deleteRule: ExprSyntax?
        var ordered: ExprSyntax?
        var orderedArgument: Syntax?
        if case .argumentList(let arguments) = attribute.arguments {
            for argument in arguments {
                switch argument.label?.text {
                case "inverse":
                    if let keyPath = argument.expression.as(KeyPathExprSyntax.self),
                        case .property(let property) = keyPath.components.last?.component
                    {
                        inverse = property.declName.baseName.identifier?.name ?? property.declName.baseName.text
                    } else if let literal = argument.expression.as(StringLiteralExprSyntax.self),
                        literal.segments.count == 1,
                        case .stringSegment(let segment) = literal.segments.first
                    {
                        inverse = segment.content.text
                    }
                case "deleteRule":
                    deleteRule = argument.expression.trimmed
                case "ordered":
                    ordered = argument.expression.trimmed
                    orderedArgument = Syntax(argument)
                default:
                    break
                }
            }
        }
        guard let inverse else {
            return .invalid([Diagnostic(node: attribute, message: EntityDiagnostic.relationshipInverse)])
        }
        if !isOptional, let array = declaredType.as(ArrayTypeSyntax.self) {
            return .relationship(
                PersistedRelationship(
                    name: name, destinationType: array.element.trimmed, isToMany: true, inverse: inverse,
                    deleteRule: deleteRule,
                    hasInitializer: hasInitializer, ordered: ordered))
        }
        guard isOptional, !valueType.is(ArrayTypeSyntax.self) else {
            return .invalid([Diagnostic(node: typeNode, message: EntityDiagnostic.relationshipType)])
        }
        if let ordered, let orderedArgument, ordered.description != "false" {
            return .invalid([Diagnostic(node: orderedArgument, message: EntityDiagnostic.orderedToOne)])
        }
        return .relationship(
            PersistedRelationship(
                name: name, destinationType: valueType, isToMany: false, inverse: inverse, deleteRule: deleteRule,
                hasInitializer: hasInitializer))
    }
}

extension PatternBindingSyntax {
    /// The bound name without backticks when the pattern is a plain identifier.
    var identifierName: String? {
        guard let identifier = pattern.as(IdentifierPatternSyntax.self)?.identifier else { return nil }
        return identifier.identifier?.name ?? identifier.text
    }

    /// Whether this binding is a computed property (a getter, or accessors other than observers).
    var isComputed: Bool {
        guard let accessorBlock else { return false }
        switch accessorBlock.accessors {
        case .getter:
            return true
        case .accessors(let list):
            return list.contains { accessor in
                switch accessor.accessorSpecifier.tokenKind {
                case .keyword(.willSet), .keyword(.didSet): false
                default: true
                }
            }
        }
    }
}

extension AttributeListSyntax {
    /// The attribute spelled `@name` or `@ObjectGraph.name`, if present.
    func attribute(named name: String) -> AttributeSyntax? {
        for element in self {
            guard case .attribute(let attribute) = element else { continue }
            let type = attribute.attributeName
            if let identifier = type.as(IdentifierTypeSyntax.self), identifier.name.text == name {
                return attribute
            }
            if let member = type.as(MemberTypeSyntax.self), member.name.text == name,
                member.baseType.as(IdentifierTypeSyntax.self)?.name.text == "ObjectGraph"
            {
                return attribute
            }
        }
        return nil
    }

    func hasAttribute(named name: String) -> Bool {
        attribute(named: name) != nil
    }

    /// The unlabeled arguments of `@attributeName(...)`.
    func unlabeledArguments(inAttribute attributeName: String) -> [ExprSyntax] {
        guard let attribute = attribute(named: attributeName),
            case .argumentList(let arguments) = attribute.arguments
        else { return [] }
        return arguments.filter { $0.label == nil }.map { $0.expression.trimmed }
    }

    /// The expression passed as `label:` to `@attributeName(...)`, unless it is absent or `nil`.
    func argument(labeled label: String, inAttribute attributeName: String) -> ExprSyntax? {
        guard let attribute = attribute(named: attributeName),
            case .argumentList(let arguments) = attribute.arguments,
            let argument = arguments.first(where: { $0.label?.text == label }),
            !argument.expression.is(NilLiteralExprSyntax.self)
        else { return nil }
        return argument.expression.trimmed
    }
}

extension TypeSyntax {
    /// Splits `T?`, `T!`, `Optional<T>` and `Swift.Optional<T>` into `(T, true)`;
    /// any other type comes back unchanged with `false`.
    func unwrappingOptional() -> (TypeSyntax, Bool) {
        if let optional = self.as(OptionalTypeSyntax.self) {
            return (optional.wrappedType.trimmed, true)
        }
        if let iuo = self.as(ImplicitlyUnwrappedOptionalTypeSyntax.self) {
            return (iuo.wrappedType.trimmed, true)
        }
        let genericArguments: GenericArgumentClauseSyntax?
        if let identifier = self.as(IdentifierTypeSyntax.self), identifier.name.text == "Optional" {
            genericArguments = identifier.genericArgumentClause
        } else if let member = self.as(MemberTypeSyntax.self), member.name.text == "Optional",
            member.baseType.as(IdentifierTypeSyntax.self)?.name.text == "Swift"
        {
            genericArguments = member.genericArgumentClause
        } else {
            genericArguments = nil
        }
        if let arguments = genericArguments?.arguments, arguments.count == 1,
            case .type(let wrapped) = arguments.first?.argument
        {
            return (wrapped.trimmed, true)
        }
        return (self, false)
    }
}
