import ArgumentParser
import Foundation
import GraphJournal
import GraphJournalProgress

/// `graph-journal repair DIR`: cuts a torn tail, or with `--keep-prefix` the bytes from a
/// corruption on; what it cuts is saved beside the segment, never deleted.
struct Repair: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Cuts a torn tail, or with --keep-prefix everything from the first corruption on, saving the cut bytes beside the store.",
        discussion: """
            A torn tail (a last record the writer did not finish) is cut: the bytes are first \
            copied to <segment>.dropped-<UTC time> in the store directory and synced, then the \
            segment is truncated. Corruption (damage with valid records after it) is only cut \
            with --keep-prefix: the records before the damage are kept and the rest of that \
            segment and every later segment is saved aside by the journal's point-in-time \
            recovery. Before acting, repair says what it will cut and how many transactions the \
            cut bytes hold, and asks for confirmation on the terminal; without a terminal it \
            refuses unless --yes is given. It takes the store's write lock, so it refuses while \
            another process has the store open.

            An encrypted store needs its key (--key-file or --key-env): repair opens the \
            journal to cut it, and the open checks every sealed record's key first. Nothing is \
            re-sealed: the records kept are the bytes they were.

            \(ToolExit.helpText)
            """
    )

    @OptionGroup var store: StoreDirectory

    @OptionGroup var keys: KeyOptions

    @Flag(
        name: .customLong("keep-prefix"),
        help: "On corruption, keep the valid records before the damage and save the rest aside.")
    var keepPrefix = false

    @Flag(name: [.customShort("y"), .customLong("yes")], help: "Act without asking for confirmation.")
    var yes = false

    func run() throws {
        try runReporting {
            let directory = store.path
            try requireWriteLock(directory: directory)
            // The same examination as `verify`, payloads included: repair acts on its verdict.
            let result = try VerifyResult.examine(directory: directory, keyring: try keys.keyring())
            let report = result.report
            if report.sealedRecordsNotOpened > 0 {
                throw ToolFailure(
                    .failure,
                    "\(directory) is encrypted (records sealed with key \(report.keyIDs.joined(separator: ", "))): repair opens the journal to cut it, give the key with --key-file or --key-env; nothing was changed"
                )
            }
            var out = StandardOutput()
            switch result.verdict {
            case .clean where report.problems.contains(where: { $0.kind == .unlistedSegment }):
                try adoptUnlisted(directory: directory, report: report, out: &out)
            case .clean:
                out.text("\(directory) is clean: nothing to repair\n")
                try out.flush()
            case .tornTailOnly:
                try repairTornTail(directory: directory, report: report, out: &out)
            case .corrupt:
                try repairCorruption(directory: directory, result: result, out: &out)
            }
        }
    }

    /// Describes records found in bytes about to be cut: "2 transaction records, 1 schema record".
    private func describe(_ entries: [JournalReport.Entry]) -> String {
        let transactions = entries.filter { $0.kind == .transaction }.count
        let others = entries.count - transactions
        var text = "\(transactions) transaction\(transactions == 1 ? "" : "s")"
        if others > 0 { text += " and \(others) other record\(others == 1 ? "" : "s")" }
        return text
    }

    private func repairTornTail(directory: String, report: JournalReport, out: inout StandardOutput) throws {
        guard let torn = report.problems.first(where: { $0.kind == .tornTail }), let offset = torn.offset else {
            return
        }
        let path = directory + "/" + torn.file
        let held = try Journal.salvageableRecords(inSegment: path, from: offset)
        out.text("torn tail: \(torn.bytes ?? 0) bytes at byte \(offset) of \(torn.file) (\(torn.message))\n")
        out.text(
            "the cut bytes hold \(describe(held)) that pass their checksum (a torn tail holds none: the writer died before finishing it)\n"
        )
        out.text(
            "repair will copy them to \(torn.file)\(droppedInfix)<time> and truncate \(torn.file) to \(offset) bytes\n")
        try out.flush()
        try confirm()

        let journal = try openForRepair(directory: directory, recovery: .tolerateTornTail)
        defer { try? journal.close() }
        guard let found = journal.openReport.tornTail, found.offset == offset else {
            throw ToolFailure(
                .failure,
                "the store changed since it was inspected (no torn tail at byte \(offset) of \(torn.file) any more); nothing was changed"
            )
        }
        let saved = try saveAside(path: path, from: offset)
        try truncate(path: path, to: offset)
        try journal.close()
        out.text("saved \(torn.bytes ?? 0) bytes to \(saved.split(separator: "/").last.map(String.init) ?? saved)\n")
        out.text("truncated \(torn.file) to \(offset) bytes; the store is clean\n")
        for removed in journal.openReport.removedFiles {
            out.text("removed leftover file \(removed.split(separator: "/").last.map(String.init) ?? removed)\n")
        }
        try out.flush()
    }

    /// Adds unlisted segments that continue the sequence to MANIFEST, as the next open would.
    private func adoptUnlisted(directory: String, report: JournalReport, out: inout StandardOutput) throws {
        let unlisted = report.problems.filter { $0.kind == .unlistedSegment }.map(\.file)
        out.text(
            "\(unlisted.joined(separator: ", ")) \(unlisted.count == 1 ? "is" : "are") not listed in MANIFEST but continue\(unlisted.count == 1 ? "s" : "") the sequence\n"
        )
        out.text("repair will add \(unlisted.count == 1 ? "it" : "them") to MANIFEST, keeping every record\n")
        try out.flush()
        try confirm()
        let journal = try openForRepair(directory: directory, recovery: .tolerateTornTail)
        let adopted = journal.openReport.adoptedFiles
        try journal.close()
        for file in adopted {
            out.text("added \(file.split(separator: "/").last.map(String.init) ?? file) to MANIFEST\n")
        }
        out.text("the store is clean\n")
        try out.flush()
    }

    private func repairCorruption(directory: String, result: VerifyResult, out: inout StandardOutput) throws {
        let report = result.report
        // The first damage in the live order: a journal problem, or a record that checks but
        // does not decode, whichever comes first.
        let order = { (file: String, offset: Int64?) in (report.files.firstIndex(of: file) ?? Int.max, offset ?? 0) }
        let journalDamage = report.problems.first { $0.kind == .corruption }
        let payloadDamage = result.problems.filter { $0.kind == "payload" }.min {
            order($0.file, $0.offset) < order($1.file, $1.offset)
        }
        let damage: (file: String, offset: Int64?, message: String)
        if let payloadDamage,
            journalDamage.map({ order(payloadDamage.file, payloadDamage.offset) < order($0.file, $0.offset) }) ?? true
        {
            damage = (
                payloadDamage.file, payloadDamage.offset,
                "record \(payloadDamage.sequence ?? 0) does not decode: \(payloadDamage.message)"
            )
        } else if let journalDamage {
            damage = (journalDamage.file, journalDamage.offset, journalDamage.message)
        } else {
            return
        }
        let at = damage.offset.map { " at byte \($0)" } ?? ""
        out.text("corruption in \(damage.file)\(at): \(damage.message)\n")
        // What point-in-time recovery drops: the damaged file from the damage on, and every later file.
        var dropped: [JournalReport.Entry] = []
        var bytes: Int64 = 0
        let sizes = segmentSizes(directory: directory, files: report.files)
        if let index = report.files.firstIndex(of: damage.file) {
            for (i, file) in report.files.enumerated() where i >= index {
                let from = i == index ? (damage.offset ?? 0) : 0
                let fromRecord = from < 48 ? 0 : from
                dropped += (try? Journal.salvageableRecords(inSegment: directory + "/" + file, from: fromRecord)) ?? []
                bytes += max(0, (sizes[file] ?? 0) - fromRecord)
            }
        }
        let kept = report.entries.filter { entry in
            guard let index = report.files.firstIndex(of: damage.file),
                let fileIndex = report.files.firstIndex(of: entry.file)
            else { return true }
            return fileIndex < index || (fileIndex == index && entry.offset < (damage.offset ?? 0))
        }
        out.text(
            "keeping the valid prefix keeps \(kept.count) record\(kept.count == 1 ? "" : "s") (through sequence \(kept.last?.sequence ?? 0)) and cuts \(bytes) bytes holding \(describe(dropped)) that pass their checksum\n"
        )
        guard keepPrefix else {
            out.text("nothing was changed: cutting corruption loses data, so it needs --keep-prefix\n")
            try out.flush()
            throw ExitCode(ToolExit.corrupt.rawValue)
        }
        out.text("repair will save the cut bytes to <segment>\(droppedInfix)<time> files in the store directory\n")
        try out.flush()
        try confirm()

        let journal = try openForRepair(
            directory: directory, recovery: .pointInTime, unreadable: result.firstUnreadable)
        defer { try? journal.close() }
        let opened = journal.openReport
        try journal.close()
        for d in opened.dropped {
            out.text(
                "saved \(d.bytes) bytes of \(d.file.split(separator: "/").last.map(String.init) ?? d.file) from byte \(d.offset) to \(d.savedAs.split(separator: "/").last.map(String.init) ?? d.savedAs)\n"
            )
        }
        for missing in opened.missingFiles {
            out.text(
                "removed \(missing.split(separator: "/").last.map(String.init) ?? missing), which does not exist, from MANIFEST\n"
            )
        }
        if opened.dropped.isEmpty && opened.missingFiles.isEmpty {
            out.text(
                "the journal's recovery found nothing to drop (the damage is inside a record that passes its checksum); nothing was changed\n"
            )
            try out.flush()
            throw ExitCode(ToolExit.corrupt.rawValue)
        }
        out.text(
            "dropped \(opened.recordsDropped) record\(opened.recordsDropped == 1 ? "" : "s") that passed their checksum; the store now ends at sequence \(kept.last?.sequence ?? 0)\n"
        )
        try out.flush()
    }

    private var droppedInfix: String { ".dropped-" }

    /// Asks on the terminal unless `--yes`; throws ``ToolExit/notConfirmed`` otherwise.
    private func confirm() throws {
        if yes { return }
        guard isTerminal(0) else {
            throw ToolFailure(
                .notConfirmed,
                "refusing to change the store without --yes: standard input is not a terminal; nothing was changed")
        }
        FileHandle.standardError.write(Data("proceed? [y/N] ".utf8))
        let answer = readLine()?.trimmingCharacters(in: .whitespaces).lowercased()
        guard answer == "y" || answer == "yes" else {
            throw ToolFailure(.notConfirmed, "not confirmed; nothing was changed")
        }
    }

    private func openForRepair(
        directory: String, recovery: JournalOptions.Recovery, unreadable: JournalOptions.UnreadableRecord? = nil
    ) throws -> Journal {
        let result: Result<Journal, JournalError>
        var options = JournalOptions(durability: .always, recovery: recovery)
        options.unreadableRecord = unreadable
        options.encryption = try keys.encryption()
        do throws(JournalError) {
            result = .success(try Journal.open(directory: directory, options: options))
        } catch {
            result = .failure(error)
        }
        if case .failure(let error) = result, error.code == .locked {
            throw ToolFailure(.locked, lockedMessage(directory))
        }
        return try result.get()
    }

    /// Copies the bytes of `path` from `offset` on to a new `<path>.dropped-<time>` file, synced.
    private func saveAside(path: String, from offset: Int64) throws -> String {
        guard let data = FileManager.default.contents(atPath: path), Int64(data.count) >= offset else {
            throw ToolFailure(.failure, "cannot read \(path); nothing was changed")
        }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        let stem = path + droppedInfix + formatter.string(from: Date())
        var saved = stem
        var suffix = 2
        while FileManager.default.fileExists(atPath: saved) { saved = stem + "-\(suffix)"; suffix += 1 }
        let fd = open(saved, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw ToolFailure(
                .failure, "cannot create \(saved): \(String(cString: strerror(errno))); nothing was changed")
        }
        defer { close(fd) }
        let tail = data.subdata(in: Int(offset)..<data.count)
        let written = tail.withUnsafeBytes { buffer -> Bool in
            var done = 0
            while done < buffer.count {
                let n = write(fd, buffer.baseAddress! + done, buffer.count - done)
                if n < 0 { if errno == EINTR { continue }; return false }
                done += n
            }
            return true
        }
        guard written, fsync(fd) == 0 else {
            throw ToolFailure(
                .failure, "cannot write \(saved): \(String(cString: strerror(errno))); the segment was not truncated")
        }
        try syncDirectory(of: path)
        return saved
    }

    private func truncate(path: String, to length: Int64) throws {
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw ToolFailure(
                .failure,
                "cannot open \(path): \(String(cString: strerror(errno))); the cut bytes are saved, the segment was not truncated"
            )
        }
        defer { close(fd) }
        guard ftruncate(fd, off_t(length)) == 0, fsync(fd) == 0 else {
            throw ToolFailure(
                .failure, "cannot truncate \(path): \(String(cString: strerror(errno))); the cut bytes are saved")
        }
    }

    private func syncDirectory(of path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        let fd = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            throw ToolFailure(.failure, "cannot open \(directory): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        guard fsync(fd) == 0 else {
            throw ToolFailure(.failure, "cannot sync \(directory): \(String(cString: strerror(errno)))")
        }
    }
}
