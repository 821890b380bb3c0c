// Small helpers that build the expanded code as syntax nodes.
//
// The macro target depends on SwiftSyntax alone (not SwiftSyntaxBuilder), so
// the expansions are assembled from node initializers rather than from
// interpolated source strings. The macro system formats the result.

import SwiftSyntax

enum Make {
    /// `name`
    static func ref(_ name: String) -> ExprSyntax {
        ExprSyntax(DeclReferenceExprSyntax(baseName: .identifier(name)))
    }

    /// `base.name`, or `.name` when `base` is nil.
    static func member(_ base: ExprSyntax?, _ name: String) -> ExprSyntax {
        ExprSyntax(MemberAccessExprSyntax(base: base, declName: DeclReferenceExprSyntax(baseName: .identifier(name))))
    }

    /// `ObjectGraph.name`
    static func objectGraph(_ name: String) -> ExprSyntax {
        member(ref("ObjectGraph"), name)
    }

    /// `callee(label: argument, ...)`; a nil label makes an unlabeled argument.
    static func call(_ callee: ExprSyntax, _ arguments: [(String?, ExprSyntax)], multiline: Bool = false) -> ExprSyntax
    {
        var list: [LabeledExprSyntax] = []
        for (index, (label, expression)) in arguments.enumerated() {
            let isLast = index == arguments.count - 1
            list.append(
                LabeledExprSyntax(
                    leadingTrivia: multiline ? .newline : [],
                    label: label.map { .identifier($0) },
                    colon: label == nil ? nil : .colonToken(),
                    expression: expression,
                    trailingComma: isLast ? nil : .commaToken()
                )
            )
        }
        return ExprSyntax(
            FunctionCallExprSyntax(
                calledExpression: callee,
                leftParen: .leftParenToken(),
                arguments: LabeledExprListSyntax(list),
                rightParen: .rightParenToken(leadingTrivia: multiline && !list.isEmpty ? .newline : [])
            )
        )
    }

    /// A one-line array literal: `[a, b]`.
    static func inlineArray(_ elements: [ExprSyntax]) -> ExprSyntax {
        ExprSyntax(
            ArrayExprSyntax(
                leftSquare: .leftSquareToken(),
                elements: ArrayElementListSyntax(
                    elements.enumerated().map { i, e in
                        ArrayElementSyntax(
                            expression: e,
                            trailingComma: i == elements.count - 1 ? nil : .commaToken(trailingTrivia: .space))
                    }
                ),
                rightSquare: .rightSquareToken()
            )
        )
    }

    /// A multi-line array literal with a trailing comma after every element.
    static func array(_ elements: [ExprSyntax]) -> ExprSyntax {
        ExprSyntax(
            ArrayExprSyntax(
                leftSquare: .leftSquareToken(),
                elements: ArrayElementListSyntax(
                    elements.map {
                        ArrayElementSyntax(leadingTrivia: .newline, expression: $0, trailingComma: .commaToken())
                    }
                ),
                rightSquare: .rightSquareToken(leadingTrivia: elements.isEmpty ? [] : .newline)
            )
        )
    }

    /// `"text"`; `text` must not need escaping (it is an identifier).
    static func string(_ text: String) -> ExprSyntax {
        ExprSyntax(
            StringLiteralExprSyntax(
                openingQuote: .stringQuoteToken(),
                segments: [.stringSegment(StringSegmentSyntax(content: .stringSegment(text)))],
                closingQuote: .stringQuoteToken()
            )
        )
    }

    static func int(_ value: Int) -> ExprSyntax {
        ExprSyntax(IntegerLiteralExprSyntax(literal: .integerLiteral(String(value))))
    }

    static func bool(_ value: Bool) -> ExprSyntax {
        ExprSyntax(BooleanLiteralExprSyntax(literal: .keyword(value ? .true : .false)))
    }

    /// `T.self`, parenthesizing `T` where the grammar needs it (`(any P).self`, `(() -> Void).self`).
    static func metatype(_ type: TypeSyntax) -> ExprSyntax {
        let isPlain =
            type.is(IdentifierTypeSyntax.self) || type.is(MemberTypeSyntax.self)
            || type.is(ArrayTypeSyntax.self) || type.is(DictionaryTypeSyntax.self)
            || type.is(TupleTypeSyntax.self)
        let typeExpression = ExprSyntax(TypeExprSyntax(type: type.trimmed))
        let base =
            isPlain
            ? typeExpression
            : ExprSyntax(TupleExprSyntax(elements: [LabeledExprSyntax(expression: typeExpression)]))
        return ExprSyntax(
            MemberAccessExprSyntax(base: base, declName: DeclReferenceExprSyntax(baseName: .keyword(.self))))
    }

    /// `{ statement }` as a code block.
    static func block(_ statement: ExprSyntax) -> CodeBlockSyntax {
        CodeBlockSyntax(statements: [CodeBlockItemSyntax(item: .expr(statement))])
    }

    /// `attributes specifier(parameter) { statement }` as an accessor.
    static func accessor(
        _ specifier: Keyword,
        parameter: String? = nil,
        attributes: AttributeListSyntax = [],
        body statement: ExprSyntax
    ) -> AccessorDeclSyntax {
        AccessorDeclSyntax(
            attributes: attributes,
            accessorSpecifier: .keyword(specifier),
            parameters: parameter.map { AccessorParametersSyntax(name: .identifier($0)) },
            body: block(statement)
        )
    }

    /// `@name(label: value)`
    static func attribute(_ name: String, label: String, value: ExprSyntax) -> AttributeSyntax {
        AttributeSyntax(
            attributeName: TypeSyntax(IdentifierTypeSyntax(name: .identifier(name))),
            leftParen: .leftParenToken(),
            arguments: .argumentList([
                LabeledExprSyntax(label: .identifier(label), colon: .colonToken(), expression: value)
            ]),
            rightParen: .rightParenToken()
        )
    }
}
