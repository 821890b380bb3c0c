/// The chain of a journal's live segment files, walked one file at a time, and the rules that
/// make it. Every walk of a journal's files drives one: `open` (``JournalOpener``), the
/// read-only walk (``PayloadWalk``: inspect, verify, dump, the tools' checks) and the walks of
/// an open journal (``Journal/walkLiveRecords(_:)``: replay, shipping, restore), so that each
/// rule lives here and nowhere else:
///
/// - **gap fill**: a listed file that does not start where the one before it ended (or is
///   missing) is preceded by the unlisted log that continues the sequence there, numbered
///   between the two (``fillGap(expecting:firstSequence:)``);
/// - **continuation**: after the last file, when it does not end in a torn tail, comes the
///   unlisted log that continues the sequence, numbered above it (``advance(endsTorn:nextSequence:)``);
/// - **torn tail or corruption**: damage at the end of the last word of the journal is a torn
///   tail, anywhere else corruption (``Link/isTornTail(_:kind:)``).
///
/// ```swift
/// var chain = SegmentChain(listed: manifest.files, unlisted: unlisted)
/// while let link = chain.current {
///     if chain.fillGap(expecting: next, firstSequence: firstSequence(of: link.name)) { continue }
///     let endsTorn = walk(link)
///     chain.advance(endsTorn: endsTorn, nextSequence: next)
/// }
/// ```
struct SegmentChain {
    /// One file of the chain, as the walk reaches it.
    struct Link {
        /// The file's name.
        let name: String
        /// Its place in the chain.
        let index: Int
        /// Whether it is the last word of the journal: the chain's last file, with no unlisted
        /// log numbered above it.
        let isLast: Bool

        /// Whether `damage` found in this file, a segment of `kind`, is a torn tail (an append a
        /// crash cut short: a normal end) rather than corruption.
        func isTornTail(_ damage: SegmentDamage, kind: JournalFormat.SegmentKind) -> Bool {
            damage.couldBeTornTail && isLast && kind == .log
        }
    }

    /// The files MANIFEST does not list, judged once.
    let unlisted: SegmentSet
    /// The files of the chain, as far as they are known: MANIFEST's, with the unlisted logs
    /// inserted so far.
    private(set) var names: [String]
    /// The unlisted logs inserted into `names`, in the order they were.
    private(set) var adopted: [String] = []
    /// The index of the file the walk is at.
    private var index = 0

    /// The chain of the `listed` files (MANIFEST's list) and the `unlisted` files around them.
    init(listed: [String], unlisted: SegmentSet) {
        self.names = listed
        self.unlisted = unlisted
    }

    /// The chain `open` settled: its files, with no unlisted file to insert.
    init(settled: [String]) {
        self.init(listed: settled, unlisted: SegmentSet())
    }

    /// The file the walk is at; nil once past the last.
    var current: Link? {
        guard index < names.count else { return nil }
        let name = names[index]
        return Link(
            name: name, index: index, isLast: index == names.count - 1 && !unlisted.hasLog(after: fileNumber(name) ?? 0)
        )
    }

    /// The gap-fill rule: when the current file does not start at `expected` (where the file
    /// before it ends; nil when that is unknown), or is missing, and an unlisted log numbered
    /// between the two continues the sequence there, inserts that log before it.
    /// `firstSequence` (the current file's first sequence, nil when its header cannot be read)
    /// is asked only when there are unlisted logs, as at almost no open.
    ///
    /// - Returns: whether a log was inserted: ``current`` is then that log.
    mutating func fillGap(expecting expected: UInt64?, firstSequence: @autoclosure () -> UInt64?) -> Bool {
        guard index > 0, index < names.count, !unlisted.logs.isEmpty, let expected, firstSequence() != expected,
            let fill = unlisted.continuation(
                at: expected, after: fileNumber(names[index - 1]), before: fileNumber(names[index]))
        else { return false }
        names.insert(fill.name, at: index)
        adopted.append(fill.name)
        return true
    }

    /// Moves past the current file, which ended (unless `endsTorn`) before `nextSequence`
    /// (nil when unknown). The continuation rule: after the last file, when it does not end
    /// torn, the unlisted log that continues the sequence, numbered above it, joins the chain.
    mutating func advance(endsTorn: Bool, nextSequence: UInt64?) {
        if index == names.count - 1, !endsTorn, let nextSequence,
            let next = unlisted.continuation(at: nextSequence, after: fileNumber(names[index]), before: nil)
        {
            names.append(next.name)
            adopted.append(next.name)
        }
        index += 1
    }
}
