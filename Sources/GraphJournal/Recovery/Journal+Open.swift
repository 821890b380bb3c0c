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
    public static func open(directory: String, options: JournalOptions = JournalOptions()) throws(JournalError) -> Journal {
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
            var opener = JournalOpener(fs: fs, directory: directory, options: options)
            var state = try opener.run()
            state.lockFD = lockFD
            let journal = Journal(directory: directory, options: options, report: opener.report, state: state)
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
    public static func open(directory: URL, options: JournalOptions = JournalOptions()) throws(JournalError) -> Journal {
        try open(directory: directory.path, options: options)
    }
}
