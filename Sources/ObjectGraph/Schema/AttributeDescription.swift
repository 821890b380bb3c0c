import Foundation

/// One persisted attribute of an entity: its name, storage type, optionality and default.
///
/// The `@Entity` macro builds these from a class's stored properties; hand-written models call
/// the `attribute(_:_:optional:default:originalName:)` factories the same way:
///
/// ```swift
/// .attribute("name", String.self),
/// .attribute("age", Int.self, default: 18),
/// .attribute("nickname", String.self, optional: true),
/// ```
public struct AttributeDescription: Sendable, Hashable {
    /// The attribute's key: the Swift property name.
    public let name: String
    /// How the value is stored.
    public let type: AttributeType
    /// How the Swift type maps onto ``type``.
    public let valueKind: AttributeValueKind
    /// The Swift type's name, for messages and the journal's schema record.
    public let swiftTypeName: String
    /// Whether `nil` is a valid value. A non-optional attribute without a value fails validation.
    public let isOptional: Bool
    /// The value a new object starts with, or `nil` for none.
    public let defaultValue: AttributeValue?
    /// The attribute's name in an older model, for schema evolution.
    public let originalName: String?
    /// Set when the attribute alone is a unique key (`@Attribute(.unique)`).
    public let uniquePolicy: UniqueConstraint.CollisionPolicy?
    /// Checks `save()` runs on the attribute's value (`@Attribute(.range(0...150))`).
    public let validators: [AttributeValidator]
    /// Whether this slot holds a to-one relationship (the destination's serial) rather than an
    /// attribute the model declares.
    public let isRelationship: Bool
    /// For a to-one relationship's slot, the destination entity's name as the journal records it.
    public let destinationEntity: String?
    /// For a `RawRepresentable` attribute: the check that a raw value is one of the type's
    /// cases. ``Entity/setValue(_:forKey:)`` refuses a raw value that is not, and opening a
    /// store refuses a journal holding one (written by a model with more cases), so that a
    /// stored value always reads back as a case.
    public let rawValueCheck: AttributeValidator?
    /// For a `Codable` attribute: the check that stored JSON decodes as the attribute's Swift
    /// type (the check's reason is the decoding error). Opening a store runs it over every
    /// stored value, and a replica over every value a shipped record stores, and both refuse
    /// a value that does not decode (`StoreError` code `incompatibleSchema`: the type changed
    /// shape since the value was written), so that reading the attribute never meets one.
    public let codableCheck: AttributeValidator?
    /// A problem found while building the description (for example a default value that cannot
    /// be encoded). ``Schema`` refuses descriptions with problems.
    public let problem: String?

    /// Creates a description from its parts (for tools that rebuild a schema from a journal).
    public init(
        name: String, type: AttributeType, valueKind: AttributeValueKind = .primitive,
        swiftTypeName: String? = nil, isOptional: Bool = false, defaultValue: AttributeValue? = nil,
        originalName: String? = nil, destinationEntity: String? = nil
    ) {
        self.validators = []
        self.rawValueCheck = nil
        self.codableCheck = nil
        self.isRelationship = destinationEntity != nil
        self.destinationEntity = destinationEntity
        self.name = name
        self.type = type
        self.valueKind = valueKind
        self.swiftTypeName = swiftTypeName ?? type.rawValue
        self.isOptional = isOptional
        self.defaultValue = defaultValue
        self.originalName = originalName
        self.problem = nil
        self.uniquePolicy = nil
    }

    init(
        name: String, type: AttributeType, valueKind: AttributeValueKind, swiftTypeName: String,
        isOptional: Bool, defaultValue: AttributeValue?, originalName: String?, problem: String?,
        options: [AttributeOption] = [], rawValueCheck: AttributeValidator? = nil,
        codableCheck: AttributeValidator? = nil
    ) {
        self.rawValueCheck = rawValueCheck
        self.codableCheck = codableCheck
        self.isRelationship = false
        self.destinationEntity = nil
        self.validators = options.compactMap(\.validator)
        self.uniquePolicy = options.lazy.compactMap(\.uniquePolicy).first
        self.name = name
        self.type = type
        self.valueKind = valueKind
        self.swiftTypeName = swiftTypeName
        self.isOptional = isOptional
        self.defaultValue = defaultValue
        self.originalName = originalName
        self.problem = problem
    }

    /// The slot of a to-one relationship; the destination's name is filled in by ``StoredSchema``.
    init(toOne name: String, destinationEntity: String? = nil) {
        self.name = name
        self.type = .uint64
        self.valueKind = .primitive
        self.swiftTypeName = "relationship"
        self.isOptional = true
        self.defaultValue = nil
        self.originalName = nil
        self.problem = nil
        self.uniquePolicy = nil
        self.isRelationship = true
        self.destinationEntity = destinationEntity
        self.validators = []
        self.rawValueCheck = nil
        self.codableCheck = nil
    }

    /// An attribute of a primitive type (`Int`, `String`, `Date`, …).
    ///
    /// - Parameters:
    ///   - name: The property name.
    ///   - type: The Swift type (the wrapped type for an optional).
    ///   - optional: Whether the property is optional.
    ///   - default: The declaration's default value, evaluated once.
    ///   - originalName: The attribute's name in an older model.
    ///   - options: `@Attribute` options such as ``AttributeOption/unique``.
    public static func attribute<T: PrimitiveAttribute>(
        _ name: String, _ type: T.Type, optional: Bool = false, default: T? = nil, originalName: String? = nil,
        options: [AttributeOption] = []
    ) -> AttributeDescription {
        AttributeDescription(
            name: name, type: T.attributeType, valueKind: .primitive, swiftTypeName: "\(T.self)",
            isOptional: optional, defaultValue: `default`?.attributeValue, originalName: originalName, problem: nil,
            options: options)
    }

    /// An attribute of a `RawRepresentable` type (typically an enum), stored as its raw value.
    public static func attribute<T: RawRepresentable>(
        _ name: String, _ type: T.Type, optional: Bool = false, default: T? = nil, originalName: String? = nil,
        options: [AttributeOption] = []
    ) -> AttributeDescription where T.RawValue: PrimitiveAttribute {
        AttributeDescription(
            name: name, type: T.RawValue.attributeType, valueKind: .rawRepresentable, swiftTypeName: "\(T.self)",
            isOptional: optional, defaultValue: `default`?.rawValue.attributeValue, originalName: originalName,
            problem: nil, options: options, rawValueCheck: .isCase(of: T.self))
    }

    /// An attribute of a `RawRepresentable` type that is also `Codable`: stored as its raw value.
    public static func attribute<T: RawRepresentable & Codable>(
        _ name: String, _ type: T.Type, optional: Bool = false, default: T? = nil, originalName: String? = nil,
        options: [AttributeOption] = []
    ) -> AttributeDescription where T.RawValue: PrimitiveAttribute {
        AttributeDescription(
            name: name, type: T.RawValue.attributeType, valueKind: .rawRepresentable, swiftTypeName: "\(T.self)",
            isOptional: optional, defaultValue: `default`?.rawValue.attributeValue, originalName: originalName,
            problem: nil, options: options, rawValueCheck: .isCase(of: T.self))
    }

    /// An attribute of any other `Codable` type, stored as its JSON encoding (sorted keys).
    public static func attribute<T: Codable>(
        _ name: String, _ type: T.Type, optional: Bool = false, default: T? = nil, originalName: String? = nil,
        options: [AttributeOption] = []
    ) -> AttributeDescription {
        var problem: String?
        var defaultValue: AttributeValue?
        if let d = `default` {
            do {
                defaultValue = .data(try CodableAttributeCoder.encode(d))
            } catch {
                problem = "default value of '\(name)' cannot be encoded as JSON: \(error)"
            }
        }
        return AttributeDescription(
            name: name, type: .data, valueKind: .codable, swiftTypeName: "\(T.self)",
            isOptional: optional, defaultValue: defaultValue, originalName: originalName, problem: problem,
            options: options, codableCheck: .decodes(as: T.self))
    }
}

/// The JSON coding of `Codable` attribute values: sorted keys, so equal values encode to equal
/// bytes and setting an equal value is recognised as no change.
enum CodableAttributeCoder {
    static func encode<T: Encodable>(_ value: T) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .secondsSince1970
        return try encoder.encode(value)
    }

    static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        // `[String]` and `[Int]`, the common list attributes, without `JSONDecoder`.
        if T.self == [String].self || T.self == [Int].self,
            let list = data.withUnsafeBytes({ ListAttributeDecoding.decode(T.self, from: $0) })
        {
            return list
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return try decoder.decode(type, from: data)
    }
}
