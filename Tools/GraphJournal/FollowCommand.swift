import ArgumentParser
import Foundation
import Glibc
import GraphJournal
import GraphJournalProgress
import ObjectGraph
import ObjectGraphReplication
import Synchronization

/// `graph-journal follow --servers URLS --stream NAME DIR`: a read-only replica kept up to date
/// from a shipping store's stream, without the application's code.
struct FollowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "follow",
        abstract:
            "Follows the JetStream stream a store ships to into a read-only replica, until interrupted or --until-seq is applied.",
        discussion: """
            A new replica (DIR missing or empty) starts from the stream's newest base, or from \
            the start of the log when the stream holds no base; an existing one resumes after \
            the last record it applied. The schema comes from the stream, or from the replica's \
            own journal: no application code is needed, and the replica opens with the \
            application as any store does (read-only while a follower has it).

            Every --status-interval seconds a status line goes to standard error: the writer's \
            record applied last and the stream message that carried it, the lag in stream \
            messages, the records applied since the start, and the servers' last error while \
            they are away. When standard error is a terminal the line is redrawn in place. \
            SIGINT (Ctrl-C) or SIGTERM stops the follower cleanly, as does --until-seq N once \
            record N is applied; either way it ends with a one-line summary on standard output \
            and exit code 0. A follower that cannot go on (a record that does not apply, records \
            missing from the stream) exits 1 with the reason.

            With --standby, the replica is a standby: once the writer's lease on the stream \
            lapses (or its writer closed and released it), it takes the lease as --holder, \
            applies everything the stream holds, renumbers its journal after the stream's \
            records, ships its first base under a new epoch, prints the epoch and exits 0. The \
            lease stays held for its time to live: open DIR as the writer with a lease of the \
            same holder name within it, and the application takes the stream over from there.

            An encrypted writer's records ship sealed: give the replica the same keys with \
            --key-file or --key-env. The replica's journal is opened with them (and a standby, \
            once promoted, seals with the current one). Without them, or with another key, \
            follow fails (exit 1) naming the key the stream needs.

            \(ToolExit.helpText)
            """
    )

    @OptionGroup var source: StreamSourceOptions

    @OptionGroup var keys: KeyOptions

    @Argument(help: "The replica's directory (created when missing).", completion: .directory)
    var directory: String

    @Option(
        name: .customLong("until-seq"),
        help: ArgumentHelp("Stop once the writer's record of this sequence is applied.", valueName: "n"))
    var untilSequence: UInt64?

    @Option(
        name: .customLong("status-interval"), help: ArgumentHelp("Seconds between two status lines.", valueName: "s"))
    var statusInterval: Double = 5

    @Flag(help: "Take the stream over when the writer's lease lapses, then exit (see above).")
    var standby = false

    @Option(help: ArgumentHelp("With --standby: the lease holder to take the stream as.", valueName: "name"))
    var holder: String = WriterLease.defaultHolder

    @Option(
        name: .customLong("lease-ttl"),
        help: ArgumentHelp(
            "With --standby: the lease's time to live in seconds, when this creates the lease bucket.",
            valueName: "s"))
    var leaseTTL: Double = 3

    func validate() throws {
        guard statusInterval.isFinite, statusInterval > 0 else {
            throw ValidationError("--status-interval must be a positive number of seconds")
        }
        guard leaseTTL.isFinite, leaseTTL >= 0.1 else {
            throw ValidationError("--lease-ttl must be at least 0.1 seconds")
        }
    }

    func run() throws {
        var path = directory
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        var target = source.target
        if standby { target.lease = WriterLease(holder: holder, ttl: .milliseconds(Int64(leaseTTL * 1000))) }
        try runReporting {
            let run = FollowRun(
                target: target, label: source.label, directory: path, untilSequence: untilSequence,
                interval: .milliseconds(Int64(statusInterval * 1000)), encryption: try keys.encryption())
            StopSignal.install()
            try waitFor { try await (standby ? run.runStandby() : run.run()) }
        }
    }
}

/// What `follow` does once its arguments are read.
private struct FollowRun: Sendable {
    let target: ReplicationTarget
    let label: String
    let directory: String
    let untilSequence: UInt64?
    let interval: Duration
    /// The keys of an encrypted writer's records, or nil.
    let encryption: JournalEncryption?

    /// The replica's store options while following: the follower's defaults, with the keys.
    var options: StoreOptions {
        var options = Follower.defaultOptions
        options.journal.encryption = encryption
        return options
    }

    /// The store options of a standby once promoted: the writer's defaults, with the keys.
    var writerOptions: StoreOptions {
        var options = StoreOptions()
        options.journal.encryption = encryption
        return options
    }

    func run() async throws {
        let start = ContinuousClock.now
        let follower: Follower
        do {
            follower = try await Follower.start(at: URL(fileURLWithPath: directory), source: target, options: options)
        } catch let error as ReplicationError {
            throw ToolFailure(.failure, "cannot follow stream \(target.stream): \(error.message)")
        } catch let error as JournalError {
            if let problem = streamKeyProblem(
                error, doing: "follow", stream: target.stream, keysGiven: encryption != nil)
            {
                throw problem
            }
            throw error
        } catch let error as StoreError {
            if let journal = error.journalError,
                let problem = streamKeyProblem(
                    journal, doing: "follow", stream: target.stream, keysGiven: encryption != nil)
            {
                throw problem
            }
            throw error
        }
        let first = follower.status
        var out = StandardOutput()
        out.text(
            "following \(label) into \(directory) from record \(first.appliedSequence) (stream message \(first.streamSequence))\n"
        )
        try out.flush()
        let line = StatusLine()
        var lastShown = ContinuousClock.now
        let ending: String
        while true {
            let status = follower.status
            if let failed = status.failed {
                try? await follower.stop()
                line.finish()
                throw ToolFailure(
                    .failure, "the follower of \(label) stopped at record \(status.appliedSequence): \(failed)")
            }
            if let untilSequence, status.appliedSequence >= untilSequence {
                ending = "reached --until-seq \(untilSequence)"
                break
            }
            if let name = StopSignal.received {
                ending = "stopped by \(name)"
                break
            }
            if ContinuousClock.now - lastShown >= interval {
                line.show(Self.describe(status, stream: target.stream))
                lastShown = ContinuousClock.now
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        let status = follower.status
        do {
            try await follower.stop()
        } catch {
            line.finish()
            throw ToolFailure(.failure, "stopping the follower of \(label): \(error)")
        }
        line.finish()
        let elapsed = (ContinuousClock.now - start).components
        let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
        out.text(
            "followed \(label) into \(directory): applied record \(status.appliedSequence) (stream message \(status.streamSequence)), \(status.recordsApplied) records applied, \(String(format: "%.2f", seconds)) s; \(ending)\n"
        )
        try out.flush()
    }

    /// `follow --standby`: follows until the lease lapses, takes the stream over, and exits with
    /// the lease held.
    func runStandby() async throws {
        let standby: Standby
        do {
            standby = try await Standby.start(
                at: URL(fileURLWithPath: directory), schema: nil, source: target, options: options,
                writerOptions: writerOptions)
        } catch let error as ReplicationError {
            throw ToolFailure(.failure, "cannot stand by for stream \(target.stream): \(error.message)")
        } catch let error as JournalError {
            if let problem = streamKeyProblem(
                error, doing: "a standby", stream: target.stream, keysGiven: encryption != nil)
            {
                throw problem
            }
            throw error
        } catch let error as StoreError {
            if let journal = error.journalError,
                let problem = streamKeyProblem(
                    journal, doing: "a standby", stream: target.stream, keysGiven: encryption != nil)
            {
                throw problem
            }
            throw error
        }
        var out = StandardOutput()
        let holder = target.lease?.holder ?? ""
        out.text("standing by for \(label) in \(directory) as \(holder)\n")
        try out.flush()
        let line = StatusLine()
        var lastShown = ContinuousClock.now
        while true {
            let status = standby.status
            if case .promoted(let epoch) = status.phase {
                let writer = try await standby.promoted()
                let sequence = writer.store.stats.lastSequence
                // The lease is left held, to lapse unless the application takes it over as the
                // same holder.
                writer.shipper.stop()
                try writer.store.close()
                line.finish()
                out.text(
                    "promoted: \(directory) is the writer of stream \(target.stream) at epoch \(epoch) (its journal ends at record \(sequence)); the lease is held as \(holder) for its time to live: open it as the writer with that holder name\n"
                )
                try out.flush()
                return
            }
            if case .stopped = status.phase {
                line.finish()
                throw ToolFailure(.failure, "the standby of \(label) stopped: \(status.lastError ?? "no reason given")")
            }
            if let name = StopSignal.received {
                try? await standby.stop()
                line.finish()
                out.text("stopped standing by for \(label) (\(name))\n")
                try out.flush()
                return
            }
            if ContinuousClock.now - lastShown >= interval, let follower = standby.follower {
                line.show("standby: " + Self.describe(follower.status, stream: target.stream))
                lastShown = ContinuousClock.now
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// `follow PKGD: applied record 57 (stream message 60), lag 0 messages, 12 records applied`.
    static func describe(_ status: Follower.Status, stream: String) -> String {
        var text =
            "follow \(stream): applied record \(status.appliedSequence) (stream message \(status.streamSequence)), lag \(status.lagMessages) messages, \(status.recordsApplied) records applied"
        if let error = status.lastError { text += "; servers: \(error)" }
        return text
    }
}

/// The status line on standard error: redrawn in place on a terminal (a carriage return, the
/// line cut to the terminal's width, "erase to the end of the line"), one line each time
/// otherwise.
private final class StatusLine: Sendable {
    private let inPlace = isTerminal(STDERR_FILENO) && ProcessInfo.processInfo.environment["TERM"] != "dumb"
    private let visible = Mutex(false)

    func show(_ text: String) {
        if inPlace {
            var size = winsize()
            let width = ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0 && size.ws_col > 0 ? Int(size.ws_col) : 80
            write("\r" + String(text.prefix(max(width - 1, 1))) + "\u{1B}[K")
            visible.withLock { $0 = true }
        } else {
            write(text + "\n")
        }
    }

    /// Erases the line, if one is drawn in place.
    func finish() {
        if visible.withLock({ v in
            defer { v = false }; return v
        }) {
            write("\r\u{1B}[K")
        }
    }

    private func write(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }
}

/// SIGINT and SIGTERM, turned into a flag the follow loop polls.
private enum StopSignal {
    /// The signal received, 0 before any.
    static let number = Atomic<Int32>(0)

    /// Installs the handler and unblocks both signals on the calling thread (the main one,
    /// before the follower starts its threads): a process started by one whose thread blocks
    /// them, as Foundation's `Process` may be, inherits that mask and would never see them.
    static func install() {
        var unblock = sigset_t()
        sigemptyset(&unblock)
        for signal in [SIGINT, SIGTERM] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { number in StopSignal.number.store(number, ordering: .relaxed) }
            sigemptyset(&action.sa_mask)
            sigaction(signal, &action, nil)
            sigaddset(&unblock, signal)
        }
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
    }

    /// `SIGINT` or `SIGTERM` once one was received.
    static var received: String? {
        switch number.load(ordering: .relaxed) {
        case SIGINT: "SIGINT"
        case SIGTERM: "SIGTERM"
        default: nil
        }
    }
}

/// Runs `work` on the concurrency pool and blocks the calling thread until it ends: the
/// commands are synchronous, the follower's API is async.
private func waitFor<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) throws -> T {
    let result = Outcome<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        let outcome: Result<T, any Error>
        do { outcome = .success(try await work()) } catch { outcome = .failure(error) }
        result.value.withLock { $0 = outcome }
        done.signal()
    }
    done.wait()
    return try result.value.withLock { $0! }.get()
}

/// The result ``waitFor(_:)`` hands from the task to the waiting thread.
private final class Outcome<T: Sendable>: Sendable {
    let value = Mutex<Result<T, any Error>?>(nil)
}
