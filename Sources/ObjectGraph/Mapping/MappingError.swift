/// Why a mapping could not be built or run, naming what is wrong as precisely as the input
/// allows: the byte offset of malformed JSON, or the source index, key path, value and attribute
/// of a value that cannot be transformed.
///
/// A mapping run that throws leaves the context exactly as it was before the run.
///
/// ```swift
/// do { try context.map(json, with: mapping) }
/// catch let error as MappingError where error.code == .untransformableValue {
///     print(error.sourceIndex!, error.keyPath!, error.attribute!)
/// }
/// ```
public struct MappingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure.
    public enum Code: String, Sendable, Hashable {
        /// The document is not JSON; ``byteOffset`` locates the first byte that cannot be read.
        case malformedJSON
        /// The root key path names nothing in the document.
        case rootKeyPathNotFound
        /// A source (or a nested source) is not a key-value object.
        case notAnObject
        /// A value cannot be transformed into its attribute's type.
        case untransformableValue
        /// A required attribute of a new object is `null` or missing in its source.
        case missingRequiredValue
        /// A mapping names an attribute or relationship its entity does not have.
        case unknownAttribute
        /// An identification list is empty, or names an attribute the mapping does not map; an
        /// upsert of a Swift value whose entity declares no identity, or a value without a
        /// property for an identifying attribute.
        case invalidIdentification
        /// An upsert's value identifies several existing objects (its entity has no unique
        /// constraint on the identifying attributes), so it updates none.
        case ambiguousIdentification
        /// A mapping's entity (or a nested mapping's) is not in the context's schema.
        case unknownEntity
        /// A value given as a struct source is not a struct.
        case notAStruct
        /// A struct's property has a type no attribute can store, or that its attribute does not hold.
        case unstorableProperty
        /// A struct has a property its entity lacks.
        case unknownProperty
        /// A `Codable` value could not be encoded into, or decoded from, an object.
        case codingFailed
        /// A Foundation value nests arrays and dictionaries deeper than a mapping accepts (1,024
        /// levels, the depth simdjson accepts in a JSON document, where a deeper one is
        /// ``malformedJSON``).
        case tooDeeplyNested
    }

    /// The kind of failure.
    public let code: Code
    /// What is wrong, in words that name every location known.
    public let message: String
    /// For malformed JSON: the offset of the first byte that cannot be read.
    public let byteOffset: Int?
    /// The index of the top-level source (the element of the document's array) that failed.
    public let sourceIndex: Int?
    /// The key path within that source, dotted (`"author.name"`).
    public let keyPath: String?
    /// The offending value as the source had it (JSON text for JSON sources).
    public let value: String?
    /// The entity concerned.
    public let entity: String?
    /// The attribute or relationship concerned.
    public let attribute: String?

    init(
        _ code: Code, _ message: String, byteOffset: Int? = nil, sourceIndex: Int? = nil, keyPath: String? = nil,
        value: String? = nil, entity: String? = nil, attribute: String? = nil
    ) {
        self.code = code
        self.message = message
        self.byteOffset = byteOffset
        self.sourceIndex = sourceIndex
        self.keyPath = keyPath
        self.value = value
        self.entity = entity
        self.attribute = attribute
    }

    public var description: String {
        var parts: [String] = []
        if let sourceIndex { parts.append("source \(sourceIndex)") }
        if let keyPath { parts.append("key path '\(keyPath)'") }
        if let byteOffset { parts.append("byte \(byteOffset)") }
        return (parts.isEmpty ? "" : parts.joined(separator: ", ") + ": ") + message
    }
}

extension MappingError.Code {
    /// Whether `error` is a ``MappingError`` with this code, so that callers can write
    /// `catch MappingError.Code.malformedJSON`.
    public static func ~= (code: Self, error: any Error) -> Bool {
        (error as? MappingError)?.code == code
    }
}
