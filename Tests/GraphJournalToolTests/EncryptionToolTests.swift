import Foundation
import ObjectGraph
import Testing

@testable import GraphJournal

/// `graph-journal` on stores encrypted at rest: the keys come from `--key-file` or
/// `--key-env`, never the command line; without them the commands that need only the clear
/// headers still work, and the others fail naming the key.
@Suite("graph-journal on encrypted stores", .serialized)
struct EncryptionToolTests {
    /// The environment variable the `--key-env` runs read.
    static let variable = "GRAPH_JOURNAL_TEST_KEYS"

    /// An encrypted store of a few saves with a base and logs, and its keys.
    static func encryptedStore(_ name: String, keys: TestKeys) throws -> URL {
        try Damage.$keys.withValue(keys) {
            try Damage.store(name, saves: 9, segmentSize: 600, compactAfter: 4)
        }
    }

    /// The live objects of a store opened with `keys`.
    static func objects(_ dir: URL, keys: TestKeys) throws -> [String: [UInt64: [String: AttributeValue?]]] {
        try Damage.$keys.withValue(keys) { try Damage.objects(dir) }
    }

    @Test func everyCommandWorksWithAKeyFileOrAKeyEnvironmentVariable() throws {
        let keys = try TestKeys([TestKeys.november])
        let dir = try Self.encryptedStore("enc-commands", keys: keys)
        let objects = try Self.objects(dir, keys: keys)
        let byFile = ["--key-file", keys.file.path]
        let byEnvironment = ["--key-env", Self.variable]
        let environment = [Self.variable: keys.environmentText]
        for keyArguments in [byFile, byEnvironment] {
            let verify = try Tool.run(["verify", dir.path] + keyArguments, environment: environment)
            #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
            #expect(verify.stdout.contains("(key 2026-11): opened and checked"), "\(verify.stdout)")
            #expect(verify.stdout.contains("transaction"))

            let stats = try Tool.run(["stats", dir.path] + keyArguments, environment: environment)
            #expect(stats.status == 0, "\(stats.stderr)")
            #expect(stats.stdout.contains("encrypted, sealed with key 2026-11"), "\(stats.stdout)")
            #expect(stats.stdout.contains("Reading"), "\(stats.stdout)")
            let live = objects["Reading"]?.count ?? 0
            #expect(stats.stdout.contains("\(live) live objects"), "\(stats.stdout)")

            let dump = try Tool.run(["dump", "--objects", dir.path] + keyArguments, environment: environment)
            #expect(dump.status == 0, "\(dump.stderr)")
            #expect(dump.stdout.split(separator: "\n").count == live)

            let export = try Tool.run(
                ["export", "--format", "jsonl", dir.path] + keyArguments, environment: environment)
            #expect(export.status == 0, "\(export.stderr)")
            #expect(export.stdout.split(separator: "\n").count == live)

            let records = try Tool.run(["dump", dir.path] + keyArguments, environment: environment)
            #expect(records.status == 0, "\(records.stderr)")
            // Transactions, or after the first pass's compaction a base.
            #expect(records.stdout.contains("\"inserted\":[{\"serial\""), "\(records.stdout)")

            let repair = try Tool.run(["repair", "--yes", dir.path] + keyArguments, environment: environment)
            #expect(repair.status == 0, "\(repair.stdout)\(repair.stderr)")
            #expect(repair.stdout.contains("is clean"))

            let compact = try Tool.run(["compact", "--no-progress", dir.path] + keyArguments, environment: environment)
            #expect(compact.status == 0, "\(compact.stdout)\(compact.stderr)")
            #expect(compact.stdout.contains("sealed with key 2026-11"), "\(compact.stdout)")
            #expect(try Self.objects(dir, keys: keys) == objects, "compaction kept every object")
        }
        // A compacted encrypted store is still sealed: the library refuses it without the key.
        #expect(throws: StoreError.self) { try Damage.objects(dir) }
    }

    @Test func verifyWithoutTheKeyChecksFramingAndCountsTheSealedRecords() throws {
        let keys = try TestKeys([TestKeys.november])
        let dir = try Self.encryptedStore("enc-nokey", keys: keys)
        let clean = try Tool.run(["verify", dir.path])
        #expect(clean.status == 0, "\(clean.stdout)\(clean.stderr)")
        let report = try Journal.inspect(directory: dir.path)
        let sealed = report.entries.filter(\.sealed).count
        #expect(sealed > 0 && sealed == report.entries.count)
        #expect(report.sealedRecordsNotOpened == sealed)
        #expect(report.keyIDs == ["2026-11"])
        #expect(
            clean.stdout.contains(
                "encrypted: \(sealed) sealed records (key 2026-11): framing and checksums verified, contents not (no key given)"
            ), "\(clean.stdout)")
        let json = try Tool.run(["verify", "--json", dir.path])
        #expect(json.stdout.contains("\"sealedRecordsNotOpened\":\(sealed)"), "\(json.stdout)")

        // stats reads the clear headers: which keys, per segment, without the key.
        let stats = try Tool.run(["stats", dir.path])
        #expect(stats.status == 0, "\(stats.stderr)")
        #expect(stats.stdout.contains("encrypted, sealed with key 2026-11"), "\(stats.stdout)")
        #expect(stats.stdout.contains("not opened (no key given"), "\(stats.stdout)")

        // dump needs the payloads: it refuses, naming the key.
        let dump = try Tool.run(["dump", dir.path])
        #expect(dump.status == 1)
        #expect(dump.stderr.contains("sealed with key 2026-11"), "\(dump.stderr)")
        let export = try Tool.run(["export", "--format", "jsonl", dir.path])
        #expect(export.status == 1)
        #expect(export.stdout.isEmpty)
        #expect(export.stderr.contains("sealed with key 2026-11"), "\(export.stderr)")

        // A torn tail: found without the key, as on a plain store.
        let lastRecord = report.entries.last!
        let torn = try Damage.copy(dir)
        let tornLog = torn.appendingPathComponent(lastRecord.file)
        try Data(try Data(contentsOf: tornLog).prefix(Int(lastRecord.endOffset) - 5)).write(to: tornLog)
        let tornVerify = try Tool.run(["verify", torn.path])
        #expect(tornVerify.status == 2, "\(tornVerify.stdout)\(tornVerify.stderr)")
        #expect(tornVerify.stdout.contains("torn-tail: \(lastRecord.file)"), "\(tornVerify.stdout)")
        #expect(tornVerify.stdout.contains("contents not (no key given)"))
        // repair without the key refuses (it opens the journal); with it, it cuts the tail.
        let refused = try Tool.run(["repair", "--yes", torn.path])
        #expect(refused.status == 1, "\(refused.stdout)\(refused.stderr)")
        #expect(refused.stderr.contains("2026-11"))
        let repaired = try Tool.run(["repair", "--yes", torn.path, "--key-file", keys.file.path])
        #expect(repaired.status == 0, "\(repaired.stdout)\(repaired.stderr)")
        #expect(try Tool.run(["verify", torn.path, "--key-file", keys.file.path]).status == 0)

        // Framing damage with valid records after it: a flipped bit in a record's header.
        let damaged = try Damage.copy(dir)
        let first = report.entries.first { $0.file.hasSuffix(".log") && $0.sequence < lastRecord.sequence }!
        var bytes = try Data(contentsOf: damaged.appendingPathComponent(first.file))
        bytes[Int(first.offset) + JournalFormat.RecordHeaderField.sequence] ^= 0x01
        try bytes.write(to: damaged.appendingPathComponent(first.file))
        let corrupt = try Tool.run(["verify", damaged.path])
        #expect(corrupt.status == 3, "\(corrupt.stdout)\(corrupt.stderr)")
        #expect(corrupt.stdout.contains("corruption: \(first.file) at byte \(first.offset)"), "\(corrupt.stdout)")
    }

    @Test func aWrongOrMissingKeyFailsNamingTheKeyAndChangesNothing() throws {
        let keys = try TestKeys([TestKeys.november])
        let dir = try Self.encryptedStore("enc-wrong", keys: keys)
        let before = try Damage.regularContents(of: dir)
        let wrong = try TestKeys([("2026-11", String(repeating: "77", count: 32))])
        let missing = try TestKeys([TestKeys.may])
        for (given, says) in [(wrong, "wrong key 2026-11"), (missing, "key 2026-11 unavailable")] {
            for command in [
                ["verify"], ["stats"], ["dump"], ["export", "--format", "jsonl"], ["compact", "--no-progress"],
                ["repair", "--yes"],
            ] {
                let run = try Tool.run(command + [dir.path, "--key-file", given.file.path])
                #expect(run.status == 1, "\(command): \(run.stdout)\(run.stderr)")
                #expect(run.stderr.contains(says), "\(command): \(run.stderr)")
                #expect(try Damage.regularContents(of: dir) == before, "\(command) changed nothing")
            }
        }
        // The key is never an argument: there is no option that takes it.
        let inline = try Tool.run(["verify", dir.path, "--key", keys.keys[0].hex])
        #expect(inline.status == 64)
        // A key file that does not hold keys says which line.
        let bad = Tool.temporaryURL("bad-keys")
        try Data("2026-11 not-hex\n".utf8).write(to: bad)
        let malformed = try Tool.run(["verify", dir.path, "--key-file", bad.path])
        #expect(malformed.status == 1)
        #expect(malformed.stderr.contains("line 1"), "\(malformed.stderr)")
        #expect(try Damage.regularContents(of: dir) == before)
    }

    @Test func compactingWithANewCurrentKeyRotatesTheStore() throws {
        let old = try TestKeys([TestKeys.november])
        let dir = try Self.encryptedStore("enc-rotate", keys: old)
        let objects = try Self.objects(dir, keys: old)
        let both = try TestKeys([TestKeys.may, TestKeys.november])
        let compact = try Tool.run(["compact", "--no-progress", dir.path, "--key-file", both.file.path])
        #expect(compact.status == 0, "\(compact.stdout)\(compact.stderr)")
        #expect(compact.stdout.contains("sealed with key 2026-05"))
        #expect(try Journal.inspect(directory: dir.path).keyIDs == ["2026-05"])
        let new = try TestKeys([TestKeys.may])
        #expect(try Self.objects(dir, keys: new) == objects, "the store opens with the new key alone")
        let verify = try Tool.run(["verify", dir.path, "--key-file", new.file.path])
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        let stats = try Tool.run(["stats", dir.path])
        #expect(stats.stdout.contains("sealed with key 2026-05 ("), "\(stats.stdout)")
    }

    @Test func compactEncryptSealsAPlainStore() throws {
        let dir = try Damage.store("enc-plain", saves: 6, segmentSize: 600)
        let objects = try Damage.objects(dir)
        let keys = try TestKeys([TestKeys.november])
        let refused = try Tool.run(["compact", "--no-progress", "--encrypt", dir.path])
        #expect(refused.status == 64, "--encrypt needs a key")
        let compact = try Tool.run(["compact", "--no-progress", "--encrypt", dir.path, "--key-file", keys.file.path])
        #expect(compact.status == 0, "\(compact.stdout)\(compact.stderr)")
        let report = try Journal.inspect(directory: dir.path)
        #expect(report.keyIDs == ["2026-11"])
        #expect(report.entries.allSatisfy { $0.sealed })
        #expect(try Self.objects(dir, keys: keys) == objects)
    }

    @Test func everyCommandThatReadsPayloadsDocumentsTheKeyOptions() throws {
        for command in ["stats", "verify", "dump", "export", "repair", "compact", "restore", "follow"] {
            let help = try Tool.run([command, "--help"])
            #expect(help.status == 0)
            #expect(help.stdout.contains("--key-file <path>"), "\(command)")
            #expect(help.stdout.contains("--key-env <name>"), "\(command)")
            // The paragraph on encrypted stores reads as prose, wrapped by the parser.
            let paragraph = help.stdout.components(separatedBy: "\n\n").first { $0.hasPrefix("An encrypted") }
            #expect(paragraph != nil, "\(command): \(help.stdout)")
            #expect(paragraph?.contains("  ") == false, "\(command): \(paragraph ?? "")")
        }
    }
}
