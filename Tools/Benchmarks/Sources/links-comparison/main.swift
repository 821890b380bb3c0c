// Relationships stored as links (many-to-many, ordered to-many) against the to-one slot they
// are measured by, release build:
//
//     swift run -c release links-comparison [--owners 100000] [--per 10] [--rounds 5] [--out Results]
//         [--only m2m-array,to-one,remove] [--commit <label for the report>]
//
// (`make bench-links` from the repository root.) Every measurement runs in a fresh process of
// this binary (`--build`, `--open`, `--remove`), the configurations one after the other in each
// round, the round's order rotated, so that each configuration meets the machine's moods alike.
//
//  (a) build and durable save: `--owners` owners and `--per` members per owner are inserted
//      and saved (not measured); then the relationships are set through the public API and
//      saved with durability `.always` (measured: the sets, then the save). The to-one baseline
//      relates the same objects in the same pairs through a to-one slot.
//  (b) open: the store of (a) opened in a new process (replay of the objects' record and the
//      relationships' record), then compacted, then opened again (replay of a base); the heap
//      in use (glibc `malloc_info`'s totals) and the resident set after each open.
//  (c) removal: one owner with 1k, 10k, 100k members; `context.remove` of single random
//      members, each timed alone, and one removal followed by a save.
// Writes <out>/links.md.

import Foundation
import ObjectGraph
import PeopleWorkload

#if canImport(Glibc)
    import Glibc
#endif

let arguments = Array(CommandLine.arguments.dropFirst())
func option(_ name: String) -> String? {
    guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
    return arguments[i + 1]
}
let owners = Int(option("--owners") ?? "100000") ?? 100_000
let per = Int(option("--per") ?? "10") ?? 10
let rounds = max(1, Int(option("--rounds") ?? "5") ?? 5)
let outDirectory = URL(fileURLWithPath: option("--out") ?? "Results", isDirectory: true)

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    guard !s.isEmpty else { return .nan }
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

// glibc's malloc_info and malloc_trim (malloc.h is not in the Glibc module), looked up by name.
let mallocLibrary = dlopen(nil, RTLD_NOW)
let mallocInfo = dlsym(mallocLibrary, "malloc_info").map {
    unsafeBitCast($0, to: (@convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32).self)
}
let mallocTrim = dlsym(mallocLibrary, "malloc_trim").map { unsafeBitCast($0, to: (@convention(c) (Int) -> Int32).self) }

/// Returns freed heap memory to the system where malloc can.
func trimHeap() { _ = mallocTrim?(0) }

/// Bytes the heap hands out right now, every arena and mmapped blocks included (mallinfo2's
/// `uordblks + hblkhd`), from `malloc_info`'s totals: the arenas' system bytes, less their free
/// chunks (fast bins and the rest, the top chunk included), plus the mmapped blocks.
func heapInUse() -> Double {
    guard let mallocInfo else { return .nan }
    var buffer: UnsafeMutablePointer<CChar>?
    var size = 0
    guard let stream = open_memstream(&buffer, &size) else { return .nan }
    _ = mallocInfo(0, stream)
    fclose(stream)
    defer { free(buffer) }
    guard let buffer else { return .nan }
    let xml = String(cString: buffer)
    // The totals follow the last arena's section.
    guard let tail = xml.range(of: "</heap>", options: .backwards).map({ xml[$0.upperBound...] }) else { return .nan }
    func value(_ element: String, _ type: String) -> Double {
        guard let r = tail.range(of: "<\(element) type=\"\(type)\"") else { return .nan }
        let rest = tail[r.upperBound...]
        guard let s = rest.range(of: "size=\"") else { return .nan }
        return Double(rest[s.upperBound...].prefix { $0.isNumber }) ?? .nan
    }
    return value("system", "current") - value("total", "fast") - value("total", "rest") + value("total", "mmap")
}

/// This process's resident set, in bytes (VmRSS of /proc/self/status).
func residentBytes() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return .nan }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        let kb = line.split(whereSeparator: \.isWhitespace).dropFirst().first.flatMap { Double($0) } ?? .nan
        return kb * 1024
    }
    return .nan
}

func loadAverage() -> String {
    (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(
        separator: " ") ?? "?"
}

/// Prints one measurement as `key value` pairs on a line, for the driver.
func emit(_ values: KeyValuePairs<String, Double>) {
    print(values.map { "\($0.key) \($0.value)" }.joined(separator: " "))
}

// MARK: Configurations

/// One way of relating the objects (a) and (b) measure.
enum Config: String, CaseIterable {
    /// The objects of the many-to-many, not related: the store (b)'s ratio divides by.
    case objects
    /// `member.owner = owner`, for each member: a to-one slot (the baseline).
    case toOne = "to-one"
    /// `owner.members = [...]` on the same schema: the to-one slots set from the to-many side.
    case toOneArray = "to-one-array"
    /// Many-to-many, `owner.members = [...]` once per owner.
    case setArray = "m2m-array"
    /// Many-to-many, `context.add(member, to: "members", of: owner)` per link.
    case setAdd = "m2m-add"
    /// Many-to-many, `member.owners = [owner]` per member (the to-one's shape).
    case setInverse = "m2m-inverse"
    /// Ordered one-to-many, `owner.members = [...]` once per owner.
    case listArray = "ordered-array"
    /// Ordered one-to-many, `context.add(member, to: "members", of: owner)` per link.
    case listAdd = "ordered-add"
    /// Ordered one-to-many, `member.owner = owner` per member (its to-one side, stored as links).
    case listToOne = "ordered-to-one"
    /// Ordered many-to-many, `owner.members = [...]` once per owner.
    case seqArray = "ordered-m2m-array"
    /// `owners` nodes of a self-referential many-to-many, not related.
    case nodeObjects = "self-objects"
    /// `owners` nodes, each `depends = [...]` on `per` others: the links among `owners` objects.
    case nodeArray = "self-m2m-array"

    var schema: Schema {
        get throws {
            switch self {
            case .objects, .setArray, .setAdd, .setInverse: try Schema(SetOwner.self, SetMember.self)
            case .toOne, .toOneArray: try Schema(OneOwner.self, OneMember.self)
            case .listArray, .listAdd, .listToOne: try Schema(ListOwner.self, ListMember.self)
            case .seqArray: try Schema(SeqOwner.self, SeqMember.self)
            case .nodeObjects, .nodeArray: try Schema(Node.self)
            }
        }
    }

    /// The links (or to-one pairs) the configuration makes.
    var relationships: Int {
        switch self {
        case .objects, .nodeObjects: 0
        default: owners * per
        }
    }
}

/// The `per` nodes node `j` depends on: distinct, never itself (`per` × 7919 < `owners`).
func dependencies(of j: Int) -> [Int] { (1...per).map { (j + $0 * 7919) % owners } }

/// Inserts `owners` owners and `owners × per` members, each with its index in `n`.
func insertObjects<O: BenchOwner>(_ type: O.Type, into context: ModelContext) throws -> ([O], [O.Member]) {
    var os: [O] = []
    os.reserveCapacity(owners)
    for i in 0..<owners {
        let o = try context.insert(O.self)
        o.n = i
        os.append(o)
    }
    var ms: [O.Member] = []
    ms.reserveCapacity(owners * per)
    for i in 0..<(owners * per) {
        let m = try context.insert(O.Member.self)
        m.n = i
        ms.append(m)
    }
    return (os, ms)
}

/// Owner `j` gets members `j × per ..< (j + 1) × per`, one array per owner.
@inline(never)
func buildArrays<O: BenchOwner>(_ os: [O], _ ms: [O.Member]) {
    for (j, o) in os.enumerated() { o.members = Array(ms[j * per..<(j + 1) * per]) }
}

/// The same pairs, one `context.add` each.
@inline(never)
func buildAdds<O: BenchOwner>(_ os: [O], _ ms: [O.Member], _ context: ModelContext) throws {
    for (i, m) in ms.enumerated() { try context.add(m, to: "members", of: os[i / per]) }
}

/// Builds `config` in a new store in `directory`: prints the seconds of the objects' insert and
/// save, of the relationships' sets and of their durable save, and the heap the relationships
/// hold once saved.
func buildChild(_ config: Config, _ directory: URL) throws {
    let store = try ObjectStore.open(at: directory, schema: try config.schema, options: Stores.options(.always))
    let context = store.context
    var t = now()
    var build: () throws -> Void
    switch config {
    case .objects:
        _ = try insertObjects(SetOwner.self, into: context)
        build = {}
    case .toOne:
        let (os, ms) = try insertObjects(OneOwner.self, into: context)
        build = { for (i, m) in ms.enumerated() { m.owner = os[i / per] } }
    case .toOneArray:
        let (os, ms) = try insertObjects(OneOwner.self, into: context)
        build = { buildArrays(os, ms) }
    case .setArray:
        let (os, ms) = try insertObjects(SetOwner.self, into: context)
        build = { buildArrays(os, ms) }
    case .setAdd:
        let (os, ms) = try insertObjects(SetOwner.self, into: context)
        build = { try buildAdds(os, ms, context) }
    case .setInverse:
        let (os, ms) = try insertObjects(SetOwner.self, into: context)
        build = { for (i, m) in ms.enumerated() { m.owners = [os[i / per]] } }
    case .listArray:
        let (os, ms) = try insertObjects(ListOwner.self, into: context)
        build = { buildArrays(os, ms) }
    case .listAdd:
        let (os, ms) = try insertObjects(ListOwner.self, into: context)
        build = { try buildAdds(os, ms, context) }
    case .listToOne:
        let (os, ms) = try insertObjects(ListOwner.self, into: context)
        build = { for (i, m) in ms.enumerated() { m.owner = os[i / per] } }
    case .seqArray:
        let (os, ms) = try insertObjects(SeqOwner.self, into: context)
        build = { buildArrays(os, ms) }
    case .nodeObjects, .nodeArray:
        var nodes: [Node] = []
        nodes.reserveCapacity(owners)
        for i in 0..<owners {
            let x = try context.insert(Node.self)
            x.n = i
            nodes.append(x)
        }
        build =
            config == .nodeObjects
            ? {}
            : {
                for (j, x) in nodes.enumerated() { x.depends = dependencies(of: j).map { nodes[$0] } }
            }
    }
    try context.save()
    let insertSeconds = now() - t
    let heapBefore = heapInUse()
    t = now()
    try build()
    let buildSeconds = now() - t
    t = now()
    try context.save()
    let saveSeconds = now() - t
    let heapAfter = heapInUse()
    let bytes = Double(store.stats.bytesOnDisk)
    try store.close()
    emit([
        "insert": insertSeconds, "build": buildSeconds, "save": saveSeconds, "heap": heapAfter - heapBefore,
        "disk": bytes,
    ])
}

/// The first owner's (or node's) relationship, checked after an open.
func check(_ config: Config, _ context: ModelContext) throws {
    func first<T: Entity>(_ type: T.Type) throws -> T {
        var d = FetchDescriptor<T>()
        d.fetchLimit = 1
        guard let x = try context.fetch(d).first else { throw BenchError("\(config): no \(T.self)") }
        return x
    }
    let expected = config.relationships == 0 ? 0 : per
    let found: [Int]
    switch config {
    case .objects, .setArray, .setAdd, .setInverse: found = try first(SetOwner.self).members.map(\.n)
    case .toOne, .toOneArray: found = try first(OneOwner.self).members.map(\.n).sorted()
    case .listArray, .listAdd, .listToOne: found = try first(ListOwner.self).members.map(\.n)
    case .seqArray: found = try first(SeqOwner.self).members.map(\.n)
    case .nodeObjects, .nodeArray:
        let deps = try first(Node.self).depends.map(\.n)
        guard deps.count == expected, expected == 0 || Set(deps) == Set(dependencies(of: 0)) else {
            throw BenchError("\(config): depends \(deps)")
        }
        return
    }
    guard found.count == expected else { throw BenchError("\(config): \(found.count) members, expected \(expected)") }
    if expected > 0, Set(found) != Set(0..<per) { throw BenchError("\(config): members \(found)") }
}

/// Opens the store of `config` in `directory`: prints the seconds of the open (and the replay
/// alone), the heap in use and the resident set after it, and with `compact`, the seconds of a
/// compaction and the bytes on disk after it.
func openChild(_ config: Config, _ directory: URL, compact: Bool) throws {
    trimHeap()
    let heapBefore = heapInUse(), residentBefore = residentBytes()
    let t = now()
    let store = try ObjectStore.open(at: directory, schema: try config.schema, options: Stores.options(.always))
    let openSeconds = now() - t
    trimHeap()
    let heapAfter = heapInUse(), residentAfter = residentBytes()
    try check(config, store.context)
    var compactSeconds = 0.0
    if compact {
        let c = now()
        try store.compact()
        compactSeconds = now() - c
    }
    let bytes = Double(store.stats.bytesOnDisk)
    try store.close()
    emit([
        "open": openSeconds, "replay": store.replaySeconds, "heap": heapAfter - heapBefore,
        "rss": residentAfter - residentBefore,
        "compact": compactSeconds, "disk": bytes,
    ])
}

// MARK: Removal

/// The relationships (c) removes from.
enum RemovalKind: String, CaseIterable {
    case toOne = "to-one"
    case set = "m2m"
    case list = "ordered"
    case seq = "ordered-m2m"
}

/// One owner with `n` members in a new store (durability `.none`: the save's CPU, not the
/// disk's sync); prints the median and mean nanoseconds of 256 single `context.remove` calls of
/// random members (rolled back after), cold and warm, then the median microseconds of 32
/// rounds of one removal and one save.
func removalChild(_ kind: RemovalKind, n: Int) throws {
    switch kind {
    case .toOne: try removal(OneOwner.self, n: n)
    case .set: try removal(SetOwner.self, n: n)
    case .list: try removal(ListOwner.self, n: n)
    case .seq: try removal(SeqOwner.self, n: n)
    }
}

func removal<O: BenchOwner>(_ type: O.Type, n: Int) throws {
    let directory = Stores.temporaryDirectory("links-remove")
    defer { Stores.remove(directory) }
    let store = try ObjectStore.open(
        at: directory, schema: try Schema(O.self, O.Member.self), options: Stores.options(.none))
    let context = store.context
    let owner = try context.insert(O.self)
    var members: [O.Member] = []
    members.reserveCapacity(n)
    for i in 0..<n {
        let m = try context.insert(O.Member.self)
        m.n = i
        members.append(m)
    }
    let heapBefore = heapInUse()
    owner.members = members
    try context.save()
    let heapPerMember = (heapInUse() - heapBefore) / Double(n)
    var rng = SplitMix(seed: UInt64(n))
    let order = members.shuffled(using: &rng)
    let single = 256, saved = 32
    var times: [Double] = []
    times.reserveCapacity(single)
    // The removals `passes` times, each pass rolled back: the first pass meets the members cold
    // (the first touch since they were built), the last one warm. `--repeat k` (for a profiler):
    // k passes.
    let passes = max(2, Int(option("--repeat") ?? "20") ?? 20)
    var cold: [Double] = []
    for pass in 0..<passes {
        times.removeAll(keepingCapacity: true)
        try measuredRemovals(Array(order.prefix(single)), owner, context, into: &times)
        context.rollback()
        if pass == 0 { cold = times }
    }
    guard owner.members.count == n else { throw BenchError("rollback left \(owner.members.count) of \(n)") }
    var removeAndSave: [Double] = []
    var saves: [Double] = []
    for m in order.suffix(saved) {
        let t = now()
        try context.remove(m, from: "members", of: owner)
        let s = now()
        try context.save()
        let e = now()
        removeAndSave.append((e - t) * 1e6)
        saves.append((e - s) * 1e6)
    }
    guard owner.members.count == n - saved else {
        throw BenchError("\(owner.members.count) members after \(saved) removals of \(n)")
    }
    try store.close()
    emit([
        "coldNs": median(cold), "coldMeanNs": cold.reduce(0, +) / Double(cold.count), "removeNs": median(times),
        "removeMeanNs": times.reduce(0, +) / Double(times.count), "removeSaveUs": median(removeAndSave),
        "saveUs": median(saves),
        "heapPerMember": heapPerMember,
    ])
}

/// Removes each of `members` from `owner`, timing each `context.remove` alone (nanoseconds).
@inline(never)
func measuredRemovals<O: BenchOwner>(
    _ members: [O.Member], _ owner: O, _ context: ModelContext, into times: inout [Double]
) throws {
    for m in members {
        let t = DispatchTime.now().uptimeNanoseconds
        try context.remove(m, from: "members", of: owner)
        times.append(Double(DispatchTime.now().uptimeNanoseconds - t))
    }
}

// MARK: A reference for the link table's replay

/// The same pairs as `m2m-array` (rows: owner j, member j × per + k) turned into flat per-side
/// lists, compressed-sparse-row style: a count pass, a prefix sum, a scatter pass per side.
/// Prints the seconds and the bytes (offsets and members of both sides): what a replay that
/// builds the committed lists in bulk, instead of one array per object, would pay for them.
func flatListsChild() {
    let rows0 = owners, rows1 = owners * per
    var a: [Int32] = [], b: [Int32] = []
    a.reserveCapacity(rows1)
    b.reserveCapacity(rows1)
    for j in 0..<owners {
        for k in 0..<per {
            a.append(Int32(j))
            b.append(Int32(j * per + k))
        }
    }
    let t = now()
    func flat(_ from: [Int32], _ to: [Int32], rows: Int) -> (offsets: [Int32], members: [Int32]) {
        var offsets = [Int32](repeating: 0, count: rows + 1)
        for r in from { offsets[Int(r) + 1] += 1 }
        for i in 0..<rows { offsets[i + 1] += offsets[i] }
        var next = offsets
        var members = [Int32](repeating: 0, count: from.count)
        for (r, m) in zip(from, to) {
            members[Int(next[Int(r)])] = m
            next[Int(r)] += 1
        }
        return (offsets, members)
    }
    let side0 = flat(a, b, rows: rows0)
    let side1 = flat(b, a, rows: rows1)
    let seconds = now() - t
    let bytes = Double((side0.offsets.count + side0.members.count + side1.offsets.count + side1.members.count) * 4)
    guard side0.members.count == rows1, side1.offsets[rows1] == Int32(rows1) else { return }
    emit(["flat": seconds, "bytes": bytes])
}

// MARK: Child modes

if let name = option("--build") {
    guard let config = Config(rawValue: name), let dir = option("--dir") else { throw BenchError("--build \(name)") }
    try buildChild(config, URL(fileURLWithPath: dir))
    exit(0)
}
if let name = option("--open") {
    guard let config = Config(rawValue: name), let dir = option("--dir") else { throw BenchError("--open \(name)") }
    try openChild(config, URL(fileURLWithPath: dir), compact: arguments.contains("--compact"))
    exit(0)
}
if arguments.contains("--flat-lists") {
    flatListsChild()
    exit(0)
}
if let name = option("--remove") {
    guard let kind = RemovalKind(rawValue: name), let n = option("--members").flatMap(Int.init) else {
        throw BenchError("--remove \(name)")
    }
    try removalChild(kind, n: n)
    exit(0)
}

// MARK: The driver

/// Runs this binary with `args` and returns the `key value` pairs of its last line.
func child(_ args: [String]) throws -> [String: Double] {
    let process = Process()
    process.executableURL = URL(
        fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
    process.arguments = args + ["--owners", "\(owners)", "--per", "\(per)"]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    guard process.terminationStatus == 0, let line = out.split(separator: "\n").last else {
        throw BenchError("\(args): \(out)")
    }
    let f = line.split(separator: " ")
    var result: [String: Double] = [:]
    for i in stride(from: 0, to: f.count - 1, by: 2) { result[String(f[i])] = Double(f[i + 1]) }
    return result
}

/// The library's commit and whether its sources differ from it, for the report.
func libraryCommit() -> String {
    func git(_ args: [String]) -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["git", "-C", "../.."] + args
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return "" }
        p.waitUntilExit()
        return String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).trimmingCharacters(
            in: .whitespacesAndNewlines)
    }
    let commit = option("--commit") ?? git(["rev-parse", "--short", "HEAD"])
    if option("--commit") != nil { return commit }
    let dirty = git(["status", "--porcelain", "--", "Sources"])
    return dirty.isEmpty ? commit : "\(commit) (library sources modified in the working tree)"
}

let configs = Config.allCases
let removalSizes = [1_000, 10_000, 100_000]
let loadBefore = loadAverage()
var builds: [Config: [[String: Double]]] = [:]
var opens: [Config: [[String: Double]]] = [:]
var baseOpens: [Config: [[String: Double]]] = [:]
var removals: [String: [[String: Double]]] = [:]
var flatLists: [[String: Double]] = []
let only = option("--only").map { Set($0.split(separator: ",").map(String.init)) }
for round in 0..<rounds {
    FileHandle.standardError.write(Data("round \(round + 1)/\(rounds)\n".utf8))
    // The round's order, rotated by one configuration per round.
    let rotated = Array(configs[(round % configs.count)...] + configs[..<(round % configs.count)])
    for config in rotated where only?.contains(config.rawValue) ?? true {
        let dir = Stores.temporaryDirectory("links-\(config.rawValue)")
        defer { Stores.remove(dir) }
        builds[config, default: []].append(try child(["--build", config.rawValue, "--dir", dir.path]))
        opens[config, default: []].append(try child(["--open", config.rawValue, "--dir", dir.path, "--compact"]))
        baseOpens[config, default: []].append(try child(["--open", config.rawValue, "--dir", dir.path]))
        FileHandle.standardError.write(
            Data(
                "  \(config.rawValue): build \(builds[config]!.last!) open \(opens[config]!.last!) base \(baseOpens[config]!.last!)\n"
                    .utf8))
    }
    flatLists.append(try child(["--flat-lists"]))
    guard only == nil || only!.contains("remove") else { continue }
    let kinds = RemovalKind.allCases
    let rotatedKinds = Array(kinds[(round % kinds.count)...] + kinds[..<(round % kinds.count)])
    for kind in rotatedKinds {
        for n in removalSizes {
            let r = try child(["--remove", kind.rawValue, "--members", "\(n)"])
            removals["\(kind.rawValue) \(n)", default: []].append(r)
            FileHandle.standardError.write(Data("  remove \(kind.rawValue) \(n): \(r)\n".utf8))
        }
    }
}
let loadAfter = loadAverage()

// MARK: The report

func m(_ runs: [[String: Double]]?, _ key: String) -> Double { median((runs ?? []).compactMap { $0[key] }) }
/// The median over the rounds of each round's `f(a) / f(b)`.
func roundRatio(_ a: [[String: Double]]?, _ b: [[String: Double]]?, _ f: ([String: Double]) -> Double) -> Double {
    median(zip(a ?? [], b ?? []).map { f($0) / f($1) })
}
func s3(_ x: Double) -> String { String(format: "%.3f", x) }
func s2(_ x: Double) -> String { String(format: "%.2f", x) }
func s1(_ x: Double) -> String { String(format: "%.1f", x) }
let total = { (r: [String: Double]) in (r["build"] ?? .nan) + (r["save"] ?? .nan) }
let baseline = builds[.toOne]
let links = Double(owners * per)

var buildRows: [String] = []
for c in configs where c != .objects && c != .nodeObjects && builds[c] != nil {
    let b = builds[c]
    let ratio = roundRatio(b, baseline, total)
    let mark = c == .toOne || c == .toOneArray ? "" : (ratio <= 2 ? " ✓" : " ✗")
    buildRows.append(
        "| `\(c.rawValue)` | \(s3(m(b, "build"))) | \(s3(m(b, "save"))) | **\(s3(median((b ?? []).map(total))))** | **\(s2(ratio))×**\(mark) | \(s1(m(b, "disk") / 1e6)) | \(s1(m(b, "heap") / links)) |"
    )
}

/// The configuration whose store holds the same objects without relationships.
func objectsOf(_ c: Config) -> Config { c == .nodeArray || c == .nodeObjects ? .nodeObjects : .objects }
var openRows: [String] = []
for c in configs where opens[c] != nil {
    let o = opens[c], b = baseOpens[c], base = objectsOf(c)
    let journalRatio = roundRatio(o, opens[base], { $0["open"] ?? .nan })
    let baseRatio = roundRatio(b, baseOpens[base], { $0["open"] ?? .nan })
    let heapPerLink = c.relationships == 0 ? "—" : s1((m(b, "heap") - m(baseOpens[base], "heap")) / links)
    let rssPerLink = c.relationships == 0 ? "—" : s1((m(b, "rss") - m(baseOpens[base], "rss")) / links)
    let mark =
        c.relationships == 0 || c == .toOne || c == .toOneArray
        ? "" : (max(journalRatio, baseRatio) <= 1.5 ? " ✓" : " ✗")
    openRows.append(
        "| `\(c.rawValue)` | \(s3(m(o, "open"))) | \(s2(journalRatio))× | \(s3(m(b, "open"))) | **\(s2(baseRatio))×**\(mark) | \(s3(m(o, "compact"))) | \(s1(m(b, "disk") / 1e6)) | \(s1(m(b, "heap") / 1e6)) | \(heapPerLink) | \(rssPerLink) |"
    )
}

var removalRows: [String] = []
for kind in RemovalKind.allCases {
    let cells = removalSizes.map { n -> String in
        let r = removals["\(kind.rawValue) \(n)"]
        return
            "\(String(format: "%.0f", m(r, "removeNs"))) ns (\(String(format: "%.0f", m(r, "removeMeanNs")))); cold \(String(format: "%.0f", m(r, "coldNs"))) ns; "
            + "\(String(format: "%.0f", m(r, "removeSaveUs"))) µs"
    }
    guard removals["\(kind.rawValue) \(removalSizes[0])"] != nil else { continue }
    let growth =
        m(removals["\(kind.rawValue) \(removalSizes.last!)"], "removeNs")
        / m(removals["\(kind.rawValue) \(removalSizes[0])"], "removeNs")
    let heap = m(removals["\(kind.rawValue) \(removalSizes.last!)"], "heapPerMember")
    removalRows.append("| `\(kind.rawValue)` | \(cells.joined(separator: " | ")) | \(s1(growth))× | \(s1(heap)) |")
}

let report = """
    # Links: many-to-many and ordered to-many against the to-one slot

    Generated by `make bench-links` (`Tools/Benchmarks/Sources/links-comparison`) at commit \(libraryCommit()),
    release build, \(owners) owners × \(per) members (\(owners * per) relationships), \(rounds) rounds, medians,
    each measurement in a fresh process, the configurations one after the other in each round (the order
    rotated by one each round). Load average before: \(loadBefore); after: \(loadAfter). 2-core VM.
    Command: `links-comparison \(arguments.joined(separator: " "))`.

    ## Build and durable save

    The \(owners) owners and \(owners * per) members are inserted and saved first (not measured); then the
    relationships are set through the public API and saved with durability `.always` (one `fdatasync`),
    automatic compaction off. Owner `j` gets members `j × \(per) ..< (j + 1) × \(per)` in every configuration, so
    every row makes the same \(owners * per) (owner, member) pairs; the baseline `to-one` sets `member.owner = owner`
    on each member (a to-one slot, its to-many inverse not stored). `-array`: `owner.members = [...]` once per
    owner; `-add`: `context.add(member, to: "members", of: owner)` per link; `m2m-inverse`: `member.owners = [owner]`
    per member; `ordered-to-one`: `member.owner = owner` where the to-one is the inverse of an ordered to-many
    (stored as links). `self-m2m-array`: \(owners) nodes, each `depends = [...]` on \(per) others (the links among
    \(owners) objects). Seconds; ratio: the median of the rounds' (build + save) / the same round's `to-one`
    (target ≤ 2×); heap: bytes the context holds after the save beyond before the build, per relationship.

    | configuration | build | save | build + save | / to-one | journal MB | heap B/rel. |
    |---|---|---|---|---|---|---|
    \(buildRows.joined(separator: "\n"))

    ## Open

    The store of each row above opened in a new process: first as written (the objects' record, then the
    relationships' record), then compacted and opened again (a base). Page cache warm for every row. Ratios:
    the median of the rounds' open / the same round's open of the same objects without relationships
    (`objects`; `self-objects` for the nodes), target ≤ 1.5×. Memory: heap in use (glibc `malloc_info`'s totals, after
    `malloc_trim`) and the resident set after the open of the base minus before it, and per relationship the
    difference to the same objects without relationships.

    For reference, the same \(owners * per) pairs (as rows) turned into flat lists per side in one process,
    compressed-sparse-row style (a count pass, a prefix sum and a scatter per side; `--flat-lists`):
    \(s3(m(flatLists, "flat"))) s and \(s1(m(flatLists, "bytes") / links)) bytes per link, both sides' offsets included.

    | store | open journal s | / objects | open base s | / objects | compact s | base MB | heap MB | heap B/rel. | RSS B/rel. |
    |---|---|---|---|---|---|---|---|---|---|
    \(openRows.joined(separator: "\n"))

    ## Removing one link

    One owner with n members (set with `owner.members = [...]` and saved), in a fresh process per n and
    relationship; `context.remove(member, from: "members", of: owner)` of 256 random members, each timed alone,
    the pass rolled back and repeated 20 times: median (mean) nanoseconds of the last pass (warm), and the median
    of the first (cold: each member's lists touched for the first time since the build); then one removal
    followed by `save()` (durability `.none`: the CPU of the save, not the disk's sync), median µs of 32.
    Growth: the warm median at n = \(removalSizes.last!) / at n = \(removalSizes[0]) (×100 members). Heap: bytes the
    context holds after setting and saving the \(removalSizes.last!) members, per member (both sides' lists, and
    for an unordered list of 64 or more its position index; the to-one: its slots were there before).

    | relationship | \(removalSizes.map { "n = \($0)" }.joined(separator: " | ")) | growth | heap B/member |
    |---|\(removalSizes.map { _ in "---|" }.joined())---|---|
    \(removalRows.joined(separator: "\n"))
    """
try FileManager.default.createDirectory(at: outDirectory, withIntermediateDirectories: true)
try report.write(to: outDirectory.appendingPathComponent("links.md"), atomically: true, encoding: .utf8)
print(report)
