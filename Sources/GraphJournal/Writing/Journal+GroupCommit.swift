internal import Foundation
internal import Synchronization

extension Journal {
    /// Makes every appended record durable (`fdatasync`), whatever the durability policy.
    ///
    /// - Throws: ``JournalError`` if the `fdatasync` fails. With `.always`, unsynced records
    ///   are then truncated (none was acknowledged); with the other policies the journal
    ///   needs reopening (``JournalError/Code/needsReopen``), since acknowledged records may
    ///   have been lost.
    public func sync() throws(JournalError) {
        let ticket = try state.withLock { (s) throws(JournalError) -> Ticket in
            try s.checkUsable()
            return Ticket(
                sequence: s.tail.nextSequence - 1, end: s.tail.end, epoch: s.epoch, segment: s.activeHeader.number,
                syncDue: true)
        }
        try syncThrough(ticket)
        deliverDurable()
    }

    /// Waits until the record `ticket` describes is durable, syncing if nobody else did.
    func syncThrough(_ ticket: Ticket) throws(JournalError) {
        try syncThroughGated(ticket)
        // Returning without an error: the ticket's record and those before it are durable.
        state.withLock { s in s.durableBefore = max(s.durableBefore, ticket.sequence + 1) }
    }

    private func syncThroughGated(_ ticket: Ticket) throws(JournalError) {
        try gate.withLock { (g) throws(JournalError) in
            let snapshot = state.withLock { s in
                let retired = s.retiredFDs
                s.retiredFDs = []
                return (
                    fd: s.activeFD, header: s.activeHeader, name: s.files[s.files.count - 1].name,
                    tail: s.tail, start: s.segmentStartTail, epoch: s.epoch, broken: s.broken,
                    closed: s.closed, retired: retired
                )
            }
            // Only fdatasync runs outside `state`, always under `gate`: closing retired
            // descriptors here cannot race with it.
            for fd in snapshot.retired { fs.closeQuietly(fd) }
            if snapshot.closed { throw JournalError(.closed, "the journal is closed", file: directory) }
            for cut in g.truncations
            where cut.epoch >= ticket.epoch && cut.segment == ticket.segment && ticket.end > cut.end {
                throw JournalError(
                    .io(errno: 5, operation: "fdatasync"),
                    "record \(ticket.sequence) was discarded: the fdatasync that should have covered it failed",
                    file: path(snapshot.name))
            }
            if let broken = snapshot.broken { throw broken }
            if ticket.segment != snapshot.header.number { return }  // roll or compaction synced it
            if g.segment != snapshot.header.number {
                g.segment = snapshot.header.number
                g.synced = snapshot.start
            }
            if ticket.end <= g.synced.end { return }  // another caller's fdatasync covered it
            do throws(JournalError) {
                try fs.fdatasync(snapshot.fd, path(snapshot.name))
            } catch {
                state.withLock { s in
                    guard s.activeHeader.number == snapshot.header.number, s.epoch == snapshot.epoch else { return }
                    if case .always = options.durability {
                        // Nothing past the last good sync was acknowledged: cut it off.
                        g.truncations.append(.init(epoch: s.epoch, segment: snapshot.header.number, end: g.synced.end))
                        s.epoch += 1
                        s.tail = g.synced
                        s.undelivered.removeAll { $0.sequence >= g.synced.nextSequence }
                        s.files[s.files.count - 1].size = g.synced.end
                        s.pendingTruncation = g.synced.end
                        try? applyPendingTruncation(&s)
                        s.history = .rebuild
                        log(
                            "fdatasync failed (\(error)); truncated \(path(snapshot.name)) back to \(g.synced.end) bytes"
                        )
                    } else {
                        s.broken = JournalError(
                            .needsReopen,
                            "an fdatasync failed (\(error)); acknowledged records may be lost, reopen the journal",
                            file: path(snapshot.name))
                    }
                }
                throw error
            }
            g.synced = snapshot.tail
            state.withLock { s in
                s.durableBefore = max(s.durableBefore, snapshot.tail.nextSequence)
                s.lastSync = .now
                s.lastSynced = (snapshot.header.number, snapshot.tail.end)
            }
        }
    }

    /// For `.batched`: a thread that syncs a dirty journal every `milliseconds`, so a quiet
    /// journal does not keep unsynced appends longer than that. It holds the journal weakly
    /// and ends when the journal is closed or released.
    static func startFlusher(for journal: Journal, milliseconds: Int) {
        let interval = Double(max(1, milliseconds)) / 1000
        let thread = Thread { [weak journal] in
            while true {
                Thread.sleep(forTimeInterval: interval)
                guard let journal else { return }
                let (usable, dirty) = journal.state.withLock { s in (!s.closed && s.broken == nil, s.isDirty) }
                guard usable else { return }
                if dirty { try? journal.sync() }
            }
        }
        thread.name = "GraphJournal flusher"
        thread.start()
    }
}
