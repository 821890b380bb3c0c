// `@_PersistedAttribute(slot:)`: the accessors of one persisted attribute.

public import SwiftSyntax
public import SwiftSyntaxMacros

/// Implements `@_PersistedAttribute(slot: N)`, which `@Entity` attaches to each
/// persisted attribute. It turns the stored property into one that reads and
/// writes slot `N` of `_backing`:
///
/// ```swift
/// @storageRestrictions(accesses: _backing)          // only with `= initialValue`
/// init(initialValue) { _backing.initialize(N, initialValue) }
/// get { _backing.get(N, as: T.self) }
/// set { _backing.set(N, newValue) }
/// ```
///
/// Optional attributes use `initializeOptional`, `getOptional` (with the
/// wrapped type) and `setOptional` instead.
public struct PersistedAttributeMacro: AccessorMacro {
    public static func expansion(
        of node: AttributeSyntax,
        providingAccessorsOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [AccessorDeclSyntax] {
        guard let slot = slotArgument(of: node),
            let variable = declaration.as(VariableDeclSyntax.self),
            case .persisted(let attribute) = EntityMembers.role(of: variable)
        else {
            // Not a valid attribute: `@Entity` has already reported why.
            return []
        }
        let optionalSuffix = attribute.isOptional ? "Optional" : ""
        let backing = Make.ref("_backing")
        let slotExpression = Make.int(slot)

        var accessors: [AccessorDeclSyntax] = []
        if attribute.defaultValue != nil {
            let restrictions = Make.attribute("storageRestrictions", label: "accesses", value: Make.ref("_backing"))
                .with(\.trailingTrivia, .newline)
            accessors.append(
                Make.accessor(
                    .`init`,
                    parameter: "initialValue",
                    attributes: [.attribute(restrictions)],
                    body: Make.call(
                        Make.member(backing, "initialize" + optionalSuffix),
                        [(nil, slotExpression), (nil, Make.ref("initialValue"))]
                    )
                )
            )
        }
        accessors.append(
            Make.accessor(
                .get,
                body: Make.call(
                    Make.member(backing, "get" + optionalSuffix),
                    [(nil, slotExpression), ("as", Make.metatype(attribute.valueType))]
                )
            )
        )
        accessors.append(
            Make.accessor(
                .set,
                body: Make.call(
                    Make.member(backing, "set" + optionalSuffix),
                    [(nil, slotExpression), (nil, Make.ref("newValue"))]
                )
            )
        )
        return accessors
    }

    /// The integer literal passed as `slot:`.
    static func slotArgument(of node: AttributeSyntax) -> Int? {
        guard case .argumentList(let arguments) = node.arguments,
            let argument = arguments.first(where: { $0.label?.text == "slot" }),
            let literal = argument.expression.as(IntegerLiteralExprSyntax.self)
        else { return nil }
        return Int(literal.literal.text)
    }
}

/// Implements `@_PersistedRelationship(index: N)`, which `@Entity` attaches to each
/// `@Relationship` property:
///
/// ```swift
/// get { _backing.getToOne(N, as: T.self) }        // getToMany for [T]
/// set { _setToOne(N, newValue) }                  // _setToMany for [T]; works before insertion too
/// ```
///
/// An initializer (`= []`, `= nil`) gets an init accessor that ignores it: a new object's
/// relationships are empty.
public struct PersistedRelationshipMacro: AccessorMacro {
    public static func expansion(
        of node: AttributeSyntax,
        providingAccessorsOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [AccessorDeclSyntax] {
        guard case .argumentList(let arguments) = node.arguments,
            let argument = arguments.first(where: { $0.label?.text == "index" }),
            let literal = argument.expression.as(IntegerLiteralExprSyntax.self),
            let index = Int(literal.literal.text),
            let variable = declaration.as(VariableDeclSyntax.self),
            case .relationship(let relationship) = EntityMembers.role(of: variable)
        else { return [] }
        let backing = Make.ref("_backing")
        let suffix = relationship.isToMany ? "ToMany" : "ToOne"
        var accessors: [AccessorDeclSyntax] = []
        if relationship.hasInitializer {
            let restrictions = Make.attribute("storageRestrictions", label: "accesses", value: Make.ref("_backing"))
                .with(\.trailingTrivia, .newline)
            accessors.append(
                Make.accessor(
                    .`init`, parameter: "initialValue", attributes: [.attribute(restrictions)],
                    body: Make.call(
                        Make.member(backing, "initialize"), [(nil, Make.int(index)), (nil, Make.ref("initialValue"))])))
        }
        accessors.append(
            Make.accessor(
                .get,
                body: Make.call(
                    Make.member(backing, "get" + suffix),
                    [(nil, Make.int(index)), ("as", Make.metatype(relationship.destinationType))])))
        accessors.append(
            Make.accessor(
                .set, body: Make.call(Make.ref("_set" + suffix), [(nil, Make.int(index)), (nil, Make.ref("newValue"))]))
        )
        return accessors
    }
}
