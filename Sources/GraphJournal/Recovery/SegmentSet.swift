/// The segment files of a store directory that MANIFEST does not list, classified once, by the
/// rules that every walk of the chain (``SegmentChain``) shares, so that `verify` predicts
/// what `open` does with each of them.
///
/// An unlisted file is one of:
/// - **leftover**: a `.tmp` file, a `.base` (the output of a compaction that did not switch
///   MANIFEST: its records repeat the live ones), or a `.log` holding no valid record or only
///   records older than the live history (superseded by the base). `open` removes it.
/// - **continuation**: a `.log` whose header continues the live sequence where the listed
///   files leave a gap or end, and that holds valid records. It is evidence of a crash (or an
///   operator's restore) between writing the segment and rewriting MANIFEST: `open` adds it to
///   MANIFEST, keeping its records.
/// - **stray**: any other unlisted `.log` that holds bytes past its header: records that do
///   not continue the sequence, or a header that does not parse. It is corruption: a default
///   `open` refuses, point-in-time recovery moves it aside (`.dropped-<time>`).
struct SegmentSet {
    /// One unlisted `.log` file.
    struct Unlisted {
        var name: String
        /// Nil when the header does not parse.
        var header: SegmentHeader?
        var size: Int
        /// Valid records from the header on, and the sequences they span.
        var records: Int
        var firstRecordSequence: UInt64?
        var lastRecordSequence: UInt64?
    }

    /// Unlisted files removed at open without looking at their records.
    private(set) var leftovers: [String] = []
    /// Unlisted `.log` files, by file number.
    private(set) var logs: [Unlisted] = []

    /// No unlisted file: the set of a chain `open` settled.
    init() {}

    /// Reads the unlisted segment files of `names` (a directory listing).
    ///
    /// - Throws: ``JournalError`` when one cannot be read, or is not a regular file.
    init(fs: FileSystem, directory: String, names: [String], manifest: Manifest) throws(JournalError) {
        let listed = Set(manifest.files)
        for name in names.sorted() where !listed.contains(name) {
            if name == JournalFormat.manifestFileName + JournalFormat.temporarySuffix {
                leftovers.append(name)
                continue
            }
            guard let number = fileNumber(name) else { continue }
            if name.hasSuffix(JournalFormat.temporarySuffix) || name.hasSuffix("." + JournalFormat.baseExtension) {
                leftovers.append(name)
                continue
            }
            let bytes = try fs.readFile(directory + "/" + name)
            let unlisted = Self.unlistedLog(bytes, name: name, number: number)
            if unlisted.header == nil && unlisted.size <= JournalFormat.segmentHeaderSize
                || unlisted.header != nil && unlisted.records == 0
            {
                leftovers.append(name)
            } else {
                logs.append(unlisted)
            }
        }
    }

    /// An unlisted `.log` file numbered `number` (its name says), from its bytes: its header
    /// when it parses and matches the name, and its valid records.
    private static func unlistedLog(_ bytes: [UInt8], name: String, number: UInt64) -> Unlisted {
        var file = Unlisted(name: name, header: nil, size: bytes.count, records: 0)
        guard case .success(let header) = SegmentHeader.parse(bytes, file: name), header.number == number,
            header.kind == .log
        else { return file }
        file.header = header
        _ = RecordCodec.scan(bytes, header: header) { record in
            file.records += 1
            if file.firstRecordSequence == nil { file.firstRecordSequence = record.sequence }
            file.lastRecordSequence = record.sequence
            return true
        }
        return file
    }

    /// The unlisted log that continues the live sequence at `sequence`, with a file number
    /// between `after` and `before` (exclusive; nil for no bound); nil when there is none.
    func continuation(at sequence: UInt64, after: UInt64?, before: UInt64?) -> Unlisted? {
        logs.first { file in
            guard let header = file.header, header.firstSequence == sequence, file.records > 0 else { return false }
            if let after, header.number <= after { return false }
            if let before, header.number >= before { return false }
            return true
        }
    }

    /// Whether an unlisted log with records (or bytes past a header that does not parse) has
    /// a file number above `number`: then the listed file numbered `number` is not the last
    /// word of the journal, and damage at its end is not a torn tail.
    func hasLog(after number: UInt64) -> Bool {
        logs.contains { file in (file.header?.number ?? fileNumber(file.name) ?? 0) > number }
    }

    /// The unlisted logs that are not adopted (not in `adopted`), split into those whose
    /// records are all older than `firstLiveSequence` (superseded: leftovers) and strays.
    func remaining(adopted: Set<String>, firstLiveSequence: UInt64) -> (superseded: [String], strays: [Unlisted]) {
        var superseded: [String] = []
        var strays: [Unlisted] = []
        for file in logs where !adopted.contains(file.name) {
            if file.header != nil, let last = file.lastRecordSequence, last < firstLiveSequence {
                superseded.append(file.name)
            } else {
                strays.append(file)
            }
        }
        return (superseded, strays)
    }

    /// Why a stray is corruption, for messages.
    static func strayReason(_ file: Unlisted) -> String {
        guard file.header != nil, let first = file.firstRecordSequence, let last = file.lastRecordSequence else {
            return "not listed in MANIFEST, and its \(file.size) bytes do not start with a valid segment header"
        }
        return
            "not listed in MANIFEST, and its \(file.records) valid record(s) (sequences \(first)...\(last)) do not continue the live sequence"
    }
}
