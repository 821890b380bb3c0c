import ArgumentParser
import Foundation
import GraphJournal
import GraphJournalProgress
import ObjectGraph

/// `graph-journal export DIR --format jsonl|sqlite [--output FILE] [--force]`: the live
/// objects, their attributes and relationships, for standard tools (`jq`, `sqlite3`).
struct Export: ParsableCommand {
    /// The formats `export` writes.
    enum Format: String, ExpressibleByArgument, CaseIterable {
        case jsonl, sqlite
    }

    static let configuration = CommandConfiguration(
        abstract: "Writes the live objects as JSON Lines or as a SQLite database, for standard tools.",
        discussion: """
            Read-only: takes no lock and writes nothing to the store. The journal is replayed \
            (as dump --objects does) and its live objects are written, by entity then ID (the \
            object's serial).

            jsonl: one object per line, {"entity":"DebianPackage","id":1,"attributes":{...},\
            "relationships":{"maintainedBy":7,"depends":[606,1244]}}. Values are encoded as \
            dump encodes them: JSON natives, data as base64, dates as ISO 8601 in UTC, UUIDs and \
            URLs as strings, NaN and infinities as the strings "NaN", "Infinity", "-Infinity". \
            A to-one relationship is the related object's ID or null, a to-many one an array of \
            IDs (in order on an ordered side, by ID otherwise). Written to standard output \
            unless --output is given.

            sqlite: a database with one table per entity (its name), an "id" INTEGER PRIMARY \
            KEY and one column per attribute (bool and integers INTEGER, double and float REAL, \
            string, date, UUID and URL TEXT as in jsonl, data BLOB but a Codable value's JSON \
            TEXT); a to-one relationship is \
            a column <name>_id with a FOREIGN KEY to the related entity's table; a many-to-many \
            is one join table <Entity>_<relationship> holding each pair once, with a column \
            <relationship>_id per side (the object that relationship leads to) and, for an \
            ordered side, <relationship>_position (0-based). An ordered to-many whose inverse \
            is a to-one keeps its order in a <relationship>_position column beside the \
            to-one's <name>_id. A name SQLite already has in that table (an attribute named \
            id, two names that differ only in case) gets a suffix (_2) and a note on \
            standard error. A uint64 above 9223372036854775807 is stored as its 64-bit two's \
            complement (a negative INTEGER) and NaN as NULL, each with a note. --output is \
            required.

            An --output file is built as a temporary file beside it and renamed into place at \
            the end: a failed or interrupted export leaves no partial output. An existing output \
            is refused unless --force is given.

            The to-many inverse of a to-one relationship stored in the to-one's own column \
            (not as links) is not named in the journal's schema: it is exported through the \
            to-one only.

            A journal that ends in a torn tail is exported as of the records before it (a \
            note on standard error, exit 0); a corrupt one is not exported at all (exit 3): \
            run verify, and repair --keep-prefix to keep its valid prefix.

            When standard error is a terminal (for jsonl on standard output, standard output \
            must not be one) and the export takes longer than half a second, a progress bar \
            shows the bytes of the journal replayed, then the objects written. --no-progress \
            turns it off.

            An encrypted store needs its key (--key-file or --key-env); without it nothing is \
            written and the command fails (exit 1) naming the keys the sealed records need.

            \(ToolExit.helpText)
            """
    )

    @OptionGroup var store: StoreDirectory

    @OptionGroup var keys: KeyOptions

    @Option(help: ArgumentHelp("JSON Lines (jsonl) or a SQLite database (sqlite).", valueName: "format"))
    var format: Format

    @Option(
        name: .customLong("output"),
        help: ArgumentHelp(
            "The file to write (required for sqlite; jsonl writes to standard output without it, or with -).",
            valueName: "file"),
        completion: .file())
    var output: String?

    @Flag(help: "Replace the output file if it exists.")
    var force = false

    @OptionGroup var progressOptions: ProgressOptions

    func validate() throws {
        if format == .sqlite && (output == nil || output == "-") {
            throw ValidationError("--format sqlite writes a database file: give --output FILE.sqlite")
        }
        if output?.isEmpty == true { throw ValidationError("--output is empty") }
    }

    /// The output file, nil for standard output.
    private var outputPath: String? { output == "-" ? nil : output }

    func run() throws {
        try runReporting {
            let directory = store.path
            let target = outputPath.map { OutputFile(path: $0, force: force) }
            // Refused before the store is read: nothing to undo.
            try target?.checkCanWrite()
            var progress = JournalProgress(
                directory: directory, label: "exporting", options: progressOptions,
                outputIsStandardOutput: target == nil)
            defer { progress?.finish() }
            var notes = ExportNotes()
            let replay = try replayLiveObjects(directory: directory, progress: &progress, notes: &notes)
            let plan = ExportPlan(replay)
            let bar = progress?.bar
            bar?.phase("writing objects", total: plan.objectCount, unit: .items("objects"))
            switch (format, target) {
            case (.jsonl, let target?):
                try target.write { path in
                    let fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC)
                    guard fd >= 0 else {
                        throw ToolFailure(.failure, "cannot open \(path): \(String(cString: strerror(errno)))")
                    }
                    defer { close(fd) }
                    var out = StandardOutput(fd: fd, name: path)
                    try writeJSONLines(plan, to: &out, notes: &notes, progress: bar)
                    try out.flush()
                }
            case (.jsonl, nil):
                var out = StandardOutput()
                try writeJSONLines(plan, to: &out, notes: &notes, progress: bar)
                try out.flush()
            case (.sqlite, let target?):
                try target.write { path in try writeSQLite(plan, to: path, notes: &notes, progress: bar) }
            case (.sqlite, nil):
                throw ValidationError("--format sqlite writes a database file: give --output FILE.sqlite")
            }
            progress?.finish()
            for line in notes.lines { printError("graph-journal: note: \(line)") }
        }
    }

    /// Replays the journal to its live objects (``JournalReplay`` through ``ParallelReplay``, as
    /// `dump --objects` does). A torn tail is a note (the objects as of the records before it
    /// are exported); corruption, or a record that does not apply, ends the export before
    /// anything is written (exit 3).
    private func replayLiveObjects(
        directory: String, progress: inout JournalProgress?, notes: inout ExportNotes
    ) throws -> JournalReplay {
        var pipeline = ParallelReplay(JournalReplay(keepValues: true, trackObjects: true))
        var walk = progress
        let emit = { (record: JournalReadRecord, _: ChangeSet?, _: StoredSchema?) -> Void in
            walk?.passed(record.entry)
        }
        let report = try Journal.readRecords(directory: directory, keyring: try keys.keyring()) { record in
            try pipeline.feed(record, emit: emit)
        }
        try pipeline.finish(emit: emit)
        if report.sealedRecordsNotOpened > 0 {
            throw ToolFailure(
                .failure,
                "\(directory) is encrypted: \(report.sealedRecordsNotOpened) records are sealed with key \(report.keyIDs.joined(separator: ", ")); give the key with --key-file or --key-env to export them; nothing was written"
            )
        }
        progress = walk
        let replay = pipeline.replay
        var damage: [String] = []
        for problem in report.problems {
            let at = problem.offset.map { " at byte \($0)" } ?? ""
            switch problem.kind {
            case .leftoverFile: continue
            case .unlistedSegment:
                notes.add(
                    "\(problem.file) is not listed in MANIFEST but continues the sequence; its records were exported")
            case .tornTail:
                notes.add(
                    "torn tail in \(problem.file)\(at) (\(problem.message)); the objects as of the records before it were exported"
                )
            case .corruption:
                damage.append("corruption in \(problem.file)\(at): \(problem.message)")
            }
        }
        for problem in replay.problems {
            damage.append(
                "payload problem in \(problem.file) at byte \(problem.offset) (record \(problem.sequence)): \(problem.message)"
            )
        }
        guard damage.isEmpty else {
            progress?.finish()
            for line in damage { printError("graph-journal: \(line)") }
            printError(
                "graph-journal: nothing was exported; `graph-journal repair --keep-prefix` keeps the valid prefix")
            throw ExitCode(ToolExit.corrupt.rawValue)
        }
        return replay
    }
}

/// What the export says on standard error once it is done: a torn tail, values SQLite cannot
/// hold as they are, names that had to change.
struct ExportNotes {
    private(set) var lines: [String] = []

    mutating func add(_ line: String) { lines.append(line) }
}
