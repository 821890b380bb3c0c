/// How far a long operation of the library has got: a bulk import, a mapping run, a sync,
/// a compaction, or the replay of a journal when a store opens.
///
/// An operation given a ``ProgressHandler`` calls it on the caller's thread, synchronously: a
/// first report with nothing completed, one report every few thousand items (see
/// `Docs/Progress.md` for each operation's rate), and a final report with ``completed`` equal
/// to ``total`` once the operation's work is done. ``completed`` never decreases.
///
/// ```swift
/// try context.importUniqueObjects(Package.self, sourceArray: records, progress: { progress in
///     print(progress)   // import: 4,096 of 100,000 objects (4.0 %)
/// })
/// ```
public struct WorkProgress: Sendable, Hashable, CustomStringConvertible {
    /// The operation reporting.
    public enum Operation: String, Sendable, Hashable {
        /// ``ModelContext/importUniqueObjects(_:sourceArray:preProcess:progress:)`` or
        /// ``ModelContext/importObjects(_:sourceArray:progress:)``.
        case `import`
        /// A mapping run (``ModelContext/map(_:with:progress:)-(Data,_,_)`` and its variants).
        case mapping
        /// A sync (``ModelContext/sync(_:sweepLimit:progress:_:)``).
        case sync
        /// ``ObjectStore/compact(progress:)``.
        case compaction
        /// ``ObjectStore/open(at:schema:options:)``: the replay of the journal.
        case open
        /// ``ObjectStore/open(at:migrationPlan:options:)`` migrating a store written at an
        /// earlier version of the model: its stages, then the writing of the new base.
        case migration
    }

    /// What ``WorkProgress/completed`` and ``WorkProgress/total`` count.
    public enum Unit: String, Sendable, Hashable {
        /// Objects (an import's distinct IDs or sources; a compaction's live objects).
        case objects
        /// Source records (a mapping's top-level sources).
        case records
        /// Bytes (of the journal's segments on disk, for the replay at open).
        case bytes
        /// Stages of a migration, and the writing of its base as the last one.
        case stages
    }

    /// The operation reporting.
    public var operation: Operation
    /// How much is done, in ``unit``s: 0 in the first report, ``total`` in the final one.
    public var completed: Int
    /// How much there is to do, in ``unit``s; nil while unknown (a sync before its first
    /// mapping, an import from a sequence that is not a collection).
    public var total: Int?
    /// What ``completed`` and ``total`` count.
    public var unit: Unit

    /// Creates a report.
    public init(operation: Operation, completed: Int, total: Int?, unit: Unit) {
        self.operation = operation
        self.completed = completed
        self.total = total
        self.unit = unit
    }

    /// ``completed`` out of ``total``, from 0 to 1; nil while the total is unknown. An
    /// operation with nothing to do (a total of 0) is complete: 1.
    public var fractionCompleted: Double? {
        guard let total else { return nil }
        guard total > 0 else { return 1 }
        return min(1, max(0, Double(completed) / Double(total)))
    }

    /// `import: 4,096 of 100,000 objects (4.0 %)`, or `sync: 4,096 records` without a total.
    public var description: String {
        let done = Self.grouped(completed)
        guard let total, let fraction = fractionCompleted else {
            return "\(operation.rawValue): \(done) \(unit.rawValue)"
        }
        let percent = (fraction * 1000).rounded(.down) / 10
        return "\(operation.rawValue): \(done) of \(Self.grouped(total)) \(unit.rawValue) (\(percent) %)"
    }

    /// `1,234,567`.
    private static func grouped(_ n: Int) -> String {
        let digits = String(n.magnitude)
        var result = n < 0 ? "-" : ""
        for (i, digit) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { result += "," }
            result.append(digit)
        }
        return result
    }
}

/// Receives the ``WorkProgress`` reports of a long operation, on the operation's own thread.
///
/// Keep it cheap (it runs inside the operation). It may cancel the task running the operation
/// (`withUnsafeCurrentTask { $0?.cancel() }`, or a `Task` handle it captured): the operation
/// notices at its next check and undoes what it did (`Docs/Progress.md`).
public typealias ProgressHandler = @Sendable (WorkProgress) -> Void

/// The reporting and cancellation points of one operation: a first report, then one report
/// and one check of `Task.isCancelled` each time ``advance(to:)`` passes ``next``, then a
/// final report.
///
/// Used inside inlinable import code: the per-item cost is ``advance(to:)``'s one comparison;
/// the report and the check are out of line.
@usableFromInline
struct _WorkReporter {
    /// Items between two reports (and cancellation checks) of an operation counted in objects
    /// or records.
    @usableFromInline static let itemStride = 4096
    /// Bytes between two reports of an operation counted in bytes.
    static let byteStride = 1 << 18

    @usableFromInline let handler: ProgressHandler?
    @usableFromInline let operation: WorkProgress.Operation
    @usableFromInline let unit: WorkProgress.Unit
    @usableFromInline var total: Int?
    /// The count at which the next report and check are due.
    @usableFromInline var next: Int
    @usableFromInline let stride: Int

    @usableFromInline
    init(_ handler: ProgressHandler?, _ operation: WorkProgress.Operation, unit: WorkProgress.Unit, total: Int?) {
        self.handler = handler
        self.operation = operation
        self.unit = unit
        self.total = total
        stride = unit == .bytes ? Self.byteStride : unit == .stages ? 1 : Self.itemStride
        next = stride
    }

    /// The first report (nothing completed), then a cancellation check.
    @usableFromInline
    func begin() throws(CancellationError) {
        report(0)
        try checkCancellation()
    }

    /// Reports `completed` and checks cancellation when it reached the next point.
    @inlinable @inline(__always)
    mutating func advance(to completed: Int) throws(CancellationError) {
        if completed >= next { try _due(completed) }
    }

    @usableFromInline
    mutating func _due(_ completed: Int) throws(CancellationError) {
        next = completed + stride
        report(completed)
        try checkCancellation()
    }

    /// The final report: `completed` is the total from now on.
    @usableFromInline
    mutating func finish(_ completed: Int) {
        total = completed
        report(completed)
    }

    /// Throws when the task running the operation was cancelled.
    @usableFromInline
    func checkCancellation() throws(CancellationError) {
        if Task.isCancelled { throw CancellationError() }
    }

    @usableFromInline
    func report(_ completed: Int) {
        handler?(WorkProgress(operation: operation, completed: completed, total: total, unit: unit))
    }
}
