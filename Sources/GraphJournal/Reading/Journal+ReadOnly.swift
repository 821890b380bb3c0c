/// One record read by ``Journal/readRecords(directory:io:keyring:_:)``: where it lies and its payload.
public struct JournalReadRecord: Sendable, Hashable {
    /// Where the record lies and how it is stored.
    public var entry: JournalReport.Entry
    /// The payload, decompressed.
    public var payload: [UInt8]

    /// Creates a record.
    ///
    /// - Parameter entry: where the record lies and how it is stored.
    /// - Parameter payload: the decompressed payload.
    public init(entry: JournalReport.Entry, payload: [UInt8]) {
        self.entry = entry
        self.payload = payload
    }
}

extension Journal {
    /// Reads every valid live record of a journal, with its payload, without the lock and
    /// without writing anything; returns the same report as ``inspect(directory:io:keyring:)``.
    ///
    /// The walk follows MANIFEST order and stops in each file at its first invalid record, like
    /// `open`; the problems found (torn tail, corruption, leftover files) are in the returned
    /// report. Unlike ``open(directory:options:)`` it never truncates, removes or moves a file,
    /// so tools can read a damaged journal, or one another process is writing (a record being
    /// appended may then show as a torn tail).
    ///
    /// ```swift
    /// let report = try Journal.readRecords(directory: "/var/lib/app/store") { record in
    ///     print(record.entry.sequence, record.entry.kind as Any, record.payload.count)
    /// }
    /// if report.verdict != .clean { print(report.problems) }
    /// ```
    ///
    /// - Parameter directory: the journal's directory.
    /// - Parameter io: the I/O layer.
    /// - Parameter keyring: the keys of sealed records (nil by default): with it each sealed
    ///   record is opened and its payload lent like any other; without it a sealed record is
    ///   framed and checksummed but not lent, and counted in
    ///   ``JournalReport/sealedRecordsNotOpened``.
    /// - Parameter body: called once per valid record in sequence order (skippable record types
    ///   included, with a nil kind); an error it throws stops the walk and is rethrown.
    /// - Returns: the report: files, entries and problems.
    /// - Throws: what `body` throws, or ``JournalError`` when the directory or MANIFEST cannot
    ///   be read (a damaged MANIFEST is thrown: nothing else says which files are live).
    public static func readRecords(
        directory: String, io: JournalIO = .system, keyring: JournalKeyring? = nil,
        _ body: (JournalReadRecord) throws -> Void
    ) throws -> JournalReport {
        try readPayloads(directory: directory, io: io, keyring: keyring) { entry, payload in
            try body(JournalReadRecord(entry: entry, payload: Array(payload)))
        }
    }

    /// Reads every valid live record of a journal as ``readRecords(directory:io:keyring:_:)`` does, but
    /// lends each payload instead of copying it into an array: `body` sees the stored bytes of
    /// a raw record, or one reused buffer decompressed into for a compressed one.
    ///
    /// For the package's tools and tests that look at each payload once and keep nothing of
    /// it: a journal is read with no allocation per record, and each segment is streamed
    /// through one reused window of a few MiB rather than read whole into fresh memory (a
    /// record larger than the window grows it). If a read fails midway through a segment, the
    /// segment is reported unreadable as a whole, but `body` has already seen its records
    /// before the failure. Outside the package, ``streamPayloads(directory:io:keyring:_:)`` lends the
    /// payloads without raw pointers.
    ///
    /// ```swift
    /// var bytes = 0
    /// let report = try Journal.readPayloads(directory: "/var/lib/app/store") { entry, payload in
    ///     bytes += payload.count
    /// }
    /// ```
    ///
    /// - Parameter directory: the journal's directory.
    /// - Parameter io: the I/O layer.
    /// - Parameter keyring: the keys of sealed records (nil by default): with it each sealed
    ///   record is opened and its payload lent like any other; without it a sealed record is
    ///   framed and checksummed but not lent, and counted in
    ///   ``JournalReport/sealedRecordsNotOpened``.
    /// - Parameter body: called once per valid record in sequence order with where it lies and
    ///   its decompressed payload, valid only during the call; an error it throws stops the walk
    ///   and is rethrown.
    /// - Returns: the report: files, entries and problems.
    /// - Throws: what `body` throws, or ``JournalError`` when the directory or MANIFEST cannot
    ///   be read.
    package static func readPayloads(
        directory: String, io: JournalIO = .system, keyring: JournalKeyring? = nil,
        _ body: (JournalReport.Entry, UnsafeRawBufferPointer) throws -> Void
    ) throws -> JournalReport {
        try readPayloads(directory: directory, io: io, window: readWindow, keyring: keyring, body)
    }

    /// Reads every valid live record of a journal as ``readRecords(directory:io:keyring:_:)`` does, but
    /// lends each payload piece by piece (``JournalPayload``) instead of copying it into an
    /// array: a chunked payload, tens of MB for one save of a million objects, comes one
    /// decompressed 1 MiB chunk at a time while the next chunks are decompressed on another
    /// core, and is never held whole.
    ///
    /// For tools that read each payload once, front to back (`graph-journal verify`). The
    /// difference for `body`: a chunk found not to decompress ends a chunked payload's pieces
    /// early, after `body` may have read the chunks before it. The record is then reported as
    /// corrupt, with the same problem ``readRecords(directory:io:keyring:_:)`` reports without lending
    /// it, and `body` must discard what it read of it: ``JournalPayload/finish()`` returns
    /// false. A payload that cannot be decompressed before it is lent (a single LZ4 block, a
    /// chunk table) is still reported without being lent.
    ///
    /// ```swift
    /// var bytes = 0
    /// let report = try Journal.streamPayloads(directory: "/var/lib/app/store") { entry, payload in
    ///     var read = 0
    ///     while let count = payload.withNextPiece({ $0.byteCount }) { read += count }
    ///     if payload.finish() { bytes += read }
    /// }
    /// ```
    ///
    /// - Parameter directory: the journal's directory.
    /// - Parameter io: the I/O layer.
    /// - Parameter keyring: the keys of sealed records (nil by default): with it each sealed
    ///   record is opened and its payload lent like any other; without it a sealed record is
    ///   framed and checksummed but not lent, and counted in
    ///   ``JournalReport/sealedRecordsNotOpened``.
    /// - Parameter body: called once per valid record in sequence order with where it lies and
    ///   its payload, valid only during the call (the journal reads what `body` leaves unread,
    ///   to check it decompresses); an error it throws stops the walk and is rethrown.
    /// - Returns: the report: files, entries and problems.
    /// - Throws: what `body` throws, or ``JournalError`` when the directory or MANIFEST cannot
    ///   be read.
    public static func streamPayloads(
        directory: String, io: JournalIO = .system, keyring: JournalKeyring? = nil,
        _ body: (JournalReport.Entry, JournalPayload) throws -> Void
    ) throws -> JournalReport {
        try walkPayloads(
            directory: directory, io: io, window: readWindow, streamingChunks: true, keyring: keyring, body)
    }

    /// The bytes of a segment ``readPayloads(directory:io:keyring:_:)`` holds at a time: small enough
    /// to stay in the last-level cache, large enough that a read costs little more than its
    /// copy (64 KiB to 4 MiB measured the same on a 1M-object journal).
    static let readWindow = 4 << 20

    /// ``readPayloads(directory:io:keyring:_:)`` with the window size chosen.
    ///
    /// Each segment is streamed through a reused window of `window` bytes (grown only for a
    /// larger record) while its records are clean. At the first byte that is not a clean
    /// record (damage, a wrong sequence, a short file) the rest of the file is read whole and
    /// walked by ``RecordCodec/scan(_:header:end:from:sequence:_:)`` from there, so damage is
    /// described exactly as when the whole file is read. A header that does not parse sends
    /// the whole file that way too.
    ///
    /// A read that fails midway reports the file unreadable, as a failed whole-file read does,
    /// and takes back the file's entries and problems; `body` has then already seen the
    /// records before the failure.
    ///
    /// - Parameter window: the bytes held at a time; nil reads each segment whole first (the
    ///   reference the tests compare the streaming walk with).
    static func readPayloads(
        directory: String, io: JournalIO, window: Int?, keyring: JournalKeyring? = nil,
        _ body: (JournalReport.Entry, UnsafeRawBufferPointer) throws -> Void
    ) throws -> JournalReport {
        // Each payload is one piece here: chunked ones are decompressed whole before `body`.
        try walkPayloads(directory: directory, io: io, window: window, streamingChunks: false, keyring: keyring) {
            entry, payload in
            try body(entry, payload.next() ?? UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }

    /// The walk behind ``readPayloads(directory:io:window:keyring:_:)`` and
    /// ``streamPayloads(directory:io:keyring:_:)``.
    ///
    /// - Parameter streamingChunks: whether a chunked payload is lent chunk by chunk as it is
    ///   decompressed (``ChunkStream``), or decompressed whole first and lent in one piece.
    /// - Parameter keyring: the keys that open sealed records, or nil to frame them only.
    static func walkPayloads(
        directory: String, io: JournalIO, window: Int?, streamingChunks: Bool, keyring: JournalKeyring? = nil,
        _ body: (JournalReport.Entry, JournalPayload) throws -> Void
    ) throws -> JournalReport {
        try withoutActuallyEscaping(body) { body in
            var walk = try PayloadWalk(
                directory: directory, io: io, window: window, streamingChunks: streamingChunks, keyring: keyring,
                body: body)
            return try walk.run()
        }
    }

    /// The first sequence in the header of the segment at `path`, or nil when it cannot be
    /// read or does not parse.
    static func firstSequence(of path: String, fs: FileSystem) -> UInt64? {
        guard let fd = try? fs.open(path, .readOnly) else { return nil }
        defer { fs.closeQuietly(fd) }
        guard let bytes = try? fs.read(fd, path, count: JournalFormat.segmentHeaderSize, at: 0) else { return nil }
        return bytes.withUnsafeBytes { raw in
            if case .success(let header) = SegmentHeader.parse(raw, file: path) { return header.firstSequence }
            return nil
        }
    }

    /// Lists the records that pass their checksum in a segment file from byte `offset` on,
    /// searching byte by byte past damage as the reader's resynchronisation does. Reads only.
    ///
    /// Tools use it to say what bytes they are about to cut hold: a torn tail holds none; the
    /// bytes after corruption may hold transactions that point-in-time recovery would drop.
    /// Sequence numbers are not checked (records after damage need not continue the prefix).
    ///
    /// ```swift
    /// let cut = try Journal.salvageableRecords(inSegment: dir + "/0000000001.log", from: 4120)
    /// print(cut.filter { $0.kind == .transaction }.count, "transactions")
    /// ```
    ///
    /// - Parameter path: the segment file's path.
    /// - Parameter offset: where to start; an offset inside the segment header starts after it.
    /// - Parameter io: the I/O layer.
    /// - Returns: the records found, in file order; empty when the header is unreadable.
    /// - Throws: ``JournalError`` when the file cannot be read.
    public static func salvageableRecords(
        inSegment path: String, from offset: Int64, io: JournalIO = .system
    ) throws(JournalError) -> [JournalReport.Entry] {
        let fs = FileSystem(io: io)
        let bytes = try fs.readFile(path)
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return bytes.withUnsafeBytes { raw in
            guard case .success(let header) = SegmentHeader.parse(raw, file: path) else { return [] }
            var entries: [JournalReport.Entry] = []
            var position = max(Int(clamping: offset), JournalFormat.segmentHeaderSize)
            while position + JournalFormat.recordHeaderSize <= raw.count {
                if RecordCodec.isPlausibleHeader(in: raw, at: position, end: raw.count),
                    case .success(let record) = RecordCodec.record(
                        in: raw, at: position, seed: header.seed, end: raw.count)
                {
                    entries.append(JournalReport.Entry(record, file: name))
                    position = record.end
                } else {
                    position += 1
                }
            }
            return entries
        }
    }
}
