internal import Foundation

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

        var files: [LiveFile] = []
        var tail = Tail(end: 0, nextSequence: 1)
        var pendingTruncation: Int64?
        var drop: DropPoint?
        for (index, name) in manifest.files.enumerated() {
            let filePath = path(name)
            let isLast = index == manifest.files.count - 1
            let bytes: [UInt8]
            do throws(JournalError) { bytes = try fs.readFile(filePath) } catch {
                if case .io(let errno, _) = error.code, errno == 2 {
                    throw JournalError(.corrupt, "MANIFEST lists \(name), which does not exist", file: filePath)
                }
                throw error
            }
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
        }

        if let drop {
            try dropForRecovery(drop, manifest: &manifest, files: &files, tail: tail, nextFileNumber: &nextFileNumber)
        }
        try removeLeftovers(live: Set(manifest.files))

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
        var lastSchema: ScannedRecord?
        var counted = tail
        let scan = RecordCodec.scan(raw, header: header) { record in
            counted.add(rawBytes: record.rawLength, storedBytes: record.storedLength)
            if record.type == JournalFormat.RecordType.schema.rawValue {
                lastSchema = record
                counted.schemaVersions += 1
            }
            return true
        }
        if let lastSchema {
            switch RecordCodec.payload(of: lastSchema, in: raw, file: filePath) {
            case .success(let payload): counted.schema = payload
            case .failure(let error): return .failure(error)
            }
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
            return .success((file, nil, DropPoint(index: index, offset: damage.offset, reason: damage.reason, recordsAfter: damage.recordsAfter)))
        }
        let after = damage.recordsAfter > 0
            ? "; \(damage.recordsAfter) valid record(s) follow, from offset \(damage.resyncOffset ?? 0)"
            : (isLast ? "" : "; later segments follow")
        return .failure(JournalError(.corrupt, damage.reason + after, file: filePath, offset: Int64(damage.offset)))
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
    /// then rewrites MANIFEST without it, then truncates / removes the originals.
    private mutating func dropForRecovery(
        _ drop: DropPoint, manifest: inout Manifest, files: inout [LiveFile], tail: Tail, nextFileNumber: inout UInt64
    ) throws(JournalError) {
        let stamp = Self.timestamp()
        var recordsDropped = drop.recordsAfter
        for index in drop.index..<manifest.files.count {
            let name = manifest.files[index]
            let bytes = try fs.readFile(path(name))
            let start = index == drop.index ? drop.offset : 0
            if index > drop.index {
                recordsDropped += bytes.withUnsafeBytes { raw in
                    guard case .success(let header) = SegmentHeader.parse(raw, file: name) else { return 0 }
                    var count = 0
                    let scan = RecordCodec.scan(raw, header: header) { _ in count += 1; return true }
                    return count + (scan.damage?.recordsAfter ?? 0)
                }
            }
            let existing = Set(try fs.list(directory))
            var savedName = name + JournalFormat.droppedInfix + stamp
            var suffix = 2
            while existing.contains(savedName) {
                savedName = name + JournalFormat.droppedInfix + stamp + "-\(suffix)"
                suffix += 1
            }
            let saved = path(savedName)
            try fs.writeNewFile(saved, Array(bytes[min(start, bytes.count)...]))
            report.dropped.append(.init(file: path(name), offset: Int64(start), bytes: Int64(bytes.count - start), savedAs: saved,
                                        reason: index == drop.index ? drop.reason : "follows the damage"))
            log("point-in-time recovery: saved \(bytes.count - start) bytes of \(path(name)) from offset \(start) to \(saved)")
        }
        try fs.syncDirectory(directory)
        report.recordsDropped = recordsDropped

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
        // The originals of wholly dropped files are now unlisted: removeLeftovers deletes them.
    }

    /// Removes segment files MANIFEST does not list and `.tmp` files: leftovers of an
    /// interrupted roll, compaction or recovery. By the protocol none holds an acknowledged
    /// record that is not also in a live file.
    private mutating func removeLeftovers(live: Set<String>) throws(JournalError) {
        var removed = false
        for name in try fs.list(directory).sorted() {
            let leftover = (fileNumber(name) != nil && !live.contains(name))
                || name == JournalFormat.manifestFileName + JournalFormat.temporarySuffix
            guard leftover else { continue }
            try fs.unlink(path(name))
            report.removedFiles.append(path(name))
            log("removed leftover file \(path(name))")
            removed = true
        }
        if removed { try fs.syncDirectory(directory) }
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
