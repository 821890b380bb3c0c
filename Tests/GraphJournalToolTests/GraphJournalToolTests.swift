import Foundation
import GraphJournal
import ObjectGraph
import Testing

/// Runs the built `graph-journal` on the journals under `Fixtures/journals/` and compares its
/// whole output and exit code. Commands that may write run on copies.
@Suite("GraphJournalTool: the graph-journal binary", .serialized)
struct GraphJournalToolTests {
    /// Derives the damaged fixtures from `v1-clean` (run with `GRAPH_JOURNAL_WRITE_FIXTURES=1`):
    /// `torn-tail` ends in the first 40 bytes of a copy of its last record (an append the
    /// writer did not finish); `corrupt-middle` has one payload byte of record 2 flipped, with
    /// the valid record 3 after it.
    @Test func writeFixturesWhenAsked() throws {
        guard ProcessInfo.processInfo.environment["GRAPH_JOURNAL_WRITE_FIXTURES"] == "1" else { return }
        let clean = Tool.fixtures.appendingPathComponent("v1-clean")
        let segment = "0000000001.log"
        let bytes = try Data(contentsOf: clean.appendingPathComponent(segment))
        for (name, damaged) in [
            ("torn-tail", bytes + bytes[1184..<1224]),
            (
                "corrupt-middle",
                {
                    var d = bytes; d[630] ^= 0xFF; return d
                }()
            ),
        ] {
            let dir = Tool.fixtures.appendingPathComponent(name)
            try? FileManager.default.removeItem(at: dir)
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            try FileManager.default.copyItem(
                at: clean.appendingPathComponent("MANIFEST"), to: dir.appendingPathComponent("MANIFEST"))
            try damaged.write(to: dir.appendingPathComponent(segment))
        }
    }

    // MARK: Usage

    @Test func helpDocumentsEveryCommandAndTheExitCodes() throws {
        let root = try Tool.run(["--help"])
        #expect(root.status == 0)
        for code in [
            "0   success", "2   the journal ends in a torn tail", "3   the journal is corrupt", "4   another process",
            "64  bad usage",
        ] {
            #expect(root.stdout.contains(code))
        }
        for command in ["stats", "verify", "dump", "export", "repair", "compact"] {
            let help = try Tool.run([command, "--help"])
            #expect(help.status == 0, "\(command) --help")
            #expect(help.stdout.hasPrefix("OVERVIEW: "), "\(command) has an abstract")
            #expect(help.stdout.contains("Exit codes:"), "\(command) documents the exit codes")
        }
    }

    @Test func badUsageExits64() throws {
        for arguments in [
            ["dump"], ["verify", "--bogus", "x"], ["frobnicate"], ["dump", "--objects", "--from-seq", "2", "x"],
            ["dump", "--from-seq", "5", "--to-seq", "2", "x"], ["dump", "--to-seq", "minus", "x"],
        ] {
            let result = try Tool.run(arguments)
            #expect(result.status == 64, "\(arguments)")
            #expect(result.stdout.isEmpty && result.stderr.contains("Error:"), "\(arguments)")
        }
    }

    @Test func noSubcommandOrAnUnknownOneIsBadUsageThatSaysSo() throws {
        let none = try Tool.run([])
        #expect(none.status == 64)
        #expect(none.stdout.isEmpty)
        #expect(none.stderr.hasPrefix("Error: missing subcommand: one of stats, verify, dump, export, repair, compact"))
        let unknown = try Tool.run(["frobnicate", "x"])
        #expect(unknown.status == 64)
        #expect(
            unknown.stderr.hasPrefix(
                "Error: unknown subcommand 'frobnicate': one of stats, verify, dump, export, repair, compact"))
    }

    @Test func aFailureWithJSONOutputIsAJSONObjectToo() throws {
        for command in ["verify", "stats"] {
            let result = try Tool.run([command, "--json", "/nonexistent/store"])
            #expect(result.status == 1, "\(command)")
            #expect(
                result.stdout.hasPrefix(
                    "{\"directory\":\"/nonexistent/store\",\"verdict\":\"error\",\"exitCode\":1,\"error\":\"journal I/O error"
                ), "\(command)")
            #expect(try JSONSerialization.jsonObject(with: result.stdoutBytes) is [String: Any], "\(command)")
            #expect(result.stderr.hasPrefix("graph-journal: journal I/O error"), "\(command)")
        }
    }

    @Test func missingDirectoryFailsWithExitOne() throws {
        let result = try Tool.run(["verify", "/nonexistent/store"])
        #expect(result.status == 1)
        #expect(result.stderr.hasPrefix("graph-journal: journal I/O error"))
    }

    // MARK: verify

    @Test func verifyCleanJournalExitsZero() throws {
        let path = Tool.fixtures.appendingPathComponent("v1-clean").path
        let result = try Tool.run(["verify", path])
        #expect(result.status == 0)
        #expect(
            result.stdout == """
                verify \(path)
                segments: 0000000001.log
                records: 3 (1 schema, 2 transaction, 0 base, 0 skipped), last sequence 3
                verdict: clean

                """)
        #expect(result.stderr.isEmpty)
    }

    @Test func verifyTornTailExitsTwo() throws {
        let path = Tool.fixtures.appendingPathComponent("torn-tail").path
        let before = try Tool.contents(of: URL(fileURLWithPath: path))
        let result = try Tool.run(["verify", path])
        #expect(result.status == 2)
        #expect(
            result.stdout == """
                verify \(path)
                segments: 0000000001.log
                records: 3 (1 schema, 2 transaction, 0 base, 0 skipped), last sequence 3
                torn-tail: 0000000001.log at byte 1249: record of 41 payload bytes extends past the end of the file; 40 bytes to the end of the file
                verdict: torn-tail (a writer died mid-append; `graph-journal repair` cuts it, saving the bytes aside)

                """)
        let json = try Tool.run(["verify", "--json", path])
        #expect(json.status == 2)
        #expect(
            json.stdout == """
                {"directory":"\(path)","verdict":"torn-tail","exitCode":2,"segments":["0000000001.log"],"records":3,"schemaRecords":1,\
                "transactions":2,"baseRecords":0,"skippedRecords":0,"lastSequence":3,"problems":[{"kind":"torn-tail","file":"0000000001.log",\
                "offset":1249,"bytes":40,"recordsAfter":0,"sequence":null,"message":"record of 41 payload bytes extends past the end of the file"}]}

                """)
        #expect(try Tool.contents(of: URL(fileURLWithPath: path)) == before, "verify writes nothing")
    }

    @Test func verifyCorruptMiddleExitsThree() throws {
        let path = Tool.fixtures.appendingPathComponent("corrupt-middle").path
        let result = try Tool.run(["verify", path])
        #expect(result.status == 3)
        #expect(
            result.stdout == """
                verify \(path)
                segments: 0000000001.log
                records: 1 (1 schema, 0 transaction, 0 base, 0 skipped), last sequence 1
                corruption: 0000000001.log at byte 596: checksum mismatch; 653 bytes to the end of the file; 1 valid record after it
                verdict: corrupt (`graph-journal repair --keep-prefix` keeps the valid prefix, saving the rest aside)

                """)
        let json = try Tool.run(["verify", "--json", path])
        #expect(json.status == 3)
        #expect(json.stdout.contains("\"verdict\":\"corrupt\",\"exitCode\":3"))
    }

    @Test func verifyReportsAPayloadThatDoesNotDecodeAgainstTheSchema() throws {
        // A transaction record whose checksum is right but whose payload names an entity the
        // schema does not have: written through the journal API, so the framing is valid.
        let dir = Tool.temporaryURL("bad-payload")
        let journal = try Journal.open(directory: dir.path)
        let schema = try Tool.libraryObjectsSchemaBytes()
        try journal.append([1, 1, 7, 0, 0, 0, 0], schema: schema)
        try journal.close()
        let result = try Tool.run(["verify", dir.path])
        #expect(result.status == 3)
        #expect(result.stdout.contains("payload: 0000000001.log at byte "))
        #expect(result.stdout.contains("(record 2): transaction does not decode against the schema in force"))
    }

    @Test func verifyReportsInsertsOfLiveObjectsAndChangesToMissingOnesInOrder() throws {
        // Transactions of two stores of the same schema, spliced so that they contradict each
        // other: verify tracks live serials in runs (a save inserts consecutive serials) and
        // must still name every contradiction, in record order.
        func transactions(_ name: String, _ saves: (ModelContext) throws -> Void) throws -> [[UInt8]] {
            let dir = Tool.temporaryURL(name)
            var options = StoreOptions(durability: .none)
            options.autoCompactionRatio = nil
            let store = try ObjectStore.open(at: dir, schema: try Schema(Reading.self), options: options)
            try saves(store.context)
            try store.close()
            var payloads: [[UInt8]] = []
            _ = try Journal.readRecords(directory: dir.path) {
                if $0.entry.kind == .transaction { payloads.append($0.payload) }
            }
            return payloads
        }
        let a = try transactions("splice-a") { c in  // inserts 1...5; then updates 2, deletes 3
            let readings = try (0..<5).map { _ in try c.insert(Reading.self) }
            try c.save()
            readings[1].value = 1
            c.delete(readings[2])
            try c.save()
        }
        let b = try transactions("splice-b") { c in  // inserts 1...8; then updates 7
            let readings = try (0..<8).map { _ in try c.insert(Reading.self) }
            try c.save()
            readings[6].value = 1
            try c.save()
        }
        let dir = Tool.temporaryURL("splice")
        let journal = try Journal.open(directory: dir.path, options: JournalOptions(durability: .none))
        let schema = try Tool.libraryObjectsSchemaBytes()
        for payload in [a[0], b[1], b[0], a[1], a[1]] { try journal.append(payload, schema: schema) }
        try journal.close()
        let result = try Tool.run(["verify", dir.path])
        #expect(result.status == 3)
        #expect(result.stdout.contains("records: 6 (1 schema, 5 transaction, 0 base, 0 skipped), last sequence 6"))
        let problems = result.stdout.split(separator: "\n").filter { $0.hasPrefix("payload: ") }.map { line in
            line.split(separator: "(", maxSplits: 1).last.map(String.init) ?? ""
        }
        #expect(
            problems == [
                "record 3): updates Reading/7, which does not exist",
                "record 4): inserts Reading/1, which already exists",
                "record 4): inserts Reading/2, which already exists",
                "record 4): inserts Reading/3, which already exists",
                "record 4): inserts Reading/4, which already exists",
                "record 4): inserts Reading/5, which already exists",
                "record 6): deletes Reading/3, which does not exist",
            ], "\(result.stdout)")
    }

    // MARK: stats

    @Test func statsOfTheCleanFixture() throws {
        let path = Tool.fixtures.appendingPathComponent("v1-clean").path
        let result = try Tool.run(["stats", path])
        #expect(result.status == 0)
        #expect(
            result.stdout == """
                store             \(path)
                format version    1
                segments          1 (0000000001.log)
                records           3 (1 schema, 2 transaction, 0 base)
                transactions      2
                last sequence     3
                schema versions   unversioned
                bytes on disk     1249 bytes
                payload bytes     2018 raw, 1129 stored
                compression       1.79 : 1
                live bytes        ~1150 bytes (estimate: what compact would write)
                superseded bytes  ~99 bytes
                entities
                  Person          16 live objects
                  Everything      1 live object
                health            clean

                """)
        let json = try Tool.run(["stats", "--json", path])
        #expect(json.status == 0)
        #expect(
            json.stdout == """
                {"directory":"\(path)","formatVersion":1,"segments":["0000000001.log"],"records":3,"schemaRecords":1,"transactions":2,\
                "baseRecords":0,"lastSequence":3,"schemaVersionsSeen":1,"schemaVersions":[],\
                "schemaRecordVersions":[null],"bytesOnDisk":1249,"rawPayloadBytes":2018,"storedPayloadBytes":1129,\
                "compressionRatio":1.787,"liveBytesEstimate":1150,"supersededBytesEstimate":99,"entities":[{"entity":"Person","live":16,\
                "inSchema":true},{"entity":"Everything","live":1,"inSchema":true}],"health":"clean"}

                """)
    }

    @Test func statsLiveEstimateIsCloseToWhatCompactWrites() throws {
        let dir = try Tool.copy("v1-clean")
        let stats = try Tool.run(["stats", "--json", dir.path])
        let figures = try #require(try JSONSerialization.jsonObject(with: stats.stdoutBytes) as? [String: Any])
        let estimate = try #require(figures["liveBytesEstimate"] as? Int)
        #expect(try Tool.run(["compact", dir.path]).status == 0)
        let after = try #require(
            try JSONSerialization.jsonObject(with: try Tool.run(["stats", "--json", dir.path]).stdoutBytes)
                as? [String: Any])
        let actual = try #require(after["bytesOnDisk"] as? Int)
        #expect(abs(estimate - actual) * 5 <= actual, "estimate \(estimate) vs \(actual) written")
        #expect(after["baseRecords"] as? Int == 1 && after["transactions"] as? Int == 0)
    }

    @Test func statsAndDumpShowTheVersionsAMigratedStoreWentThrough() throws {
        let dir = Tool.temporaryURL("versioned")
        try Tool.writeVersionedStore(at: dir)
        let stats = try Tool.run(["stats", dir.path])
        #expect(stats.status == 0)
        // The migration's base names version 2; the lightweight open's first save appended a
        // schema record naming version 3.
        #expect(
            stats.stdout.contains("\nschema versions   1 → 2 → 3 (schema records: version 2, version 3)\n"),
            "\(stats.stdout)")
        #expect(stats.stdout.contains("records           4 (2 schema, 1 transaction, 1 base)\n"), "\(stats.stdout)")
        let json = try Tool.run(["stats", "--json", dir.path])
        let figures = try #require(try JSONSerialization.jsonObject(with: json.stdoutBytes) as? [String: Any])
        #expect(figures["schemaVersions"] as? [String] == ["1", "2", "3"])
        #expect(figures["schemaRecordVersions"] as? [String] == ["2", "3"])
        #expect(figures["schemaVersionsSeen"] as? Int == 2)
        // dump --schema: only the schema records, each with the versions it lists.
        let dump = try Tool.run(["dump", "--schema", dir.path])
        #expect(dump.status == 0 && dump.stderr.isEmpty)
        #expect(dump.stdout == (try Tool.expected("dump-schema-versioned.jsonl", actual: dump.stdout)))
        let lines = dump.stdout.split(separator: "\n").map { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
        #expect(lines.map { $0?["kind"] as? String } == ["schema", "schema"])
        #expect(lines.map { $0?["versions"] as? [String] } == [["1", "2"], ["1", "2", "3"]])
        // The whole dump has the same schema lines among the records.
        let all = try Tool.run(["dump", dir.path]).stdout.split(separator: "\n")
        #expect(all.filter { $0.contains(#""kind":"schema""#) } == dump.stdout.split(separator: "\n"))
        #expect(all.count == 4)
        #expect(try Tool.run(["dump", "--schema", "--objects", dir.path]).status != 0)
    }

    @Test func aStoreMigratedOnceShowsItsHistoryInOneSchemaRecord() throws {
        let dir = Tool.temporaryURL("migrated")
        try Tool.writeVersionedStore(at: dir)
        // Compacting keeps the history: one schema record, naming version 3.
        #expect(try Tool.run(["compact", dir.path]).status == 0)
        let stats = try Tool.run(["stats", dir.path])
        #expect(
            stats.stdout.contains("\nschema versions   1 → 2 → 3 (schema record: version 3)\n"), "\(stats.stdout)")
        let dump = try Tool.run(["dump", "--schema", dir.path])
        #expect(dump.stdout.hasSuffix(#"],"versions":["1","2","3"]}"# + "\n"), "\(dump.stdout)")
    }

    // MARK: dump

    @Test func dumpWritesEveryTransactionAsJSONLines() throws {
        let path = Tool.fixtures.appendingPathComponent("v1-clean").path
        let result = try Tool.run(["dump", path])
        #expect(result.status == 0 && result.stderr.isEmpty)
        #expect(result.stdout == (try Tool.expected("dump-v1-clean.jsonl", actual: result.stdout)))
        for line in result.stdout.split(separator: "\n") {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "every line is JSON")
        }
    }

    @Test func dumpObjectsWritesTheLiveObjects() throws {
        let path = Tool.fixtures.appendingPathComponent("v1-clean").path
        let result = try Tool.run(["dump", "--objects", path])
        #expect(result.status == 0)
        #expect(result.stdout == (try Tool.expected("dump-objects-v1-clean.jsonl", actual: result.stdout)))
        let everything = try Tool.run(["dump", "--objects", "--entity", "Everything", path])
        #expect(
            everything.stdout == """
                {"entity":"Everything","serial":1,"attributes":{"flag":true,"i8":-8,"i16":-16,"i32":-32,"i64":-64,"int":-1,"u8":8,"u16":16,\
                "u32":32,"u64":18446744073709551615,"uint":7,"double":0.25,"float":-1.5,"text":"fixture text","blob":"3q0=",\
                "date":"2027-01-15T08:00:00Z","uuid":"01020304-0506-0708-090A-0B0C0D0E0F10","url":"https://www.debian.org/",\
                "priority":"important","level":2,"checksum":"eyJhbGdvcml0aG0iOiJzaGEyNTYiLCJoZXgiOiIwMGZmIn0=","maybeText":"maybe","maybeInt":3}}

                """)
    }

    @Test func dumpNamesTheDestinationOfARelationshipAndVerifyAndCompactKeepIt() throws {
        let dir = Tool.temporaryURL("relationships")
        do {
            let store = try ObjectStore.open(at: dir, schema: try Schema(Shelf.self, Box.self))
            let shelf = try store.context.insert(Shelf.self)
            shelf.label = "top"
            for i in 0..<3 {
                try store.context.insert(Box.self) {
                    $0.label = "b\(i)"; $0.shelf = shelf
                }
            }
            try store.context.save()
            try store.close()
        }
        let dump = try Tool.run(["dump", dir.path])
        #expect(dump.status == 0)
        #expect(dump.stdout.contains(#"{"name":"shelf","type":"uint64","optional":true,"destination":"Shelf"}"#))
        #expect(dump.stdout.contains(#""label":"b2","shelf":1"#))
        #expect(try Tool.run(["verify", dir.path]).status == 0)
        #expect(try Tool.run(["compact", dir.path]).status == 0)
        let store = try ObjectStore.open(at: dir, schema: try Schema(Shelf.self, Box.self))
        defer { try? store.close() }
        let reopened = try #require(try store.context.objects(of: Shelf.self).first)
        #expect(reopened.boxes.map(\.label) == ["b0", "b1", "b2"])
        try? FileManager.default.removeItem(at: dir)
    }

    @Test func dumpFiltersBySequenceAndEntity() throws {
        let path = Tool.fixtures.appendingPathComponent("v1-clean").path
        let last = try Tool.run(["dump", "--from-seq", "3", path])
        #expect(
            last.stdout == """
                {"seq":3,"kind":"transaction","entities":[{"entity":"Person","inserted":[],"updated":[{"serial":2,"values":\
                {"city":"Moved","score":100.0}},{"serial":7,"values":{"city":"Moved","score":100.0}},{"serial":12,"values":\
                {"city":"Moved","score":100.0}},{"serial":17,"values":{"city":"Moved","score":100.0}}],"deleted":[1,6,11,16]}]}

                """)
        let everything = try Tool.run(["dump", "--entity", "Everything", "--from-seq", "2", "--to-seq", "3", path])
        #expect(everything.stdout.split(separator: "\n").count == 1)
        #expect(
            everything.stdout.hasPrefix("{\"seq\":2,\"kind\":\"transaction\",\"entities\":[{\"entity\":\"Everything\",")
        )
        // The objects as of sequence 2: all 20 people, before the deletes of sequence 3.
        let asOf2 = try Tool.run(["dump", "--objects", "--entity", "Person", "--to-seq", "2", path])
        #expect(asOf2.stdout.split(separator: "\n").count == 20)
        let unknown = try Tool.run(["dump", "--entity", "Nobody", path])
        #expect(unknown.status == 1 && unknown.stdout.isEmpty)
        #expect(unknown.stderr == "graph-journal: no entity named 'Nobody' in the journal's schema\n")
    }

    @Test func dumpOfADamagedJournalWritesTheValidPrefixAndSaysWhy() throws {
        let torn = try Tool.run(["dump", Tool.fixtures.appendingPathComponent("torn-tail").path])
        #expect(torn.status == 0)
        #expect(torn.stdout == (try Tool.expected("dump-v1-clean.jsonl", actual: torn.stdout)))
        #expect(
            torn.stderr
                == "graph-journal: note: torn tail in 0000000001.log at byte 1249 (record of 41 payload bytes extends past the end of the file); the records before it were written\n"
        )
        let corrupt = try Tool.run(["dump", "--objects", Tool.fixtures.appendingPathComponent("corrupt-middle").path])
        #expect(corrupt.status == 3 && corrupt.stdout.isEmpty)
        #expect(
            corrupt.stderr
                == "graph-journal: corruption in 0000000001.log at byte 596: checksum mismatch; only the records before it were written\n"
        )
    }

    // MARK: repair

    @Test func repairRefusesWithoutATerminalOrYes() throws {
        let dir = try Tool.copy("torn-tail")
        let before = try Tool.contents(of: dir)
        let result = try Tool.run(["repair", dir.path])
        #expect(result.status == 5)
        #expect(
            result.stderr
                == "graph-journal: refusing to change the store without --yes: standard input is not a terminal; nothing was changed\n"
        )
        #expect(try Tool.contents(of: dir) == before)
    }

    @Test func repairCutsATornTailAndSavesTheBytes() throws {
        let dir = try Tool.copy("torn-tail")
        let original = try Data(contentsOf: dir.appendingPathComponent("0000000001.log"))
        let result = try Tool.run(["repair", "--yes", dir.path])
        #expect(result.status == 0)
        let saved = try #require(
            try FileManager.default.contentsOfDirectory(atPath: dir.path).first {
                $0.hasPrefix("0000000001.log.dropped-")
            })
        #expect(
            result.stdout == """
                torn tail: 40 bytes at byte 1249 of 0000000001.log (record of 41 payload bytes extends past the end of the file)
                the cut bytes hold 0 transactions that pass their checksum (a torn tail holds none: the writer died before finishing it)
                repair will copy them to 0000000001.log.dropped-<time> and truncate 0000000001.log to 1249 bytes
                saved 40 bytes to \(saved)
                truncated 0000000001.log to 1249 bytes; the store is clean

                """)
        #expect(try Data(contentsOf: dir.appendingPathComponent(saved)) == original[1249...])
        #expect(try Data(contentsOf: dir.appendingPathComponent("0000000001.log")) == original[..<1249])
        #expect(try Tool.run(["verify", dir.path]).status == 0)
        #expect(try Tool.libraryObjects(dir) == (try Tool.libraryObjects(try Tool.copy("v1-clean"))))
    }

    @Test func repairOfCorruptionNeedsKeepPrefix() throws {
        let dir = try Tool.copy("corrupt-middle")
        let before = try Tool.contents(of: dir)
        let result = try Tool.run(["repair", "--yes", dir.path])
        #expect(result.status == 3)
        #expect(
            result.stdout == """
                corruption in 0000000001.log at byte 596: checksum mismatch
                keeping the valid prefix keeps 1 record (through sequence 1) and cuts 653 bytes holding 1 transaction that pass their checksum
                nothing was changed: cutting corruption loses data, so it needs --keep-prefix

                """)
        #expect(try Tool.contents(of: dir) == before)
    }

    @Test func repairKeepPrefixSavesTheRestAside() throws {
        let dir = try Tool.copy("corrupt-middle")
        let original = try Data(contentsOf: dir.appendingPathComponent("0000000001.log"))
        let result = try Tool.run(["repair", "--keep-prefix", "--yes", dir.path])
        #expect(result.status == 0, "\(result.stderr)")
        let saved = try #require(
            try FileManager.default.contentsOfDirectory(atPath: dir.path).first { $0.contains(".dropped-") })
        #expect(
            result.stdout == """
                corruption in 0000000001.log at byte 596: checksum mismatch
                keeping the valid prefix keeps 1 record (through sequence 1) and cuts 653 bytes holding 1 transaction that pass their checksum
                repair will save the cut bytes to <segment>.dropped-<time> files in the store directory
                saved 653 bytes of 0000000001.log from byte 596 to \(saved)
                dropped 1 record that passed their checksum; the store now ends at sequence 1

                """)
        #expect(try Data(contentsOf: dir.appendingPathComponent(saved)) == original[596...])
        #expect(try Tool.run(["verify", dir.path]).status == 0)
        let objects = try Tool.libraryObjects(dir)
        #expect(objects["Person"]?.isEmpty == true && objects["Everything"]?.isEmpty == true)
    }

    @Test func repairOfACleanStoreChangesNothing() throws {
        let dir = try Tool.copy("v1-clean")
        let before = try Tool.contents(of: dir)
        let result = try Tool.run(["repair", dir.path])
        #expect(result.status == 0 && result.stdout == "\(dir.path) is clean: nothing to repair\n")
        #expect(try Tool.contents(of: dir) == before)
    }

    // MARK: compact

    @Test func compactKeepsEveryLiveObjectByteForByte() throws {
        let dir = try Tool.copy("v1-clean")
        let objectsBefore = try Tool.run(["dump", "--objects", dir.path]).stdout
        let libraryBefore = try Tool.libraryObjects(try Tool.copy("v1-clean"))
        let result = try Tool.run(["compact", dir.path])
        #expect(result.status == 0, "\(result.stderr)")
        let masked = result.stdout.replacingOccurrences(
            of: #"[0-9]+\.[0-9]+ s\n$"#, with: "T s\n", options: .regularExpression)
        #expect(masked.hasPrefix("compacted \(dir.path): 1249 -> "))
        #expect(masked.hasSuffix(" %), 17 live objects, T s\n"))
        #expect(result.stderr.isEmpty, "no progress line without a terminal")
        #expect(try Tool.run(["dump", "--objects", dir.path]).stdout == objectsBefore)
        #expect(try Tool.libraryObjects(dir) == libraryBefore)
        #expect(try Tool.run(["verify", dir.path]).status == 0)
        let manifest = try String(contentsOf: dir.appendingPathComponent("MANIFEST"), encoding: .utf8)
        #expect(manifest.contains("base 0000000002.base\nlog 0000000003.log\n"))
    }

    @Test func compactRefusesWhileAnotherProcessHoldsTheLock() throws {
        let dir = try Tool.copy("v1-clean")
        let journal = try Journal.open(directory: dir.path)
        defer { try? journal.close() }
        let before = try Tool.contents(of: dir)
        let result = try Tool.run(["compact", dir.path])
        #expect(result.status == 4)
        #expect(
            result.stderr
                == "graph-journal: another process holds the write lock on \(dir.path) (its LOCK file); stop it first; nothing was changed\n"
        )
        #expect(try Tool.contents(of: dir) == before)
        let repair = try Tool.run(["repair", "--yes", try Tool.copy("torn-tail").path])
        #expect(repair.status == 0)
    }

    @Test func compactRefusesADamagedStore() throws {
        let torn = try Tool.copy("torn-tail")
        let result = try Tool.run(["compact", torn.path])
        #expect(result.status == 2)
        #expect(
            result.stderr
                == "graph-journal: \(torn.path) ends in a torn tail; run `graph-journal repair` first (it saves the bytes aside); nothing was changed\n"
        )
        let corrupt = try Tool.copy("corrupt-middle")
        #expect(try Tool.run(["compact", corrupt.path]).status == 3)
    }

    @Test func killingCompactAtRandomMomentsNeverLosesData() throws {
        // A store big enough that compaction takes a while: 40 saves of 500 objects, half of
        // them later updated or deleted.
        let source = Tool.temporaryURL("kill-source")
        try Tool.writeLargeStore(at: source, saves: 40, objectsPerSave: 500)
        let expected = try Tool.run(["dump", "--objects", source.path])
        #expect(expected.status == 0)
        var generator = SystemRandomNumberGenerator()
        for round in 0..<6 {
            let dir = Tool.temporaryURL("kill-\(round)")
            try FileManager.default.copyItem(at: source, to: dir)
            let running = try Tool.start(["compact", dir.path])
            usleep(UInt32.random(in: 0...(round == 0 ? 1000 : 150_000), using: &generator))
            kill(running.process.processIdentifier, SIGKILL)
            running.process.waitUntilExit()
            _ = try running.finish()
            let verify = try Tool.run(["verify", dir.path])
            #expect(verify.status == 0, "round \(round): \(verify.stdout)")
            #expect(try Tool.run(["dump", "--objects", dir.path]).stdout == expected.stdout, "round \(round)")
            let store = try ObjectStore.openDynamic(at: dir)
            try store.close()
            #expect(
                try Tool.run(["dump", "--objects", dir.path]).stdout == expected.stdout,
                "round \(round), after a library open")
        }
    }
}

/// Writes the 1M-object journal the README's performance figures were measured on, when
/// `GRAPH_JOURNAL_BENCH_STORE` names a directory (it must not exist yet); and a people journal
/// (the benchmarks' six-attribute record) when `GRAPH_JOURNAL_PEOPLE_STORE` names one:
/// `GRAPH_JOURNAL_PEOPLE_OBJECTS` objects (default 1,000,000) in `GRAPH_JOURNAL_PEOPLE_SAVES`
/// saves (default 1).
@Suite("GraphJournalTool: benchmark store")
struct GraphJournalToolBenchmarkStore {
    @Test func writeBenchmarkStoreWhenAsked() throws {
        guard let path = ProcessInfo.processInfo.environment["GRAPH_JOURNAL_BENCH_STORE"] else { return }
        try Tool.writeLargeStore(at: URL(fileURLWithPath: path), saves: 1000, objectsPerSave: 1000)
    }

    @Test func writePeopleStoreWhenAsked() throws {
        let environment = ProcessInfo.processInfo.environment
        guard let path = environment["GRAPH_JOURNAL_PEOPLE_STORE"] else { return }
        let objects = environment["GRAPH_JOURNAL_PEOPLE_OBJECTS"].flatMap { Int($0) } ?? 1_000_000
        let saves = environment["GRAPH_JOURNAL_PEOPLE_SAVES"].flatMap { Int($0) } ?? 1
        try Tool.writePeopleStore(at: URL(fileURLWithPath: path), objects: objects, saves: saves)
    }
}
