import Foundation
import GraphJournal
import ObjectGraph
import PropertyBased
import Testing

// Random operation sequences on relationships stored as links, run in lockstep on an in-memory
// context (whose saves go to a recording backend) and on an `ObjectStore` in a temporary
// directory, against a reference model.

/// An unordered many-to-many: articles and their labels.
@Entity final class LpArticle {
    var n: Int = 0
    @Relationship(inverse: "articles") var labels: [LpLabel]
}

@Entity final class LpLabel {
    var n: Int = 0
    @Relationship(inverse: "labels") var articles: [LpArticle]
}

/// An ordered many-to-many, ordered on both sides: an album orders its songs, a song orders the
/// albums it is on.
@Entity final class LpAlbum {
    var n: Int = 0
    @Relationship(inverse: "albums", ordered: true) var songs: [LpSong]
}

@Entity final class LpSong {
    var n: Int = 0
    @Relationship(inverse: "songs", ordered: true) var albums: [LpAlbum]
    @Relationship(inverse: "songs") var crates: [LpCrate]
}

/// An ordered many-to-many ordered on one side, whose ordered side cascades: deleting a crate
/// deletes its songs.
@Entity final class LpCrate {
    var n: Int = 0
    @Relationship(deleteRule: .cascade, inverse: "crates", ordered: true) var songs: [LpSong]
}

/// An ordered one-to-many with its to-one inverse (nullify). `LpPage` comes first in the
/// schema, so the to-one is side 0 of the link table.
@Entity final class LpPage {
    var n: Int = 0
    @Relationship(inverse: "pages") var binder: LpBinder?
}

@Entity final class LpBinder {
    var n: Int = 0
    @Relationship(inverse: "binder", ordered: true) var pages: [LpPage]
}

/// A self-referential many-to-many; deleting a node deletes what it points at (cycles too).
@Entity final class LpNode {
    var n: Int = 0
    @Relationship(inverse: "outgoing") var incoming: [LpNode]
    @Relationship(deleteRule: .cascade, inverse: "incoming") var outgoing: [LpNode]
}

/// The entities of the link property test.
enum LpKind: Int, CaseIterable, Sendable {
    case article, label, album, song, crate, page, binder, node

    var name: String {
        switch self {
        case .article: "LpArticle"
        case .label: "LpLabel"
        case .album: "LpAlbum"
        case .song: "LpSong"
        case .crate: "LpCrate"
        case .page: "LpPage"
        case .binder: "LpBinder"
        case .node: "LpNode"
        }
    }
}

/// One relationship stored as links, in the model's orientation (side 0 first): which entity and
/// key each side is, and how it behaves.
struct LpSpec: Sendable {
    var kinds: [LpKind]
    var keys: [String]
    var ordered: [Bool]
    var toOne: [Bool]
    var cascade: [Bool]
}

let lpSpecs: [LpSpec] = [
    LpSpec(
        kinds: [.article, .label], keys: ["labels", "articles"], ordered: [false, false], toOne: [false, false],
        cascade: [false, false]),
    LpSpec(
        kinds: [.album, .song], keys: ["songs", "albums"], ordered: [true, true], toOne: [false, false],
        cascade: [false, false]),
    LpSpec(
        kinds: [.crate, .song], keys: ["songs", "crates"], ordered: [true, false], toOne: [false, false],
        cascade: [true, false]),
    LpSpec(
        kinds: [.binder, .page], keys: ["pages", "binder"], ordered: [true, false], toOne: [false, true],
        cascade: [false, false]),
    LpSpec(
        kinds: [.node, .node], keys: ["outgoing", "incoming"], ordered: [false, false], toOne: [false, false],
        cascade: [true, false]),
]

func lpSchema() throws -> Schema {
    try Schema(
        LpArticle.self, LpLabel.self, LpAlbum.self, LpSong.self, LpCrate.self, LpPage.self, LpBinder.self, LpNode.self)
}

/// A link between the model's objects `a` (side 0) and `b` (side 1).
struct LpPair: Hashable, Sendable {
    var a: Int
    var b: Int
}

/// The reference model: which objects are live, and per relationship the set of linked pairs
/// and, for each ordered side, each owner's list in order.
struct LpModel: Equatable, Sendable {
    var live: [Set<Int>] = Array(repeating: [], count: LpKind.allCases.count)
    var pairs: [Set<LpPair>] = Array(repeating: [], count: lpSpecs.count)
    /// Per relationship, per side: owner -> members in order (ordered sides only; no empty lists).
    var order: [[[Int: [Int]]]] = Array(repeating: [[:], [:]], count: lpSpecs.count)

    static func pair(_ side: Int, owner: Int, member: Int) -> LpPair {
        side == 0 ? LpPair(a: owner, b: member) : LpPair(a: member, b: owner)
    }

    /// `owner`'s members on `side` of relationship `l`: in order on an ordered side, ascending
    /// otherwise.
    func members(_ l: Int, _ side: Int, _ owner: Int) -> [Int] {
        if lpSpecs[l].ordered[side] { return order[l][side][owner] ?? [] }
        return pairs[l].compactMap { p in side == 0 ? (p.a == owner ? p.b : nil) : (p.b == owner ? p.a : nil) }.sorted()
    }

    /// Links `p` unless it is linked, placing each end at `at[side]` on an ordered side (the end
    /// when nil); a to-one side loses its previous link first.
    @discardableResult
    mutating func link(_ l: Int, _ p: LpPair, at: [Int?] = [nil, nil]) -> Bool {
        guard !pairs[l].contains(p) else { return false }
        let spec = lpSpecs[l]
        if spec.toOne[0] { for m in members(l, 0, p.a) { unlink(l, LpPair(a: p.a, b: m)) } }
        if spec.toOne[1] { for m in members(l, 1, p.b) { unlink(l, LpPair(a: m, b: p.b)) } }
        pairs[l].insert(p)
        for side in 0..<2 where spec.ordered[side] {
            let owner = side == 0 ? p.a : p.b
            var list = order[l][side][owner] ?? []
            list.insert(side == 0 ? p.b : p.a, at: min(at[side] ?? list.count, list.count))
            order[l][side][owner] = list
        }
        return true
    }

    @discardableResult
    mutating func unlink(_ l: Int, _ p: LpPair) -> Bool {
        guard pairs[l].remove(p) != nil else { return false }
        for side in 0..<2 where lpSpecs[l].ordered[side] {
            let owner = side == 0 ? p.a : p.b
            let member = side == 0 ? p.b : p.a
            var list = order[l][side][owner] ?? []
            list.removeAll { $0 == member }
            order[l][side][owner] = list.isEmpty ? nil : list
        }
        return true
    }

    /// What setting the whole list of `owner` on `side` to `wanted` does.
    mutating func setMembers(_ l: Int, _ side: Int, _ owner: Int, _ wanted: [Int]) {
        var seen = Set<Int>()
        let wanted = wanted.filter { seen.insert($0).inserted }
        for m in members(l, side, owner) where !seen.contains(m) { unlink(l, Self.pair(side, owner: owner, member: m)) }
        for m in wanted { link(l, Self.pair(side, owner: owner, member: m)) }
        if lpSpecs[l].ordered[side] { order[l][side][owner] = wanted.isEmpty ? nil : wanted }
    }

    mutating func move(_ l: Int, _ side: Int, _ owner: Int, from: Int, to: Int) {
        guard var list = order[l][side][owner] else { return }
        let m = list.remove(at: from)
        list.insert(m, at: to)
        order[l][side][owner] = list
    }

    /// Deletes `id` and what its cascading relationships reach; every link of a deleted object
    /// goes.
    mutating func delete(_ id: Int, kinds: [Int: LpKind]) {
        var doomed = Set<Int>()
        var queue = [id]
        while let x = queue.popLast() {
            guard let k = kinds[x], doomed.insert(x).inserted else { continue }
            for (l, spec) in lpSpecs.enumerated() {
                for side in 0..<2 where spec.kinds[side] == k && spec.cascade[side] {
                    queue += members(l, side, x).filter { !doomed.contains($0) }
                }
            }
        }
        for x in doomed { if let k = kinds[x] { live[k.rawValue].remove(x) } }
        for l in lpSpecs.indices {
            pairs[l] = pairs[l].filter { !doomed.contains($0.a) && !doomed.contains($0.b) }
            for side in 0..<2 {
                var lists: [Int: [Int]] = [:]
                for (owner, list) in order[l][side] where !doomed.contains(owner) {
                    let kept = list.filter { !doomed.contains($0) }
                    if !kept.isEmpty { lists[owner] = kept }
                }
                order[l][side] = lists
            }
        }
    }
}

/// One step of a run, decided from the model so that both contexts do exactly the same.
indirect enum LpAction: CustomStringConvertible, Sendable {
    case insert(LpKind, id: Int)
    /// Inserts `ids` of `kind` and makes them the whole list of `owner` on `side` of `link`.
    case bulk(link: Int, side: Int, owner: Int, kind: LpKind, ids: [Int])
    case delete(id: Int)
    case setMembers(link: Int, side: Int, owner: Int, members: [Int], dynamic: Bool)
    case add(link: Int, side: Int, owner: Int, member: Int, at: Int?, valid: Bool)
    case remove(link: Int, side: Int, owner: Int, member: Int)
    case move(link: Int, side: Int, owner: Int, from: Int, to: Int, valid: Bool)
    case setToOne(link: Int, side: Int, owner: Int, target: Int?, dynamic: Bool)
    case save, rollback, reopen, compact
    /// The in-memory context's backend fails the save: every change stays pending.
    case failedSave
    /// `reset()`: a rollback that also forgets the object instances.
    case reset
    case transaction(throwing: Bool, [LpAction])

    var description: String {
        switch self {
        case .insert(let k, let id): "insert \(k) #\(id)"
        case .bulk(let l, let s, let o, let k, let ids): "bulk: \(ids.count) \(k) as link \(l) side \(s) of #\(o)"
        case .delete(let id): "delete #\(id)"
        case .setMembers(let l, let s, let o, let m, let d):
            "link \(l) side \(s): #\(o) = \(m)\(d ? " (setValue)" : "")"
        case .add(let l, let s, let o, let m, let at, let v):
            "link \(l) side \(s): add #\(m) to #\(o) at \(at.map(String.init) ?? "end")\(v ? "" : " (invalid)")"
        case .remove(let l, let s, let o, let m): "link \(l) side \(s): remove #\(m) from #\(o)"
        case .move(let l, let s, let o, let f, let t, let v):
            "link \(l) side \(s): move in #\(o) \(f) -> \(t)\(v ? "" : " (invalid)")"
        case .setToOne(let l, let s, let o, let t, let d):
            "link \(l) side \(s): #\(o) -> \(t.map { "#\($0)" } ?? "nil")\(d ? " (setValue)" : "")"
        case .save: "save"
        case .rollback: "rollback"
        case .reopen: "rollback, close and reopen"
        case .compact: "compact"
        case .failedSave: "a save the backend fails"
        case .reset: "reset"
        case .transaction(let t, let inner):
            "transaction\(t ? " that throws" : "") { \(inner.map(\.description).joined(separator: "; ")) }"
        }
    }
}

/// Reads and writes a side of a relationship through the typed properties.
enum LpAccess {
    static func read(_ o: any Entity, _ l: Int, _ side: Int) -> [any Entity] {
        switch (l, side) {
        case (0, 0): (o as? LpArticle)?.labels ?? []
        case (0, 1): (o as? LpLabel)?.articles ?? []
        case (1, 0): (o as? LpAlbum)?.songs ?? []
        case (1, 1): (o as? LpSong)?.albums ?? []
        case (2, 0): (o as? LpCrate)?.songs ?? []
        case (2, 1): (o as? LpSong)?.crates ?? []
        case (3, 0): (o as? LpBinder)?.pages ?? []
        case (3, 1): [(o as? LpPage)?.binder].compactMap { $0 }
        case (4, 0): (o as? LpNode)?.outgoing ?? []
        default: (o as? LpNode)?.incoming ?? []
        }
    }

    static func write(_ o: any Entity, _ l: Int, _ side: Int, _ v: [any Entity]) {
        switch (l, side) {
        case (0, 0): (o as? LpArticle)?.labels = v.compactMap { $0 as? LpLabel }
        case (0, 1): (o as? LpLabel)?.articles = v.compactMap { $0 as? LpArticle }
        case (1, 0): (o as? LpAlbum)?.songs = v.compactMap { $0 as? LpSong }
        case (1, 1): (o as? LpSong)?.albums = v.compactMap { $0 as? LpAlbum }
        case (2, 0): (o as? LpCrate)?.songs = v.compactMap { $0 as? LpSong }
        case (2, 1): (o as? LpSong)?.crates = v.compactMap { $0 as? LpCrate }
        case (3, 0): (o as? LpBinder)?.pages = v.compactMap { $0 as? LpPage }
        case (3, 1): (o as? LpPage)?.binder = v.first as? LpBinder
        case (4, 0): (o as? LpNode)?.outgoing = v.compactMap { $0 as? LpNode }
        default: (o as? LpNode)?.incoming = v.compactMap { $0 as? LpNode }
        }
    }

    static func insert(_ kind: LpKind, into c: ModelContext) throws -> any Entity {
        switch kind {
        case .article: try c.insert(LpArticle.self)
        case .label: try c.insert(LpLabel.self)
        case .album: try c.insert(LpAlbum.self)
        case .song: try c.insert(LpSong.self)
        case .crate: try c.insert(LpCrate.self)
        case .page: try c.insert(LpPage.self)
        case .binder: try c.insert(LpBinder.self)
        case .node: try c.insert(LpNode.self)
        }
    }
}

/// Expects `body` to throw an ``ObjectGraphError``.
private func expectObjectGraphError(_ what: String, _ body: () throws -> Void) {
    do {
        try body()
        Issue.record("\(what): expected an ObjectGraphError, nothing was thrown")
    } catch is ObjectGraphError {
    } catch {
        Issue.record("\(what): expected an ObjectGraphError, got \(error)")
    }
}

/// One run: the two contexts, the model, and the objects' serials in each context.
final class LpRun {
    struct Stop: Error {}

    let schema: Schema
    let backend = RecordingBackend()
    let memory: ModelContext
    let replica: ModelContext
    var replayedSets = 0
    let dir: URL
    var store: ObjectStore
    var model = LpModel()
    var committed = LpModel()
    var kinds: [Int: LpKind] = [:]
    /// Per context (0: memory, 1: store): model id -> serial.
    var serials: [[Int: UInt64]] = [[:], [:]]
    var nextID = 1
    var trace: [String] = []
    var failed = false

    static let options: StoreOptions = {
        var o = StoreOptions(durability: .none)
        o.autoCompactionRatio = nil
        return o
    }()

    init() throws {
        schema = try lpSchema()
        memory = ModelContext(schema: schema, backend: backend)
        replica = ModelContext(schema: schema)
        dir = temporaryStoreDirectory("link-property")
        store = try ObjectStore.open(at: dir, schema: schema, options: Self.options)
    }

    func context(_ ci: Int) -> ModelContext { ci == 0 ? memory : store.context }

    func object(_ ci: Int, _ id: Int) -> (any Entity)? {
        guard let kind = kinds[id], let serial = serials[ci][id] else { return nil }
        return context(ci).object(with: ObjectID(entityName: kind.name, serial: serial))
    }

    func requireObject(_ ci: Int, _ id: Int) throws -> any Entity {
        guard let o = object(ci, id) else {
            fail("context \(ci): object #\(id) (\(kinds[id].map { "\($0)" } ?? "?")) is missing")
            throw Stop()
        }
        return o
    }

    func fail(_ message: String) {
        guard !failed else { return }
        failed = true
        Issue.record("\(message)\nsteps:\n\(trace.suffix(40).joined(separator: "\n"))")
    }

    // MARK: Deciding a step

    /// A deterministic stream of numbers from one step's code (for transactions' inner steps).
    struct Stream {
        var state: UInt64
        mutating func next() -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(state >> 33)
        }
    }

    func pick(_ kind: LpKind, _ arg: Int, in m: LpModel) -> Int? {
        let ids = m.live[kind.rawValue].sorted()
        return ids.isEmpty ? nil : ids[arg % ids.count]
    }

    func newID(_ kind: LpKind) -> Int {
        defer { nextID += 1 }
        kinds[nextID] = kind
        return nextID
    }

    /// The action `code` means in model state `m` (depth > 0: inside a transaction, where
    /// saves, rollbacks, reopening and compaction are not decided).
    func decide(_ code: Int, _ m: LpModel, depth: Int) -> LpAction? {
        // Weights out of 40: insert 8, delete 2, set a list 6, add 6, remove 3, move 3, set the
        // to-one 2, save 2, rollback 1, transaction 3, reopen 1, compact 1, many members 1,
        // nested transaction 1 (inside a transaction only), a failed save 1, reset 1.
        let op = depth == 0 ? code % 42 : [Int](0..<30)[code % 31 == 30 ? 0 : code % 31] + (code % 31 == 30 ? 39 : 0)
        var arg = code / 40
        func next(_ n: Int) -> Int {
            defer { arg /= max(n, 1) }
            return arg % max(n, 1)
        }
        let l = next(lpSpecs.count)
        let spec = lpSpecs[l]
        let side = spec.toOne[0] ? 1 : spec.toOne[1] ? 0 : next(2)
        switch op {
        case 0..<8:
            let kind = LpKind.allCases[next(LpKind.allCases.count)]
            return .insert(kind, id: newID(kind))
        case 8, 9:
            let kind = LpKind.allCases[next(LpKind.allCases.count)]
            return pick(kind, next(1 << 20), in: m).map { .delete(id: $0) }
        case 10..<16:
            guard let owner = pick(spec.kinds[side], next(1 << 10), in: m) else { return nil }
            let candidates = m.live[spec.kinds[1 - side].rawValue].sorted()
            var chosen: [Int] = []
            let bits = next(1 << 12)
            for (i, c) in candidates.enumerated() where (bits >> (i % 12)) & 1 == 1 && chosen.count < 7 {
                chosen.append(c)
            }
            if !chosen.isEmpty {
                // Some other order, sometimes a duplicate, sometimes members kept from before.
                let rotation = next(chosen.count)
                chosen = Array(chosen[rotation...] + chosen[..<rotation])
                if next(2) == 1 { chosen.reverse() }
                if next(4) == 0 { chosen.append(chosen[next(chosen.count)]) }
            }
            if next(3) == 0 { chosen = m.members(l, side, owner).reversed() + chosen.prefix(1) }
            return .setMembers(link: l, side: side, owner: owner, members: chosen, dynamic: next(4) == 0)
        case 16..<22:
            guard let owner = pick(spec.kinds[side], next(1 << 10), in: m),
                let member = pick(spec.kinds[1 - side], next(1 << 10), in: m)
            else { return nil }
            let count = m.members(l, side, owner).count
            let at: Int? = next(3) == 0 ? nil : next(count + 2)
            return .add(link: l, side: side, owner: owner, member: member, at: at, valid: (at ?? 0) <= count)
        case 22..<25:
            guard let owner = pick(spec.kinds[side], next(1 << 10), in: m) else { return nil }
            let current = m.members(l, side, owner)
            let member: Int?
            if !current.isEmpty && next(4) != 0 {
                member = current[next(current.count)]
            } else {
                member = pick(spec.kinds[1 - side], next(1 << 10), in: m)
            }
            return member.map { .remove(link: l, side: side, owner: owner, member: $0) }
        case 25..<28:
            let ordered = lpSpecs.indices.flatMap { k in (0..<2).filter { lpSpecs[k].ordered[$0] }.map { (k, $0) } }
            let (k, orderedSide) = ordered[next(ordered.count)]
            guard let owner = pick(lpSpecs[k].kinds[orderedSide], next(1 << 10), in: m) else { return nil }
            let count = m.members(k, orderedSide, owner).count
            let from = next(count + 1), to = next(count + 1)
            return .move(
                link: k, side: orderedSide, owner: owner, from: from, to: to, valid: from < count && to < count)
        case 28, 29:
            // The to-one side of the ordered one-to-many.
            guard let page = pick(.page, next(1 << 10), in: m) else { return nil }
            let binder = next(4) == 0 ? nil : pick(.binder, next(1 << 10), in: m)
            return .setToOne(link: 3, side: 1, owner: page, target: binder, dynamic: next(3) == 0)
        case 30, 31: return .save
        case 32: return .rollback
        case 33..<36: return transaction(from: arg, m, depth: depth)
        case 36: return .reopen
        case 37: return .compact
        case 38:
            // Many members at once: an unordered list past the size where it keeps a position
            // index, or a long ordered list.
            guard next(2) == 0, let owner = pick(spec.kinds[side], next(1 << 10), in: m) else { return nil }
            let kind = spec.kinds[1 - side]
            return .bulk(
                link: l, side: side, owner: owner, kind: kind, ids: (0..<(64 + next(8))).map { _ in newID(kind) })
        case 40 where depth == 0: return .failedSave
        case 41 where depth == 0: return .reset
        default:
            // A transaction inside a transaction (one level deep): it never saves.
            guard depth == 1 else { return nil }
            return transaction(from: arg, m, depth: depth)
        }
    }

    func transaction(from arg: Int, _ m: LpModel, depth: Int) -> LpAction {
        var stream = Stream(state: UInt64(arg) &+ 0x9E37_79B9)
        var scratch = m
        var inner: [LpAction] = []
        for _ in 0..<(1 + stream.next() % 3) {
            guard let a = decide(stream.next() % 1_000_000, scratch, depth: depth + 1) else { continue }
            update(&scratch, a, depth: depth + 1)
            inner.append(a)
        }
        return .transaction(throwing: stream.next() % 2 == 0, inner)
    }

    // MARK: The model

    func update(_ m: inout LpModel, _ a: LpAction, depth: Int) {
        switch a {
        case .insert(let kind, let id): m.live[kind.rawValue].insert(id)
        case .bulk(let l, let side, let owner, let kind, let ids):
            for id in ids { m.live[kind.rawValue].insert(id) }
            m.setMembers(l, side, owner, ids)
        case .delete(let id): m.delete(id, kinds: kinds)
        case .setMembers(let l, let side, let owner, let members, _): m.setMembers(l, side, owner, members)
        case .add(let l, let side, let owner, let member, let at, let valid):
            guard valid else { return }
            var positions: [Int?] = [nil, nil]
            positions[side] = at
            m.link(l, LpModel.pair(side, owner: owner, member: member), at: positions)
        case .remove(let l, let side, let owner, let member):
            m.unlink(l, LpModel.pair(side, owner: owner, member: member))
        case .move(let l, let side, let owner, let from, let to, let valid):
            if valid && from != to { m.move(l, side, owner, from: from, to: to) }
        case .setToOne(let l, let side, let owner, let target, _):
            if let target {
                m.link(l, LpModel.pair(side, owner: owner, member: target))
            } else {
                for x in m.members(l, side, owner) { m.unlink(l, LpModel.pair(side, owner: owner, member: x)) }
            }
        case .save: if depth == 0 { committed = m }
        case .rollback, .reopen, .reset: m = committed
        case .compact, .failedSave: break
        case .transaction(let throwing, let inner):
            guard !throwing else { return }
            for i in inner { update(&m, i, depth: depth + 1) }
            if depth == 0 { committed = m }
        }
    }

    // MARK: Doing a step

    func perform(_ a: LpAction, _ ci: Int) throws {
        let c = context(ci)
        let what = "context \(ci): \(a)"
        switch a {
        case .insert(let kind, let id):
            let o = try LpAccess.insert(kind, into: c)
            serials[ci][id] = o.objectID?.serial
        case .bulk(let l, let side, let owner, let kind, let ids):
            var objects: [any Entity] = []
            for id in ids {
                let o = try LpAccess.insert(kind, into: c)
                serials[ci][id] = o.objectID?.serial
                objects.append(o)
            }
            LpAccess.write(try requireObject(ci, owner), l, side, objects)
        case .delete(let id):
            c.delete(try requireObject(ci, id))
        case .setMembers(let l, let side, let owner, let members, let dynamic):
            let o = try requireObject(ci, owner)
            let objects = try members.map { try requireObject(ci, $0) }
            if dynamic {
                try o.setValue(objects, forKey: lpSpecs[l].keys[side])
            } else {
                LpAccess.write(o, l, side, objects)
            }
        case .add(let l, let side, let owner, let member, let at, let valid):
            let o = try requireObject(ci, owner), m = try requireObject(ci, member)
            if valid {
                try c.add(m, to: lpSpecs[l].keys[side], of: o, at: at)
            } else {
                expectObjectGraphError(what) { try c.add(m, to: lpSpecs[l].keys[side], of: o, at: at) }
            }
        case .remove(let l, let side, let owner, let member):
            try c.remove(try requireObject(ci, member), from: lpSpecs[l].keys[side], of: try requireObject(ci, owner))
        case .move(let l, let side, let owner, let from, let to, let valid):
            let o = try requireObject(ci, owner)
            if valid {
                try c.move(in: lpSpecs[l].keys[side], of: o, from: from, to: to)
            } else {
                expectObjectGraphError(what) { try c.move(in: lpSpecs[l].keys[side], of: o, from: from, to: to) }
            }
        case .setToOne(let l, let side, let owner, let target, let dynamic):
            let o = try requireObject(ci, owner)
            let t = try target.map { try requireObject(ci, $0) }
            if dynamic {
                try o.setValue(t, forKey: lpSpecs[l].keys[side])
            } else {
                LpAccess.write(o, l, side, t.map { [$0] } ?? [])
            }
        case .save:
            try c.save()
        case .rollback:
            c.rollback()
        case .reopen:
            c.rollback()
            if ci == 1 {
                try store.close()
                store = try ObjectStore.open(at: dir, schema: schema, options: Self.options)
            }
        case .compact:
            if ci == 1 { try store.compact() }
        case .failedSave:
            guard ci == 0 else { return }
            backend.failNext = true
            defer { backend.failNext = false }
            do {
                // A save with nothing to write (changes that cancel out) does not reach the backend.
                try c.save()
                if model != committed { fail("\(what): a save with changes did not reach the backend") }
            } catch is RecordingBackend.InjectedFailure {}
        case .reset:
            c.reset()
        case .transaction(let throwing, let inner):
            do {
                try c.transaction { _ in
                    for i in inner { try perform(i, ci) }
                    if throwing { throw Stop() }
                }
            } catch is Stop where throwing {}
        }
    }

    // MARK: Checking

    /// Compares every live object's lists in `c` (serials: `serialOf`) with `m`, and, where
    /// `saved` is given, the committed lists `committedValues(forKeys:)` reports.
    func check(_ c: ModelContext, _ ci: Int, _ m: LpModel, saved: LpModel?, _ at: String) {
        guard !failed else { return }
        let serialOf = serials[ci]
        func mapped(_ ids: [Int]) -> [UInt64] { ids.map { serialOf[$0] ?? 0 } }
        for kind in LpKind.allCases {
            let objects = (try? c.objects(ofEntityNamed: kind.name)) ?? []
            let actual = Set(objects.compactMap { $0.objectID?.serial })
            let expected = Set(mapped(Array(m.live[kind.rawValue])))
            guard actual == expected else {
                fail("\(at): \(kind.name) objects are \(actual.sorted()), the model has \(expected.sorted())")
                return
            }
        }
        for (l, spec) in lpSpecs.enumerated() {
            for side in 0..<2 {
                let kind = spec.kinds[side]
                for id in m.live[kind.rawValue].sorted() {
                    guard let serial = serialOf[id],
                        let o = c.object(with: ObjectID(entityName: kind.name, serial: serial))
                    else {
                        fail("\(at): #\(id) missing")
                        return
                    }
                    let read = LpAccess.read(o, l, side)
                    let actual = read.map { $0.objectID?.serial ?? 0 }
                    let expected = mapped(m.members(l, side, id))
                    let same = spec.ordered[side] ? actual == expected : actual.sorted() == expected.sorted()
                    guard same else {
                        fail(
                            "\(at): \(kind.name)/\(serial).\(spec.keys[side]) (#\(id)) is \(actual), the model has \(expected)"
                        )
                        return
                    }
                    if read.contains(where: { $0.isDeleted }) {
                        fail("\(at): \(kind.name)/\(serial).\(spec.keys[side]) reaches a deleted object")
                        return
                    }
                    guard let saved else { continue }
                    // changedValues() names the relationship when its members (or their order)
                    // differ from the committed ones; for an inserted object, when it has any.
                    let wasSaved = saved.live[kind.rawValue].contains(id)
                    let committedList = wasSaved ? mapped(saved.members(l, side, id)) : []
                    let differs =
                        spec.ordered[side] ? committedList != expected : committedList.sorted() != expected.sorted()
                    let changed = o.changedValues()[spec.keys[side]]
                    guard (changed != nil) == (wasSaved ? differs : !expected.isEmpty) else {
                        fail(
                            "\(at): \(kind.name)/\(serial).\(spec.keys[side]) (#\(id)) changedValues \(String(describing: changed)); committed \(committedList), current \(expected)"
                        )
                        return
                    }
                    // The committed list, for objects that were saved.
                    guard wasSaved else { continue }
                    let committedValue = try? o.committedValues(forKeys: [spec.keys[side]])[spec.keys[side]]
                    let committedSerials: [UInt64]
                    switch committedValue {
                    case .some(.some(.objects(let ids))): committedSerials = ids.map(\.serial)
                    case .some(.some(.object(let one))): committedSerials = [one.serial]
                    case .some(.none): committedSerials = []
                    default:
                        fail(
                            "\(at): \(kind.name)/\(serial).\(spec.keys[side]) has no committed value: \(String(describing: committedValue))"
                        )
                        return
                    }
                    let expectedCommitted = mapped(saved.members(l, side, id))
                    let sameCommitted =
                        spec.ordered[side]
                        ? committedSerials == expectedCommitted
                        : committedSerials.sorted() == expectedCommitted.sorted()
                    guard sameCommitted else {
                        fail(
                            "\(at): committed \(kind.name)/\(serial).\(spec.keys[side]) (#\(id)) is \(committedSerials), the model has \(expectedCommitted)"
                        )
                        return
                    }
                }
            }
        }
    }

    func checkAll(_ at: String) {
        for ci in 0..<2 {
            check(context(ci), ci, model, saved: committed, "\(at), context \(ci)")
            if (model != committed) != context(ci).hasChanges {
                fail(
                    "\(at), context \(ci): hasChanges is \(context(ci).hasChanges), the model has \(model != committed ? "" : "no ")changes"
                )
            }
        }
        // The recorded change sets, applied in order to a fresh context, give the saved lists.
        if backend.saved.count > replayedSets {
            do {
                for set in backend.saved[replayedSets...] { try replica.apply(set) }
                replayedSets = backend.saved.count
                check(replica, 0, committed, saved: nil, "\(at), change sets applied to a fresh context")
            } catch {
                fail("\(at): applying a recorded change set: \(error)")
            }
        }
    }

    /// Closes, reopens and checks the store; replays its journal records as change sets into a
    /// fresh context and checks that; removes the directory.
    func finish() throws {
        memory.rollback()
        model = committed
        try store.close()
        store = try ObjectStore.open(at: dir, schema: schema, options: Self.options)
        check(store.context, 1, committed, saved: committed, "after the final reopen")
        try store.close()
        let decoded = ModelContext(schema: schema)
        var stored: StoredSchema?
        _ = try Journal.readRecords(directory: dir.path) { record in
            switch record.entry.kind {
            case .schema: stored = try StoredSchema.decode(record.payload)
            case .transaction, .base:
                let s = try #require(stored)
                try decoded.apply(try s.decodeTransaction(record.payload))
                var outline = TransactionOutline()
                try s.validateTransaction(record.payload, into: &outline)
            case nil: break
            }
        }
        check(decoded, 1, committed, saved: nil, "journal records decoded and applied to a fresh context")
        // A store opened without the model's classes keeps the links through a compaction.
        if stored != nil {
            let dynamic = try ObjectStore.openDynamic(at: dir, options: Self.options)
            try dynamic.compact()
            try dynamic.close()
            store = try ObjectStore.open(at: dir, schema: schema, options: Self.options)
            check(
                store.context, 1, committed, saved: committed, "after a compaction by a store opened without the model")
            try store.close()
        }
        try? FileManager.default.removeItem(at: dir)
    }

    func run(_ codes: [Int]) throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        for (n, code) in codes.enumerated() {
            guard let action = decide(code, model, depth: 0) else { continue }
            trace.append("\(n): \(action)")
            for ci in 0..<2 { try perform(action, ci) }
            update(&model, action, depth: 0)
            checkAll("step \(n) (\(action))")
            if failed { return }
        }
        try finish()
    }
}

/// The longest operation sequence of a run (OBJECTGRAPH_LINK_PROPERTY_STEPS): long sequences
/// reach long lists and more interleavings, short ones shrink to readable failures.
let linkPropertySteps = max(
    1, ProcessInfo.processInfo.environment["OBJECTGRAPH_LINK_PROPERTY_STEPS"].flatMap(Int.init) ?? 100)

@Suite("Property: links against a reference model")
struct LinkPropertyTests {
    @Test func randomLinkOperationsMatchTheModelInMemoryInAStoreAndInChangeSets() async {
        await propertyCheck(count: propertyRuns, input: Gen.int(in: 0...1_000_000_000).array(of: 1...linkPropertySteps))
        { codes in
            do {
                let run = try LpRun()
                do {
                    try run.run(codes)
                } catch {
                    run.fail("unexpected error: \(error)")
                }
            } catch {
                Issue.record("unexpected error: \(error)")
            }
        }
    }
}

/// Single cases the property test found, each its smallest sequence.
@Suite("Links: single cases the property test found")
struct LinkSingleCaseTests {
    /// Deleting an object applies `nullify` at once ("Links to a deleted object read as absent
    /// at once"): a to-many stored as links no longer lists it, and a to-one stored as links
    /// (the inverse of an ordered to-many) should read nil, as a slot-stored to-one does.
    @Test func linkedToOneReadsNilOnceItsDestinationIsDeleted() throws {
        let c = ModelContext(schema: try lpSchema())
        let binder = try c.insert(LpBinder.self)
        let page = try c.insert(LpPage.self)
        binder.pages = [page]
        try c.save()
        c.delete(binder)
        #expect(page.binder == nil, "page.binder is a deleted object: isDeleted \(page.binder?.isDeleted == true)")
        #expect(try page.value(forKey: "binder") == nil)
        try c.save()
        #expect(page.binder == nil)
    }

    /// A transaction inside a transaction deletes an object the outer one inserted and
    /// returns; the outer one then throws: everything is undone. Run in a child process: a
    /// rollback that restores the vanished row of an object whose row it has just freed traps.
    @Test func nestedTransactionDeletingAnOuterInsertRollsBack() async {
        await #expect(processExitsWith: .success) {
            struct Stop: Error {}
            let c = ModelContext(schema: try lpSchema())
            let article = try c.insert(LpArticle.self)
            try c.save()
            do {
                try c.transaction { _ in
                    let label = try c.insert(LpLabel.self)
                    article.labels = [label]
                    try c.transaction { _ in c.delete(label) }
                    throw Stop()
                }
            } catch is Stop {}
            guard try c.count(of: LpLabel.self) == 0, article.labels.isEmpty, !c.hasChanges else { throw Stop() }
        }
    }

    /// Compaction writes the committed links; pending changes stay pending. When every link
    /// of a relationship is pending removal, the committed links must still be written.
    @Test func compactionKeepsCommittedLinksWhileAllArePendingRemoval() throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        do {
            let store = try ObjectStore.open(at: dir, schema: try lpSchema())
            let a = try store.context.insert(LpArticle.self)
            a.labels = [try store.context.insert(LpLabel.self)]
            try store.context.save()
            a.labels = []  // pending, never saved
            try store.compact()
            try store.close()
        }
        let store = try ObjectStore.open(at: dir, schema: try lpSchema())
        defer { try? store.close() }
        let a = try #require(try store.context.objects(of: LpArticle.self).first)
        #expect(a.labels.count == 1, "the saved link was lost by compaction")
    }

    /// A change set's order edit names indexes among the objects that outlive the save;
    /// `apply(_:)` must place them so, although objects it deletes are not freed until it
    /// commits.
    @Test func changeSetOrderEditsCountOnlySurvivingMembers() throws {
        let schema = try lpSchema()
        /// Saves four songs in order, then deletes the first and moves the last one up.
        func edit(_ c: ModelContext) throws {
            let album = try c.insert(LpAlbum.self)
            let songs = try (0..<4).map { i in try c.insert(LpSong.self) { $0.n = i } }
            album.songs = songs
            try c.save()
            c.delete(songs[0])
            try c.move(in: "songs", of: album, from: 2, to: 1)
            #expect(album.songs.map(\.n) == [1, 3, 2])
            try c.save()
        }
        let backend = RecordingBackend()
        try edit(ModelContext(schema: schema, backend: backend))
        let replica = ModelContext(schema: schema)
        for set in backend.saved { try replica.apply(set) }
        #expect(try replica.objects(of: LpAlbum.self).first?.songs.map(\.n) == [1, 3, 2], "change sets applied")
        // The journal's replay places them right.
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try ObjectStore.open(at: dir, schema: schema)
        try edit(store.context)
        try store.close()
        let reopened = try ObjectStore.open(at: dir, schema: schema)
        defer { try? reopened.close() }
        #expect(try reopened.context.objects(of: LpAlbum.self).first?.songs.map(\.n) == [1, 3, 2], "journal replayed")
    }
}
