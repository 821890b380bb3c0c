/// The schema as the journal records it: entity and attribute names and types, so the journal
/// can be read, dumped and compacted without the application's model code.
///
/// ```
/// payload   := u8 version entityCount entity*  [varint linkCount link* if version ≥ 3]
///              [varint versionCount string* if version ≥ 4]
///              version: 1; 2 when a relationship slot is present; 3 when a link is present;
///              4 when the schema names its versions (``StoredSchema/versions``); 5 when an
///              attribute is a native list (``AttributeType/stringList``, ``AttributeType/intList``)
/// entity    := string name  varint attributeCount attribute*
/// attribute := string name  string type  string valueKind  string swiftType  u8 flags
///              [value default if flags & 2]  [string originalName if flags & 4]
///              [string destinationEntity if flags & 8, version ≥ 2 only: a to-one relationship slot]
/// flags     := 1 optional | 2 has default | 4 has original name | 8 to-one relationship
/// link      := side side        (a relationship stored as links; side 0, then its inverse)
/// side      := varint entity (index above)  string relationship  u8 (1 ordered | 2 to-one)
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

    /// One relationship stored as links (a many-to-many, or an ordered to-many with its
    /// inverse): its two sides, side 0 first.
    public struct Link: Sendable, Hashable {
        /// Per side: the entity's index in ``StoredSchema/entities``.
        public var entities: [Int]
        /// Per side: the relationship's name on that entity.
        public var names: [String]
        /// Per side: whether its lists keep an order.
        public var ordered: [Bool]
        /// Per side: whether it is a to-one (a list of at most one object).
        public var toOne: [Bool]

        /// "Entity.name ↔ Other.inverse", for messages and tools.
        public func describe(in schema: StoredSchema) -> String {
            func side(_ s: Int) -> String {
                let e =
                    schema.entities.indices.contains(entities[s])
                    ? schema.entities[entities[s]].name : "#\(entities[s])"
                return "\(e).\(names[s])\(toOne[s] ? "" : ordered[s] ? " (ordered)" : " (set)")"
            }
            return side(0) + " ↔ " + side(1)
        }
    }

    /// The relationships stored as links, in the order transaction payloads refer to them.
    public var links: [Link] = []

    /// The version identifiers of the models this store was written with, oldest first; the
    /// last one is this schema's (``VersionedSchema/versionIdentifier``). Empty for a store
    /// opened without versions (`Schema(Package.self)`). A migration appends
    /// the version it migrated to; a compaction keeps the list.
    public var versions: [String] = []

    /// This schema's version identifier: the last of ``versions``, nil for an unversioned one.
    public var versionIdentifier: String? { versions.last }

    /// The payload format version this code writes for a schema without relationships; version
    /// 1 readers can read it.
    static let version: UInt8 = 1
    /// The version written when a to-one relationship slot is present: its attribute flags carry
    /// bit 8 and the destination entity's name follows.
    static let relationshipVersion: UInt8 = 2
    /// The version written when the schema has relationships stored as links: the link list
    /// follows the entities.
    static let linkVersion: UInt8 = 3
    /// The version written when the schema names its versions: the link list (possibly empty)
    /// then the version identifiers follow the entities.
    static let versionsVersion: UInt8 = 4
    /// The version written when an attribute is a native list (``AttributeType/stringList``,
    /// ``AttributeType/intList``): laid out as version 4, except that the version list may be
    /// empty (an unversioned model). A build that predates list types refuses it by its
    /// version, before it meets a list cell it would misread as bytes.
    static let listVersion: UInt8 = 5

    init(entities: [Entity], links: [Link] = [], versions: [String] = []) {
        self.entities = entities
        self.links = links
        self.versions = versions
    }

    /// The stored form of a live schema.
    public init(_ schema: Schema) {
        entities = schema.entities.enumerated().map { index, e in
            var attributes = e.attributes
            for r in schema.relationships[index] where r.slot >= 0 {
                attributes[r.slot] = AttributeDescription(
                    toOne: r.name, destinationEntity: schema.entities[r.destination].name)
            }
            return Entity(name: e.name, attributes: attributes)
        }
        links = schema.links.map { Link(entities: $0.entities, names: $0.names, ordered: $0.ordered, toOne: $0.toOne) }
        versions = schema.versionIdentifier.map { [$0] } ?? []
    }

    /// Whether `other` records the same entities, attributes (names, types, optionality) and
    /// links as this schema, whatever the versions, defaults and Swift type names: what
    /// matches an unversioned store to a version of a migration plan.
    public func hasSameShape(as other: StoredSchema) -> Bool {
        func shape(_ s: StoredSchema) -> [[String]] {
            s.entities.map { e in
                [e.name]
                    + e.attributes.map {
                        "\($0.name):\($0.type.rawValue):\($0.isOptional):\($0.destinationEntity ?? "")"
                    }
            } + s.links.map { [$0.describe(in: s)] }
        }
        return shape(self) == shape(other)
    }

    /// Encodes the schema payload.
    public func encoded() -> [UInt8] {
        var w = ByteWriter()
        let references = entities.contains { $0.attributes.contains { $0.destinationEntity != nil } }
        let lists = entities.contains { $0.attributes.contains { $0.type.isList } }
        w.byte(
            lists
                ? Self.listVersion
                : !versions.isEmpty
                    ? Self.versionsVersion
                    : !links.isEmpty ? Self.linkVersion : references ? Self.relationshipVersion : Self.version)
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
        if !links.isEmpty || !versions.isEmpty || lists {
            w.varint(links.count)
            for l in links {
                for side in 0..<2 {
                    w.varint(l.entities[side])
                    w.string(l.names[side])
                    w.byte((l.ordered[side] ? 1 : 0) | (l.toOne[side] ? 2 : 0))
                }
            }
        }
        if !versions.isEmpty || lists {
            w.varint(versions.count)
            for v in versions { w.string(v) }
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
                guard version >= Self.version && version <= Self.listVersion else {
                    throw PayloadReader.malformed(
                        0,
                        "schema payload version \(version) is not supported (this build reads \(Self.version) to \(Self.listVersion))"
                    )
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
                        guard !type.isList || version >= Self.listVersion else {
                            throw PayloadReader.malformed(
                                typeOffset, "list attribute '\(aName)' in a version \(version) schema (lists need 5)")
                        }
                        let kind = AttributeValueKind(rawValue: try r.string()) ?? .primitive
                        let swiftType = try r.string()
                        let flags = try r.byte()
                        let defaultValue = flags & 2 != 0 ? try r.value(type) : nil
                        let original = flags & 4 != 0 ? try r.string() : nil
                        if flags & 8 != 0 {
                            guard version >= Self.relationshipVersion, type == .uint64 else {
                                throw PayloadReader.malformed(
                                    r.offset,
                                    "relationship flag on '\(aName)' in a version \(version) schema or a \(type.rawValue) slot"
                                )
                            }
                            attributes.append(AttributeDescription(toOne: aName, destinationEntity: try r.string()))
                            continue
                        }
                        attributes.append(
                            AttributeDescription(
                                name: aName, type: type, valueKind: kind, swiftTypeName: swiftType,
                                isOptional: flags & 1 != 0, defaultValue: defaultValue, originalName: original,
                                problem: nil))
                    }
                    entities.append(Entity(name: name, attributes: attributes))
                }
                var links: [Link] = []
                if version >= Self.linkVersion {
                    for _ in 0..<(try r.count(limit: 1 << 20)) {
                        var link = Link(entities: [], names: [], ordered: [], toOne: [])
                        for _ in 0..<2 {
                            let offset = r.offset
                            let entity = try r.count(limit: 1 << 20)
                            guard entity < entities.count else {
                                throw PayloadReader.malformed(
                                    offset, "link side names entity \(entity); the schema has \(entities.count)")
                            }
                            link.entities.append(entity)
                            link.names.append(try r.string())
                            let flagsOffset = r.offset
                            let flags = try r.byte()
                            guard flags & ~3 == 0, flags != 3 else {
                                throw PayloadReader.malformed(flagsOffset, "link side flags \(flags)")
                            }
                            link.ordered.append(flags & 1 != 0)
                            link.toOne.append(flags & 2 != 0)
                        }
                        guard !(link.toOne[0] && link.toOne[1]) else {
                            throw PayloadReader.malformed(r.offset - 1, "a link with two to-one sides")
                        }
                        links.append(link)
                    }
                }
                var versions: [String] = []
                if version >= Self.versionsVersion {
                    let offset = r.offset
                    let count = try r.count(limit: 1 << 16)
                    guard count > 0 || version >= Self.listVersion else {
                        throw PayloadReader.malformed(offset, "a version 4 schema names no version")
                    }
                    for _ in 0..<count { versions.append(try r.string()) }
                }
                guard r.isAtEnd else {
                    throw PayloadReader.malformed(r.offset, "\(r.count - r.offset) bytes after the schema")
                }
                return StoredSchema(entities: entities, links: links, versions: versions)
            }
        } catch {
            switch error {
            case .malformed(let malformed): throw StoreError(.corruptPayload, "schema record: \(malformed)")
            case .piecesEnded: throw StoreError(.corruptPayload, "schema record: truncated")
            case .violation(_, let violation): throw StoreError(.corruptPayload, "schema record: \(violation.reason)")
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
    /// Per stored link: the current link table and whether its sides are swapped, or nil when
    /// the relationship was removed.
    var links: [(link: Int, swapped: Bool)?] = []
    /// Per stored entity, per stored attribute: for a to-one slot whose relationship is now
    /// stored as links, the current link and this entity's side (a migration: each stored
    /// value becomes that object's only link).
    var slotLinks: [[(link: Int, side: Int)?]] = []
    /// Per stored entity: whether its stored attributes map onto every slot of the current
    /// entity, so that an inserted block's columns write each cell and null bit of its rows and
    /// replay need not write the defaults first.
    var feedsEverySlot: [Bool] = []
    /// Per stored entity, per stored attribute: the native list type (``AttributeType/stringList``,
    /// ``AttributeType/intList``) a `Codable` attribute's stored JSON is converted to, when the
    /// model now declares it as that list (`[String]`, `[Int]` written before lists were stored
    /// natively); nil for every other attribute.
    var listConversions: [[AttributeType?]] = []

    /// Matches entities by name and attributes by name or declared original name.
    ///
    /// With `permissive` (the copy a custom migration stage starts from), an attribute whose
    /// type changed incompatibly, and a relationship stored as links that is now of another
    /// kind, are dropped instead of refused: the stage sets them from the old objects.
    ///
    /// - Throws: ``StoreError`` with code `incompatibleSchema` for an attribute whose type changed
    ///   to one that cannot hold every stored value.
    init(stored: StoredSchema, current: Schema, permissive: Bool = false) throws(StoreError) {
        var entity: [Int?] = []
        var slots: [[Int]] = []
        var conversions: [[AttributeType?]] = []
        var problems: [String] = []
        for e in stored.entities {
            guard let index = current.indexByName[e.name] else {
                entity.append(nil)
                slots.append(Array(repeating: -1, count: e.attributes.count))
                conversions.append(Array(repeating: nil, count: e.attributes.count))
                continue
            }
            let d = current.entities[index]
            entity.append(index)
            var map: [Int] = []
            var converted: [AttributeType?] = []
            for a in e.attributes {
                converted.append(nil)
                let slot =
                    d.slot(forKey: a.name)
                    ?? d.attributes.firstIndex { $0.originalName == a.name && d.slot(forKey: a.name) == nil }
                guard let slot else {
                    map.append(-1)
                    continue
                }
                let now = d.attributes[slot]
                // JSON of a list now stored natively: converted as it is replayed, a lightweight
                // change (a value that is not such a list is refused then).
                if let list = ListCoding.conversion(from: a, to: now) {
                    converted[converted.count - 1] = list
                    map.append(slot)
                    continue
                }
                // For a custom stage, a value whose Swift type changed (an enum or a Codable
                // type, stored as its raw value or JSON) starts at its default too.
                let retyped =
                    a.valueKind != now.valueKind
                    || (now.valueKind != .primitive && a.swiftTypeName != now.swiftTypeName)
                if !Self.canWiden(from: a.type, to: now.type) || permissive && retyped {
                    if permissive {
                        map.append(-1)
                        continue
                    }
                    problems.append(
                        "\(e.name).\(a.name) was stored as \(a.type.rawValue) and is now \(now.name): \(now.type.rawValue)"
                    )
                }
                map.append(slot)
            }
            slots.append(map)
            conversions.append(converted)
        }
        // Relationships stored as links: matched by their two (entity, name) sides.
        func currentLink(_ entityName: String, _ name: String) -> (link: Int, side: Int)? {
            guard let e = current.indexByName[entityName] else { return nil }
            for (k, l) in current.links.enumerated() {
                for side in 0..<2 where l.entities[side] == e && l.names[side] == name { return (k, side) }
            }
            return nil
        }
        var links: [(link: Int, swapped: Bool)?] = []
        for l in stored.links {
            let names = (0..<2).map { stored.entities[l.entities[$0]].name }
            if let (k, side) = currentLink(names[0], l.names[0]),
                let (k1, side1) = currentLink(names[1], l.names[1]), k1 == k, side1 == 1 - side
            {
                links.append((k, side == 1))
                continue
            }
            // Still declared, no longer as links: refused, not dropped.
            for s in 0..<2 where !permissive {
                if let e = current.entity(named: names[s]), e.relationships.contains(where: { $0.name == l.names[s] }) {
                    problems.append(
                        "\(names[s]).\(l.names[s]) was stored as links (\(l.describe(in: stored))) and is now a relationship of another kind; "
                            + "changing a many-to-many or ordered relationship into a to-one or an unordered one-to-many is not migrated"
                    )
                }
            }
            links.append(nil)
        }
        var slotLinks: [[(link: Int, side: Int)?]] = []
        for (i, e) in stored.entities.enumerated() {
            var row: [(link: Int, side: Int)?] = Array(repeating: nil, count: e.attributes.count)
            for (j, a) in e.attributes.enumerated() where a.destinationEntity != nil && slots[i][j] < 0 {
                row[j] = currentLink(e.name, a.name)
            }
            slotLinks.append(row)
        }
        guard problems.isEmpty else {
            throw StoreError(.incompatibleSchema, "incompatible schema change: " + problems.joined(separator: "; "))
        }
        self.entity = entity
        self.slots = slots
        self.links = links
        self.slotLinks = slotLinks
        self.listConversions = conversions
        feedsEverySlot = zip(entity, slots).map { index, map in
            guard let index else { return false }
            var fed = [Bool](repeating: false, count: current.entities[index].attributes.count)
            for slot in map where slot >= 0 { fed[slot] = true }
            return !fed.contains(false)
        }
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
