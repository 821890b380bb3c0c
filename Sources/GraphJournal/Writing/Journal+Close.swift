internal import Synchronization

extension Journal {
    /// Syncs and closes the journal and releases the lock. Later calls throw
    /// ``JournalError/Code/closed``; closing twice does nothing.
    ///
    /// - Throws: ``JournalError`` if the final `fdatasync` or a `close` fails (the descriptors
    ///   and the lock are released anyway).
    public func close() throws(JournalError) {
        defer { deliverDurable() }
        try gate.withLock { (_) throws(JournalError) in
            try state.withLock { (s) throws(JournalError) in
                guard !s.closed else { return }
                s.closed = true
                var failure: JournalError?
                if s.broken == nil {
                    do throws(JournalError) {
                        try fs.fdatasync(s.activeFD, path(s.files[s.files.count - 1].name))
                        s.durableBefore = s.tail.nextSequence
                    } catch { failure = error }
                }
                for fd in s.retiredFDs + [s.activeFD] {
                    do throws(JournalError) { try fs.close(fd, nil) } catch { failure = failure ?? error }
                }
                s.retiredFDs = []
                fs.closeQuietly(s.lockFD)
                if let failure { throw failure }
            }
        }
    }
}
