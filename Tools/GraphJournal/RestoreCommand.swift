import ArgumentParser
import Foundation
import GraphJournal
import ObjectGraph
import ObjectGraphReplication

/// The options that name a shipping store's stream: `--servers`, `--stream`, `--subject-prefix`.
struct StreamSourceOptions: ParsableArguments {
    @Option(
        name: .customLong("servers"),
        help: ArgumentHelp(
            "The NATS servers, comma-separated (nats://host:port[,nats://host:port...]); the client fails over between them.",
            valueName: "urls"))
    var servers: String

    @Option(
        name: .customLong("stream"), help: ArgumentHelp("The JetStream stream the store ships to.", valueName: "name"))
    var stream: String

    @Option(
        name: .customLong("subject-prefix"),
        help: ArgumentHelp(
            "The prefix of the stream's subjects (<prefix>.log, <prefix>.base). Default: the stream's name, lowercased.",
            valueName: "prefix"))
    var subjectPrefix: String?

    /// The server URLs, in order.
    var serverList: [String] {
        servers.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    func validate() throws {
        guard !serverList.isEmpty else {
            throw ValidationError("--servers names no server; give nats://host:port[,...]")
        }
        for url in serverList where !url.contains("://") {
            throw ValidationError("--servers: '\(url)' is not a server URL; give nats://host:port")
        }
        guard !stream.isEmpty else { throw ValidationError("--stream is empty") }
    }

    /// The target as the replication library takes it.
    var target: ReplicationTarget {
        ReplicationTarget(servers: serverList, stream: stream, subjectPrefix: subjectPrefix)
    }

    /// `stream PKGD on nats://…` for messages.
    var label: String { "stream \(stream) on \(serverList.joined(separator: ","))" }
}

/// `graph-journal restore --servers URLS --stream NAME (--to-seq N | --to-time T | --latest) DIR`:
/// point-in-time recovery from a shipping store's stream.
struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract:
            "Rebuilds a store in a new directory from the JetStream stream it ships to, as of a record, a time, or the latest.",
        discussion: """
            The store is rebuilt from the newest base in the stream at or before the target, \
            then the log records after that base up to the target: --to-seq N stops after the \
            writer's record N, --to-time T after the last record the servers stored at or \
            before T (ISO 8601, e.g. 2026-11-24T05:00:00Z or 2026-11-24T06:00:00+01:00), \
            --latest takes everything the stream holds. The schema comes from the stream: no \
            application code is needed. DIR must not exist; a failed restore removes what it \
            wrote. It ends with a one-line summary: the record the base covered (0: no base, the \
            log was replayed from its start), the records applied after it, the last record \
            applied and the time taken. Open the result with the application, or look at it \
            with `graph-journal stats` and `graph-journal dump --objects`.

            An encrypted writer's records ship sealed and are restored as they came, still \
            sealed: the restored store needs the writer's keys. Given --key-file or --key-env, \
            restore checks that every restored record opens with them and fails (exit 1, naming \
            the key) when one does not. Without keys, or with another key, restore fails (exit \
            1) naming the key the stream needs, and writes nothing.

            \(ToolExit.helpText)
            """
    )

    @OptionGroup var source: StreamSourceOptions

    @OptionGroup var keys: KeyOptions

    @Option(
        name: .customLong("to-seq"),
        help: ArgumentHelp("Restore up to and including the writer's record of this sequence.", valueName: "n"))
    var toSequence: UInt64?

    @Option(
        name: .customLong("to-time"),
        help: ArgumentHelp(
            "Restore up to the last record the servers stored at or before this time (ISO 8601).", valueName: "time"))
    var toTime: String?

    @Flag(help: "Restore everything the stream holds.")
    var latest = false

    @Argument(help: "The directory to create the restored store in; it must not exist.", completion: .directory)
    var directory: String

    func validate() throws {
        let chosen = (toSequence != nil ? 1 : 0) + (toTime != nil ? 1 : 0) + (latest ? 1 : 0)
        guard chosen == 1 else {
            throw ValidationError(
                chosen == 0
                    ? "say how far to restore: one of --to-seq N, --to-time T, --latest"
                    : "--to-seq, --to-time and --latest exclude each other; give one")
        }
        if let toTime, parseTime(toTime) == nil {
            throw ValidationError(
                "--to-time '\(toTime)' is not an ISO 8601 time; give e.g. 2026-11-24T05:00:00Z or 2026-11-24T06:00:00.250+01:00"
            )
        }
    }

    /// What the options ask for.
    private var restoreTarget: Restore.Target {
        if let toSequence { return .sequence(toSequence) }
        if let toTime, let date = parseTime(toTime) { return .time(date) }
        return .latest
    }

    func run() throws {
        try runReporting {
            var path = directory
            while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
            guard !FileManager.default.fileExists(atPath: path) else {
                throw ToolFailure(
                    .failure,
                    "\(path) exists; restore writes a new store, give it a directory that does not exist; nothing was changed"
                )
            }
            let encryption = try keys.encryption()
            let keyring = encryption.map(JournalKeyring.init)
            let report: Restore.Report
            do {
                report = try Restore.run(
                    from: source.target, to: URL(fileURLWithPath: path), at: restoreTarget, encryption: encryption)
            } catch let error as ReplicationError {
                throw ToolFailure(
                    .failure, "cannot restore from stream \(source.stream): \(error.message); nothing was written")
            } catch let error as JournalError {
                if let problem = streamKeyProblem(
                    error, doing: "restore", stream: source.stream, keysGiven: keyring != nil)
                {
                    throw problem
                }
                throw error
            } catch let error as StoreError {
                if let journal = error.journalError,
                    let problem = streamKeyProblem(
                        journal, doing: "restore", stream: source.stream, keysGiven: keyring != nil)
                {
                    throw problem
                }
                throw error
            }
            var out = StandardOutput()
            let base =
                report.baseCovers == 0
                ? "no base (log replayed from its start)" : "base covers record \(report.baseCovers)"
            out.text(
                "restored \(path) from stream \(source.stream): \(base), \(report.recordsApplied) records applied, last sequence \(report.lastSequence), \(String(format: "%.2f", report.seconds)) s\n"
            )
            try out.flush()
            if let keyring {
                // The records came as they were sealed: check the keys open every one of them.
                let check = try Journal.inspect(directory: path, keyring: keyring)
                out.text(
                    "keys checked: every sealed record opens (\(check.keyIDs.isEmpty ? "none is sealed" : "keys " + check.keyIDs.joined(separator: ", ")))\n"
                )
                try out.flush()
            }
            if let toSequence, report.lastSequence < toSequence {
                printError(
                    "graph-journal: note: the stream holds records only up to \(report.lastSequence), before the requested --to-seq \(toSequence)"
                )
            }
        }
    }
}

/// An ISO 8601 time with a zone (`Z` or `±hh:mm`), with or without fractional seconds; nil
/// otherwise.
func parseTime(_ text: String) -> Date? {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime]
    if let date = formatter.date(from: text) { return date }
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.date(from: text)
}
