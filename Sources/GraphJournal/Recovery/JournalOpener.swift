internal import Foundation
internal import Glibc

/// The steps of ``Journal/open(directory:options:)`` after the lock is taken: read MANIFEST,
/// check every segment, recover, remove leftovers, open the active segment.
struct JournalOpener {
    let fs: FileSystem
    let directory: String
    let options: JournalOptions
    var report = JournalOpenReport()

    init(fs: FileSystem, directory: String, options: JournalOptions) {
        self.fs = fs
        self.directory = directory
        self.options = options
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
        let pointInTime = options.recovery == .pointInTime

        // The live chain: the listed files, with unlisted logs that continue the sequence
        // inserted where they fill a gap or appended where the listed files end.
        var chain = manifest.files
        var adopted: [String] = []
        var files: [LiveFile] = []
        var tail = Tail(end: 0, nextSequence: 1)
        var pendingTruncation: Int64?
        var drop: DropPoint?
        var index = 0
        while index < chain.count {
            let name = chain[index]
            let filePath = path(name)
            var bytes: [UInt8]?
            do throws(JournalError) { bytes = try fs.readFile(filePath) } catch {
                guard case .io(let errno, _) = error.code, errno == ENOENT else { throw error }
            }
            // A gap before this file, or a missing file, that an unlisted log fills: walk that
            // log first. (With no unlisted log, as at nearly every open, nothing is parsed twice.)
            if index > 0, !unlisted.logs.isEmpty, bytes.flatMap({ Self.header(of: $0, name: name) })?.firstSequence != tail.nextSequence,
               let fill = unlisted.continuation(at: tail.nextSequence, after: fileNumber(chain[index - 1]), before: fileNumber(name)) {
                chain.insert(fill.name, at: index)
                adopted.append(fill.name)
                continue
            }
            guard let bytes else {
                let reason = "MANIFEST lists \(name), which does not exist (a segment is missing)"
                guard pointInTime else { throw JournalError(.corrupt, reason, file: filePath) }
                drop = DropPoint(index: index, offset: 0, reason: reason, recordsAfter: 0)
                break
            }
            let isLast = index == chain.count - 1 && !unlisted.hasLog(after: fileNumber(name) ?? 0)
            let result: Result<(LiveFile, Int64?, DropPoint?), JournalError> = bytes.withUnsafeBytes { raw in
                checkSegment(raw, name: name, index: index, isLast: isLast, tail: &tail)
            }
            let (file, torn, dropPoint) = try result.get()
            if let dropPoint {
                drop = dropPoint
                if dropPoint.offset > 0 { files.append(file) }
                break
            }
            files.append(file)
            if let torn {
                pendingTruncation = file.size
                let tornTail = JournalOpenReport.TornTail(file: filePath, offset: file.size, bytes: torn, reason: tornReason)
                report.tornTail = tornTail
                log("torn tail: \(torn) bytes at offset \(file.size) of \(filePath) (\(tornReason)); truncated before the next append")
            }
            if index == chain.count - 1, torn == nil,
               let next = unlisted.continuation(at: tail.nextSequence, after: fileNumber(name), before: nil) {
                chain.append(next.name)
                adopted.append(next.name)
            }
            index += 1
        }

        // Unlisted logs neither adopted nor superseded by the base hold records nobody else
        // has: corruption, refused before anything is changed, or moved aside.
        let firstLive = files.first?.header.firstSequence ?? tail.nextSequence
        let adoptedSet = Set(adopted.filter { name in files.contains { $0.name == name } })
        let (superseded, strays) = unlisted.remaining(adopted: Set(adopted), firstLiveSequence: firstLive)
        if let stray = strays.first, !pointInTime {
            throw JournalError(.corrupt, SegmentSet.strayReason(stray) + "; `repair --keep-prefix` moves it aside", file: path(stray.name), offset: 0)
        }

        var removable = unlisted.leftovers + superseded
        if let drop {
            removable += try dropForRecovery(drop, manifest: &manifest, chain: chain, files: &files, tail: tail, nextFileNumber: &nextFileNumber)
        } else if !adoptedSet.isEmpty {
            manifest = Manifest(files: files.map(\.name))
            var renamed = false
            try fs.replaceFile(path(JournalFormat.manifestFileName), with: manifest.encoded(), directory: directory, renamed: &renamed)
        }
        for name in adopted where adoptedSet.contains(name) {
            report.adoptedFiles.append(path(name))
            log("\(path(name)) was not listed in MANIFEST but continues the sequence: added to MANIFEST with its records")
        }
        if !strays.isEmpty { try moveAside(strays) }
        try removeLeftovers(removable)

        guard let active = files.last else {
            throw JournalError(.corrupt, "no live segment after recovery", file: directory)
        }
        let fd = try fs.open(path(active.name), .readWrite)
        var state = WriterState(
            files: files, activeFD: fd, activeHeader: active.header, activeSeed: active.header.seed,
            tail: tail, segmentStartTail: tail, pendingTruncation: pendingTruncation,
            nextFileNumber: nextFileNumber)
        state.lastSynced = (active.header.number, tail.end)  // as found on disk: nothing to flush
        return state
    }

    /// The header of a segment's bytes, or nil when it does not parse.
    static func header(of bytes: [UInt8], name: String) -> SegmentHeader? {
        bytes.withUnsafeBytes { raw in
            if case .success(let header) = SegmentHeader.parse(raw, file: name) { return header }
            return nil
        }
    }

    private var tornReason = ""

    /// Checks one segment, adding its records to `tail`.
    private mutating func checkSegment(
        _ raw: UnsafeRawBufferPointer, name: String, index: Int, isLast: Bool, tail: inout Tail
    ) -> Result<(LiveFile, Int64?, DropPoint?), JournalError> {
        let filePath = path(name)
        let pointInTime = options.recovery == .pointInTime
        let header: SegmentHeader
        switch SegmentHeader.parse(raw, file: filePath) {
        case .success(let parsed): header = parsed
        case .failure(let error):
            if pointInTime, error.code != .unsupportedVersion {
                return .success((LiveFile(name: name, header: SegmentHeader(kind: .log, salt: 0, number: 0, firstSequence: 0), size: 0), nil,
                                 DropPoint(index: index, offset: 0, reason: error.message, recordsAfter: 0)))
            }
            return .failure(error)
        }
        let expectedKind: JournalFormat.SegmentKind = name.hasSuffix("." + JournalFormat.logExtension) ? .log : .base
        var problem: String?
        if header.kind != expectedKind || header.number != fileNumber(name) {
            problem = "segment header says \(header.kind) number \(header.number), which does not match the file name"
        } else if index > 0, header.firstSequence != tail.nextSequence {
            problem = "segment starts at sequence \(header.firstSequence) but the previous one ends before \(tail.nextSequence) (a segment is missing?)"
        }
        if let problem {
            if pointInTime {
                return .success((LiveFile(name: name, header: header, size: 0), nil,
                                 DropPoint(index: index, offset: 0, reason: problem, recordsAfter: 0)))
            }
            return .failure(JournalError(.corrupt, problem, file: filePath, offset: Int64(JournalFormat.SegmentHeaderField.firstSequence)))
        }
        if index == 0 { tail.nextSequence = header.firstSequence }
        // The schema in force is the last schema record's payload, decompressed here; one that
        // does not decompress is damage at that record, so the scan is redone stopping there.
        var unreadable = options.unreadableRecord
        var counted: Tail
        var scan: (validEnd: Int, nextSequence: UInt64, damage: SegmentDamage?)
        while true {
            var lastSchema: ScannedRecord?
            var running = tail
            scan = RecordCodec.scan(raw, header: header, unreadable: unreadable) { record in
                running.add(rawBytes: record.rawLength, storedBytes: record.storedLength)
                if record.type == JournalFormat.RecordType.schema.rawValue {
                    lastSchema = record
                    running.schemaVersions += 1
                }
                return true
            }
            counted = running
            guard let lastSchema else { break }
            switch RecordCodec.payload(of: lastSchema, in: raw, file: filePath) {
            case .success(let payload):
                counted.schema = payload
            case .failure(let error):
                unreadable = JournalOptions.UnreadableRecord(sequence: lastSchema.sequence, reason: error.message)
                continue
            }
            break
        }
        tail = counted
        tail.end = Int64(scan.validEnd)
        let file = LiveFile(name: name, header: header, size: Int64(scan.validEnd))
        guard let damage = scan.damage else { return .success((file, nil, nil)) }
        if damage.couldBeTornTail, isLast, header.kind == .log {
            tornReason = damage.reason
            return .success((file, Int64(raw.count - damage.offset), nil))
        }
        if pointInTime {
            return .success((file, nil, DropPoint(index: index, offset: damage.offset, reason: damage.reason, recordsAfter: damage.recordsDropped)))
        }
        let after = damage.recordsAfter > 0
            ? "; \(damage.recordsAfter) valid record(s) follow, from offset \(damage.resyncOffset ?? 0)"
            : (isLast ? "" : "; later segments follow")
        return .failure(JournalError(.corrupt, damage.reason + after, file: filePath, offset: Int64(damage.offset), sequence: scan.nextSequence))
    }

    /// A directory without MANIFEST: new, or left by a crash during the very first open.
    private mutating func initialize(names: [String], nextFileNumber: inout UInt64) throws(JournalError) -> Manifest {
        for name in names where fileNumber(name) != nil && !name.hasSuffix(JournalFormat.temporarySuffix) {
            let bytes = try fs.readFile(path(name))
            let holdsRecords: Bool = bytes.withUnsafeBytes { raw in
                guard case .success(let header) = SegmentHeader.parse(raw, file: name) else { return raw.count > JournalFormat.segmentHeaderSize }
                var any = false
                _ = RecordCodec.scan(raw, header: header) { _ in any = true; return false }
                return any
            }
            if holdsRecords {
                throw JournalError(.corrupt, "MANIFEST is missing but \(name) holds records; restore MANIFEST or move the segments away", file: path(JournalFormat.manifestFileName))
            }
        }
        let header = SegmentHeader(kind: .log, salt: .random(in: .min ... .max), number: nextFileNumber, firstSequence: 1)
        let name = fileName(header.number, .log)
        nextFileNumber += 1
        try fs.writeNewFile(path(name) + JournalFormat.temporarySuffix, header.encoded())
        try fs.rename(path(name) + JournalFormat.temporarySuffix, path(name))
        let manifest = Manifest(files: [name])
        var renamed = false
        try fs.replaceFile(path(JournalFormat.manifestFileName), with: manifest.encoded(), directory: directory, renamed: &renamed)
        log("created journal \(directory) with segment \(name)")
        return manifest
    }

    /// Point-in-time recovery: saves everything from the drop point on to `.dropped-` files,
    /// then rewrites MANIFEST without it, then truncates the file the drop starts in.
    ///
    /// - Returns: the files wholly dropped (now saved aside), for removal.
    private mutating func dropForRecovery(
        _ drop: DropPoint, manifest: inout Manifest, chain: [String], files: inout [LiveFile], tail: Tail, nextFileNumber: inout UInt64
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
                recordsDropped += bytes.withUnsafeBytes { raw in
                    guard case .success(let header) = SegmentHeader.parse(raw, file: name) else { return 0 }
                    var count = 0
                    let scan = RecordCodec.scan(raw, header: header) { _ in count += 1; return true }
                    return count + (scan.damage?.recordsAfter ?? 0)
                }
            }
            let saved = try uniqueAsideName(for: name, stamp: stamp)
            try fs.writeNewFile(saved, Array(bytes[min(start, bytes.count)...]))
            report.dropped.append(.init(file: path(name), offset: Int64(start), bytes: Int64(bytes.count - start), savedAs: saved,
                                        reason: index == drop.index ? drop.reason : "follows the damage"))
            log("point-in-time recovery: saved \(bytes.count - start) bytes of \(path(name)) from offset \(start) to \(saved)")
            if index > drop.index || start == 0 { whollyDropped.append(name) }
        }
        try fs.syncDirectory(directory)
        report.recordsDropped += recordsDropped

        var kept = files
        if kept.last?.header.kind != .log {
            let header = SegmentHeader(kind: .log, salt: .random(in: .min ... .max), number: nextFileNumber, firstSequence: tail.nextSequence)
            let name = fileName(header.number, .log)
            nextFileNumber += 1
            try fs.writeNewFile(path(name) + JournalFormat.temporarySuffix, header.encoded())
            try fs.rename(path(name) + JournalFormat.temporarySuffix, path(name))
            kept.append(LiveFile(name: name, header: header, size: Int64(JournalFormat.segmentHeaderSize)))
        }
        manifest = Manifest(files: kept.map(\.name))
        var renamed = false
        try fs.replaceFile(path(JournalFormat.manifestFileName), with: manifest.encoded(), directory: directory, renamed: &renamed)
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
            report.dropped.append(.init(file: path(stray.name), offset: 0, bytes: Int64(stray.size), savedAs: saved, reason: reason))
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
