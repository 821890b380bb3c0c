public import ArgumentParser
import Foundation
import Glibc
public import GraphJournal
public import ObjectGraph
import Synchronization

/// The `--no-progress` flag of the commands that draw a ``ProgressBar``.
public struct ProgressOptions: ParsableArguments {
    /// Whether `--no-progress` was given.
    @Flag(
        name: .customLong("no-progress"),
        help:
            "Draw no progress bar. Without this flag one is drawn on standard error only when it is a terminal and the command runs longer than half a second."
    )
    public var noProgress = false

    /// No flag given: a bar where a terminal shows it.
    public init() {}
}

/// A one-line progress bar on standard error, like `pv`'s or `cargo`'s: what a phase has done
/// out of its total, the percentage and the rate,
///
///     verifying [=========>                  ]  34%   64.0 MB / 183.0 MB   121.9 MB/s
///
/// redrawn in place (a carriage return, then the line, then "erase to the end of the line")
/// at most ten times a second, and erased by ``finish()``, so that the command's own output
/// starts on a clean line. Nothing is drawn before ``delay`` has passed since the bar was
/// created: a command that ends sooner draws nothing at all.
///
/// A phase with no known total (``phase(_:total:unit:)`` with nil) shows its label and the
/// seconds elapsed instead. ``redrawPeriodically()`` keeps the line moving while the caller
/// has nothing to report (a long record, or work done inside the library).
///
/// ``onStandardError(label:total:unit:options:outputIsStandardOutput:)`` decides whether to
/// draw at all; the initializer always draws, to the descriptor it is given, with the clock
/// it is given (the tests pass a fake one).
public final class ProgressBar: Sendable {
    /// What a phase counts.
    public enum Unit: Sendable, Equatable {
        /// Bytes, shown as `12.3 MB`, with a rate in MB/s.
        case bytes
        /// Things of the given name (`objects`), shown as counts, with a rate per second.
        case items(String)
    }

    /// How long a command runs before the bar is drawn.
    static let defaultDelay = Duration.milliseconds(500)
    /// The shortest time between two redraws.
    static let interval = Duration.milliseconds(100)

    private struct State {
        var label: String
        /// Nil: the phase shows the elapsed time instead of a bar.
        var total: Int64?
        var unit: Unit
        var done: Int64 = 0
        /// When the phase began, on ``clock``: the rate is measured from there.
        var phaseStart: Duration
        /// When the line was last drawn; nil before the first time.
        var lastDraw: Duration?
        /// Whether a line is on the terminal (to be erased by ``finish()``).
        var visible = false
        var finished = false
    }

    private let fd: Int32
    private let delay: Duration
    /// The line's maximum width in columns; nil asks the terminal at every redraw.
    private let width: Int?
    /// Monotonic time since an origin before the bar's creation.
    private let clock: @Sendable () -> Duration
    /// When the bar was created, on ``clock``.
    private let created: Duration
    private let state: Mutex<State>

    /// A bar for a first phase of `total` `unit`s; nothing is drawn yet.
    ///
    /// - Parameter total: the phase's total, or nil to show the elapsed time instead.
    /// - Parameter label: what is going on, at the start of the line.
    /// - Parameter fd: the descriptor the line is written to.
    /// - Parameter delay: nothing is drawn before this time has passed since now.
    /// - Parameter width: the columns the line may take; nil asks the terminal (80 when it
    ///   does not say).
    /// - Parameter clock: monotonic time; it must not go backwards.
    init(
        total: Int64?, label: String, unit: Unit = .bytes, output fd: Int32 = STDERR_FILENO,
        delay: Duration = ProgressBar.defaultDelay, width: Int? = nil,
        clock: @escaping @Sendable () -> Duration = ProgressBar.monotonicClock()
    ) {
        self.fd = fd
        self.delay = delay
        self.width = width
        self.clock = clock
        let now = clock()
        created = now
        state = Mutex(State(label: label, total: total, unit: unit, phaseStart: now))
    }

    /// The bar a command draws on standard error, or nil when none is to be drawn: with
    /// `--no-progress`, when standard error is not a terminal (a pipe, a file, CI, the tests)
    /// or is a dumb one (`TERM=dumb`), and, for a command whose output goes to standard output
    /// as it runs (`dump`), when standard output is a terminal too: the bar would be drawn
    /// among the output lines. It is redrawn periodically (``redrawPeriodically()``).
    ///
    /// `GRAPH_JOURNAL_PROGRESS_DELAY` (seconds) replaces the half-second delay; the tests set
    /// it to 0 to see the bar of a small store.
    public static func onStandardError(
        label: String, total: Int64?, unit: Unit = .bytes, options: ProgressOptions,
        outputIsStandardOutput: Bool = false
    ) -> ProgressBar? {
        guard !options.noProgress, isTerminal(STDERR_FILENO), ProcessInfo.processInfo.environment["TERM"] != "dumb",
            !(outputIsStandardOutput && isTerminal(STDOUT_FILENO))
        else { return nil }
        var delay = defaultDelay
        if let text = ProcessInfo.processInfo.environment["GRAPH_JOURNAL_PROGRESS_DELAY"], let seconds = Double(text),
            seconds >= 0
        {
            delay = .milliseconds(Int64(seconds * 1000))
        }
        let bar = ProgressBar(total: total, label: label, unit: unit, delay: delay)
        bar.redrawPeriodically()
        return bar
    }

    /// Monotonic time since the call.
    static func monotonicClock() -> @Sendable () -> Duration {
        let origin = ContinuousClock.now
        return { ContinuousClock.now - origin }
    }

    /// Sets how much the phase has done (a smaller value than before is ignored: the bar never
    /// goes back) and redraws the line if the delay has passed and it was not drawn in the
    /// last tenth of a second.
    public func update(done: Int64) {
        state.withLock { s in
            if done > s.done { s.done = done }
            draw(&s, force: false)
        }
    }

    /// Starts a new phase: its label and total, nothing done; drawn at once once the delay has
    /// passed.
    ///
    /// - Parameter total: the phase's total, or nil to show the elapsed time instead.
    public func phase(_ label: String, total: Int64?, unit: Unit = .bytes) {
        state.withLock { s in
            s.label = label
            s.total = total
            s.unit = unit
            s.done = 0
            s.phaseStart = clock()
            draw(&s, force: true)
        }
    }

    /// Sets the phase's total (nil: none, the elapsed time is shown) and how much it has done,
    /// as ``update(done:)`` does: for work whose total its reports give. A new total is drawn at
    /// once (once the delay has passed), as a new phase is.
    public func update(done: Int64, total: Int64?) {
        state.withLock { s in
            let changed = s.total != total
            s.total = total
            if done > s.done { s.done = done }
            draw(&s, force: changed)
        }
    }

    /// A handler that draws the library's progress reports (an open's replay, a compaction) on
    /// this bar, in the phase's unit: each report's total and what it completed.
    public func handler() -> ProgressHandler {
        { [self] progress in update(done: Int64(progress.completed), total: progress.total.map { Int64($0) }) }
    }

    /// Adds `bytes` to the phase's total (a file found to belong to the work on the way).
    public func extendTotal(by bytes: Int64) {
        state.withLock { s in s.total = s.total.map { $0 + bytes } }
    }

    /// What the phase has done out of its total (nil: no total).
    var progress: (done: Int64, total: Int64?) {
        state.withLock { ($0.done, $0.total) }
    }

    /// Redraws the line as ``update(done:)`` would, without changing what is done.
    func refresh() {
        state.withLock { draw(&$0, force: false) }
    }

    /// Erases the line, if one was drawn, and draws nothing more. Call it before anything
    /// else is written to the terminal; calling it again does nothing.
    public func finish() {
        state.withLock { s in
            if s.visible { write("\r\u{1B}[K") }
            s.visible = false
            s.finished = true
        }
    }

    /// Redraws the line every tenth of a second on a thread of its own, until ``finish()``:
    /// the elapsed time and the rate keep moving while the caller has nothing to report.
    public func redrawPeriodically() {
        let thread = Thread { [self] in
            while !state.withLock({ $0.finished }) {
                Thread.sleep(forTimeInterval: 0.1)
                refresh()
            }
        }
        thread.start()
    }

    /// Writes the line if it is due (or `force`d, once the delay has passed).
    private func draw(_ s: inout State, force: Bool) {
        guard !s.finished else { return }
        let now = clock()
        guard now - created >= delay else { return }
        if !force, let last = s.lastDraw, now - last < Self.interval { return }
        s.lastDraw = now
        let line = Self.render(
            label: s.label, done: s.done, total: s.total, unit: s.unit,
            elapsed: now - s.phaseStart, width: width ?? terminalWidth())
        write("\r" + line + "\u{1B}[K")
        s.visible = true
    }

    /// The columns of the terminal on ``fd``; 80 when it does not say.
    private func terminalWidth() -> Int {
        var size = winsize()
        guard ioctl(fd, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
        return Int(size.ws_col)
    }

    /// Writes all of `text`; a failed write is dropped (the bar is only decoration).
    private func write(_ text: String) {
        var bytes = Array(text.utf8)
        bytes.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return }
                offset += n
            }
        }
    }

    // MARK: Rendering

    /// The line for a phase: `label [====>     ]  45%  12.3 MB / 27.4 MB  5.6 MB/s`, or
    /// `label… 12.3 s` without a total; at most `width - 1` characters (the last column is left
    /// free, so that no terminal wraps the line). The bar takes what the text leaves, up to 40
    /// columns; below 10 it is left out, and a line still too long is cut.
    static func render(label: String, done: Int64, total: Int64?, unit: Unit, elapsed: Duration, width: Int) -> String {
        let room = max(width - 1, 1)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        guard let total else { return cut("\(label)… " + String(format: "%.1f", seconds) + " s", to: room) }
        let done = min(max(done, 0), max(total, 0))
        let percent = total > 0 ? Int(done * 100 / total) : 100
        var text = " " + String(repeating: " ", count: max(0, 3 - String(percent).count)) + "\(percent)%"
        // Numbers are padded to fixed widths, so that the bar keeps its length as they grow.
        let rate = seconds > 0 ? Double(done) / seconds : 0
        switch unit {
        case .bytes:
            text +=
                "  \(padded(shortBytes(done), 8)) / \(shortBytes(total))  " + String(format: "%6.1f", rate / 1e6)
                + " MB/s"
        case .items(let name):
            let totalText = grouped(total)
            text +=
                "  \(padded(grouped(done), totalText.count)) / \(totalText) \(name)  \(padded(grouped(Int64(rate)), 9)) \(name)/s"
        }
        let inner = min(40, room - label.count - 3 - text.count)
        guard inner >= 10 else { return cut(label + text, to: room) }
        let filled = total > 0 ? Int(Int64(inner) * done / total) : inner
        let bar =
            filled >= inner
            ? String(repeating: "=", count: inner)
            : String(repeating: "=", count: filled) + ">" + String(repeating: " ", count: inner - filled - 1)
        return label + " [" + bar + "]" + text
    }

    /// `812 B`, `12.3 kB`, `274.2 MB`, `1.5 GB` (units of 1000, as ``formatBytes(_:)``).
    public static func shortBytes(_ bytes: Int64) -> String {
        if bytes < 1000 { return "\(bytes) B" }
        let units = ["kB", "MB", "GB", "TB"]
        var value = Double(bytes) / 1000
        var unit = 0
        while value >= 999.95 && unit < units.count - 1 { value /= 1000; unit += 1 }
        return String(format: "%.1f", value) + " " + units[unit]
    }

    /// `1,234,567`.
    public static func grouped(_ n: Int64) -> String {
        let digits = String(n.magnitude)
        var result = ""
        for (i, digit) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { result += "," }
            result.append(digit)
        }
        return (n < 0 ? "-" : "") + result
    }

    private static func padded(_ text: String, _ width: Int) -> String {
        String(repeating: " ", count: max(0, width - text.count)) + text
    }

    private static func cut(_ line: String, to room: Int) -> String {
        line.count <= room ? line : String(line.prefix(room))
    }
}

/// How far a walk of a journal got, in bytes of its live segments: the first phase of
/// `verify`, `dump` and `compact`. The total is the size on disk of the segments MANIFEST lists
/// (a log a walk adopts without MANIFEST listing it is added when it is reached); a record
/// handed over by the walk (its ``JournalReport/Entry``: file and offset) is at the sizes of the
/// files before its own plus its offset in it.
public struct JournalProgress {
    /// The bar drawn.
    public let bar: ProgressBar
    /// The live segments in MANIFEST order.
    private let listed: [String]
    private let directory: String
    private var sizes: [String: Int64]
    /// Where each file reached so far starts, counting the files before it.
    private var fileStart: [String: Int64] = [:]
    /// The file of the last record handed over, and where it starts.
    private var last: (file: String, start: Int64) = ("", 0)
    /// Where the file after the last one reached starts.
    private var nextStart: Int64 = 0
    /// The listed files before this index were reached or passed.
    private var nextListed = 0

    /// The progress of a walk of the journal in `directory`, or nil when no bar is to be drawn
    /// (``ProgressBar/onStandardError(label:total:unit:options:outputIsStandardOutput:)``).
    public init?(directory: String, label: String, options: ProgressOptions, outputIsStandardOutput: Bool = false) {
        guard !options.noProgress else { return nil }
        let listed = Self.manifestFiles(directory: directory)
        let sizes = segmentSizes(directory: directory, files: listed)
        let total = listed.reduce(Int64(0)) { $0 + (sizes[$1] ?? 0) }
        guard
            let bar = ProgressBar.onStandardError(
                label: label, total: total, options: options,
                outputIsStandardOutput: outputIsStandardOutput)
        else { return nil }
        self.init(directory: directory, listed: listed, sizes: sizes, bar: bar)
    }

    /// The progress of a walk of `listed` files of the given sizes, drawn on `bar` (for tests).
    init(directory: String, listed: [String], sizes: [String: Int64], bar: ProgressBar) {
        self.directory = directory
        self.listed = listed
        self.sizes = sizes
        self.bar = bar
    }

    /// The bytes of the journal up to the end of `entry`'s record, drawn as done.
    public mutating func passed(_ entry: JournalReport.Entry) {
        bar.update(done: position(entry.file, entry.endOffset))
    }

    /// The bytes up to `fraction` (0...1) of `entry`'s record, drawn as done (a record whose
    /// handling takes long reports its progress through it).
    public mutating func within(_ entry: JournalReport.Entry, fraction: Double) {
        let start = position(entry.file, entry.offset)
        let end = position(entry.file, entry.endOffset)
        bar.update(done: start + Int64(Double(end - start) * min(max(fraction, 0), 1)))
    }

    /// Erases the bar.
    public func finish() { bar.finish() }

    /// Where `offset` of `file` is in the walk: the files before it (in the order they are
    /// reached; listed files with no record count as passed) plus the offset.
    private mutating func position(_ file: String, _ offset: Int64) -> Int64 {
        if file == last.file { return last.start + offset }
        if let start = fileStart[file] {
            last = (file, start)
            return start + offset
        }
        var start = nextStart
        if let index = listed.firstIndex(of: file), index >= nextListed {
            for skipped in listed[nextListed..<index] where fileStart[skipped] == nil { start += sizes[skipped] ?? 0 }
            nextListed = index + 1
        } else if sizes[file] == nil {
            // Not listed: a log the walk adopts; it adds to the total.
            let size = segmentSizes(directory: directory, files: [file])[file] ?? 0
            sizes[file] = size
            bar.extendTotal(by: size)
        }
        fileStart[file] = start
        last = (file, start)
        nextStart = start + (sizes[file] ?? 0)
        return start + offset
    }

    /// The files MANIFEST lists (its `log NAME` and `base NAME` lines), in order; empty when it
    /// cannot be read. Only the bar's total depends on it: the walk reads MANIFEST itself and
    /// reports what is wrong with it.
    static func manifestFiles(directory: String) -> [String] {
        guard let text = try? String(contentsOfFile: directory + "/MANIFEST", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ")
            guard parts.count == 2, parts[0] == "log" || parts[0] == "base" else { return nil }
            return String(parts[1])
        }
    }
}

/// The bytes of the live segment files, by name.
public func segmentSizes(directory: String, files: [String]) -> [String: Int64] {
    var sizes: [String: Int64] = [:]
    for name in files {
        var info = stat()
        if stat(directory + "/" + name, &info) == 0 { sizes[name] = Int64(info.st_size) }
    }
    return sizes
}

/// Whether a file descriptor is a terminal.
public func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }
