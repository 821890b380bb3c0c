internal import Foundation
internal import Glibc

/// The steps of ``Journal/open(directory:options:)`` after the lock is taken: read MANIFEST,
/// check every segment, recover, remove leftovers, open the active segment.
///
/// With a ``Sink``, the open also hands each record it keeps to the sink as soon as its
/// segment is checked, from the bytes the check read: a replay at open reads each byte once.
struct JournalOpener {
    /// Takes the records the open keeps, in order: each with its segment's bytes (the whole
    /// file), the segment's path, the bytes of the kept segments before it, the size of the
    /// live segments as far as they are known, and a function that returns its payload,
    /// decompressed. Returns false to stop: the open then checks the rest of the chain (so
    /// that damage there is reported as it is without a sink), hands nothing more, and throws
    /// ``stop`` before it changes anything on disk.
    typealias Sink = (
        _ record: ScannedRecord, _ bytes: UnsafeRawBufferPointer, _ path: String, _ bytesBefore: Int64,
        _ bytesTotal: Int64,
        _ payload: @escaping () -> Result<[UInt8], JournalError>
    ) -> Bool

    let fs: FileSystem
    let directory: String
    let options: JournalOptions
    /// The keys of sealed records, when the journal is opened with encryption.
    let keyring: JournalKeyring?
    var report = JournalOpenReport()
    /// What the sealed records checked so far show (``SealOrder``).
    private var sealOrder = SealOrder()
    /// Where the records kept go, if anywhere.
    private let sink: Sink?
    /// Whether the sink asked to stop (`run` then throws ``stop`` unless it found damage first).
    private(set) var stopped = false
    /// The size of the live segments, as far as the check knows them (for the sink's progress).
    private var bytesTotal: Int64 = 0
    /// The history of the last segment handed to the sink, when every byte of it was a
    /// record: the writer's history of the active segment, if it is that one.
    private var lastHistory: (name: String, history: RecordHistory)?

    init(fs: FileSystem, directory: String, options: JournalOptions, keyring: JournalKeyring? = nil, sink: Sink? = nil)
    {
        self.fs = fs
        self.directory = directory
        self.options = options
        self.keyring = keyring
        self.sink = sink
    }

    /// The error `run` throws once the sink asked to stop, before anything on disk changed.
    static var stop: JournalError {
        JournalError(.corrupt, "the open was stopped by the replay of its records; nothing was changed")
    }

    func path(_ name: String) -> String { directory + "/" + name }

    func log(_ message: String) { options.log?(message) }

    /// Where point-in-time recovery starts dropping.
    struct DropPoint {
        var index: Int
        var offset: Int
        var reason: String
        var recordsAfter: Int
    }

    /// The live files as the check found them: MANIFEST's list, with the unlisted logs that
    /// continue the sequence inserted where they fill a gap or appended where the listed
    /// files end.
    struct LiveChain {
        /// The names of the files, listed and adopted, in order.
        var names: [String]
        /// The unlisted logs inserted into `names`.
        var adopted: [String] = []
        /// The files checked, up to the drop point if there is one.
        var files: [LiveFile] = []
        /// The end of the records checked, and their counters.
        var tail = Tail(end: 0, nextSequence: 1)
        /// Where the last file's torn tail starts, to be truncated before the next append.
        var pendingTruncation: Int64?
        /// Where point-in-time recovery starts dropping, when it has to.
        var drop: DropPoint?
    }

    /// What checking one segment found.
    struct SegmentCheck {
        /// The segment, its size that of its valid records.
        var file: LiveFile
        /// The bytes of a torn tail after its valid records, and why they are not a record.
        var torn: (bytes: Int64, reason: String)?
        /// Where point-in-time recovery starts dropping, in this segment or at its start.
        var drop: DropPoint?
        /// The records kept, when the open has a sink.
        var records: [ScannedRecord] = []
    }

    /// A segment header that does not parse or does not fit, and the header when it parsed.
    struct HeaderProblem: Error {
        /// What is wrong with the header.
        var error: JournalError
        /// The header, when it parsed but does not fit.
        var header: SegmentHeader?
    }

    /// Whether damage is recovered from by dropping what follows it.
    private var pointInTime: Bool { options.recovery == .pointInTime }

    /// Checks the journal and readies the writer: reads MANIFEST (or creates the journal),
    /// checks every live segment, recovers, removes leftovers and opens the active segment.
    mutating func run() throws(JournalError) -> WriterState {
        let names = try fs.list(directory)
        var nextFileNumber = (names.compactMap(fileNumber).max() ?? 0) + 1
        var manifest: Manifest
        if names.contains(JournalFormat.manifestFileName) {
            let manifestPath = path(JournalFormat.manifestFileName)
            manifest = try Manifest.parse(try fs.readFile(manifestPath), file: manifestPath)
        } else {
            manifest = try initialize(names: names, nextFileNumber: &nextFileNumber)
        }
        let unlisted = try SegmentSet(fs: fs, directory: directory, names: names, manifest: manifest)
        var live = try checkChain(manifest.files, unlisted: unlisted)
        if stopped { throw Self.stop }
        // The writer run's key before anything changes: an unavailable current key fails the
        // open as an unavailable old one does.
        let sealer = try keyring.map { keyring throws(JournalError) in
            Sealer(key: try keyring.currentKey(), journalID: sealOrder.journalID ?? .random())
        }
        try settle(&live, manifest: &manifest, unlisted: unlisted, nextFileNumber: &nextFileNumber)
        guard let active = live.files.last else {
            throw JournalError(.corrupt, "no live segment after recovery", file: directory)
        }
        let fd = try fs.open(path(active.name), .readWrite)
        var state = WriterState(
            files: live.files, activeFD: fd, activeHeader: active.header, activeSeed: active.header.seed,
            tail: live.tail, segmentStartTail: live.tail, pendingTruncation: live.pendingTruncation,
            nextFileNumber: nextFileNumber)
        state.lastSynced = (active.header.number, live.tail.end)  // as found on disk: nothing to flush
        state.sealer = sealer
        state.holdsSealedRecords = sealOrder.sealedRecords > 0
        state.keyIDs = sealOrder.keyIDs
        if let (name, history) = lastHistory, name == active.name, live.pendingTruncation == nil, history.enabled {
            // The sink had every record of the active segment decompressed: the writer goes
            // on from that history instead of reading the segment again before its first append.
            _ = history.window { window in
                if let encoder = HistoryEncoder(window: window) { state.history = .ready(encoder) }
            }
        }
        return state
    }

    /// Checks the files of `listed` in order, with the unlisted logs that continue the
    /// sequence (the rules of ``SegmentChain``), until the last or a drop point.
    private mutating func checkChain(_ listed: [String], unlisted: SegmentSet) throws(JournalError) -> LiveChain {
        var chain = SegmentChain(listed: listed, unlisted: unlisted)
        var live = LiveChain(names: listed)
        if sink != nil { bytesTotal = listedSize(listed) }
        while let link = chain.current {
            let name = link.name
            var bytes: [UInt8]?
            do throws(JournalError) { bytes = try fs.readFile(path(name)) } catch {
                guard case .io(let errno, _) = error.code, errno == ENOENT else { throw error }
            }
            // A gap before this file, or a missing file, that an unlisted log fills: walk that
            // log first. (With no unlisted log, as at nearly every open, nothing is parsed twice.)
            if chain.fillGap(
                expecting: live.tail.nextSequence,
                firstSequence: bytes.flatMap({ Self.header(of: $0, name: name) })?.firstSequence)
            {
                continue
            }
            guard let bytes else {
                let reason = "MANIFEST lists \(name), which does not exist (a segment is missing)"
                guard pointInTime else { throw JournalError(.corrupt, reason, file: path(name)) }
                live.drop = DropPoint(index: link.index, offset: 0, reason: reason, recordsAfter: 0)
                break
            }
            let endsTorn = try add(bytes, link: link, to: &live)
            if live.drop != nil { break }
            chain.advance(endsTorn: endsTorn, nextSequence: live.tail.nextSequence)
        }
        live.names = chain.names
        live.adopted = chain.adopted
        return live
    }

    /// The size of the files of `listed` that exist.
    private func listedSize(_ listed: [String]) -> Int64 {
        listed.reduce(Int64(0)) { total, name in
            guard let fd = try? fs.open(path(name), .readOnly) else { return total }
            defer { fs.closeQuietly(fd) }
            return total + ((try? fs.fileSize(fd, path(name))) ?? 0)
        }
    }

    /// Hands the records `check` kept of the segment `bytes` to the sink, decompressed through
    /// the segment's history, until the sink asks to stop.
    private mutating func deliver(_ check: SegmentCheck, of bytes: [UInt8], bytesBefore: Int64) {
        guard let sink, !stopped, !check.records.isEmpty else { return }
        let filePath = path(check.file.name)
        let history = RecordHistory(header: check.file.header, keyring: keyring)
        let total = bytesTotal
        var stop = false
        bytes.withUnsafeBytes { raw in
            for record in check.records where !stop {
                history.visit(record, in: raw, file: filePath) { payload in
                    stop = !sink(record, raw, filePath, bytesBefore, total, payload)
                }
            }
        }
        stopped = stop
        lastHistory = !stop && check.file.size == Int64(bytes.count) ? (check.file.name, history) : nil
    }

    /// Checks the segment `link` (its `bytes`) and adds it to `live`:
    /// its records to the tail, a torn tail to truncate, or the drop point.
    ///
    /// - Returns: whether the segment ends in a torn tail.
    private mutating func add(
        _ bytes: [UInt8], link: SegmentChain.Link, to live: inout LiveChain
    ) throws(JournalError) -> Bool {
        let name = link.name
        let check = try checkSegment(bytes, link: link, tail: &live.tail)
        if !live.names.contains(name) { bytesTotal += Int64(bytes.count) }  // an unlisted log adopted
        deliver(check, of: bytes, bytesBefore: live.files.reduce(Int64(0)) { $0 + $1.size })
        if let drop = check.drop {
            live.drop = drop
            if drop.offset > 0 { live.files.append(check.file) }
            return false
        }
        live.files.append(check.file)
        guard let torn = check.torn else { return false }
        let file = check.file
        live.pendingTruncation = file.size
        report.tornTail = JournalOpenReport.TornTail(
            file: path(name), offset: file.size, bytes: torn.bytes, reason: torn.reason)
        log(
            "torn tail: \(torn.bytes) bytes at offset \(file.size) of \(path(name)) (\(torn.reason)); truncated before the next append"
        )
        return true
    }

    /// Settles what the check found before the writer starts: refuses (or moves aside) stray
    /// logs, recovers to the drop point or lists the adopted logs in MANIFEST, and removes
    /// leftovers.
    private mutating func settle(
        _ live: inout LiveChain, manifest: inout Manifest, unlisted: SegmentSet, nextFileNumber: inout UInt64
    ) throws(JournalError) {
        // Unlisted logs neither adopted nor superseded by the base hold records nobody else
        // has: corruption, refused before anything is changed, or moved aside.
        let firstLive = live.files.first?.header.firstSequence ?? live.tail.nextSequence
        let adoptedSet = Set(live.adopted.filter { name in live.files.contains { $0.name == name } })
        let (superseded, strays) = unlisted.remaining(adopted: Set(live.adopted), firstLiveSequence: firstLive)
        if let stray = strays.first, !pointInTime {
            throw JournalError(
                .corrupt, SegmentSet.strayReason(stray) + "; `repair --keep-prefix` moves it aside",
                file: path(stray.name), offset: 0)
        }
        var removable = unlisted.leftovers + superseded
        if let drop = live.drop {
            removable += try dropForRecovery(
                drop, manifest: &manifest, chain: live.names, files: &live.files, tail: live.tail,
                nextFileNumber: &nextFileNumber)
        } else if !adoptedSet.isEmpty {
            manifest = Manifest(files: live.files.map(\.name))
            var renamed = false
            try fs.replaceFile(
                path(JournalFormat.manifestFileName), with: manifest.encoded(), directory: directory, renamed: &renamed)
        }
        for name in live.adopted where adoptedSet.contains(name) {
            report.adoptedFiles.append(path(name))
            log(
                "\(path(name)) was not listed in MANIFEST but continues the sequence: added to MANIFEST with its records"
            )
        }
        if !strays.isEmpty { try moveAside(strays) }
        try removeLeftovers(removable)
    }

    /// The header of a segment's bytes, or nil when it does not parse.
    static func header(of bytes: [UInt8], name: String) -> SegmentHeader? {
        if case .success(let header) = SegmentHeader.parse(bytes, file: name) { return header }
        return nil
    }

    /// Checks one segment, adding its records to `tail`.
    private mutating func checkSegment(
        _ bytes: [UInt8], link: SegmentChain.Link, tail: inout Tail
    ) throws(JournalError) -> SegmentCheck {
        let (name, index, isLast) = (link.name, link.index, link.isLast)
        let filePath = path(name)
        let header: SegmentHeader
        switch checkedHeader(bytes, name: name, index: index, nextSequence: tail.nextSequence) {
        case .success(let checked): header = checked
        case .failure(let problem):
            guard pointInTime, problem.error.code != .unsupportedVersion else { throw problem.error }
            let placeholder = SegmentHeader(kind: .log, salt: 0, number: 0, firstSequence: 0)
            return SegmentCheck(
                file: LiveFile(name: name, header: problem.header ?? placeholder, size: 0),
                drop: DropPoint(index: index, offset: 0, reason: problem.error.message, recordsAfter: 0))
        }
        if index == 0 { tail.nextSequence = header.firstSequence }
        var order = sealOrder
        let scan = scanRecords(bytes, header: header, path: filePath, tail: &tail, order: &order)
        if let fatal = scan.fatal { throw fatal }
        sealOrder = order
        let file = LiveFile(name: name, header: header, size: Int64(scan.validEnd))
        guard let damage = scan.damage else { return SegmentCheck(file: file, records: scan.records) }
        if link.isTornTail(damage, kind: header.kind) {
            return SegmentCheck(
                file: file, torn: (Int64(bytes.count - damage.offset), damage.reason), records: scan.records)
        }
        if pointInTime {
            // The point-in-time cut: the records before the damage are kept.
            return SegmentCheck(
                file: file,
                drop: DropPoint(
                    index: index, offset: damage.offset, reason: damage.reason,
                    recordsAfter: damage.recordsDropped), records: scan.records)
        }
        let after =
            damage.recordsAfter > 0
            ? "; \(damage.recordsAfter) valid record(s) follow, from offset \(damage.resyncOffset ?? 0)"
            : (isLast ? "" : "; later segments follow")
        throw JournalError(
            .corrupt, damage.reason + after, file: filePath, offset: Int64(damage.offset), sequence: scan.nextSequence)
    }

    /// The segment's header, parsed and checked against the file's name and, after the first
    /// segment, against `nextSequence`, where the previous one ends.
    private func checkedHeader(
        _ bytes: [UInt8], name: String, index: Int, nextSequence: UInt64
    ) -> Result<SegmentHeader, HeaderProblem> {
        let header: SegmentHeader
        switch SegmentHeader.parse(bytes, file: path(name)) {
        case .success(let parsed): header = parsed
        case .failure(let error): return .failure(HeaderProblem(error: error, header: nil))
        }
        let expectedKind: JournalFormat.SegmentKind = name.hasSuffix("." + JournalFormat.logExtension) ? .log : .base
        let problem: String
        if header.kind != expectedKind || header.number != fileNumber(name) {
            problem = "segment header says \(header.kind) number \(header.number), which does not match the file name"
        } else if index > 0, header.firstSequence != nextSequence {
            problem =
                "segment starts at sequence \(header.firstSequence) but the previous one ends before \(nextSequence) (a segment is missing?)"
        } else {
            return .success(header)
        }
        let offset = Int64(JournalFormat.SegmentHeaderField.firstSequence)
        return .failure(
            HeaderProblem(error: JournalError(.corrupt, problem, file: path(name), offset: offset), header: header))
    }

    /// Scans the segment's records, counting them into `tail`, its end moved to theirs.
    ///
    /// The schema in force is the last schema record's payload, decompressed here; one that
    /// does not decompress is damage at that record, so the scan is redone stopping there.
    private func scanRecords(
        _ bytes: [UInt8], header: SegmentHeader, path filePath: String, tail: inout Tail, order: inout SealOrder
    ) -> (
        validEnd: Int, nextSequence: UInt64, damage: SegmentDamage?, records: [ScannedRecord], fatal: JournalError?
    ) {
        var unreadable = options.unreadableRecord
        let keepsRecords = sink != nil
        let keyring = self.keyring
        while true {
            var lastSchema: ScannedRecord?
            var running = tail
            var runningOrder = order
            var fatal: JournalError?
            var records: [ScannedRecord] = []
            let judge = RecordJudge { (record: ScannedRecord) -> String? in
                bytes.withUnsafeBytes { raw in
                    switch runningOrder.admit(record, in: raw, keyring: keyring, file: filePath) {
                    case .accept: return nil
                    case .damage(let reason): return reason
                    case .fatal(let error):
                        fatal = error
                        return error.message
                    }
                }
            }
            let scan = RecordCodec.scan(bytes, header: header, unreadable: unreadable, judge: judge) { record in
                if keepsRecords { records.append(record) }
                running.add(rawBytes: record.rawLength, storedBytes: record.storedLength)
                running.noteOrigin(
                    type: record.type,
                    payload: record.type == JournalFormat.RecordType.origin.rawValue
                        ? try? RecordCodec.payload(of: record, in: bytes, file: filePath, keyring: keyring).get() : nil)
                if record.type == JournalFormat.RecordType.schema.rawValue {
                    lastSchema = record
                    running.schemaVersions += 1
                }
                return true
            }
            if let fatal { return (scan.validEnd, scan.nextSequence, scan.damage, records, fatal) }
            if let lastSchema {
                switch RecordCodec.payload(of: lastSchema, in: bytes, file: filePath, keyring: keyring) {
                case .success(let payload):
                    running.schema = payload
                case .failure(let error):
                    unreadable = JournalOptions.UnreadableRecord(sequence: lastSchema.sequence, reason: error.message)
                    continue
                }
            }
            // A base is written whole (fsynced before MANIFEST lists it): its origin holds even
            // with no base record after it.
            if header.kind == .base { running.settleOrigin() }
            tail = running
            tail.end = Int64(scan.validEnd)
            order = runningOrder
            return (scan.validEnd, scan.nextSequence, scan.damage, records, nil)
        }
    }

    /// A directory without MANIFEST: new, or left by a crash during the very first open.
    private mutating func initialize(names: [String], nextFileNumber: inout UInt64) throws(JournalError) -> Manifest {
        for name in names where fileNumber(name) != nil && !name.hasSuffix(JournalFormat.temporarySuffix) {
            let bytes = try fs.readFile(path(name))
            var holdsRecords = bytes.count > JournalFormat.segmentHeaderSize
            if case .success(let header) = SegmentHeader.parse(bytes, file: name) {
                holdsRecords = false
                _ = RecordCodec.scan(bytes, header: header) { _ in
                    holdsRecords = true; return false
                }
            }
            if holdsRecords {
                throw JournalError(
                    .corrupt,
                    "MANIFEST is missing but \(name) holds records; restore MANIFEST or move the segments away",
                    file: path(JournalFormat.manifestFileName))
            }
        }
        let header = SegmentHeader(
            kind: .log, salt: .random(in: .min ... .max), number: nextFileNumber, firstSequence: 1,
            version: options.writtenLogVersion)
        let name = fileName(header.number, .log)
        nextFileNumber += 1
        try fs.writeNewFile(path(name) + JournalFormat.temporarySuffix, header.encoded())
        try fs.rename(path(name) + JournalFormat.temporarySuffix, path(name))
        let manifest = Manifest(files: [name])
        var renamed = false
        try fs.replaceFile(
            path(JournalFormat.manifestFileName), with: manifest.encoded(), directory: directory, renamed: &renamed)
        log("created journal \(directory) with segment \(name)")
        return manifest
    }

    /// Point-in-time recovery: saves everything from the drop point on to `.dropped-` files,
    /// then rewrites MANIFEST without it, then truncates the file the drop starts in.
    ///
    /// - Returns: the files wholly dropped (now saved aside), for removal.
    private mutating func dropForRecovery(
        _ drop: DropPoint, manifest: inout Manifest, chain: [String], files: inout [LiveFile], tail: Tail,
        nextFileNumber: inout UInt64
    ) throws(JournalError) -> [String] {
        let stamp = Self.timestamp()
        var recordsDropped = drop.recordsAfter
        var whollyDropped: [String] = []
        for index in drop.index..<chain.count {
            let name = chain[index]
            let bytes: [UInt8]
            do throws(JournalError) { bytes = try fs.readFile(path(name)) } catch {
                if case .io(let errno, _) = error.code, errno == ENOENT {
                    // A missing segment: nothing to save; MANIFEST stops listing it.
                    report.missingFiles.append(path(name))
                    continue
                }
                throw error
            }
            let start = index == drop.index ? drop.offset : 0
            if index > drop.index {
                if case .success(let header) = SegmentHeader.parse(bytes, file: name) {
                    var count = 0
                    let scan = RecordCodec.scan(bytes, header: header) { _ in
                        count += 1; return true
                    }
                    recordsDropped += count + (scan.damage?.recordsAfter ?? 0)
                }
            }
            let saved = try uniqueAsideName(for: name, stamp: stamp)
            try fs.writeNewFile(saved, Array(bytes[min(start, bytes.count)...]))
            report.dropped.append(
                .init(
                    file: path(name), offset: Int64(start), bytes: Int64(bytes.count - start), savedAs: saved,
                    reason: index == drop.index ? drop.reason : "follows the damage"))
            log(
                "point-in-time recovery: saved \(bytes.count - start) bytes of \(path(name)) from offset \(start) to \(saved)"
            )
            if index > drop.index || start == 0 { whollyDropped.append(name) }
        }
        try fs.syncDirectory(directory)
        report.recordsDropped += recordsDropped

        var kept = files
        if kept.last?.header.kind != .log {
            let header = SegmentHeader(
                kind: .log, salt: .random(in: .min ... .max), number: nextFileNumber, firstSequence: tail.nextSequence,
                version: options.writtenLogVersion)
            let name = fileName(header.number, .log)
            nextFileNumber += 1
            try fs.writeNewFile(path(name) + JournalFormat.temporarySuffix, header.encoded())
            try fs.rename(path(name) + JournalFormat.temporarySuffix, path(name))
            kept.append(LiveFile(name: name, header: header, size: Int64(JournalFormat.segmentHeaderSize)))
        }
        manifest = Manifest(files: kept.map(\.name))
        var renamed = false
        try fs.replaceFile(
            path(JournalFormat.manifestFileName), with: manifest.encoded(), directory: directory, renamed: &renamed)
        if drop.offset > 0, let truncated = files.last {
            let fd = try fs.open(path(truncated.name), .readWrite)
            defer { fs.closeQuietly(fd) }
            try fs.truncate(fd, path(truncated.name), to: truncated.size)
            try fs.fsync(fd, path(truncated.name))
        }
        files = kept
        log("point-in-time recovery dropped \(recordsDropped) record(s); the bytes are saved in the .dropped- files")
        return whollyDropped
    }

    /// `<name>.dropped-<stamp>` in the store directory, with `-2`, `-3`… if taken.
    private func uniqueAsideName(for name: String, stamp: String) throws(JournalError) -> String {
        let existing = Set(try fs.list(directory))
        var savedName = name + JournalFormat.droppedInfix + stamp
        var suffix = 2
        while existing.contains(savedName) {
            savedName = name + JournalFormat.droppedInfix + stamp + "-\(suffix)"
            suffix += 1
        }
        return path(savedName)
    }

    /// Point-in-time recovery of unlisted logs whose records do not continue the sequence:
    /// each is renamed to `<name>.dropped-<time>` (its bytes stay as they were).
    private mutating func moveAside(_ strays: [SegmentSet.Unlisted]) throws(JournalError) {
        let stamp = Self.timestamp()
        for stray in strays {
            let saved = try uniqueAsideName(for: stray.name, stamp: stamp)
            try fs.rename(path(stray.name), saved)
            let reason = SegmentSet.strayReason(stray)
            report.dropped.append(
                .init(file: path(stray.name), offset: 0, bytes: Int64(stray.size), savedAs: saved, reason: reason))
            report.recordsDropped += stray.records
            log("point-in-time recovery: moved \(path(stray.name)) aside to \(saved) (\(reason))")
        }
        try fs.syncDirectory(directory)
    }

    /// Removes files that hold no record a live file lacks: `.tmp` files, a compaction's
    /// unswitched output, empty or superseded logs, and the originals of segments point-in-time
    /// recovery saved aside.
    private mutating func removeLeftovers(_ names: [String]) throws(JournalError) {
        for name in names.sorted() {
            do throws(JournalError) { try fs.unlink(path(name)) } catch {
                // Gone already (MANIFEST.tmp, renamed over MANIFEST by recovery's rewrite).
                if case .io(let errno, _) = error.code, errno == ENOENT { continue }
                throw error
            }
            report.removedFiles.append(path(name))
            log("removed leftover file \(path(name))")
        }
        if !names.isEmpty { try fs.syncDirectory(directory) }
    }

    /// `20261122T094512Z`, UTC.
    static func timestamp() -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        return formatter.string(from: Date())
    }
}
