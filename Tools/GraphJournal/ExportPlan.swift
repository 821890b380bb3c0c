import Foundation
import GraphJournal
import GraphJournalProgress
import ObjectGraph

/// What `export` writes, worked out once from a replay's live objects: per entity, its
/// attributes and its relationships, to-one slots and relationships stored as links alike.
struct ExportPlan {
    /// One relationship of an entity, as an object's value of it is found.
    struct Relationship {
        enum Storage {
            /// A to-one stored in the object's attribute slot `slot` (the destination's serial).
            case slot(Int)
            /// A side of the relationship stored as links `links[link]`.
            case link(Int, side: Int)
        }

        /// The relationship's name on the entity.
        var name: String
        var storage: Storage
        /// The related entity's name, when the schema names it.
        var destination: String?
        /// Whether an object holds at most one related object.
        var isToOne: Bool
        /// Whether a to-many side keeps its order.
        var isOrdered: Bool
    }

    /// One entity's live objects and what is written of them.
    struct Entity {
        var table: JournalReplay.Table
        /// The indices (in ``JournalReplay/Table/attributes``) of the attributes proper, in
        /// slot order: the to-one slots are ``relationships``.
        var attributes: [Int]
        /// The to-one slots in slot order, then the sides of relationships stored as links in
        /// the schema's order of links.
        var relationships: [Relationship]

        var name: String { table.name }

        /// The live serials, ascending.
        func serials() -> [UInt64] { table.objects.keys.sorted() }
    }

    var entities: [Entity]
    /// The relationships stored as links, with their links, in the schema's order.
    var links: [LinkState]
    /// ``entities`` by name.
    private var entityIndex: [String: Int] = [:]

    /// The plan of what `replay` holds: the tables of the schema in force (and of entities it
    /// dropped that still hold objects), in its order.
    init(_ replay: JournalReplay) {
        links = replay.links
        entities = []
        for table in replay.liveTables {
            var attributes: [Int] = []
            var relationships: [Relationship] = []
            for (i, a) in table.attributes.enumerated() {
                if a.isRelationship || a.destinationEntity != nil {
                    relationships.append(
                        Relationship(
                            name: a.name, storage: .slot(i), destination: a.destinationEntity, isToOne: true,
                            isOrdered: false))
                } else {
                    attributes.append(i)
                }
            }
            if table.inSchema {
                for (k, state) in replay.links.enumerated() {
                    for side in 0..<2 where state.entityNames[side] == table.name {
                        relationships.append(
                            Relationship(
                                name: state.link.names[side], storage: .link(k, side: side),
                                destination: state.entityNames[1 - side], isToOne: state.link.toOne[side],
                                isOrdered: state.link.ordered[side] && !state.link.toOne[side]))
                    }
                }
            }
            entityIndex[table.name] = entities.count
            entities.append(Entity(table: table, attributes: attributes, relationships: relationships))
        }
    }

    /// How many objects are written.
    var objectCount: Int64 { entities.reduce(0) { $0 + Int64($1.table.objects.count) } }

    /// The entity named `name`, if it has a table.
    func entity(named name: String) -> Entity? { entityIndex[name].map { entities[$0] } }

    /// Whether the object `serial` of `entity` is live.
    func isLive(_ entity: String, _ serial: UInt64) -> Bool {
        guard let i = entityIndex[entity] else { return false }
        return entities[i].table.objects[serial] != nil
    }

    /// The serial a to-one slot's value names, or nil (no value, or one that names no live
    /// object of the destination: counted in `dangling`).
    func destination(of value: AttributeValue?, _ relationship: Relationship, dangling: inout Int) -> UInt64? {
        let serial: UInt64
        switch value {
        case .uint(let v)?: serial = v
        case .int(let v)? where v > 0: serial = UInt64(v)
        case .object(let id)?: serial = id.serial
        case nil: return nil
        default:
            dangling += 1
            return nil
        }
        if let destination = relationship.destination, !isLive(destination, serial) {
            dangling += 1
            return nil
        }
        return serial
    }

    /// The note for to-one values that name no live object, written as null.
    static func danglingNote(_ count: Int) -> String {
        "\(count) to-one value\(count == 1 ? "" : "s") naming no live object \(count == 1 ? "was" : "were") written as null"
    }
}

/// Writes `plan`'s objects as JSON Lines: `{"entity":…,"id":…,"attributes":{…},"relationships":{…}}`,
/// by entity then ID, values as `dump` writes them; `out` is flushed as it fills.
func writeJSONLines(
    _ plan: ExportPlan, to out: inout StandardOutput, notes: inout ExportNotes, progress: ProgressBar?
) throws {
    func key(_ name: String) -> [UInt8] {
        var k = JSONWriter(capacity: 32)
        k.key(name)
        return k.bytes
    }
    var written: Int64 = 0
    var dangling = 0
    for entity in plan.entities {
        var prefix = JSONWriter(capacity: 64)
        prefix.raw("{\"entity\":"); prefix.string(entity.name); prefix.raw(",\"id\":")
        let attributeKeys = entity.attributes.map { key(entity.table.attributes[$0].name) }
        let relationshipKeys = entity.relationships.map { key($0.name) }
        for serial in entity.serials() {
            guard let values = entity.table.objects[serial] else { continue }
            out.json.bytes.append(contentsOf: prefix.bytes)
            out.json.uint(serial)
            out.json.raw(",\"attributes\":{")
            for (j, a) in entity.attributes.enumerated() {
                if j > 0 { out.json.raw(",") }
                out.json.bytes.append(contentsOf: attributeKeys[j])
                out.json.value(a < values.count ? values[a] : nil)
            }
            out.json.raw("},\"relationships\":{")
            for (j, r) in entity.relationships.enumerated() {
                if j > 0 { out.json.raw(",") }
                out.json.bytes.append(contentsOf: relationshipKeys[j])
                switch r.storage {
                case .slot(let slot):
                    let value = slot < values.count ? values[slot] : nil
                    if let d = plan.destination(of: value, r, dangling: &dangling) {
                        out.json.uint(d)
                    } else {
                        out.json.raw("null")
                    }
                case .link(let k, let side):
                    let members = plan.links[k].members(side, serial)
                    if r.isToOne {
                        if let m = members.first { out.json.uint(m) } else { out.json.raw("null") }
                    } else {
                        out.json.raw("[")
                        for (i, m) in members.enumerated() {
                            if i > 0 { out.json.raw(",") }
                            out.json.uint(m)
                        }
                        out.json.raw("]")
                    }
                }
            }
            out.json.raw("}}\n")
            try out.flushIfFull()
            written += 1
            if written % 4096 == 0 { progress?.update(done: written) }
        }
    }
    progress?.update(done: written)
    if dangling > 0 { notes.add(ExportPlan.danglingNote(dangling)) }
}
