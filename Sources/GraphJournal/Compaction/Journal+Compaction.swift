extension Journal {
    /// Replaces the whole history by a snapshot: a new base segment holding `schema` and the
    /// `base` payloads, followed by a new, empty log segment.
    ///
    /// The protocol (see `Docs/JournalFormat.md`, "Compaction"): sync the active log; write
    /// the base to `N.base.tmp`, fsync, rename to `N.base`; create `N+1.log` the same way;
    /// fsync the directory; write `MANIFEST.tmp` listing the two, fsync, rename over
    /// `MANIFEST`, fsync the directory; only then remove the old segments. A crash at any step
    /// leaves a directory that opens to either the old records or the new base, complete.
    ///
    /// Appends wait while compaction runs.
    ///
    /// ```swift
    /// try journal.compact(base: store.snapshotPayloads(), schema: store.schemaPayload())
    /// ```
    ///
    /// - Parameter base: the snapshot's payloads, in the order ``forEachRecord(_:)`` should
    ///   return them.
    /// - Parameter schema: the schema the snapshot is written with.
    /// - Throws: ``JournalError``. Before the MANIFEST is replaced the journal is unchanged and
    ///   usable; a failure after it (the directory fsync) makes the journal throw
    ///   ``JournalError/Code/needsReopen``, and reopening shows the new base.
    public func compact(base: some Sequence<[UInt8]>, schema: [UInt8]) throws(JournalError) {
        try gate.withLock { (g) throws(JournalError) in
            try state.withLock { (s) throws(JournalError) in
                try s.checkUsable()
                try applyPendingTruncation(&s)
                try compact(&s, &g, base: base, schema: schema)
            }
        }
    }

    private func compact(_ s: inout WriterState, _ g: inout SyncGate, base: some Sequence<[UInt8]>, schema: [UInt8]) throws(JournalError) {
        // 1. Everything acknowledged so far is durable in the old files.
        try fs.fdatasync(s.activeFD, path(s.files[s.files.count - 1].name))
        g.segment = s.activeHeader.number
        g.synced = s.tail

        let baseHeader = SegmentHeader(kind: .base, salt: .random(in: .min ... .max), number: s.nextFileNumber, firstSequence: s.tail.nextSequence)
        let baseName = fileName(baseHeader.number, .base)
        let basePath = path(baseName)
        let logNumber = s.nextFileNumber + 1
        let logName = fileName(logNumber, .log)
        let logPath = path(logName)
        let temporarySuffix = JournalFormat.temporarySuffix
        var newTail = Tail(end: 0, nextSequence: baseHeader.firstSequence)
        var createdFiles: [String] = []

        func cleanUp() {
            for file in createdFiles { try? fs.unlink(file) }
        }

        do throws(JournalError) {
            // 2. The base, through a temporary file.
            let fd = try fs.open(basePath + temporarySuffix, .createTruncating)
            createdFiles.append(basePath + temporarySuffix)
            do throws(JournalError) {
                let seed = baseHeader.seed
                var buffer = baseHeader.encoded()
                var offset: Int64 = 0
                let stored = schema.withUnsafeBytes {
                    RecordCodec.append(to: &buffer, seed: seed, sequence: newTail.nextSequence, type: .schema, payload: $0)
                }
                newTail.add(rawBytes: schema.count, storedBytes: stored)
                newTail.schema = schema
                newTail.schemaVersions = 1
                for payload in base {
                    guard payload.count <= JournalFormat.maxPayloadSize else {
                        throw JournalError(.payloadTooLarge, "a base payload exceeds \(JournalFormat.maxPayloadSize) bytes")
                    }
                    let stored = payload.withUnsafeBytes {
                        RecordCodec.append(to: &buffer, seed: seed, sequence: newTail.nextSequence, type: .base, payload: $0)
                    }
                    newTail.add(rawBytes: payload.count, storedBytes: stored)
                    if buffer.count >= 1 << 20 {
                        try fs.write(fd, basePath + temporarySuffix, buffer, at: offset)
                        offset += Int64(buffer.count)
                        buffer.removeAll(keepingCapacity: true)
                    }
                }
                try fs.write(fd, basePath + temporarySuffix, buffer, at: offset)
                offset += Int64(buffer.count)
                try fs.fsync(fd, basePath + temporarySuffix)
                newTail.end = offset
            } catch {
                fs.closeQuietly(fd)
                throw error
            }
            try fs.close(fd, basePath + temporarySuffix)
            try fs.rename(basePath + temporarySuffix, basePath)
            createdFiles = [basePath]

            // 3. The new, empty log.
            let logHeader = SegmentHeader(kind: .log, salt: .random(in: .min ... .max), number: logNumber, firstSequence: newTail.nextSequence)
            createdFiles.append(logPath + temporarySuffix)
            try fs.writeNewFile(logPath + temporarySuffix, logHeader.encoded())
            try fs.rename(logPath + temporarySuffix, logPath)
            createdFiles[createdFiles.count - 1] = logPath
            try fs.syncDirectory(directory)

            // 4. The MANIFEST: the switch.
            var renamed = false
            do throws(JournalError) {
                try fs.replaceFile(path(JournalFormat.manifestFileName), with: Manifest(files: [baseName, logName]).encoded(),
                                   directory: directory, renamed: &renamed)
            } catch {
                if renamed {
                    s.broken = JournalError(.needsReopen, "compaction replaced MANIFEST but the directory fsync failed (\(error)); reopen the journal", file: directory)
                    createdFiles = []
                }
                throw error
            }

            // 5. Switch to the new files.
            let newFD: Int32
            do throws(JournalError) { newFD = try fs.open(logPath, .readWrite) } catch {
                s.broken = JournalError(.needsReopen, "compaction finished but the new log cannot be opened (\(error)); reopen the journal", file: logPath)
                createdFiles = []
                throw error
            }
            let oldFiles = s.files.map(\.name)
            s.retiredFDs.append(s.activeFD)
            s.activeFD = newFD
            s.activeHeader = logHeader
            s.activeSeed = logHeader.seed
            let baseSize = newTail.end
            newTail.end = Int64(JournalFormat.segmentHeaderSize)
            s.files = [LiveFile(name: baseName, header: baseHeader, size: baseSize),
                       LiveFile(name: logName, header: logHeader, size: newTail.end)]
            s.tail = newTail
            s.segmentStartTail = newTail
            s.nextFileNumber = logNumber + 1
            s.pendingTruncation = nil
            g.segment = logNumber
            g.synced = newTail
            log("compacted into \(baseName) (\(newTail.records - 1) base record(s)) and \(logName)")

            // 6. Remove the old segments; a failure here only leaves leftovers for the next open.
            for name in oldFiles {
                do throws(JournalError) { try fs.unlink(path(name)) } catch { log("could not remove \(path(name)) after compaction: \(error)") }
            }
            do throws(JournalError) { try fs.syncDirectory(directory) } catch { log("directory fsync after removing old segments failed: \(error)") }
        } catch {
            cleanUp()
            throw error
        }
    }
}
