import Foundation
import Glibc
import ObjectGraph
import ObjectGraphTestSupport
import Testing

@testable import GraphJournal

/// Damaged stores on which `verify`, a default open, `.pointInTime` and `repair` as `verify`
/// advises must agree, and on which nothing valid may be deleted. Each test is named after a
/// defect that once made them disagree or lose data.
@Suite("Recovery: one verdict for open, verify and repair", .serialized)
struct RecoveryDefectTests {
    // MARK: A record that checks but does not decode

    @Test func aPayloadChangedWithItsChecksumRecomputedIsDamageThatEveryCommandAgreesOn() throws {
        let dir = try Damage.store("payload-crc", saves: 12)
        let report = try Journal.inspect(directory: dir.path)
        let victim = try #require(report.entries.filter { $0.kind == .transaction }.dropFirst(2).first)
        try Damage.rewrite(dir, victim) { record in
            // An entity number no schema has, in place of the payload's first block's.
            record.replaceSubrange(JournalFormat.recordHeaderSize..., with: [1, 1, 0x7F, 0, 0, 0, 0])
            Damage.setStored(&record, raw: 7)
        }
        let outcome = try Damage.expectAgreement(dir, verdict: 3)
        #expect(outcome.keptSequences == victim.sequence - 1, "the prefix before the record is kept")
        #expect(outcome.defaultOpenError?.sequence == victim.sequence)
        #expect(outcome.defaultOpenError?.file?.hasSuffix(victim.file) == true)
        #expect(outcome.defaultOpenError?.offset == victim.offset)
    }

    @Test func anEarlierTransactionReplayedAtTheEndWithANewSequenceIsDamage() throws {
        let dir = try Damage.store("replayed", saves: 6)
        let report = try Journal.inspect(directory: dir.path)
        let first = try #require(report.entries.first { $0.kind == .transaction })
        let last = try #require(report.entries.last)
        // The first save's record again, numbered to follow the last and checksummed anew.
        var record = try Damage.recordBytes(dir, first)
        record.storeLittleEndian(last.sequence + 1, at: JournalFormat.RecordHeaderField.sequence)
        try Damage.append(dir, file: last.file, record: record)
        let outcome = try Damage.expectAgreement(dir, verdict: 3)
        #expect(outcome.keptSequences == last.sequence)
    }

    @Test func aChunkedPayloadThatDoesNotDecompressIsDamageThatEveryCommandAgreesOn() throws {
        // One save large enough to be stored in LZ4 chunks, between two small ones.
        let dir = Tool.temporaryURL("chunked")
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        let store = try ObjectStore.open(at: dir, schema: try Schema(Reading.self), options: options)
        for count in [3, 60_000, 3] {
            for i in 0..<count {
                let r = try store.context.insert(Reading.self)
                r.sensor = "sensor \(i) " + String(repeating: "x", count: i % 40)
                r.note = "note \(i * 7919) " + String(repeating: "n", count: 64 + i % 50)
                r.count = Int64(i)
            }
            try store.context.save()
        }
        try store.close()
        let report = try Journal.inspect(directory: dir.path)
        let chunked = try #require(report.entries.first { $0.rawLength >= JournalFormat.chunkedThreshold })
        try Damage.rewrite(dir, chunked) { record in
            // Zeros over the middle of the chunk data: LZ4 finds offsets that point nowhere.
            let middle = record.count / 2
            for i in middle..<(middle + 4096) { record[i] = 0xFF }
        }
        let outcome = try Damage.expectAgreement(dir, verdict: 3)
        #expect(outcome.keptSequences == chunked.sequence - 1)
    }

    // MARK: Unlisted and missing segments

    @Test func anOlderManifestThatLacksTheLastLogLosesNoSave() throws {
        let dir = try Damage.store("older-manifest", saves: 36, segmentSize: 600)
        let before = try Damage.objects(dir)
        let files = try Journal.inspect(directory: dir.path).files
        #expect(files.count >= 3)
        try Damage.writeManifest(dir, Array(files.dropLast()))
        let outcome = try Damage.expectAgreement(dir, verdict: 0)
        #expect(outcome.defaultOpenObjects == before, "every save is kept")
        #expect(try Journal.inspect(directory: dir.path).files == files, "open listed the log again")
    }

    @Test func aManifestThatSkipsAMiddleLogLosesNoSaveEvenInPointInTimeRecovery() throws {
        let dir = try Damage.store("skipped-middle", saves: 36, segmentSize: 600)
        let before = try Damage.objects(dir)
        let files = try Journal.inspect(directory: dir.path).files
        #expect(files.count >= 4)
        try Damage.writeManifest(dir, files.enumerated().filter { $0.offset != 1 }.map(\.element))
        let copy = try Damage.copy(dir)
        var options = StoreOptions(durability: .none, recovery: .pointInTime)
        options.autoCompactionRatio = nil
        let recovered = try ObjectStore.openDynamic(at: copy, options: options)
        #expect(recovered.openReport.recordsDropped == 0)
        #expect(recovered.openReport.dropped.isEmpty)
        try recovered.close()
        #expect(try Damage.objects(copy) == before)
        let outcome = try Damage.expectAgreement(dir, verdict: 0)
        #expect(outcome.defaultOpenObjects == before)
    }

    @Test func aMissingSegmentIsCorruptionThatRepairKeepPrefixRepairs() throws {
        let dir = try Damage.store("missing-segment", saves: 30, segmentSize: 600)
        let files = try Journal.inspect(directory: dir.path).files
        #expect(files.count >= 3)
        try FileManager.default.removeItem(at: dir.appendingPathComponent(files[1]))
        let outcome = try Damage.expectAgreement(dir, verdict: 3)
        #expect(outcome.keptSequences > 0)
    }

    @Test func anUnlistedLogWhoseRecordsDoNotContinueIsMovedAsideNotDeleted() throws {
        let dir = try Damage.store("stray", saves: 30, segmentSize: 600)
        let files = try Journal.inspect(directory: dir.path).files
        // A log of the live history, renamed past the end: its records do not continue.
        let strayName = fileName((fileNumber(files.last!) ?? 0) + 5, .log)
        try FileManager.default.copyItem(
            at: dir.appendingPathComponent(files[1]), to: dir.appendingPathComponent(strayName))
        let strayBytes = try Data(contentsOf: dir.appendingPathComponent(strayName))
        // Its header must name its own number to be read as a log: rewrite it.
        var bytes = [UInt8](strayBytes)
        let header = try #require(bytes.withUnsafeBytes { raw in try? SegmentHeader.parse(raw, file: strayName).get() })
        let renumbered = SegmentHeader(
            kind: .log, salt: header.salt, number: fileNumber(strayName)!, firstSequence: header.firstSequence)
        bytes.replaceSubrange(0..<JournalFormat.segmentHeaderSize, with: renumbered.encoded())
        try Data(bytes).write(to: dir.appendingPathComponent(strayName))
        let outcome = try Damage.expectAgreement(dir, verdict: 3)
        #expect(outcome.asideAfterRepair.contains { $0.hasPrefix(strayName + ".dropped-") })
    }

    // MARK: Odd file types

    @Test func aFIFOInPlaceOfTheManifestOrASegmentIsRefusedWithoutBlocking() throws {
        for target in ["MANIFEST", "segment"] {
            let dir = try Damage.store("fifo-\(target)", saves: 3)
            let name = target == "MANIFEST" ? "MANIFEST" : try Journal.inspect(directory: dir.path).files[0]
            try FileManager.default.removeItem(at: dir.appendingPathComponent(name))
            #expect(mkfifo(dir.appendingPathComponent(name).path, 0o600) == 0)
            let start = ContinuousClock.now
            let verify = try Tool.run(["verify", dir.path])
            #expect(verify.status == 1, "\(target)")
            #expect(verify.stderr.contains("is a named pipe (FIFO), not a regular file"), "\(target): \(verify.stderr)")
            for recovery in [JournalOptions.Recovery.tolerateTornTail, .pointInTime] {
                #expect(throws: StoreError.self) {
                    _ = try ObjectStore.openDynamic(
                        at: dir, options: StoreOptions(durability: .none, recovery: recovery))
                }
                do {
                    _ = try ObjectStore.openDynamic(
                        at: dir, options: StoreOptions(durability: .none, recovery: recovery))
                } catch {
                    #expect(error.journalError?.code == .notRegularFile, "\(target) \(recovery): \(error)")
                }
            }
            #expect(ContinuousClock.now - start < atOnceBound, "nothing blocked")
        }
    }

    @Test func aSymlinkOrDirectoryInPlaceOfASegmentIsRefused() throws {
        for kind in ["symlink", "directory"] {
            let dir = try Damage.store("odd-\(kind)", saves: 3)
            let name = try Journal.inspect(directory: dir.path).files[0]
            let path = dir.appendingPathComponent(name).path
            let outside = Tool.temporaryURL("outside")
            try FileManager.default.moveItem(atPath: path, toPath: outside.path)
            if kind == "symlink" {
                try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: outside.path)
            } else {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            }
            let verify = try Tool.run(["verify", dir.path])
            #expect(verify.status == 1 || verify.status == 3, "\(kind): \(verify.stdout)\(verify.stderr)")
            #expect(
                (verify.stdout + verify.stderr).contains(
                    kind == "symlink" ? "is a symbolic link to" : "is a directory"), "\(kind)")
            do {
                _ = try ObjectStore.openDynamic(at: dir, options: StoreOptions(durability: .none))
                Issue.record("\(kind): open succeeded")
            } catch {
                #expect(error.journalError?.code == .notRegularFile, "\(kind): \(error)")
            }
        }
    }

    // MARK: The write lock

    @Test func repairOnACleanStoreAnotherProcessHoldsExitsFour() throws {
        let dir = try Damage.store("held", saves: 2)
        let holder = try Journal.open(directory: dir.path)
        defer { try? holder.close() }
        let repair = try Tool.run(["repair", "--yes", dir.path])
        #expect(repair.status == 4, "\(repair.stdout)\(repair.stderr)")
        #expect(repair.stderr.contains("another process holds the write lock"))
        let keepPrefix = try Tool.run(["repair", "--keep-prefix", "--yes", dir.path])
        #expect(keepPrefix.status == 4)
    }
}

/// Stores to damage, and the check that every reader agrees on one.
///
/// Inside ``$keys``'s `withValue`, every store is written encrypted with those keys, and every
/// open and every run of the tool is given them: the same checks, on an encrypted store.
enum Damage {
    /// The keys the stores of the current test are encrypted with, or nil for plain stores.
    @TaskLocal static var keys: TestKeys?

    /// The options that open a store of the current test: `options` with the keys, if any.
    static func withKeys(_ options: StoreOptions) -> StoreOptions {
        var options = options
        options.journal.encryption = keys?.encryption
        return options
    }

    /// The tool's arguments that give it the current test's keys (none for plain stores).
    static var keyArguments: [String] { keys.map { ["--key-file", $0.file.path] } ?? [] }

    /// A store of `saves` saves of a few `Reading`s each (updates and deletes too), compacted
    /// halfway so that it has a base, in segments of about `segmentSize` bytes.
    ///
    /// - Parameter compactAfter: the save after which the store is compacted; half way by default.
    /// - Parameter saved: called after each save (and once before the first) with the context.
    static func store(
        _ name: String, saves: Int, segmentSize: Int = 64 << 20, compactAfter: Int? = nil,
        saved: (ModelContext) throws -> Void = { _ in }
    ) throws -> URL {
        let dir = Tool.temporaryURL(name)
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        options.journal.segmentSize = segmentSize
        let store = try ObjectStore.open(at: dir, schema: try Schema(Reading.self), options: withKeys(options))
        try saved(store.context)
        var all: [Reading] = []
        for save in 0..<saves {
            for i in 0..<3 {
                let r = try store.context.insert(Reading.self)
                r.sensor = "s\(save)-\(i)"
                r.count = Int64(save * 3 + i)
                all.append(r)
            }
            if save % 3 == 2 { all[save].value += 1 }
            if save % 4 == 3 { store.context.delete(all.remove(at: 0)) }
            try store.context.save()
            try saved(store.context)
            if save == (compactAfter ?? saves / 2) { try store.compact() }
        }
        try store.close()
        return dir
    }

    /// The bytes of a record (header and stored payload).
    static func recordBytes(_ dir: URL, _ entry: JournalReport.Entry) throws -> [UInt8] {
        let bytes = [UInt8](try Data(contentsOf: dir.appendingPathComponent(entry.file)))
        let start = Int(entry.offset)
        return Array(bytes[start..<(start + JournalFormat.recordHeaderSize + entry.storedLength)])
    }

    /// Replaces a record by what `change` makes of its bytes, with its checksum recomputed.
    static func rewrite(_ dir: URL, _ entry: JournalReport.Entry, _ change: (inout [UInt8]) -> Void) throws {
        let url = dir.appendingPathComponent(entry.file)
        var bytes = [UInt8](try Data(contentsOf: url))
        var record = try recordBytes(dir, entry)
        change(&record)
        try seal(&record, segment: bytes)
        let start = Int(entry.offset)
        bytes.replaceSubrange(start..<(start + JournalFormat.recordHeaderSize + entry.storedLength), with: record)
        try Data(bytes).write(to: url)
    }

    /// Appends a record, checksummed for the segment, to the end of `file`.
    static func append(_ dir: URL, file: String, record: [UInt8]) throws {
        let url = dir.appendingPathComponent(file)
        var bytes = [UInt8](try Data(contentsOf: url))
        var record = record
        try seal(&record, segment: bytes)
        bytes += record
        try Data(bytes).write(to: url)
    }

    /// Sets a record's stored length to its payload's and its raw length to `raw`, stored
    /// uncompressed.
    static func setStored(_ record: inout [UInt8], raw: Int) {
        record.storeLittleEndian(
            UInt32(record.count - JournalFormat.recordHeaderSize), at: JournalFormat.RecordHeaderField.storedLength)
        record.storeLittleEndian(UInt32(raw), at: JournalFormat.RecordHeaderField.rawLength)
        record[JournalFormat.RecordHeaderField.flags] = 0
    }

    /// Recomputes a record's checksum with the seed of the segment it goes into.
    static func seal(_ record: inout [UInt8], segment: [UInt8]) throws {
        let header = try segment.withUnsafeBytes { try SegmentHeader.parse($0, file: "segment").get() }
        let crc = record.withUnsafeBytes { CRC32C.extend(header.seed, UnsafeRawBufferPointer(rebasing: $0[4...])) }
        record.storeLittleEndian(crc, at: JournalFormat.RecordHeaderField.crc)
    }

    /// Writes a MANIFEST listing `files`.
    static func writeManifest(_ dir: URL, _ files: [String]) throws {
        try Data(Manifest(files: files).encoded()).write(to: dir.appendingPathComponent(JournalFormat.manifestFileName))
    }

    /// Every live object of a store of `Reading`s (an empty store has none), opened with the
    /// model, by entity and serial.
    static func objects(_ dir: URL) throws -> [String: [UInt64: [String: AttributeValue?]]] {
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        let store = try ObjectStore.open(at: dir, schema: try Schema(Reading.self), options: withKeys(options))
        defer { try? store.close() }
        return try Tool.objects(of: store.context)
    }

    /// Every regular file of a directory with its bytes (a named pipe is listed, not read).
    static func regularContents(of dir: URL) throws -> [String: Data] {
        var result: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) {
            var info = stat()
            guard lstat(dir.appendingPathComponent(name).path, &info) == 0 else { continue }
            result[name] =
                info.st_mode & S_IFMT == S_IFREG
                ? try Data(contentsOf: dir.appendingPathComponent(name)) : Data("not a regular file".utf8)
        }
        return result
    }

    /// A copy of a store directory.
    static func copy(_ dir: URL) throws -> URL {
        let copy = Tool.temporaryURL(dir.lastPathComponent + "-copy")
        try FileManager.default.copyItem(at: dir, to: copy)
        return copy
    }

    struct Outcome {
        /// The error of the default open, when it refused.
        var defaultOpenError: StoreError?
        /// The objects after a default open that succeeded.
        var defaultOpenObjects: [String: [UInt64: [String: AttributeValue?]]]?
        /// The last sequence point-in-time recovery kept.
        var keptSequences: UInt64 = 0
        /// The `.dropped-` files after repair.
        var asideAfterRepair: [String] = []
        /// The copy point-in-time recovery opened.
        var pointInTimeCopy = URL(fileURLWithPath: "/")
    }

    /// Checks that `verify` exits with `verdict`, that a default open does what that promises
    /// (opens for 0 and 2, refuses for 3, changing nothing), that `.pointInTime` opens, and
    /// that `repair` as `verify` advises leaves a store that verifies clean, holds what
    /// `.pointInTime` kept, and keeps every byte it cut in `.dropped-` files.
    @discardableResult
    static func expectAgreement(
        _ dir: URL, verdict: Int32, comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Outcome {
        var outcome = Outcome()
        let verify = try Tool.run(["verify", dir.path] + keyArguments)
        #expect(
            verify.status == verdict,
            "verify: \(verify.stdout)\(verify.stderr)\(comment.map { " [\($0.rawValue)]" } ?? "")",
            sourceLocation: sourceLocation)
        let pristine = try copy(dir)
        outcome.pointInTimeCopy = pristine
        let forRepair = try copy(dir)
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        options = withKeys(options)

        let before = try Damage.regularContents(of: dir)
        do {
            let store = try ObjectStore.open(at: dir, schema: try Schema(Reading.self), options: options)
            try store.close()
            #expect(
                verdict != 3,
                "a default open succeeded where verify said corrupt\(comment.map { " [\($0.rawValue)]" } ?? "")",
                sourceLocation: sourceLocation)
            outcome.defaultOpenObjects = try Damage.objects(dir)
        } catch let error as StoreError {
            outcome.defaultOpenError = error
            #expect(
                verdict == 3,
                "a default open refused where verify said \(verdict): \(error)\(comment.map { " [\($0.rawValue)]" } ?? "")",
                sourceLocation: sourceLocation)
            #expect(
                try Damage.regularContents(of: dir) == before,
                "a refused open changed nothing\(comment.map { " [\($0.rawValue)]" } ?? "")",
                sourceLocation: sourceLocation)
        }

        var pit = options
        pit.recovery = .pointInTime
        let recovered = try ObjectStore.open(at: pristine, schema: try Schema(Reading.self), options: pit)
        outcome.keptSequences = recovered.stats.lastSequence
        try recovered.close()
        let kept = try Damage.objects(pristine)

        let advice: [String] =
            switch verdict {
            case 3: ["repair", "--keep-prefix", "--yes", forRepair.path] + keyArguments
            default: ["repair", "--yes", forRepair.path] + keyArguments
            }
        let original = try Damage.regularContents(of: forRepair)
        // Leftovers hold no record the live files lack: the one thing repair may remove.
        let leftovers = Set(
            ((try? Journal.inspect(directory: forRepair.path))?.problems ?? []).filter { $0.kind == .leftoverFile }.map(
                \.file))
        let repair = try Tool.run(advice)
        #expect(
            repair.status == 0,
            "repair as advised: \(repair.stdout)\(repair.stderr)\(comment.map { " [\($0.rawValue)]" } ?? "")",
            sourceLocation: sourceLocation)
        let after = try Tool.run(["verify", forRepair.path] + keyArguments)
        #expect(
            after.status == 0, "verify after repair: \(after.stdout)\(comment.map { " [\($0.rawValue)]" } ?? "")",
            sourceLocation: sourceLocation)
        #expect(
            try Damage.objects(forRepair) == kept,
            "repair kept what point-in-time recovery kept\(comment.map { " [\($0.rawValue)]" } ?? "")",
            sourceLocation: sourceLocation)
        // Every byte of every original file is still somewhere: in a live file or aside.
        let repaired = try Damage.regularContents(of: forRepair)
        outcome.asideAfterRepair = repaired.keys.filter { $0.contains(".dropped-") }.sorted()
        let everything = repaired.values.reduce(into: Data()) { $0.append($1) }
        for (name, bytes) in original
        where name != "MANIFEST" && name != "LOCK" && !bytes.isEmpty && !leftovers.contains(name) {
            let found = repaired[name].map { bytes.starts(with: $0) } ?? false
            let tail = repaired[name].map { bytes.dropFirst($0.count) } ?? bytes[...]
            #expect(
                tail.isEmpty || everything.range(of: Data(tail)) != nil || (found && tail.isEmpty),
                "the \(tail.count) bytes of \(name) not kept are saved aside\(comment.map { " [\($0.rawValue)]" } ?? "")",
                sourceLocation: sourceLocation)
        }
        return outcome
    }
}

/// Keys for the tests of encrypted stores: the key file the tool reads, and the encryption the
/// library opens the stores with.
struct TestKeys: Sendable {
    /// The keys, the current one first.
    var keys: [JournalKey]
    /// A key file holding them, in a temporary directory.
    var file: URL
    /// The encryption of the keys, the first one current.
    var encryption: JournalEncryption

    /// Keys from `(identifier, hex)` pairs, the first current, written to a new key file.
    init(_ pairs: [(String, String)]) throws {
        keys = try pairs.map { try JournalKey(id: $0.0, hex: $0.1) }
        encryption = try JournalEncryption(keys: keys)
        file = Tool.temporaryURL("keys")
        let text = "# test keys, the current one first\n" + keys.map { "\($0.id) \($0.hex)" }.joined(separator: "\n")
        try Data((text + "\n").utf8).write(to: file)
    }

    /// The key file's text in one line, `;`-separated, as `--key-env` takes it.
    var environmentText: String { keys.map { "\($0.id) \($0.hex)" }.joined(separator: ";") }

    /// One key, `2026-11`, the same in every run.
    static let november = ("2026-11", String(repeating: "5f1c", count: 16))
    /// Another key, `2026-05`.
    static let may = ("2026-05", String(repeating: "09ab", count: 16))
}
