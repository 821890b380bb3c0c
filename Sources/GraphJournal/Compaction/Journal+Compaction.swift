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
        try compact(base: base, schema: schema, proceed: { true })
    }

    /// ``compact(base:schema:)``, which the caller may abandon at the last moment it can: once
    /// the new base and log are written and synced, just before MANIFEST is replaced, it calls
    /// `proceed`; when that returns false, the new files are removed and the journal goes on
    /// with its old segments, unchanged (a torn tail the journal was to cut before its next
    /// append is cut, as any append would).
    ///
    /// - Parameter proceed: whether to switch to the new base.
    /// - Returns: whether the journal switched to the new base (false: `proceed` said no).
    /// - Throws: ``JournalError`` as ``compact(base:schema:)``.
    @discardableResult
    public func compact(base: some Sequence<[UInt8]>, schema: [UInt8], proceed: () -> Bool) throws(JournalError) -> Bool
    {
        try compact(base: base, schema: schema, origin: nil, proceed: proceed)
    }

    /// ``compact(base:schema:proceed:)`` for a replica installing a base it received: the new
    /// base's origin (``origin``) is `origin` instead of the journal's current one.
    ///
    /// - Parameter origin: where the base came from, at most 1 KiB; nil keeps the current origin.
    /// - Returns: whether the journal switched to the new base.
    /// - Throws: ``JournalError`` as ``compact(base:schema:)``.
    @discardableResult
    public func compact(
        base: some Sequence<[UInt8]>, schema: [UInt8], origin: [UInt8]?, proceed: () -> Bool
    ) throws(JournalError) -> Bool {
        try compact(base: base, schema: schema, origin: origin, numberingFrom: nil, proceed: proceed)
    }

    /// ``compact(base:schema:origin:proceed:)`` whose new base starts at sequence
    /// `firstSequence` when that is above the journal's next sequence: the records after it
    /// continue a numbering the journal takes over from elsewhere (a replica promoted to writer
    /// goes on with its source's sequence numbers). Sequence numbers only ever grow, so a
    /// `firstSequence` at or below the next sequence changes nothing.
    ///
    /// - Parameter numberingFrom: the smallest sequence the new base may start at; nil for the
    ///   next sequence.
    /// - Returns: whether the journal switched to the new base.
    /// - Throws: ``JournalError`` as ``compact(base:schema:)``.
    @discardableResult
    public func compact(
        base: some Sequence<[UInt8]>, schema: [UInt8], origin: [UInt8]?, numberingFrom firstSequence: UInt64?,
        proceed: () -> Bool
    ) throws(JournalError) -> Bool {
        guard (origin?.count ?? 0) <= 1024 else {
            throw JournalError(.payloadTooLarge, "an origin is limited to 1024 bytes")
        }
        defer { deliverDurable() }
        return try gate.withLock { (g) throws(JournalError) in
            try state.withLock { (s) throws(JournalError) in
                try s.checkUsable()
                try applyPendingTruncation(&s)
                return try compact(
                    &s, &g, base: .payloads(AnySequence(base)), schema: schema, origin: origin ?? s.tail.origin,
                    firstSequence: firstSequence, proceed: proceed)
            }
        }
    }

    /// Replaces the whole history by a base shipped from another journal (a replica starting
    /// from its source's base): `records` are the base's schema record then its base records,
    /// in wire form (``ShippedRecord``), written as they are (stored payloads not decompressed
    /// nor compressed again), numbered in this journal's sequence. Otherwise as
    /// ``compact(base:schema:origin:proceed:)``.
    ///
    /// - Parameter records: a schema record, then base records.
    /// - Parameter origin: where the base came from, at most 1 KiB; nil keeps the current origin.
    /// - Throws: ``JournalError``: `corrupt` when `records` is not a schema record followed by
    ///   base records, or the schema does not decompress; otherwise as ``compact(base:schema:)``.
    public func compact(shipped records: [ShippedRecord], origin: [UInt8]?) throws(JournalError) {
        guard (origin?.count ?? 0) <= 1024 else {
            throw JournalError(.payloadTooLarge, "an origin is limited to 1024 bytes")
        }
        guard let first = records.first, first.kind == .schema, records.dropFirst().allSatisfy({ $0.kind == .base })
        else {
            throw JournalError(.corrupt, "a shipped base is a schema record followed by base records")
        }
        let schema = try first.payload(keyring: keyring)
        let identity = try first.sealHeader()?.journalID
        defer { deliverDurable() }
        _ = try gate.withLock { (g) throws(JournalError) in
            try state.withLock { (s) throws(JournalError) in
                try s.checkUsable()
                try applyPendingTruncation(&s)
                // The base replaces the whole journal: the journal takes the identity of its source.
                if let identity, let sealer = s.sealer, sealer.journalID != identity {
                    s.sealer = Sealer(key: sealer.master, journalID: identity)
                }
                return try compact(
                    &s, &g, base: .shipped(Array(records.dropFirst())), schema: schema, origin: origin ?? s.tail.origin,
                    firstSequence: nil, proceed: { true })
            }
        }
    }

    /// Compacts under both locks; the steps are the protocol's, in order.
    ///
    /// - Returns: false when `proceed` abandoned the compaction before the switch.
    private func compact(
        _ s: inout WriterState, _ g: inout SyncGate, base: BaseRecords, schema: [UInt8], origin: [UInt8]?,
        firstSequence: UInt64?, proceed: () -> Bool
    ) throws(JournalError) -> Bool {
        // Everything acknowledged so far is durable in the old files.
        try fs.fdatasync(s.activeFD, path(s.files[s.files.count - 1].name))
        s.durableBefore = max(s.durableBefore, s.tail.nextSequence)
        g.segment = s.activeHeader.number
        g.synced = s.tail

        // A base is version 1 (3 when sealed): its records are self-contained, written in one go.
        let baseHeader = SegmentHeader(
            kind: .base, salt: .random(in: .min ... .max), number: s.nextFileNumber,
            firstSequence: max(s.tail.nextSequence, firstSequence ?? 0), version: options.writtenBaseVersion)
        // A compaction is a writer run of its own: a new salt, its counter from 1, the current key.
        var sealer = try keyring.map { (keyring) throws(JournalError) in
            Sealer(key: try keyring.currentKey(), journalID: s.sealer?.journalID ?? .random())
        }
        var baseKeys: Set<String> = []
        let logNumber = s.nextFileNumber + 1
        // The new files written so far, removed if compaction fails before it switches to them.
        var created: [String] = []
        do throws(JournalError) {
            let baseTail = try writeBase(
                baseHeader, schema: schema, origin: origin, base: base, sealer: &sealer, keyIDs: &baseKeys,
                created: &created)
            let logHeader = SegmentHeader(
                kind: .log, salt: .random(in: .min ... .max), number: logNumber, firstSequence: baseTail.nextSequence,
                version: options.writtenLogVersion)
            try writeEmptyLog(logHeader, created: &created)
            try fs.syncDirectory(directory)
            guard proceed() else {
                for file in created { try? fs.unlink(file) }
                try? fs.syncDirectory(directory)
                return false
            }
            let newFiles = [
                LiveFile(name: fileName(baseHeader.number, .base), header: baseHeader, size: baseTail.end),
                LiveFile(
                    name: fileName(logNumber, .log), header: logHeader, size: Int64(JournalFormat.segmentHeaderSize)),
            ]
            try switchManifest(to: newFiles.map(\.name), &s, created: &created)
            let oldFiles = try switchWriter(to: newFiles, tail: baseTail, &s, &g, created: &created)
            s.keyIDs = baseKeys
            s.holdsSealedRecords = !baseKeys.isEmpty
            removeReplaced(oldFiles)
        } catch {
            for file in created { try? fs.unlink(file) }
            throw error
        }
        return true
    }

    /// Writes the base segment through a temporary file: its header, a schema record and one
    /// record per payload, fsynced, then renamed to its name.
    ///
    /// - Parameter created: the new files so far; ends with the base.
    /// - Returns: the tail after the base's records; its `end` is the base's size.
    private func writeBase(
        _ header: SegmentHeader, schema: [UInt8], origin: [UInt8]?, base: BaseRecords, sealer: inout Sealer?,
        keyIDs: inout Set<String>, created: inout [String]
    ) throws(JournalError) -> Tail {
        let basePath = path(fileName(header.number, .base))
        let temporary = basePath + JournalFormat.temporarySuffix
        let fd = try fs.open(temporary, .createTruncating)
        created.append(temporary)
        let tail: Tail
        do throws(JournalError) {
            tail = try writeBaseRecords(
                header, schema: schema, origin: origin, base: base, sealer: &sealer, keyIDs: &keyIDs, to: fd,
                path: temporary)
        } catch {
            fs.closeQuietly(fd)
            throw error
        }
        try fs.close(fd, temporary)
        try fs.rename(temporary, basePath)
        created = [basePath]
        return tail
    }

    /// Writes the base's header and records to the open file `fd`, a MiB at a time, and
    /// fsyncs it.
    ///
    /// - Returns: the tail after the records; its `end` is the bytes written.
    private func writeBaseRecords(
        _ header: SegmentHeader, schema: [UInt8], origin: [UInt8]?, base: BaseRecords, sealer: inout Sealer?,
        keyIDs: inout Set<String>, to fd: Int32, path: String
    ) throws(JournalError) -> Tail {
        let seed = header.seed
        var tail = Tail(end: 0, nextSequence: header.firstSequence)
        var buffer = header.encoded()
        var offset: Int64 = 0
        try Self.appendSchemaRecord(schema, to: &buffer, seed: seed, tail: &tail, sealer: &sealer)
        if let sealer { keyIDs.insert(sealer.keyID) }
        // A replica's base keeps its origin: an origin record before the first base record.
        if let origin {
            let stored = RecordCodec.append(
                to: &buffer, seed: seed, sequence: tail.nextSequence, type: .origin, payload: origin)
            tail.add(rawBytes: origin.count, storedBytes: stored)
            tail.noteOrigin(type: JournalFormat.RecordType.origin.rawValue, payload: origin)
        }
        let records = base.makeIterator()
        while let next = records.next() {
            switch next {
            case .payload(let payload):
                guard payload.count <= JournalFormat.maxPayloadSize else {
                    throw JournalError(.payloadTooLarge, "a base payload exceeds \(JournalFormat.maxPayloadSize) bytes")
                }
                let start = buffer.count
                var stored = RecordCodec.append(
                    to: &buffer, seed: seed, sequence: tail.nextSequence, type: .base, payload: payload)
                if var running = sealer {
                    try RecordCodec.seal(&buffer, at: start, seed: seed, sealer: &running)
                    sealer = running
                    stored = buffer.count - start - JournalFormat.recordHeaderSize
                }
                tail.add(rawBytes: payload.count, storedBytes: stored)
            case .shipped(let record):
                if let sealHeader = try record.sealHeader() { keyIDs.insert(sealHeader.keyID) }
                let start = buffer.count
                buffer.append(contentsOf: record.wire)
                buffer.storeLittleEndian(tail.nextSequence, at: start + JournalFormat.RecordHeaderField.sequence)
                RecordCodec.reseal(&buffer, at: start, seed: seed)
                tail.add(rawBytes: record.rawLength, storedBytes: record.storedLength)
            }
            tail.noteOrigin(type: JournalFormat.RecordType.base.rawValue, payload: nil)
            if buffer.count >= 1 << 20 {
                try fs.write(fd, path, buffer, at: offset)
                offset += Int64(buffer.count)
                buffer.removeAll(keepingCapacity: true)
            }
        }
        // A base is written whole: its origin holds even with no base record after it.
        tail.settleOrigin()
        try fs.write(fd, path, buffer, at: offset)
        offset += Int64(buffer.count)
        try fs.fsync(fd, path)
        tail.end = offset
        return tail
    }

    /// Creates the new, empty log through a temporary file.
    ///
    /// - Parameter created: the new files so far; ends with the log.
    private func writeEmptyLog(_ header: SegmentHeader, created: inout [String]) throws(JournalError) {
        let logPath = path(fileName(header.number, .log))
        let temporary = logPath + JournalFormat.temporarySuffix
        created.append(temporary)
        try fs.writeNewFile(temporary, header.encoded())
        try fs.rename(temporary, logPath)
        created[created.count - 1] = logPath
    }

    /// Replaces MANIFEST by one listing `names`: the switch to the compacted journal.
    ///
    /// A failure after the rename (the directory fsync) leaves the new MANIFEST in place: the
    /// journal then needs reopening, and `created` is emptied, the new files being live.
    private func switchManifest(
        to names: [String], _ s: inout WriterState, created: inout [String]
    ) throws(JournalError) {
        var renamed = false
        do throws(JournalError) {
            try fs.replaceFile(
                path(JournalFormat.manifestFileName), with: Manifest(files: names).encoded(),
                directory: directory, renamed: &renamed)
        } catch {
            if renamed {
                s.broken = JournalError(
                    .needsReopen,
                    "compaction replaced MANIFEST but the directory fsync failed (\(error)); reopen the journal",
                    file: directory)
                created = []
            }
            throw error
        }
    }

    /// Makes `files` (the new base and log) the writer's: appends go to the log from now on,
    /// and `tail` (the base's) continues there.
    ///
    /// - Returns: the names of the files they replace.
    private func switchWriter(
        to files: [LiveFile], tail baseTail: Tail, _ s: inout WriterState, _ g: inout SyncGate, created: inout [String]
    ) throws(JournalError) -> [String] {
        let log = files[1]
        let newFD: Int32
        do throws(JournalError) { newFD = try fs.open(path(log.name), .readWrite) } catch {
            s.broken = JournalError(
                .needsReopen, "compaction finished but the new log cannot be opened (\(error)); reopen the journal",
                file: path(log.name))
            created = []
            throw error
        }
        let oldFiles = s.files.map(\.name)
        s.retiredFDs.append(s.activeFD)
        s.activeFD = newFD
        s.activeHeader = log.header
        s.activeSeed = log.header.seed
        var tail = baseTail
        tail.end = log.size
        s.files = files
        s.tail = tail
        s.segmentStartTail = tail
        s.history = WriterState.freshHistory(for: log.header)
        s.nextFileNumber = log.header.number + 1
        s.pendingTruncation = nil
        g.segment = log.header.number
        g.synced = tail
        self.log(
            "compacted into \(files[0].name) (\(tail.records - 1 - (tail.origin == nil ? 0 : 1)) base record(s)) and \(log.name)"
        )
        return oldFiles
    }

    /// Removes the segments compaction replaced; a failure only leaves leftovers, which the
    /// next `open` removes.
    private func removeReplaced(_ names: [String]) {
        for name in names {
            do throws(JournalError) { try fs.unlink(path(name)) } catch {
                log("could not remove \(path(name)) after compaction: \(error)")
            }
        }
        do throws(JournalError) { try fs.syncDirectory(directory) } catch {
            log("directory fsync after removing old segments failed: \(error)")
        }
    }
}

/// What a base segment's base records come from: payloads to compress, or shipped records
/// written as they are.
enum BaseRecords {
    case payloads(AnySequence<[UInt8]>)
    case shipped([ShippedRecord])

    enum Element {
        case payload([UInt8])
        case shipped(ShippedRecord)
    }

    func makeIterator() -> AnyIterator<Element> {
        switch self {
        case .payloads(let payloads):
            let i = payloads.makeIterator()  // an AnyIterator: a reference to its state
            return AnyIterator { i.next().map(Element.payload) }
        case .shipped(let records):
            var i = 0
            return AnyIterator {
                guard i < records.count else { return nil }
                defer { i += 1 }
                return .shipped(records[i])
            }
        }
    }
}
