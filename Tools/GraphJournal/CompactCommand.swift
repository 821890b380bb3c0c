import ArgumentParser
import Foundation
import GraphJournal
import GraphJournalProgress
import ObjectGraph
import Synchronization

/// `graph-journal compact DIR`: rewrites the live objects as a new base.
struct Compact: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Writes the live objects as a new base segment and switches the store to it atomically.",
        discussion: """
            The store is replayed with the schema its journal records, its live objects (and \
            the links of its many-to-many and ordered relationships, every list in its order) \
            are written to a new base segment (temporary file, fsync, rename), and MANIFEST is \
            replaced atomically; only then are the old segments removed. A crash at any moment \
            leaves a store that opens with nothing lost. compact refuses while another process \
            holds the store's write lock, and on a damaged journal (run repair first). It ends \
            with a one-line summary.

            When standard error is a terminal and compaction takes longer than half a second, \
            it shows its progress there: a bar of the bytes of the journal checked (out of its \
            segments' size on disk) and the rate, then of the bytes replayed, then of the live \
            objects written to the new base; the line is erased before the summary. \
            --no-progress turns it off.

            An encrypted store needs its keys (--key-file or --key-env): the new base is sealed \
            with the current key, the first of the key file. This is how keys are rotated: put \
            the new key first and keep the old one after it, compact, and the store then needs \
            only the new key (stats lists the keys the live records name). --encrypt encrypts a \
            plain store: its records are read as they are and the new base is sealed (the key \
            options are then required); afterwards the store opens only with the key.

            \(ToolExit.helpText)
            """
    )

    @OptionGroup var store: StoreDirectory

    @OptionGroup var keys: KeyOptions

    @Flag(
        help:
            "Encrypt a plain store: read the records written without encryption and seal the new base with the current key (needs --key-file or --key-env)."
    )
    var encrypt = false

    func validate() throws {
        if encrypt && !keys.given {
            throw ValidationError("--encrypt needs the key to seal with: give --key-file or --key-env.")
        }
    }

    @OptionGroup var progressOptions: ProgressOptions

    func run() throws {
        try runReporting {
            let directory = store.path
            try requireWriteLock(directory: directory)
            let encryption = try keys.encryption(plaintextRecords: encrypt ? .accept : .refuse)
            let keyring = encryption.map(JournalKeyring.init)
            var check = JournalProgress(directory: directory, label: "compacting: checking", options: progressOptions)
            let progress = check?.bar
            defer { progress?.finish() }
            // The walk of Journal.inspect, which checks every record, with the bar advanced.
            let report = try Journal.readPayloads(directory: directory, keyring: keyring) { entry, _ in
                check?.passed(entry)
            }
            if report.sealedRecordsNotOpened > 0 {
                throw ToolFailure(
                    .failure,
                    "\(directory) is encrypted (records sealed with key \(report.keyIDs.joined(separator: ", "))): give the keys with --key-file or --key-env; nothing was changed"
                )
            }
            switch report.verdict {
            case .clean: break
            case .tornTailOnly:
                throw ToolFailure(
                    .tornTail,
                    "\(directory) ends in a torn tail; run `graph-journal repair` first (it saves the bytes aside); nothing was changed"
                )
            case .corrupt:
                throw ToolFailure(
                    .corrupt,
                    "\(directory) is corrupt; run `graph-journal verify` and `graph-journal repair` first; nothing was changed"
                )
            }
            let before = report.files.reduce(Int64(0)) {
                $0 + (segmentSizes(directory: directory, files: report.files)[$1] ?? 0)
            }
            let start = ContinuousClock.now
            // The library reports the replay in bytes of the journal and the writing of the new
            // base in objects; the bar shows each phase's done out of its total.
            progress?.phase(
                "compacting: replaying \(ProgressBar.grouped(Int64(report.entries.count))) records (\(ProgressBar.shortBytes(before)))",
                total: before)
            var options = StoreOptions(durability: .always)
            options.autoCompactionRatio = nil
            options.progress = progress?.handler()
            options.journal.encryption = encryption
            let opened: ObjectStore
            do throws(StoreError) {
                opened = try ObjectStore.openDynamic(at: URL(fileURLWithPath: directory), options: options)
            } catch {
                progress?.finish()
                if error.journalError?.code == .locked { throw ToolFailure(.locked, lockedMessage(directory)) }
                if let journalError = error.journalError,
                    journalError.isKeyProblem || journalError.code == .notEncrypted
                {
                    throw ToolFailure(.failure, describe(journalError))
                }
                throw ToolFailure(.failure, "cannot open \(directory): \(error); nothing was changed")
            }
            // The compaction's reports also say how many live objects it writes.
            let written = LiveObjects()
            let bar = progress?.handler()
            progress?.phase("compacting: writing live objects", total: nil, unit: .items("objects"))
            do {
                try opened.compact { report in
                    written.count.withLock { $0 = report.total ?? 0 }
                    bar?(report)
                }
                try opened.close()
            } catch {
                progress?.finish()
                try? opened.close()
                throw ToolFailure(.failure, "compaction failed, the store is unchanged: \(error)")
            }
            progress?.finish()
            let objects = written.count.withLock { $0 }
            let after = opened.stats.bytesOnDisk
            let elapsed = (ContinuousClock.now - start).components
            let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
            let change = before > 0 ? Double(after - before) / Double(before) * 100 : 0
            var out = StandardOutput()
            out.text(
                "compacted \(directory): \(before) -> \(after) bytes (\(String(format: "%+.1f", change)) %), \(objects) live objects\(encryption.map { ", sealed with key \($0.currentKeyID)" } ?? ""), \(String(format: "%.2f", seconds)) s\n"
            )
            try out.flush()
        }
    }
}

/// The live objects a compaction writes, as its progress reports say.
private final class LiveObjects: Sendable {
    let count = Mutex(0)
}
