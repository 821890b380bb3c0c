import Foundation
import Glibc
import ObjectGraph
import ObjectGraphTestSupport
import Testing

@testable import GraphJournal

/// Damage cases per run: a short pass in `make test`, every class many times in `make soak`
/// (OBJECTGRAPH_DAMAGE_CASES). The seed is printed; OBJECTGRAPH_DAMAGE_SEED replays a run.
let damageCases = ProcessInfo.processInfo.environment["OBJECTGRAPH_DAMAGE_CASES"].flatMap(Int.init) ?? 48
let damageSeed =
    ProcessInfo.processInfo.environment["OBJECTGRAPH_DAMAGE_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 0 ... .max)

/// Every way a disk, an operator or an attacker damages a store, applied to a store with a
/// base and several logs; for each, `verify`, a default open, `.pointInTime` and `repair` as
/// `verify` advises must agree (``Damage/expectAgreement(_:verdict:sourceLocation:)``), and
/// what recovery keeps must be the state after some save.
///
/// It runs twice: on a plain store, and on a store encrypted at rest, where every reader is
/// given the key and must agree the same way; there `verify` without the key must also give
/// the verdict the framing alone supports (a clean or torn-tail store the same verdict; a
/// corruption only the key reveals, such as a sealed payload changed with its checksum
/// recomputed, may look clean without it).
@Suite("Damage matrix: every damage class, one verdict", .serialized)
struct DamageMatrixTests {
    enum Kind: CaseIterable {
        case truncate, flipBit, zeros, randomBytes, earlierBytes, payloadWithChecksum
        case deleteSegment, emptySegment, renameSegment, swapSegments, extraSegment
        case missingManifest, staleManifest, craftedManifest, damagedManifest
        case duplicateRecord, replayedRecord, garbageTail, fifoSegment
    }

    /// The store every case starts from, and the objects after each of its saves.
    struct Original {
        var dir: URL
        var states: [[String: [UInt64: [String: AttributeValue?]]]]
    }

    static func original() throws -> Original {
        var states: [[String: [UInt64: [String: AttributeValue?]]]] = []
        let dir = try Damage.store("matrix", saves: 24, segmentSize: 600, compactAfter: 8) {
            states.append(try Tool.objects(of: $0))
        }
        return Original(dir: dir, states: states)
    }

    /// Whether opening a copy of `original` with the test's model is refused as an incompatible schema (and
    /// leaves every file as it was): what a journal written by another model gets.
    static func refusesAsAnotherModel(_ original: URL) throws -> Bool {
        let dir = try Damage.copy(original)  // the case's own files stay untouched
        defer { try? FileManager.default.removeItem(at: dir) }
        let before = try Damage.regularContents(of: dir)
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        do {
            let store = try ObjectStore.open(
                at: dir, schema: try Schema(Reading.self), options: Damage.withKeys(options))
            try store.close()
            return false
        } catch let error as StoreError where error.code == .incompatibleSchema {
            #expect(try Damage.regularContents(of: dir) == before, "a refused open changed nothing")
            return true
        } catch {
            return false
        }
    }

    @Test(arguments: [false, true])
    func everyDamageClassGivesOneVerdictAndLosesNothing(encrypted: Bool) throws {
        let keys = encrypted ? try TestKeys([TestKeys.november]) : nil
        try Damage.$keys.withValue(keys) { try runMatrix() }
    }

    /// The matrix on stores written with ``Damage/keys`` (plain ones when nil).
    func runMatrix() throws {
        let encrypted = Damage.keys != nil
        print(
            "damage matrix\(encrypted ? " (encrypted)" : ""): seed \(damageSeed), \(damageCases) cases (OBJECTGRAPH_DAMAGE_SEED, OBJECTGRAPH_DAMAGE_CASES)"
        )
        var random = SeededGenerator(seed: damageSeed)
        let original = try Self.original()
        var outcomes: [String: Int] = [:]
        for index in 0..<damageCases {
            let kind = Kind.allCases[index % Kind.allCases.count]
            let dir = try Damage.copy(original.dir)
            let label = try Self.apply(kind, to: dir, random: &random)
            let verify = try Tool.run(["verify", dir.path] + Damage.keyArguments)
            outcomes["\(kind) → \(verify.status)", default: 0] += 1
            let place = "case \(index) \(label), seed \(damageSeed)\(encrypted ? ", encrypted" : "")"
            let context = Comment(rawValue: place)
            if encrypted { try Self.expectFramingVerdict(dir, withKey: verify, place: place) }
            switch verify.status {
            case 1:
                // Unreadable as a whole (MANIFEST damaged, a file that is not a regular file):
                // nothing opens it, nothing is changed.
                let before = try Damage.regularContents(of: dir)
                for recovery in [JournalOptions.Recovery.tolerateTornTail, .pointInTime] {
                    #expect(throws: StoreError.self, "\(place)") {
                        _ = try ObjectStore.open(
                            at: dir, schema: try Schema(Reading.self),
                            options: Damage.withKeys(StoreOptions(durability: .none, recovery: recovery)))
                    }
                }
                #expect(try Damage.regularContents(of: dir) == before, "\(place)")
            case _
            where kind == .payloadWithChecksum && verify.status == 0 && (try? Self.refusesAsAnotherModel(dir)) == true:
                // A schema record changed with its checksum recomputed that still decodes (an
                // entity renamed) is a model nobody wrote, as valid as a real one: verify, which
                // reads the journal without the application's model, finds nothing wrong; the
                // application's open refuses it as a schema change and changes nothing.
                outcomes["\(kind) → another model", default: 0] += 1
            default:
                let outcome = try Damage.expectAgreement(dir, verdict: verify.status, comment: context)
                let kept = try Damage.objects(outcome.pointInTimeCopy)
                // A payload changed with its checksum recomputed that still decodes is a save
                // nobody made, indistinguishable from a real one: only its verdict is checked.
                // A later record may contradict it (an insert of a serial the forged record
                // already inserted): then the corruption reported is at that later record, and
                // what recovery keeps includes the forged save.
                let forged =
                    kind == .payloadWithChecksum
                    && (verify.status != 3
                        || Self.firstCorruptRecord(verify.stdout).map { $0 > (Self.record(in: label) ?? .max) } == true)
                let isAState = original.states.contains(kept) || forged
                #expect(isAState, "point-in-time recovery kept the state after some save: \(place)")
                if verify.status != 3 {
                    let same = outcome.defaultOpenObjects == kept
                    #expect(same, "without corruption nothing is dropped: \(place)")
                }
            }
        }
        print("damage matrix outcomes (class → verify exit: cases):")
        for (key, count) in outcomes.sorted(by: { $0.key < $1.key }) { print("  \(key): \(count)") }
    }

    /// Checks `verify` without the key against its verdict with it (`withKey`): the framing,
    /// checksums and seal order it checks alone give the same verdict when the key reveals no
    /// more, it never finds damage the key does not, and it says how many sealed records it
    /// could not open.
    static func expectFramingVerdict(_ dir: URL, withKey: Tool.Result, place: String) throws {
        let bare = try Tool.run(["verify", dir.path])
        switch withKey.status {
        case 0, 2:
            #expect(bare.status == withKey.status, "verify without the key: \(bare.stdout)\(bare.stderr) [\(place)]")
        case 3:
            #expect([0, 2, 3].contains(bare.status), "verify without the key: \(bare.stdout)\(bare.stderr) [\(place)]")
        default:
            // Unreadable with the key: a MANIFEST that does not parse, a file that is not a
            // regular one, or a seal whose key identifier or check was changed (a key the
            // keyring lacks, or a wrong one): without the key only the framing is judged.
            #expect([0, 1, 2, 3].contains(bare.status), "[\(place)]")
        }
        if bare.status == 3 {
            #expect([1, 3].contains(withKey.status), "the key hides no damage the framing shows [\(place)]")
        }
        if bare.status != 1, bare.stdout.contains("sealed record") {
            #expect(bare.stdout.contains("contents not (no key given)"), "[\(place)]")
        }
        #expect(!bare.stdout.contains("opened and checked"), "[\(place)]")
    }

    /// The sequence `verify` names first as corrupt ("… (record N): …"), if any.
    static func firstCorruptRecord(_ report: String) -> UInt64? {
        guard let range = report.range(of: "(record ") else { return nil }
        return UInt64(report[range.upperBound...].prefix { $0.isNumber })
    }

    /// The sequence a damage label names ("… of record N, …").
    static func record(in label: String) -> UInt64? {
        guard let range = label.range(of: "of record ") else { return nil }
        return UInt64(label[range.upperBound...].prefix { $0.isNumber })
    }

    /// Damages the store in `dir`; returns a description of what was done.
    static func apply(_ kind: Kind, to dir: URL, random: inout SeededGenerator) throws -> String {
        let files = try Journal.inspect(directory: dir.path).files
        let logs = files.filter { $0.hasSuffix(".log") }
        func url(_ name: String) -> URL { dir.appendingPathComponent(name) }
        func bytes(_ name: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: url(name))) }
        func write(_ name: String, _ data: [UInt8]) throws { try Data(data).write(to: url(name)) }
        let file = files.randomElement(using: &random)!
        switch kind {
        case .truncate:
            let b = try bytes(file)
            let at = Int.random(in: 0..<b.count, using: &random)
            try write(file, Array(b[..<at]))
            return "truncate \(file) at \(at)"
        case .flipBit:
            var b = try bytes(file)
            let bit = Int.random(in: 0..<(b.count * 8), using: &random)
            b[bit / 8] ^= UInt8(1 << (bit % 8))
            try write(file, b)
            return "flip bit \(bit) of \(file)"
        case .zeros, .randomBytes, .earlierBytes:
            var b = try bytes(file)
            let count = min(b.count, Int.random(in: 1...64, using: &random))
            let at = Int.random(in: 0...(b.count - count), using: &random)
            for i in 0..<count {
                b[at + i] =
                    switch kind {
                    case .zeros: 0
                    case .randomBytes: UInt8.random(in: 0...255, using: &random)
                    default: b[i % max(1, at)]
                    }
            }
            try write(file, b)
            return "\(kind) over \(count) bytes at \(at) of \(file)"
        case .payloadWithChecksum:
            let entries = try Journal.inspect(directory: dir.path).entries.filter { $0.storedLength > 0 }
            let entry = entries.randomElement(using: &random)!
            let at = Int.random(in: 0..<entry.storedLength, using: &random)
            try Damage.rewrite(dir, entry) { $0[JournalFormat.recordHeaderSize + at] ^= 0x5A }
            return "change payload byte \(at) of record \(entry.sequence), checksum recomputed"
        case .deleteSegment:
            try FileManager.default.removeItem(at: url(file))
            return "delete \(file)"
        case .emptySegment:
            try write(file, [])
            return "empty \(file)"
        case .renameSegment:
            let log = logs.randomElement(using: &random)!
            let name = fileName((fileNumber(files.last!) ?? 0) + 3, .log)
            try FileManager.default.moveItem(at: url(log), to: url(name))
            return "rename \(log) to \(name)"
        case .swapSegments:
            guard logs.count >= 2 else { return "nothing to swap" }
            let a = logs[0], b = logs[1]
            let (x, y) = (try bytes(a), try bytes(b))
            try write(a, y)
            try write(b, x)
            return "swap \(a) and \(b)"
        case .extraSegment:
            let log = logs.randomElement(using: &random)!
            let name = fileName((fileNumber(files.last!) ?? 0) + 7, .log)
            try FileManager.default.copyItem(at: url(log), to: url(name))
            return "copy \(log) to \(name)"
        case .missingManifest:
            try FileManager.default.removeItem(at: url("MANIFEST"))
            return "delete MANIFEST"
        case .staleManifest:
            try Damage.writeManifest(dir, Array(files.dropLast()).isEmpty ? files : Array(files.dropLast()))
            return "MANIFEST without its last log"
        case .craftedManifest:
            let kept = files.enumerated().filter {
                $0.offset == 0 || $0.offset == files.count - 1 || Bool.random(using: &random)
            }.map(\.element)
            try Damage.writeManifest(dir, kept)
            return "MANIFEST listing \(kept)"
        case .damagedManifest:
            var b = try bytes("MANIFEST")
            b[Int.random(in: 0..<b.count, using: &random)] ^= 0x01
            try write("MANIFEST", b)
            return "flip a bit of MANIFEST"
        case .duplicateRecord, .replayedRecord:
            let entries = try Journal.inspect(directory: dir.path).entries
            let entry = entries.randomElement(using: &random)!
            var record = try Damage.recordBytes(dir, entry)
            if kind == .replayedRecord {
                record.storeLittleEndian(entries.last!.sequence + 1, at: JournalFormat.RecordHeaderField.sequence)
            }
            try Damage.append(dir, file: logs.last!, record: record)
            return "\(kind) of record \(entry.sequence) at the end"
        case .garbageTail:
            let count = Int.random(in: 1...200, using: &random)
            try write(
                logs.last!, try bytes(logs.last!) + (0..<count).map { _ in UInt8.random(in: 0...255, using: &random) })
            return "\(count) garbage bytes after \(logs.last!)"
        case .fifoSegment:
            try FileManager.default.removeItem(at: url(file))
            _ = mkfifo(url(file).path, 0o600)
            return "FIFO in place of \(file)"
        }
    }
}

/// Truncation at, and a flipped bit in, every byte of every file of a store with a base and
/// several logs, judged by
/// the library alone: the read-only walk's verdict, a default open and `.pointInTime` agree,
/// and what recovery keeps is the state after some save.
@Suite("Damage at every offset", .serialized)
struct DamageAtEveryOffsetTests {
    @Test func truncationOrABitFlipAtEveryOffsetOfEveryFileGivesOneVerdict() throws {
        let original = try DamageMatrixTests.original()
        let files = try Journal.inspect(directory: original.dir.path).files
        var outcomes: [String: Int] = [:]
        for file in files + ["MANIFEST"] {
            let pristine = try Data(contentsOf: original.dir.appendingPathComponent(file))
            for offset in 0..<pristine.count {
                for damage in ["truncate", "flip"] {
                    let dir = try Damage.copy(original.dir)
                    var bytes = pristine
                    if damage == "truncate" { bytes = bytes.prefix(offset) } else { bytes[offset] ^= 0x10 }
                    try bytes.write(to: dir.appendingPathComponent(file))
                    let label = "\(damage) \(file) at \(offset)"
                    outcomes["\(damage) → \(try Self.check(dir, original: original, label: label))", default: 0] += 1
                }
            }
        }
        print("damage at every offset (damage → verdict: cases): \(outcomes.sorted { $0.key < $1.key })")
    }

    /// Returns the verdict's name after checking that the readers agree.
    static func check(_ dir: URL, original: DamageMatrixTests.Original, label: String) throws -> String {
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        let schema = try Schema(Reading.self)
        guard let report = try? Journal.inspect(directory: dir.path) else {
            #expect(throws: StoreError.self, "\(label): MANIFEST unreadable, so open refuses") {
                try ObjectStore.open(at: dir, schema: schema, options: options).close()
            }
            return "unreadable"
        }
        let before = try Damage.regularContents(of: dir)
        var opened: [String: [UInt64: [String: AttributeValue?]]]?
        do {
            let store = try ObjectStore.open(at: dir, schema: schema, options: options)
            opened = try Tool.objects(of: store.context)
            try store.close()
        } catch {
            #expect(try Damage.regularContents(of: dir) == before, "\(label): a refused open changed nothing")
        }
        // Payload problems the walk does not see (a record that checks but does not decode)
        // make open refuse where the walk says clean; verify (the tool) sees them too.
        if report.verdict == .corrupt {
            #expect(opened == nil, "\(label): open succeeded where the walk found corruption: \(report.problems)")
        }
        options.recovery = .pointInTime
        let store = try ObjectStore.open(at: dir, schema: schema, options: options)
        let kept = try Tool.objects(of: store.context)
        try store.close()
        let isAState = original.states.contains(kept)
        #expect(isAState, "\(label): point-in-time recovery kept the state after some save")
        if let opened {
            let same = opened == kept
            #expect(same, "\(label): nothing is dropped from a store that opens")
        }
        return opened == nil ? "refused" : (report.verdict == .clean ? "clean" : "\(report.verdict)")
    }
}
