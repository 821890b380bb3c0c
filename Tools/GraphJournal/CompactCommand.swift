import ArgumentParser
import Foundation
import GraphJournal
import ObjectGraph
import Synchronization

/// `graph-journal compact DIR`: rewrites the live objects as a new base.
struct Compact: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Writes the live objects as a new base segment and switches the store to it atomically.",
        discussion: """
            The store is replayed with the schema its journal records, its live objects are \
            written to a new base segment (temporary file, fsync, rename), and MANIFEST is \
            replaced atomically; only then are the old segments removed. A crash at any moment \
            leaves a store that opens with nothing lost. compact refuses while another process \
            holds the store's write lock, and on a damaged journal (run repair first). On a \
            terminal it shows progress on standard error; it always ends with a one-line summary.

            \(ToolExit.helpText)
            """
    )

    @OptionGroup var store: StoreDirectory

    func run() throws {
        try runReporting {
            let directory = store.path
            try requireWriteLock(directory: directory)
            let report = try Journal.inspect(directory: directory)
            switch report.verdict {
            case .clean: break
            case .tornTailOnly:
                throw ToolFailure(.tornTail, "\(directory) ends in a torn tail; run `graph-journal repair` first (it saves the bytes aside); nothing was changed")
            case .corrupt:
                throw ToolFailure(.corrupt, "\(directory) is corrupt; run `graph-journal verify` and `graph-journal repair` first; nothing was changed")
            }
            let before = report.files.reduce(Int64(0)) { $0 + (segmentSizes(directory: directory, files: report.files)[$1] ?? 0) }
            let progress = Progress(enabled: isTerminal(2), label: "compacting \(directory)")
            let start = ContinuousClock.now
            progress.phase("replaying \(report.entries.count) records (\(formatBytes(before)))")
            var options = StoreOptions(durability: .always)
            options.autoCompactionRatio = nil
            let opened: ObjectStore
            do throws(StoreError) {
                opened = try ObjectStore.openDynamic(at: URL(fileURLWithPath: directory), options: options)
            } catch {
                progress.finish()
                if error.journalError?.code == .locked { throw ToolFailure(.locked, lockedMessage(directory)) }
                throw ToolFailure(.failure, "cannot open \(directory): \(error); nothing was changed")
            }
            var objects = 0
            for entity in opened.context.schema.entities {
                objects += (try? opened.context.objects(ofEntityNamed: entity.name).count) ?? 0
            }
            progress.phase("writing \(objects) live objects")
            do {
                try opened.compact()
                try opened.close()
            } catch {
                progress.finish()
                try? opened.close()
                throw ToolFailure(.failure, "compaction failed, the store is unchanged: \(error)")
            }
            progress.finish()
            let after = opened.stats.bytesOnDisk
            let elapsed = (ContinuousClock.now - start).components
            let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
            let change = before > 0 ? Double(after - before) / Double(before) * 100 : 0
            var out = StandardOutput()
            out.text("compacted \(directory): \(before) -> \(after) bytes (\(String(format: "%+.1f", change)) %), \(objects) live objects, \(String(format: "%.2f", seconds)) s\n")
            try out.flush()
        }
    }
}

/// A status line on standard error, redrawn every 0.2 s with the elapsed time, when it is a
/// terminal; silent otherwise.
final class Progress: Sendable {
    private let enabled: Bool
    private let label: String
    private let state = Mutex<(phase: String, done: Bool)>(("", false))
    private let start = ContinuousClock.now

    init(enabled: Bool, label: String) {
        self.enabled = enabled
        self.label = label
        guard enabled else { return }
        let thread = Thread { [self] in
            while true {
                Thread.sleep(forTimeInterval: 0.2)
                guard self.draw() else { return }
            }
        }
        thread.start()
    }

    /// Shows a new phase.
    func phase(_ text: String) {
        state.withLock { $0.phase = text }
        _ = draw()
    }

    /// Clears the status line and stops redrawing.
    func finish() {
        guard enabled else { return }
        let wasDone = state.withLock { s in
            defer { s.done = true }
            return s.done
        }
        if !wasDone { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }

    /// Redraws the line; false once finished.
    private func draw() -> Bool {
        guard enabled else { return false }
        let (phase, done) = state.withLock { ($0.phase, $0.done) }
        if done { return false }
        let elapsed = (ContinuousClock.now - start).components.seconds
        FileHandle.standardError.write(Data("\r\u{1B}[K\(label): \(phase)… \(elapsed) s".utf8))
        return true
    }
}
