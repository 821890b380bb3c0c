import ArgumentParser
import GraphJournal
import GraphJournalProgress
import ObjectGraph
import ObjectGraphReplication

/// `graph-journal verify DIR`: checks every record; the exit code tells clean, torn tail or corrupt.
struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Reads every record and checks its checksum, its sequence number and that it decodes against the schema in force.",
        discussion: """
            Read-only: takes no lock and writes nothing. Each problem is printed with its kind \
            (torn-tail, corruption, payload, leftover-file), file and byte offset. Leftover files \
            (unlisted segments of an interrupted compaction) are reported but do not change the \
            verdict: the next writer removes them.

            A replica (a follower's directory) or a restored store holds an origin record (type \
            0x80) before each record that came from a stream: the writer's sequence of that \
            record and the stream message that carried it. They are counted as "origin", not \
            checked against a schema; "skipped" counts records of other types this tool does \
            not know.

            When standard error is a terminal and the check takes longer than half a second, a \
            progress bar there shows the bytes of the journal checked out of its segments' size \
            on disk, and the rate; it is erased before the result is printed, and standard \
            output (text or --json) is the same with or without it. --no-progress turns it off.

            An encrypted store: record headers are in the clear, so without a key verify still \
            checks every record's framing, checksum and sequence, the order of the seals (each \
            record where its writer put it, none from another store), and finds torn tails and \
            damage exactly as on a plain store; it then says how many sealed records it could \
            not open ("N sealed records: framing and checksums verified, contents not (no key \
            given)"). With --key-file or --key-env every record is opened and its contents \
            checked too; a missing or wrong key fails (exit 1) naming the key.

            \(ToolExit.helpText)
            """
    )

    @OptionGroup var store: StoreDirectory

    @OptionGroup var keys: KeyOptions

    @Flag(help: "Print the result as one JSON object (verdict, counts, problems).")
    var json = false

    @OptionGroup var progressOptions: ProgressOptions

    func run() throws {
        try runReporting(jsonDirectory: json ? store.path : nil) {
            var progress = JournalProgress(directory: store.path, label: "verifying", options: progressOptions)
            defer { progress?.finish() }
            let result = try VerifyResult.examine(
                directory: store.path, keyring: try keys.keyring(), progress: &progress)
            progress?.finish()
            var out = StandardOutput()
            if json { result.writeJSON(to: &out.json) } else { result.writeText(to: &out) }
            try out.flush()
            if result.exit != .success { throw ExitCode(result.exit.rawValue) }
        }
    }
}

/// What `verify` found: the journal report's problems plus the replay's payload problems.
struct VerifyResult {
    struct Problem {
        var kind: String
        var file: String
        var offset: Int64?
        var bytes: Int64?
        var recordsAfter: Int
        var sequence: UInt64?
        var message: String
    }

    /// Reads every record of the store at `directory` and checks every payload: the verdict
    /// `verify` prints and `repair` acts on.
    ///
    /// - Parameter progress: advanced past each record once it is checked.
    /// - Parameter keyring: the keys that open sealed records, or nil to check their framing
    ///   only.
    static func examine(
        directory: String, keyring: JournalKeyring?, progress: inout JournalProgress?
    ) throws -> VerifyResult {
        // A validating skim of each payload, not a decode into values.
        var replay = JournalReplay(keepValues: false)
        var outline = TransactionOutline()
        outline.keepsInsertedRuns = true  // a 1M-object save's inserts: one run, not 8 MB of serials
        // Payloads lent piece by piece: a chunked one is never held whole.
        let report = try Journal.streamPayloads(directory: directory, keyring: keyring) { entry, payload in
            replay.check(entry, payload: payload, outline: &outline)
            progress?.passed(entry)
        }
        replay.finishOrigins()
        return VerifyResult(directory: directory, report: report, replay: replay)
    }

    /// ``examine(directory:keyring:progress:)`` without a progress bar.
    static func examine(directory: String, keyring: JournalKeyring?) throws -> VerifyResult {
        var none: JournalProgress?
        return try examine(directory: directory, keyring: keyring, progress: &none)
    }

    var directory: String
    var report: JournalReport
    var replay: JournalReplay
    var problems: [Problem] = []

    init(directory: String, report: JournalReport, replay: JournalReplay) {
        self.directory = directory
        self.report = report
        self.replay = replay
        problems = report.problems.map {
            Problem(
                kind: $0.kind.label, file: $0.file, offset: $0.offset, bytes: $0.bytes, recordsAfter: $0.recordsAfter,
                message: $0.message)
        }
        problems += replay.problems.map {
            Problem(
                kind: "payload", file: $0.file, offset: $0.offset, recordsAfter: 0, sequence: $0.sequence,
                message: $0.message)
        }
        problems.sort {
            ($0.kind == "leftover-file" ? 1 : 0, report.files.firstIndex(of: $0.file) ?? -1, $0.offset ?? -1)
                < ($1.kind == "leftover-file" ? 1 : 0, report.files.firstIndex(of: $1.file) ?? -1, $1.offset ?? -1)
        }
    }

    /// The first record, in sequence order, that passes its checksum but cannot be read:
    /// its payload does not decompress, or does not decode.
    var firstUnreadable: JournalOptions.UnreadableRecord? {
        var candidates = replay.problems.map {
            JournalOptions.UnreadableRecord(sequence: $0.sequence, reason: "record \($0.sequence): \($0.message)")
        }
        // A payload that does not decompress is reported by the journal at its record.
        for problem in report.problems where problem.kind == .corruption {
            if let entry = report.entries.first(where: { $0.file == problem.file && $0.offset == problem.offset }) {
                candidates.append(.init(sequence: entry.sequence, reason: problem.message))
            }
        }
        return candidates.min { $0.sequence < $1.sequence }
    }

    /// The verdict: payload problems are corruption.
    var verdict: JournalReport.Verdict {
        replay.problems.isEmpty ? report.verdict : .corrupt
    }

    var exit: ToolExit { verdict.exit }

    var lastSequence: UInt64 { report.entries.last?.sequence ?? 0 }

    func writeText(to out: inout StandardOutput) {
        let r = replay
        out.text("verify \(directory)\n")
        out.text("segments: \(report.files.joined(separator: ", "))\n")
        let origins = r.originRecords > 0 ? "\(r.originRecords) origin, " : ""
        out.text(
            "records: \(report.entries.count) (\(r.schemaRecords) schema, \(r.transactions) transaction, \(r.baseRecords) base, \(origins)\(r.skippedRecords) skipped), last sequence \(lastSequence)\n"
        )
        if r.originRecords > 0 {
            var line =
                "origin records: where each record that came from a stream came from (the writer's sequence and the stream message); sequences here are this store's own"
            if let origin = r.origin.flatMap({ ReplicaOrigin(payload: $0) }) {
                line +=
                    "; a replica of \(origin.stream.map { "stream \($0)" } ?? "a stream"), the writer's record \(origin.writerSequence) applied last (stream message \(origin.streamSequence))"
            }
            out.text(line + "\n")
        }
        for p in problems {
            var line = "\(p.kind): \(p.file)"
            if let offset = p.offset { line += " at byte \(offset)" }
            if let sequence = p.sequence { line += " (record \(sequence))" }
            line += ": \(p.message)"
            if let bytes = p.bytes { line += "; \(bytes) byte\(bytes == 1 ? "" : "s") to the end of the file" }
            if p.recordsAfter > 0 {
                line += "; \(p.recordsAfter) valid record\(p.recordsAfter == 1 ? "" : "s") after it"
            }
            out.text(line + "\n")
        }
        if replay.problemsNotShown > 0 { out.text("payload: \(replay.problemsNotShown) more problems not shown\n") }
        if let line = encryptionLine { out.text(line + "\n") }
        switch verdict {
        case .clean where report.problems.contains(where: { $0.kind == .unlistedSegment }):
            out.text(
                "verdict: clean (the next open adds the unlisted segments to MANIFEST; `graph-journal repair` does it now)\n"
            )
        case .clean: out.text("verdict: clean\n")
        case .tornTailOnly:
            out.text(
                "verdict: torn-tail (a writer died mid-append; `graph-journal repair` cuts it, saving the bytes aside)\n"
            )
        case .corrupt:
            out.text(
                "verdict: corrupt (`graph-journal repair --keep-prefix` keeps the valid prefix, saving the rest aside)\n"
            )
        }
    }

    /// The sealed records and the keys they name: what was opened, or that nothing could be.
    var encryptionLine: String? {
        let keys = report.keyIDs
        guard !keys.isEmpty else { return nil }
        let sealed = report.entries.lazy.filter(\.sealed).count
        let named = "key\(keys.count == 1 ? "" : "s") \(keys.joined(separator: ", "))"
        let records = "\(sealed) sealed record\(sealed == 1 ? "" : "s") (\(named))"
        if report.sealedRecordsNotOpened > 0 {
            return "encrypted: \(records): framing and checksums verified, contents not (no key given)"
        }
        return "encrypted: \(records): opened and checked"
    }

    func writeJSON(to w: inout JSONWriter) {
        let r = replay
        w.raw("{\"directory\":"); w.string(directory)
        w.raw(",\"verdict\":"); w.string(verdict.label)
        w.raw(",\"exitCode\":"); w.int(Int64(exit.rawValue))
        w.raw(",\"segments\":[")
        for (i, file) in report.files.enumerated() { if i > 0 { w.raw(",") }; w.string(file) }
        w.raw("],\"records\":"); w.int(Int64(report.entries.count))
        w.raw(",\"schemaRecords\":"); w.int(Int64(r.schemaRecords))
        w.raw(",\"transactions\":"); w.int(Int64(r.transactions))
        w.raw(",\"baseRecords\":"); w.int(Int64(r.baseRecords))
        if r.originRecords > 0 { w.raw(",\"originRecords\":"); w.int(Int64(r.originRecords)) }
        w.raw(",\"skippedRecords\":"); w.int(Int64(r.skippedRecords))
        w.raw(",\"lastSequence\":"); w.uint(lastSequence)
        let keys = report.keyIDs
        if !keys.isEmpty {
            w.raw(",\"sealedRecords\":"); w.int(Int64(report.entries.lazy.filter(\.sealed).count))
            w.raw(",\"sealedRecordsNotOpened\":"); w.int(Int64(report.sealedRecordsNotOpened))
            w.raw(",\"keyIDs\":[")
            for (i, id) in keys.enumerated() { if i > 0 { w.raw(",") }; w.string(id) }
            w.raw("]")
        }
        w.raw(",\"problems\":[")
        for (i, p) in problems.enumerated() {
            if i > 0 { w.raw(",") }
            w.raw("{\"kind\":"); w.string(p.kind)
            w.raw(",\"file\":"); w.string(p.file)
            w.raw(",\"offset\":"); if let o = p.offset { w.int(o) } else { w.raw("null") }
            w.raw(",\"bytes\":"); if let b = p.bytes { w.int(b) } else { w.raw("null") }
            w.raw(",\"recordsAfter\":"); w.int(Int64(p.recordsAfter))
            w.raw(",\"sequence\":"); if let s = p.sequence { w.uint(s) } else { w.raw("null") }
            w.raw(",\"message\":"); w.string(p.message)
            w.raw("}")
        }
        w.raw("]}\n")
    }
}
