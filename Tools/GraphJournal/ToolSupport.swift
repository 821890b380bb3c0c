import ArgumentParser
import Foundation
import GraphJournal

/// The exit codes of every subcommand, documented in `graph-journal --help`.
enum ToolExit: Int32 {
    /// Success; for `verify`, a clean journal.
    case success = 0
    /// The command failed: unreadable directory or MANIFEST, I/O error, unusable store.
    case failure = 1
    /// The journal ends in a torn tail (and has no other damage).
    case tornTail = 2
    /// The journal is corrupt: damage with valid data after it, or a record that does not decode.
    case corrupt = 3
    /// Another process holds the store's write lock.
    case locked = 4
    /// `repair` was not confirmed (answered no, or no terminal and no `--yes`).
    case notConfirmed = 5

    /// The text of the "exit codes" section of `--help`.
    static let helpText = """
        Exit codes:
          0   success (verify: the journal is clean)
          1   failure: unreadable directory or MANIFEST, I/O error, unusable store
          2   the journal ends in a torn tail, and has no other damage
          3   the journal is corrupt (damage followed by valid data, or a record that does not decode)
          4   another process holds the store's write lock (compact, repair)
          5   repair was not confirmed (answered no, or stdin is not a terminal and --yes was not given)
          64  bad usage
        """
}

/// A failure that ends the command with a message on standard error and an exit code.
struct ToolFailure: Error, CustomStringConvertible {
    var exit: ToolExit
    var message: String

    init(_ exit: ToolExit, _ message: String) {
        self.exit = exit
        self.message = message
    }

    var description: String { message }
}

/// The store directory argument every subcommand takes.
struct StoreDirectory: ParsableArguments {
    @Argument(help: "The store's directory (it holds MANIFEST and the segment files).", completion: .directory)
    var directory: String

    /// The directory without a trailing slash.
    var path: String {
        var path = directory
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        return path
    }
}

/// Writes a line to standard error.
func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

/// Runs a command body, turning a ``ToolFailure`` or a journal error into a message on standard
/// error and an exit code.
///
/// - Parameter jsonDirectory: for a command run with `--json`, the store directory: a failure
///   is then also written to standard output as one JSON object
///   (`{"directory":…,"verdict":"error","exitCode":1,"error":"…"}`), so that a script reading
///   the JSON sees it.
func runReporting(jsonDirectory: String? = nil, _ body: () throws -> Void) throws {
    let exit: ToolExit
    let message: String
    do {
        try body()
        return
    } catch let failure as ToolFailure {
        (exit, message) = (failure.exit, failure.message)
    } catch let error as JournalError {
        (exit, message) = (error.code == .locked ? .locked : .failure, describe(error))
    } catch let code as ExitCode {
        throw code
    } catch {
        (exit, message) = (.failure, "\(error)")
    }
    printError("graph-journal: \(message)")
    if let jsonDirectory {
        var out = StandardOutput()
        out.json.raw("{\"directory\":"); out.json.string(jsonDirectory)
        out.json.raw(",\"verdict\":\"error\",\"exitCode\":"); out.json.int(Int64(exit.rawValue))
        out.json.raw(",\"error\":"); out.json.string(message)
        out.json.raw("}\n")
        try? out.flush()
    }
    throw ExitCode(exit.rawValue)
}

/// A journal error as the tool prints it: a missing or wrong key, or a store that is not
/// encrypted, with what to do about it.
func describe(_ error: JournalError) -> String {
    switch error.code {
    case .keyUnavailable(let id):
        "\(error)\n  the store needs key \(id): give it with --key-file or --key-env; nothing was changed"
    case .wrongKey(let id):
        "\(error)\n  the key given as \(id) is not the one the store was sealed with; nothing was changed"
    case .notEncrypted:
        "\(error)\n  the store is not encrypted: `graph-journal compact --encrypt` encrypts it; nothing was changed"
    default: "\(error)"
    }
}

extension JournalReport.Problem.Kind {
    /// The problem kind as printed: `torn-tail`, `corruption`, `leftover-file`.
    var label: String {
        switch self {
        case .tornTail: "torn-tail"
        case .corruption: "corruption"
        case .leftoverFile: "leftover-file"
        case .unlistedSegment: "unlisted-segment"
        }
    }
}

extension JournalReport.Verdict {
    /// The verdict as printed: `clean`, `torn-tail`, `corrupt`.
    var label: String {
        switch self {
        case .clean: "clean"
        case .tornTailOnly: "torn-tail"
        case .corrupt: "corrupt"
        }
    }

    /// The exit code `verify` returns for it.
    var exit: ToolExit {
        switch self {
        case .clean: .success
        case .tornTailOnly: .tornTail
        case .corrupt: .corrupt
        }
    }
}

extension JournalRecord.Kind? {
    /// `schema`, `transaction`, `base`, or `skipped` for a skippable record type.
    var label: String {
        switch self {
        case .schema: "schema"
        case .transaction: "transaction"
        case .base: "base"
        case nil: "skipped"
        }
    }
}

/// `1249 bytes` or `12.3 MB (12,345,678 bytes)`.
func formatBytes(_ bytes: Int64) -> String {
    if bytes < 10_000 { return "\(bytes) bytes" }
    let units = ["kB", "MB", "GB", "TB"]
    var value = Double(bytes) / 1000
    var unit = 0
    while value >= 1000 && unit < units.count - 1 { value /= 1000; unit += 1 }
    return String(format: "%.1f %@ (%lld bytes)", value, units[unit], bytes)
}

/// Throws ``ToolExit/locked`` unless the store's write lock is free: every command that may
/// write checks it first, before it looks at the store, so that what it reports is never a
/// verdict on a store another process is changing. (The write itself takes the lock again.)
func requireWriteLock(directory: String) throws {
    guard writeLockIsFree(directory: directory) else {
        throw ToolFailure(.locked, lockedMessage(directory))
    }
}

/// The message of a command refused because another process holds the write lock.
func lockedMessage(_ directory: String) -> String {
    "another process holds the write lock on \(directory) (its LOCK file); stop it first; nothing was changed"
}

/// Whether the store's write lock is free right now (false: another process holds it). A
/// missing LOCK file means no writer ever opened the store, so it is free. The check takes the
/// lock for an instant and releases it; it does not create LOCK.
func writeLockIsFree(directory: String) -> Bool {
    let fd = open(directory + "/LOCK", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return true }
    defer { close(fd) }
    if flock(fd, LOCK_EX | LOCK_NB) != 0 { return errno != EWOULDBLOCK }
    flock(fd, LOCK_UN)
    return true
}
