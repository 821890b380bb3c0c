import Foundation

/// The storage form of (part of) a predicate.
///
/// `exact`: the condition is the predicate. Otherwise it is a *prefilter*: a row that fails it
/// makes the predicate false without anything in the predicate throwing, so the row can be
/// skipped; a row that passes still needs Foundation's evaluation.
struct StorageTranslation {
    var condition: StorageCondition
    var exact: Bool
}

/// Translates the common shapes of a Foundation `Predicate` into a ``StorageCondition``.
struct PredicateTranslator<T: Entity> {
    let entity: EntityDescription
    /// The table a key path the entity description does not list may be probed on; none for a
    /// snapshot (such a key path is then evaluated by Foundation).
    let table: EntityTable?

    init(table: EntityTable) {
        entity = table.entity
        self.table = table
    }

    init(entity: EntityDescription) {
        self.entity = entity
        table = nil
    }

    /// The translation of `predicate`, or `nil` when no part of it can be evaluated on storage.
    func translate(_ predicate: Predicate<T>) -> StorageTranslation? {
        translate(predicate.expression)
    }

    func translate(_ expression: Any) -> StorageTranslation? {
        (expression as? any StorageTranslatable)?.storageTranslation(self)
    }

    /// `operand op other` where one side reads an attribute of the predicate's input and the
    /// other is a constant or `nil`.
    func comparison(_ lhs: Any, _ op: StorageCondition.Operator, _ rhs: Any) -> StorageTranslation? {
        if let k = lhs as? any KeyPathOperand, k.isRootVariable {
            return comparison(keyPath: k.anyKeyPath, op, rhs)
        }
        if let k = rhs as? any KeyPathOperand, k.isRootVariable {
            return comparison(keyPath: k.anyKeyPath, op.flipped, lhs)
        }
        return nil
    }

    private func comparison(keyPath: AnyKeyPath, _ op: StorageCondition.Operator, _ other: Any) -> StorageTranslation? {
        guard let a = KeyPathResolver.resolve(keyPath, entity: entity, probing: table, as: T.self) else { return nil }
        let constant: Any?
        if other is any NilOperand {
            constant = nil
        } else if let v = other as? any ConstantOperand {
            let value = v.constantValue
            constant = (value as? any AnyOptional)?.isNil == true ? nil : value
        } else {
            return nil
        }
        guard let constant else {
            guard a.isOptional, op == .equal || op == .notEqual else { return nil }
            let isNull = StorageCondition.isNull(slot: a.slot)
            return StorageTranslation(condition: op == .equal ? isNull : .not(isNull), exact: true)
        }
        guard let p = constant as? any PrimitiveAttribute,
            let value = AttributeValue.coerce(attributeValue: p.attributeValue, to: a.type)
        else { return nil }
        let s = a.slot, o = a.isOptional
        let condition: StorageCondition
        switch value {
        case .int(let k): condition = .int(slot: s, op, k, optional: o)
        case .uint(let k): condition = .uint(slot: s, op, k, optional: o)
        case .double(let k): condition = .double(slot: s, op, k, optional: o)
        case .float(let k): condition = .float(slot: s, op, Double(k), optional: o)
        case .date(let d): condition = .double(slot: s, op, d.timeIntervalSinceReferenceDate, optional: o)
        case .bool(let k):
            guard op == .equal || op == .notEqual else { return nil }
            condition = .bool(slot: s, op, k, optional: o)
        case .string(let k):
            let utf8 = Array(k.utf8)
            condition = .string(
                slot: s, op, .init(string: k, utf8: utf8, isASCII: utf8.allSatisfy { $0 < 0x80 }), optional: o)
        case .data, .uuid, .url, .stringList, .intList, .object, .objects:
            return nil
        }
        return StorageTranslation(condition: condition, exact: true)
    }
}

// MARK: Expression shapes

/// A predicate expression that may have a storage form.
protocol StorageTranslatable {
    func storageTranslation<T: Entity>(_ translator: PredicateTranslator<T>) -> StorageTranslation?
}

/// A key path applied to a predicate variable or another expression.
protocol KeyPathOperand {
    var anyKeyPath: AnyKeyPath { get }
    var isRootVariable: Bool { get }
}

/// A constant captured by the predicate.
protocol ConstantOperand {
    var constantValue: Any { get }
}

/// The `nil` literal.
protocol NilOperand {}

/// A predicate's input variable.
protocol VariableOperand {}

extension PredicateExpressions.Variable: VariableOperand {}
extension PredicateExpressions.NilLiteral: NilOperand {}

extension PredicateExpressions.Value: ConstantOperand {
    var constantValue: Any { value }
}

extension PredicateExpressions.KeyPath: KeyPathOperand {
    var anyKeyPath: AnyKeyPath { keyPath }
    // Only a variable at the top level of the predicate is reached: the translator never
    // descends into nested scopes, so any variable here is the predicate's input.
    var isRootVariable: Bool { root is any VariableOperand }
}

extension PredicateExpressions.KeyPath: StorageTranslatable where Output == Bool {
    func storageTranslation<E: Entity>(_ translator: PredicateTranslator<E>) -> StorageTranslation? {
        translator.comparison(self, .equal, PredicateExpressions.Value(true))
    }
}

extension PredicateExpressions.Value: StorageTranslatable where Output == Bool {
    func storageTranslation<E: Entity>(_ translator: PredicateTranslator<E>) -> StorageTranslation? {
        StorageTranslation(condition: .constant(value), exact: true)
    }
}

extension PredicateExpressions.Equal: StorageTranslatable {
    func storageTranslation<E: Entity>(_ translator: PredicateTranslator<E>) -> StorageTranslation? {
        translator.comparison(lhs, .equal, rhs)
    }
}

extension PredicateExpressions.NotEqual: StorageTranslatable {
    func storageTranslation<E: Entity>(_ translator: PredicateTranslator<E>) -> StorageTranslation? {
        translator.comparison(lhs, .notEqual, rhs)
    }
}

extension PredicateExpressions.Comparison: StorageTranslatable {
    func storageTranslation<E: Entity>(_ translator: PredicateTranslator<E>) -> StorageTranslation? {
        let o: StorageCondition.Operator =
            switch op {
            case .lessThan: .less
            case .lessThanOrEqual: .lessOrEqual
            case .greaterThan: .greater
            case .greaterThanOrEqual: .greaterOrEqual
            @unknown default: .equal
            }
        if case .equal = o { return nil }
        return translator.comparison(lhs, o, rhs)
    }
}

extension PredicateExpressions.Conjunction: StorageTranslatable {
    func storageTranslation<E: Entity>(_ translator: PredicateTranslator<E>) -> StorageTranslation? {
        // `lhs && rhs` evaluates rhs only when lhs is true, so lhs alone may prefilter; rhs may
        // join it only when lhs is exact (rhs then runs exactly when Foundation would run it).
        guard let l = translator.translate(lhs) else { return nil }
        guard l.exact else { return l }
        guard let r = translator.translate(rhs) else { return StorageTranslation(condition: l.condition, exact: false) }
        return StorageTranslation(condition: .and(l.condition, r.condition), exact: r.exact)
    }
}

extension PredicateExpressions.Disjunction: StorageTranslatable {
    func storageTranslation<E: Entity>(_ translator: PredicateTranslator<E>) -> StorageTranslation? {
        // A row failing both prefilters makes each side false without throwing.
        guard let l = translator.translate(lhs), let r = translator.translate(rhs) else { return nil }
        return StorageTranslation(condition: .or(l.condition, r.condition), exact: l.exact && r.exact)
    }
}

extension PredicateExpressions.Negation: StorageTranslatable {
    func storageTranslation<E: Entity>(_ translator: PredicateTranslator<E>) -> StorageTranslation? {
        guard let w = translator.translate(wrapped), w.exact else { return nil }
        return StorageTranslation(condition: .not(w.condition), exact: true)
    }
}
