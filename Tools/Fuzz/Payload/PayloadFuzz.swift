// libFuzzer target over the records above the journal: transaction payloads with valid
// checksums whose bytes are hostile, fed to the three appliers of a record that a process
// runs (`Tools/Fuzz/build.sh` builds it with `-sanitize=fuzzer,address`; `make fuzz` runs it).
//
// Each input edits one record of a small valid store (the first input byte picks the record
// and how the rest is read: edits of its bytes, or bytes appended to it, or a payload of its
// own), then the journal of those records, every checksum valid, goes through:
//   - a default open, which opens or refuses with a `StoreError` naming a record;
//   - point-in-time recovery, which must open unless the model itself refuses a record
//     (`incompatibleSchema`);
//   - a follower (a read-only replica) applying each record with `applyShipped`.
// The open and the follower must refuse the same record, or accept them all and hold the same
// notes. A crash, a sanitizer report, an allocation failure or a broken agreement (an abort)
// is a finding.
//
// Built without `OBJECTGRAPH_PAYLOAD_FUZZ` (a plain `swift build`), it is a program that says
// how to build it.

import Foundation
import GraphJournal
import ObjectGraph

enum FuzzMood: Int {
    case calm = 0
    case busy = 1
}

@Entity final class FuzzNote {
    var title: String = ""
    var mood: FuzzMood = .calm
    var size: Int = 0
    /// Native lists: every payload of the store holds list cells (schema record version 5), so
    /// their decoding is fuzzed with the rest.
    var words: [String] = []
    var counts: [Int]?
    @Relationship(inverse: "notes") var tags: [FuzzTag]
    @Relationship(inverse: "pages") var folder: FuzzFolder?
}

@Entity final class FuzzTag {
    var word: String = ""
    @Relationship(inverse: "tags") var notes: [FuzzNote]
}

@Entity final class FuzzFolder {
    var name: String = ""
    @Relationship(inverse: "folder", ordered: true) var pages: [FuzzNote]
}

#if OBJECTGRAPH_PAYLOAD_FUZZ
    @_cdecl("LLVMFuzzerTestOneInput")
    public func payloadFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
        guard size > 0 else { return 0 }
        PayloadFuzz.run(data[0], Array(UnsafeBufferPointer(start: data + 1, count: size - 1)))
        return 0
    }

    /// libFuzzer's driver, which its own `main` calls.
    @_silgen_name("LLVMFuzzerRunDriver")
    func runFuzzerDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ body: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
    ) -> CInt

    /// The program's entry in a debug build: SwiftPM links an executable's `main` to this symbol
    /// (so that tests can import the module), which takes the place of libFuzzer's `main`.
    @_cdecl("objectgraph_payload_fuzz_main")
    public func payloadFuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
        var argc = argc
        var argv = argv
        return runFuzzerDriver(&argc, &argv) { data, size in payloadFuzz(data, size) }
    }
#else
    @main enum PayloadFuzzMain {
        static func main() {
            print(
                "objectgraph-payload-fuzz is a libFuzzer target: build it with Tools/Fuzz/build.sh, run it with make fuzz"
            )
        }
    }
#endif

enum PayloadFuzz {
    static let schema: Schema = {
        do { return try Schema(FuzzNote.self, FuzzTag.self, FuzzFolder.self) } catch { fail("schema: \(error)") }
    }()

    static let root = NSTemporaryDirectory() + "objectgraph-payload-fuzz-\(getpid())"

    /// The valid store's records: its schema record's payload and its transactions.
    static let base: (schema: [UInt8], transactions: [[UInt8]]) = {
        let dir = URL(fileURLWithPath: root + "-base")
        try? FileManager.default.removeItem(at: dir)
        defer { try? FileManager.default.removeItem(at: dir) }
        do {
            let store = try ObjectStore.open(at: dir, schema: schema, options: StoreOptions(durability: .none))
            let c = store.context
            let f = try c.insert(FuzzFolder.self) { $0.name = "f" }
            let tags = try (0..<3).map { i in try c.insert(FuzzTag.self) { $0.word = "w\(i)" } }
            let notes = try (0..<4).map { i in
                try c.insert(FuzzNote.self) { n in
                    n.title = "n\(i)"; n.mood = i % 2 == 0 ? .calm : .busy; n.size = i * 1000
                    n.words = Array(["é", "w\(i)", ""].prefix(i))
                    n.counts = i % 2 == 0 ? [i, -i, Int.max] : nil
                }
            }
            try c.save()
            notes[0].tags = tags
            notes[1].tags = [tags[0]]
            f.pages = notes
            notes[2].title = "changed"
            notes[2].words = ["changed", "日本"]
            notes[1].counts = [7]
            try c.save()
            try c.move(in: "pages", of: f, from: 3, to: 0)
            notes[1].tags = []
            c.delete(notes[3])
            try c.save()
            try store.close()
            var schemaBytes: [UInt8] = []
            var transactions: [[UInt8]] = []
            _ = try Journal.readRecords(directory: dir.path) { record in
                switch record.entry.kind {
                case .schema: schemaBytes = record.payload
                case .transaction: transactions.append(record.payload)
                default: break
                }
            }
            return (schemaBytes, transactions)
        } catch {
            fail("the base store: \(error)")
        }
    }()

    /// The payloads of one run: the base's records up to the edited one.
    static func payloads(_ mode: UInt8, _ bytes: [UInt8]) -> [[UInt8]] {
        let k = Int(mode & 0x03) % base.transactions.count
        var p = base.transactions[k]
        switch (mode >> 2) & 0x03 {
        case 0:
            // Edits: (position, value) pairs, the position modulo the payload's length.
            var i = 0
            while i + 1 < bytes.count, !p.isEmpty {
                p[Int(bytes[i]) % p.count] = bytes[i + 1]
                i += 2
            }
        case 1:
            // A cut, then the input's bytes.
            let cut = bytes.first.map { Int($0) % (p.count + 1) } ?? p.count
            p = Array(p[..<cut]) + bytes.dropFirst()
        case 2:
            // Long varints (a huge count or serial) written over positions.
            for b in bytes where !p.isEmpty {
                let at = Int(b) % p.count
                p.replaceSubrange(at..<min(p.count, at + 1), with: [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F])
            }
        default:
            // A payload of its own.
            p = bytes
        }
        return Array(base.transactions[..<k]) + [p]
    }

    struct Verdict: Equatable {
        var refused: Bool
        var sequence: UInt64?
        var code: StoreError.Code?
    }

    static func notes(_ context: ModelContext) -> [String] {
        ((try? context.objects(of: FuzzNote.self)) ?? []).map {
            "\($0.title)/\($0.mood.rawValue)/\($0.size)/\($0.words)/\(String(describing: $0.counts))/\($0.tags.count)/\($0.folder == nil)"
        }.sorted()
    }

    static func run(_ mode: UInt8, _ bytes: [UInt8]) {
        let records = payloads(mode, bytes)
        let dir = URL(fileURLWithPath: root + "-store"), replicaDir = URL(fileURLWithPath: root + "-replica")
        try? FileManager.default.removeItem(at: dir)
        try? FileManager.default.removeItem(at: replicaDir)
        defer {
            try? FileManager.default.removeItem(at: dir)
            try? FileManager.default.removeItem(at: replicaDir)
        }
        var shipped: [ShippedRecord] = []
        do {
            let journal = try Journal.open(directory: dir, options: JournalOptions(durability: .none))
            for (i, p) in records.enumerated() { try journal.append(p, schema: i == 0 ? base.schema : nil) }
            try journal.forEachShippedRecord(after: 0) { shipped.append($0) }
            try journal.close()
        } catch {
            fail("writing the journal: \(error)")
        }
        let options = StoreOptions(durability: .none)

        // A follower.
        var replicaOptions = options
        replicaOptions.readOnly = true
        var follower = Verdict(refused: false)
        var followerNotes: [String] = []
        do {
            let replica = try ObjectStore.open(at: replicaDir, schema: schema, options: replicaOptions)
            var schemaBytes: [UInt8] = []
            do {
                for r in shipped {
                    if r.kind == .schema { schemaBytes = try r.payload(); continue }
                    try replica.applyShipped(r, schema: schemaBytes, origin: [1])
                }
                followerNotes = notes(replica.context)
            } catch let error as StoreError {
                follower = Verdict(refused: true, sequence: error.sequence, code: error.code)
            }
            try? replica.close()
        } catch {
            fail("the replica: \(error)")
        }

        // A default open.
        var open = Verdict(refused: false)
        var openNotes: [String] = []
        do {
            let store = try ObjectStore.open(at: dir, schema: schema, options: options)
            openNotes = notes(store.context)
            try store.close()
        } catch {
            open = Verdict(refused: true, sequence: error.sequence, code: error.code)
        }
        guard open.refused == follower.refused, open.sequence == follower.sequence else {
            fail("open \(open) and a follower \(follower) disagree on \(records.last ?? [])")
        }
        if !open.refused, openNotes != followerNotes {
            fail("open holds \(openNotes), a follower \(followerNotes), after \(records.last ?? [])")
        }
        if open.code == .incompatibleSchema, follower.code != .incompatibleSchema {
            fail("open \(open) and a follower \(follower) disagree on the model's verdict")
        }

        // Point in time: opens unless the model refuses a record.
        var recovery = options
        recovery.recovery = .pointInTime
        do {
            let store = try ObjectStore.open(at: dir, schema: schema, options: recovery)
            if open.refused, let bad = open.sequence, store.stats.lastSequence >= bad {
                fail("point in time kept record \(bad), which open refused")
            }
            try store.close()
        } catch  where error.code == .incompatibleSchema && open.code == .incompatibleSchema {
        } catch {
            fail("point in time failed: \(error) (open: \(open))")
        }
    }

    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data(("objectgraph-payload-fuzz: " + message + "\n").utf8))
        abort()
    }
}
