internal import Synchronization

extension Journal {
    /// Starts a new log segment: syncs the active one, creates the next file, lists it in
    /// MANIFEST. On failure before the MANIFEST rename nothing changes.
    func roll(_ s: inout WriterState) throws(JournalError) {
        let oldPath = path(s.files[s.files.count - 1].name)
        try fs.fdatasync(s.activeFD, oldPath)
        s.durableBefore = max(s.durableBefore, s.tail.nextSequence)
        let header = SegmentHeader(
            kind: .log, salt: .random(in: .min ... .max), number: s.nextFileNumber, firstSequence: s.tail.nextSequence,
            version: options.writtenLogVersion)
        let name = fileName(header.number, .log)
        try fs.writeNewFile(path(name) + JournalFormat.temporarySuffix, header.encoded())
        do throws(JournalError) { try fs.rename(path(name) + JournalFormat.temporarySuffix, path(name)) } catch {
            try? fs.unlink(path(name) + JournalFormat.temporarySuffix)
            throw error
        }
        var renamed = false
        do throws(JournalError) {
            try fs.replaceFile(
                path(JournalFormat.manifestFileName), with: Manifest(files: s.files.map(\.name) + [name]).encoded(),
                directory: directory, renamed: &renamed)
        } catch {
            if renamed {
                s.broken = JournalError(
                    .needsReopen, "MANIFEST was replaced but the directory fsync failed: \(error)", file: directory)
            } else {
                try? fs.unlink(path(name))
            }
            throw error
        }
        s.nextFileNumber += 1
        let fd: Int32
        do throws(JournalError) { fd = try fs.open(path(name), .readWrite) } catch {
            s.broken = JournalError(.needsReopen, "cannot open the new segment: \(error)", file: path(name))
            throw error
        }
        s.retiredFDs.append(s.activeFD)
        s.activeFD = fd
        s.activeHeader = header
        s.activeSeed = header.seed
        s.files.append(LiveFile(name: name, header: header, size: Int64(JournalFormat.segmentHeaderSize)))
        s.tail.end = Int64(JournalFormat.segmentHeaderSize)
        s.segmentStartTail = s.tail
        s.pendingTruncation = nil
        s.history = WriterState.freshHistory(for: header)
        log("rolled to segment \(name) at sequence \(header.firstSequence)")
    }
}
