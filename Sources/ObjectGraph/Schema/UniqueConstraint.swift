import Foundation

/// A set of attributes whose combined values no two objects of an entity may share.
///
/// Declared with `@Attribute(.unique)` on one attribute or `#Unique<T>([\.a, \.b])` for a
/// compound key (SwiftData's spelling). Objects with a `nil` in any of the key's attributes
/// are not constrained, as in SQL.
///
/// Each constraint is a hash index over the entity's objects, pending inserts and changes
/// included, so ``ModelContext/object(_:where:equals:)`` and upserts find any object in O(1).
public struct UniqueConstraint: Sendable, Hashable {
    /// What a save does when two objects share a key.
    public enum CollisionPolicy: String, Sendable, Hashable, Codable {
        /// The save fails with a ``ValidationError`` naming both objects and the constraint
        /// (Docs/Semantics.md, rule 13). The default.
        case fail
        /// An object inserted since the last save that collides with another object is merged
        /// into it: its non-nil values are copied onto the existing object and the inserted one
        /// vanishes (SwiftData's upsert-on-save). A merge that would change another unique key
        /// the existing object holds is not made: the save reports the collision, as `.fail`
        /// does, saying which key (Docs/Semantics.md, rule 13).
        case merge
    }

    /// The attribute names making up the key, in order.
    public let keys: [String]
    /// What a save does on a collision.
    public let onCollision: CollisionPolicy

    /// Creates a constraint over `keys`.
    public init(_ keys: [String], onCollision: CollisionPolicy = .fail) {
        self.keys = keys
        self.onCollision = onCollision
    }

    /// `Entity(a, b)`, for messages.
    func name(in entity: String) -> String { "\(entity)(\(keys.joined(separator: ", ")))" }
}

/// Options of `@Attribute`.
public struct AttributeOption: Sendable, Hashable {
    let uniquePolicy: UniqueConstraint.CollisionPolicy?
    var validator: AttributeValidator? = nil

    /// The attribute's value is unique among the entity's objects; a collision fails the save.
    public static let unique = AttributeOption(uniquePolicy: .fail)

    /// The attribute's value is unique; `onCollision` says what a save does on a collision.
    public static func unique(onCollision: UniqueConstraint.CollisionPolicy) -> AttributeOption {
        AttributeOption(uniquePolicy: onCollision)
    }
}

extension AttributeOption {
    /// The attribute's value must lie in `range`; checked by `save()`'s validation (a `nil`
    /// value is not checked: optionality is its own rule).
    public static func range<T: PrimitiveAttribute & Comparable>(_ range: ClosedRange<T>) -> AttributeOption {
        AttributeOption(uniquePolicy: nil, validator: .range(range))
    }

    /// The attribute's value must be at least `range.lowerBound`.
    public static func range<T: PrimitiveAttribute & Comparable>(_ range: PartialRangeFrom<T>) -> AttributeOption {
        AttributeOption(uniquePolicy: nil, validator: .range(range))
    }

    /// The attribute's value must satisfy `isValid`; `reason` is the failure's reason.
    ///
    /// ```swift
    /// @Attribute(.validate("must contain @") { (email: String) in email.contains("@") }) var email: String
    /// ```
    public static func validate<T: PrimitiveAttribute>(
        _ reason: String, _ isValid: @escaping @Sendable (T) -> Bool
    ) -> AttributeOption {
        AttributeOption(uniquePolicy: nil, validator: .validate(reason, isValid))
    }
}

/// A per-attribute check that `save()` runs on every inserted and updated object with a value
/// for the attribute; each failure becomes one entry of the save's ``ValidationError``.
///
/// Declared through `@Attribute` options (``AttributeOption/range(_:)-(ClosedRange<T>)``,
/// ``AttributeOption/validate(_:_:)``) or the `options:` of a hand-written
/// ``AttributeDescription``. Two validators are equal when their descriptions are.
public struct AttributeValidator: Sendable, Hashable, CustomStringConvertible {
    /// What the validator requires, for messages (`in 0...150`).
    public let description: String
    /// Returns `nil` for a valid value, or the reason it is not.
    let check: @Sendable (AttributeValue) -> String?
    /// For a `Codable` attribute's check (``decodes(as:)``), the Swift type the JSON must decode
    /// as: a value of exactly this type needs no check, its JSON is its own.
    let decodedType: ObjectIdentifier?

    /// A validator from a check returning `nil` for a valid value or the reason it is not.
    public init(_ description: String, check: @escaping @Sendable (AttributeValue) -> String?) {
        self.init(description, decodedType: nil, check: check)
    }

    private init(
        _ description: String, decodedType: ObjectIdentifier?, check: @escaping @Sendable (AttributeValue) -> String?
    ) {
        self.description = description
        self.decodedType = decodedType
        self.check = check
    }

    /// The value must be the raw value of one of `T`'s cases.
    static func isCase<T: RawRepresentable>(of type: T.Type) -> AttributeValidator
    where T.RawValue: PrimitiveAttribute {
        // The check runs where the context runs (its one isolation domain), like every other
        // use of the model's types; only the description crosses domains. An enum's
        // `init(rawValue:)` is a pure function of its cases, whatever isolation it is called from.
        nonisolated(unsafe) let isCase: (T.RawValue) -> Bool = { T(rawValue: $0) != nil }
        return rawValue(T.RawValue.self, typeName: "\(T.self)") { isCase($0) }
    }

    /// The value must be JSON that decodes as `T` (``CodableAttributeCoder``); the reason is
    /// the decoding error.
    static func decodes<T: Decodable>(as type: T.Type) -> AttributeValidator {
        // As for `isCase(of:)`: the check runs where the context runs; decoding is a function
        // of the bytes and the type's declaration.
        nonisolated(unsafe) let decodes: (Data) -> String? = { data in
            do {
                _ = try CodableAttributeCoder.decode(T.self, from: data)
                return nil
            } catch {
                return "\(error)"
            }
        }
        return AttributeValidator("JSON of \(T.self)", decodedType: ObjectIdentifier(T.self)) { value in
            guard case .data(let data) = value else { return "holds \(value), not JSON" }
            return decodes(data)
        }
    }

    private static func rawValue<R: PrimitiveAttribute>(
        _ type: R.Type, typeName: String, isCase: @escaping @Sendable (R) -> Bool
    ) -> AttributeValidator {
        AttributeValidator("a case of \(typeName)") { value in
            guard let raw = R(value) else { return "holds \(value), not a \(R.self)" }
            return isCase(raw) ? nil : "\(raw) is not the raw value of a case of \(typeName)"
        }
    }

    /// The value must lie in `range`.
    public static func range<T: PrimitiveAttribute & Comparable>(_ range: ClosedRange<T>) -> AttributeValidator {
        AttributeValidator("in \(range)") { value in
            guard let v = T(value) else { return "holds \(value), not a \(T.self)" }
            return range.contains(v) ? nil : "\(v) is not in \(range)"
        }
    }

    /// The value must be at least `range.lowerBound`.
    public static func range<T: PrimitiveAttribute & Comparable>(_ range: PartialRangeFrom<T>) -> AttributeValidator {
        AttributeValidator("at least \(range.lowerBound)") { value in
            guard let v = T(value) else { return "holds \(value), not a \(T.self)" }
            return range.contains(v) ? nil : "\(v) is less than \(range.lowerBound)"
        }
    }

    /// The value must satisfy `isValid`; `reason` is the failure's reason.
    public static func validate<T: PrimitiveAttribute>(
        _ reason: String, _ isValid: @escaping @Sendable (T) -> Bool
    ) -> AttributeValidator {
        AttributeValidator(reason) { value in
            guard let v = T(value) else { return "holds \(value), not a \(T.self)" }
            return isValid(v) ? nil : reason
        }
    }

    public static func == (a: AttributeValidator, b: AttributeValidator) -> Bool { a.description == b.description }
    public func hash(into hasher: inout Hasher) { hasher.combine(description) }
}
