public import Foundation

extension Journal {

    /// Opens (creating if needed) the journal in `directory` for appending.
    ///
    /// Creates the directory (mode 0700) if it is missing, takes the exclusive lock (waiting up to
    /// about 240 ms for a lock held only for a moment), reads
    /// `MANIFEST` and checks every record of every live segment. A torn last record is a
    /// normal end: it is reported in ``openReport`` and truncated before the first append.
    /// Damage followed by valid data is corruption: `open` throws unless
    /// `options.recovery` is ``JournalOptions/Recovery/pointInTime``.
    ///
    /// ```swift
    /// let journal = try Journal.open(directory: "/var/lib/app/store",
    ///                                options: JournalOptions(durability: .always))
    /// ```
    ///
    /// - Parameter directory: the journal's directory.
    /// - Parameter options: durability, recovery, segment size, I/O layer and log sink.
    /// - Returns: the open journal.
    /// - Throws: ``JournalError`` with code ``JournalError/Code/locked`` (another writer),
    ///   ``JournalError/Code/corrupt`` (file and byte offset of the damage),
    ///   ``JournalError/Code/badHeader``, ``JournalError/Code/unsupportedVersion`` or
    ///   ``JournalError/Code/io(errno:operation:)``.
    public static func open(
        directory: String, options: JournalOptions = JournalOptions()
    ) throws(JournalError) -> Journal {
        var stopped = false
        return try open(
            directory: directory, options: options, keyring: options.encryption.map(JournalKeyring.init),
            stopped: &stopped, sink: nil)
    }

    /// Opens the journal as ``open(directory:options:)-(String,_)`` does and replays it in the
    /// same pass: each record the open keeps is lent to `body` as ``forEachPayload(progress:_:)``
    /// lends it, as soon as its segment is checked, from the bytes the check read. Each byte
    /// of the journal is read once.
    ///
    /// Damage found after records were lent fails the open as it would without `body`
    /// (``JournalOptions/Recovery/strict``): what `body` built from them must then be
    /// discarded. With ``JournalOptions/Recovery/pointInTime`` the records before the damage
    /// are lent, and kept. A torn tail's records before it are lent.
    ///
    /// - Parameter progress: called with the bytes of the journal's live segments (as far as
    ///   they are known) before the first record, then after each record, as
    ///   ``forEachPayload(progress:_:)`` calls it.
    /// - Parameter body: called once per record with its sequence, kind and payload.
    /// - Throws: ``JournalError`` as ``open(directory:options:)-(String,_)``, or
    ///   ``ReplayFailure`` with what `body` or `progress` threw, or a payload's error (as
    ///   ``forEachPayload(progress:_:)`` throws it); when `body` or `progress` throws, the
    ///   open stops replaying, checks the rest of the journal (its damage is thrown first,
    ///   as without `body`), and leaves the directory as it found it.
    package static func open(
        directory: String, options: JournalOptions,
        progress: (_ bytesDone: Int64, _ bytesTotal: Int64) throws -> Void,
        replay body: (_ sequence: UInt64, _ kind: JournalRecord.Kind, _ payload: JournalPayload) throws -> Void
    ) throws -> Journal {
        let keyring = options.encryption.map(JournalKeyring.init)
        let lender = PayloadLender(keyring: keyring)
        var failure: (any Error)?
        var begun = false
        var stopped = false
        return try withoutActuallyEscaping(progress) { progress in
            try withoutActuallyEscaping(body) { body in
                do {
                    return try open(directory: directory, options: options, keyring: keyring, stopped: &stopped) {
                        record, bytes, path, bytesBefore, bytesTotal, payload in
                        do {
                            if !begun {
                                begun = true
                                try progress(0, bytesTotal)
                            }
                            guard try lender.lend(record, in: bytes, path: path, payload: payload, to: body) else {
                                return true
                            }
                            try progress(bytesBefore + Int64(record.end), bytesTotal)
                            return true
                        } catch {
                            failure = error
                            return false
                        }
                    }
                } catch {
                    // An error of the replay, unless damage the check found after it comes first.
                    if let failure, stopped {
                        throw ReplayFailure(error: failure)
                    }
                    throw error
                }
            }
        }
    }

    /// What the replay of ``open(directory:options:progress:replay:)`` threw: the open
    /// stopped, and changed nothing.
    package struct ReplayFailure: Error {
        /// What `body` or `progress` threw, or a payload's ``JournalError``.
        package var error: any Error
    }

    /// The open, with a sink for the records it keeps.
    ///
    /// `stopped` is set when the open threw because the sink asked it to stop (and found no
    /// damage it would report first).
    private static func open(
        directory: String, options: JournalOptions, keyring: JournalKeyring?, stopped: inout Bool,
        sink: JournalOpener.Sink?
    ) throws(JournalError) -> Journal {
        let fs = FileSystem(io: options.io)
        _ = try fs.makeDirectory(directory)
        let lockPath = directory + "/" + JournalFormat.lockFileName
        let lockFD = try fs.open(lockPath, .createOrOpen)
        do throws(JournalError) {
            // A lock can be held for a moment by a process being spawned (a fork's copy of a
            // descriptor lives until exec closes it), so a conflict is retried briefly before it
            // is reported.
            var attempts = 0
            while try !fs.lock(lockFD, lockPath) {
                attempts += 1
                guard attempts < Self.lockAttempts else {
                    throw JournalError(.locked, "another journal has \(directory) open for writing", file: lockPath)
                }
                usleep(20_000)
            }
            var opener = JournalOpener(fs: fs, directory: directory, options: options, keyring: keyring, sink: sink)
            var state: WriterState
            do throws(JournalError) {
                state = try opener.run()
            } catch {
                stopped = opener.stopped
                throw error
            }
            state.lockFD = lockFD
            let journal = Journal(
                directory: directory, options: options, report: opener.report, state: state, keyring: keyring)
            if case .batched(let milliseconds) = options.durability {
                startFlusher(for: journal, milliseconds: milliseconds)
            }
            return journal
        } catch {
            fs.closeQuietly(lockFD)
            throw error
        }
    }

    /// Opens the journal at a file URL; see ``open(directory:options:)-(String,_)``.
    ///
    /// - Parameter directory: a file URL of the journal's directory.
    /// - Parameter options: durability, recovery, segment size, I/O layer and log sink.
    /// - Returns: the open journal.
    /// - Throws: ``JournalError``, as the `String` variant.
    public static func open(directory: URL, options: JournalOptions = JournalOptions()) throws(JournalError) -> Journal
    {
        try open(directory: directory.path, options: options)
    }
}
