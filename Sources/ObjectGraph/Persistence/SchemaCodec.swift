/// The schema as the journal records it: entity and attribute names and types, so the journal
/// can be read, dumped and compacted without the application's model code.
///
/// ```
/// payload   := u8 version(1, or 2 when a relationship slot is present) varint entityCount entity*
/// entity    := string name  varint attributeCount attribute*
/// attribute := string name  string type  string valueKind  string swiftType  u8 flags
///              [value default if flags & 2]  [string originalName if flags & 4]
///              [string destinationEntity if flags & 8, version 2 only: a to-one relationship slot]
/// flags     := 1 optional | 2 has default | 4 has original name | 8 to-one relationship
/// string    := varint length + UTF-8 bytes
/// ```
public struct StoredSchema: Sendable, Hashable {
    /// One entity as recorded.
    public struct Entity: Sendable, Hashable {
        /// The entity's name.
        public var name: String
        /// Its attributes in slot order.
        public var attributes: [AttributeDescription]
    }

    /// The entities in the order their transaction blocks refer to them.
    public var entities: [Entity]

    /// The payload format version this code writes for a schema without relationships; version
    /// 1 readers can read it.
    static let version: UInt8 = 1
    /// The version written when a to-one relationship slot is present: its attribute flags carry
    /// bit 8 and the destination entity's name follows.
    static let relationshipVersion: UInt8 = 2

    init(entities: [Entity]) { self.entities = entities }

    /// The stored form of a live schema.
    public init(_ schema: Schema) {
        entities = schema.entities.enumerated().map { index, e in
            var attributes = e.attributes
            for r in schema.relationships[index] where r.slot >= 0 {
                attributes[r.slot] = AttributeDescription(toOne: r.name, destinationEntity: schema.entities[r.destination].name)
            }
            return Entity(name: e.name, attributes: attributes)
        }
    }

    /// Encodes the schema payload.
    public func encoded() -> [UInt8] {
        var w = ByteWriter()
        let references = entities.contains { $0.attributes.contains { $0.destinationEntity != nil } }
        w.byte(references ? Self.relationshipVersion : Self.version)
        w.varint(entities.count)
        for e in entities {
            w.string(e.name)
            w.varint(e.attributes.count)
            for a in e.attributes {
                w.string(a.name)
                w.string(a.type.rawValue)
                w.string(a.valueKind.rawValue)
                w.string(a.swiftTypeName)
                w.byte(
                    (a.isOptional ? 1 : 0) | (a.defaultValue != nil ? 2 : 0) | (a.originalName != nil ? 4 : 0)
                        | (a.destinationEntity != nil ? 8 : 0))
                if let d = a.defaultValue { TransactionCodec.writeValue(d, type: a.type, into: &w) }
                if let o = a.originalName { w.string(o) }
                if let d = a.destinationEntity { w.string(d) }
            }
        }
        return w.bytes
    }

    /// Decodes a schema payload.
    ///
    /// - Throws: ``StoreError`` (`corruptPayload`) naming the byte offset of the problem.
    public static func decode(_ bytes: [UInt8]) throws(StoreError) -> StoredSchema {
        do throws(PayloadReader.Failure) {
            return try PayloadReader.read(bytes) { r throws(PayloadReader.Failure) -> StoredSchema in
                let version = try r.byte()
                guard version == Self.version || version == Self.relationshipVersion else {
                    throw PayloadReader.malformed(
                        0, "schema payload version \(version) is not supported (this build reads \(Self.version) and \(Self.relationshipVersion))")
                }
                var entities: [Entity] = []
                for _ in 0..<(try r.count(limit: 1 << 20)) {
                    let name = try r.string()
                    var attributes: [AttributeDescription] = []
                    for _ in 0..<(try r.count(limit: 1 << 20)) {
                        let aName = try r.string()
                        let typeOffset = r.offset
                        guard let type = AttributeType(rawValue: try r.string()) else {
                            throw PayloadReader.malformed(typeOffset, "unknown attribute type")
                        }
                        let kind = AttributeValueKind(rawValue: try r.string()) ?? .primitive
                        let swiftType = try r.string()
                        let flags = try r.byte()
                        let defaultValue = flags & 2 != 0 ? try r.value(type) : nil
                        let original = flags & 4 != 0 ? try r.string() : nil
                        if flags & 8 != 0 {
                            guard version >= Self.relationshipVersion, type == .uint64 else {
                                throw PayloadReader.malformed(r.offset, "relationship flag on '\(aName)' in a version \(version) schema or a \(type.rawValue) slot")
                            }
                            attributes.append(AttributeDescription(toOne: aName, destinationEntity: try r.string()))
                            continue
                        }
                        attributes.append(AttributeDescription(
                            name: aName, type: type, valueKind: kind, swiftTypeName: swiftType,
                            isOptional: flags & 1 != 0, defaultValue: defaultValue, originalName: original, problem: nil))
                    }
                    entities.append(Entity(name: name, attributes: attributes))
                }
                return StoredSchema(entities: entities)
            }
        } catch {
            switch error {
            case .malformed(let malformed): throw StoreError(.corruptPayload, "schema record: \(malformed)")
            case .piecesEnded: throw StoreError(.corruptPayload, "schema record: truncated")
            }
        }
    }
}

/// How a journal written with one schema maps onto the application's current schema.
struct SchemaMapping {
    /// Per stored entity: the current entity's index, or nil when the entity was removed.
    var entity: [Int?]
    /// Per stored entity, per stored attribute: the current slot, or -1 when dropped.
    var slots: [[Int]]

    /// Matches entities by name and attributes by name or declared original name.
    ///
    /// - Throws: ``StoreError`` with code `incompatibleSchema` for an attribute whose type changed
    ///   to one that cannot hold every stored value.
    init(stored: StoredSchema, current: Schema) throws(StoreError) {
        var entity: [Int?] = []
        var slots: [[Int]] = []
        var problems: [String] = []
        for e in stored.entities {
            guard let index = current.indexByName[e.name] else {
                entity.append(nil)
                slots.append(Array(repeating: -1, count: e.attributes.count))
                continue
            }
            let d = current.entities[index]
            entity.append(index)
            var map: [Int] = []
            for a in e.attributes {
                let slot = d.slot(forKey: a.name)
                    ?? d.attributes.firstIndex { $0.originalName == a.name && d.slot(forKey: a.name) == nil }
                guard let slot else {
                    map.append(-1)
                    continue
                }
                let now = d.attributes[slot]
                if !Self.canWiden(from: a.type, to: now.type) {
                    problems.append("\(e.name).\(a.name) was stored as \(a.type.rawValue) and is now \(now.name): \(now.type.rawValue)")
                }
                map.append(slot)
            }
            slots.append(map)
        }
        guard problems.isEmpty else {
            throw StoreError(.incompatibleSchema, "incompatible schema change: " + problems.joined(separator: "; "))
        }
        self.entity = entity
        self.slots = slots
    }

    /// Whether every value of `stored` type is a value of `current` type.
    static func canWiden(from stored: AttributeType, to current: AttributeType) -> Bool {
        if stored == current { return true }
        let signed: [AttributeType] = [.int8, .int16, .int32, .int64]
        let unsigned: [AttributeType] = [.uint8, .uint16, .uint32, .uint64]
        if let a = signed.firstIndex(of: stored), let b = signed.firstIndex(of: current) { return a <= b }
        if let a = unsigned.firstIndex(of: stored), let b = unsigned.firstIndex(of: current) { return a <= b }
        // uintN fits in int(2N).
        if let a = unsigned.firstIndex(of: stored), let b = signed.firstIndex(of: current) { return a < b }
        return false
    }
}
