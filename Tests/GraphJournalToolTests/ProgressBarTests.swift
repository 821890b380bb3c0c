import Foundation
import Glibc
import ObjectGraph
import Synchronization
import Testing

@testable import GraphJournal
@testable import GraphJournalProgress

/// A clock the test moves by hand.
private final class FakeClock: Sendable {
    private let time = Mutex(Duration.zero)
    var now: Duration { time.withLock { $0 } }
    func set(_ milliseconds: Int64) { time.withLock { $0 = .milliseconds(milliseconds) } }
    var closure: @Sendable () -> Duration { { [self] in now } }
}

/// A temporary file the bar writes to, read back by the test.
private final class CapturedOutput {
    let url = Tool.temporaryURL("progress")
    let fd: Int32

    init() throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        fd = open(url.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        if fd < 0 { throw CocoaError(.fileWriteUnknown) }
    }

    /// Everything written so far.
    var text: String { (try? String(contentsOf: url, encoding: .utf8)) ?? "" }

    /// The lines drawn so far, without the carriage return and the erase sequence.
    var frames: [String] {
        text.split(separator: "\r", omittingEmptySubsequences: true).map { String($0) }
            .filter { $0 != "\u{1B}[K" }
            .map { $0.hasSuffix("\u{1B}[K") ? String($0.dropLast(3)) : $0 }
    }

    deinit { close(fd) }
}

@Suite("GraphJournalTool: the progress bar")
struct ProgressBarTests {
    // MARK: The line

    @Test func rendersLabelBarPercentAmountsAndRate() {
        let line = ProgressBar.render(
            label: "verifying", done: 64_000_000, total: 183_000_000, unit: .bytes,
            elapsed: .milliseconds(525), width: 80)
        #expect(line == "verifying [=========>                  ]  34%   64.0 MB / 183.0 MB   121.9 MB/s")
        #expect(line.count == 79, "the last column stays free")
        let done = ProgressBar.render(
            label: "verifying", done: 183_000_000, total: 183_000_000, unit: .bytes,
            elapsed: .seconds(2), width: 80)
        #expect(done == "verifying [============================] 100%  183.0 MB / 183.0 MB    91.5 MB/s")
        let wide = ProgressBar.render(
            label: "verifying", done: 45, total: 100, unit: .bytes, elapsed: .seconds(1), width: 200)
        #expect(
            wide == "verifying [==================>                     ]  45%      45 B / 100 B     0.0 MB/s",
            "40 columns at most")
        let objects = ProgressBar.render(
            label: "writing objects", done: 250_000, total: 1_000_000, unit: .items("objects"),
            elapsed: .seconds(1), width: 100)
        #expect(
            objects
                == "writing objects [======>                 ]  25%    250,000 / 1,000,000 objects    250,000 objects/s"
        )
        let phase = ProgressBar.render(
            label: "compacting: replaying 1,001 records (18.9 MB)", done: 0, total: nil, unit: .bytes,
            elapsed: .milliseconds(2340), width: 80)
        #expect(phase == "compacting: replaying 1,001 records (18.9 MB)… 2.3 s")
    }

    @Test func aNarrowTerminalDropsTheBarThenCutsTheLine() {
        let narrow = ProgressBar.render(
            label: "verifying", done: 1_500, total: 3_000, unit: .bytes, elapsed: .seconds(1), width: 50)
        #expect(narrow == "verifying  50%    1.5 kB / 3.0 kB     0.0 MB/s")
        let tiny = ProgressBar.render(
            label: "verifying", done: 1_500, total: 3_000, unit: .bytes, elapsed: .seconds(1), width: 20)
        #expect(tiny == "verifying  50%    1")
        #expect(
            ProgressBar.render(label: "dumping", done: 5, total: 0, unit: .bytes, elapsed: .zero, width: 60).contains(
                " 100% "))
    }

    @Test func formatsAmounts() {
        #expect(ProgressBar.shortBytes(0) == "0 B")
        #expect(ProgressBar.shortBytes(999) == "999 B")
        #expect(ProgressBar.shortBytes(1_000) == "1.0 kB")
        #expect(ProgressBar.shortBytes(999_949) == "999.9 kB")
        #expect(ProgressBar.shortBytes(999_960) == "1.0 MB")
        #expect(ProgressBar.shortBytes(18_860_179) == "18.9 MB")
        #expect(ProgressBar.shortBytes(2_500_000_000) == "2.5 GB")
        #expect(ProgressBar.grouped(0) == "0")
        #expect(ProgressBar.grouped(999) == "999")
        #expect(ProgressBar.grouped(1_000) == "1,000")
        #expect(ProgressBar.grouped(750_250) == "750,250")
        #expect(ProgressBar.grouped(12_345_678) == "12,345,678")
    }

    // MARK: When it draws

    @Test func drawsNothingBeforeTheDelayThenAtMostTenTimesASecond() throws {
        let clock = FakeClock()
        let output = try CapturedOutput()
        let bar = ProgressBar(
            total: 1_000, label: "verifying", output: output.fd, delay: .milliseconds(500), width: 60,
            clock: clock.closure)
        bar.update(done: 100)
        clock.set(499)
        bar.update(done: 200)
        bar.refresh()
        #expect(output.text.isEmpty, "nothing before half a second")
        clock.set(500)
        bar.update(done: 300)
        #expect(output.frames.count == 1)
        #expect(output.text.hasPrefix("\rverifying ["))
        #expect(output.text.hasSuffix("\u{1B}[K"))
        clock.set(599)
        bar.update(done: 400)
        bar.refresh()
        #expect(output.frames.count == 1, "not again within a tenth of a second")
        clock.set(600)
        bar.update(done: 350)  // smaller than before: ignored
        #expect(output.frames.count == 2)
        #expect(output.frames.last!.contains("  40%  "))
        clock.set(650)
        bar.phase("writing", total: nil)
        #expect(output.frames.last == "writing… 0.0 s", "a new phase is drawn at once")
        clock.set(2_650)
        bar.refresh()
        #expect(output.frames.last == "writing… 2.0 s")
        bar.finish()
        #expect(output.text.hasSuffix("\u{1B}[K\r\u{1B}[K"), "the line is erased")
        let erased = output.text
        clock.set(5_000)
        bar.update(done: 1_000)
        bar.refresh()
        bar.finish()
        #expect(output.text == erased, "nothing after finish")
    }

    @Test func aCommandThatEndsBeforeTheDelayDrawsNothingAtAll() throws {
        let clock = FakeClock()
        let output = try CapturedOutput()
        let bar = ProgressBar(total: 1_000, label: "verifying", output: output.fd, width: 60, clock: clock.closure)
        for done in stride(from: Int64(0), through: 1_000, by: 10) {
            clock.set(done / 3)
            bar.update(done: done)
        }
        bar.finish()
        #expect(output.text.isEmpty)
    }

    @Test func aWalkIsMeasuredInBytesOfTheSegmentsBeforeTheRecordAndItsOffset() throws {
        let clock = FakeClock()
        let output = try CapturedOutput()
        let sizes: [String: Int64] = ["0000000002.base": 1_000, "0000000003.log": 64, "0000000004.log": 500]
        let listed = ["0000000002.base", "0000000003.log", "0000000004.log"]
        let bar = ProgressBar(
            total: 1_564, label: "verifying", output: output.fd, delay: .zero, width: 80, clock: clock.closure)
        var progress = JournalProgress(directory: "/nonexistent", listed: listed, sizes: sizes, bar: bar)
        func entry(_ file: String, _ offset: Int64, _ stored: Int) -> JournalReport.Entry {
            JournalReport.Entry(
                file: file, offset: offset, sequence: 1, kind: .transaction, type: 2,
                storedLength: stored, rawLength: stored, compressed: false)
        }
        let base = entry("0000000002.base", 64, 900)
        progress.within(base, fraction: 0.5)
        let halfway: Int64 = 64 + (24 + 900) / 2
        #expect(bar.progress.done == halfway)
        progress.passed(base)
        #expect(bar.progress.done == base.endOffset)
        // 0000000003.log holds no record: reaching the next file passes it whole.
        progress.passed(entry("0000000004.log", 64, 100))
        let expected: Int64 = 1_000 + 64 + 64 + 24 + 100
        #expect(bar.progress.done == expected)
        #expect(bar.progress.total == 1_564)
    }

    @Test func aHandlerDrawsTheLibrarysReportsWithTheirTotal() throws {
        let clock = FakeClock()
        let output = try CapturedOutput()
        let bar = ProgressBar(
            total: nil, label: "compacting: writing live objects", unit: .items("objects"), output: output.fd,
            delay: .zero, width: 100, clock: clock.closure)
        let handler = bar.handler()
        handler(WorkProgress(operation: .compaction, completed: 0, total: 30_000, unit: .objects))
        #expect(
            output.frames.last?.hasPrefix("compacting: writing live objects [") == true, "a new total is drawn at once")
        #expect(output.frames.last?.contains("   0 / 30,000 objects") == true, "\(output.frames)")
        clock.set(50)
        handler(WorkProgress(operation: .compaction, completed: 12_000, total: 30_000, unit: .objects))
        #expect(output.frames.count == 1, "within a tenth of a second of the last line")
        #expect(bar.progress.done == 12_000 && bar.progress.total == 30_000)
        clock.set(150)
        handler(WorkProgress(operation: .compaction, completed: 30_000, total: 30_000, unit: .objects))
        #expect(output.frames.count == 2)
        #expect(output.frames.last?.contains(" 100%  30,000 / 30,000 objects") == true, "\(output.frames)")
        bar.phase("replaying", total: nil)
        handler(WorkProgress(operation: .open, completed: 0, total: nil, unit: .bytes))
        #expect(output.frames.last == "replaying… 0.0 s", "no total: the seconds elapsed")
        bar.finish()
    }

    // MARK: The binary

    /// A store big enough that its bar is drawn several times with no delay.
    private static let store: URL = {
        let dir = Tool.temporaryURL("progress-store")
        try! Tool.writeLargeStore(at: dir, saves: 60, objectsPerSave: 500)
        return dir
    }()

    static let hasScript = FileManager.default.isExecutableFile(atPath: "/usr/bin/script")

    /// Runs `graph-journal arguments` under `script`, which gives it a pseudo-terminal for
    /// standard input, output and error (unless `redirect` sends standard output elsewhere);
    /// returns what the terminal received, both streams, with `\r\n` line ends.
    private func runOnTerminal(
        _ arguments: [String], delay: String? = "0", redirect: String? = nil
    ) throws -> (status: Int32, screen: String) {
        var command = "TERM=xterm"
        if let delay { command += " GRAPH_JOURNAL_PROGRESS_DELAY=\(delay)" }
        command += " " + ([Tool.binary.path] + arguments).map { "'\($0)'" }.joined(separator: " ")
        if let redirect { command += " > '\(redirect)'" }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        process.arguments = ["-qfec", command, "/dev/null"]
        var environment = ProcessInfo.processInfo.environment
        environment["GRAPH_JOURNAL_PROGRESS_DELAY"] = nil
        process.environment = environment
        let out = Tool.temporaryURL("screen")
        try Data().write(to: out)
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        try process.run()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: try Data(contentsOf: out), as: UTF8.self))
    }

    /// `screen` without the bar's lines and erasures, with `\n` line ends.
    private func withoutBar(_ screen: String) -> String {
        screen.replacingOccurrences(of: #"\r[^\r\n]*\x{1B}\[K"#, with: "", options: .regularExpression)
            .replacingOccurrences(of: "\r\n", with: "\n")
    }

    @Test func withoutATerminalNothingIsDrawnEvenWithNoDelay() throws {
        let store = Self.store.path
        for arguments in [
            ["verify", store], ["verify", "--json", store], ["dump", store], ["dump", "--objects", store],
            ["export", store, "--format", "jsonl"],
        ] {
            let process = Process()
            process.executableURL = Tool.binary
            process.arguments = arguments
            process.environment = ProcessInfo.processInfo.environment.merging([
                "GRAPH_JOURNAL_PROGRESS_DELAY": "0", "TERM": "xterm",
            ]) { $1 }
            let err = Tool.temporaryURL("err")
            try Data().write(to: err)
            process.standardOutput = FileHandle.nullDevice
            process.standardError = try FileHandle(forWritingTo: err)
            try process.run()
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "\(arguments)")
            #expect(try Data(contentsOf: err).isEmpty, "\(arguments): standard error is a file")
        }
        let copy = Tool.temporaryURL("progress-compact")
        try FileManager.default.copyItem(at: Self.store, to: copy)
        let compact = try Tool.run(["compact", copy.path])
        #expect(compact.status == 0 && compact.stderr.isEmpty)
    }

    @Test(.enabled(if: hasScript)) func verifyOnATerminalDrawsABarAndErasesItBeforeTheVerdict() throws {
        let store = Self.store.path
        let plain = try Tool.run(["verify", store])
        let (status, screen) = try runOnTerminal(["verify", store])
        #expect(status == 0)
        #expect(screen.hasPrefix("\rverifying ["), "\(screen.debugDescription)")
        #expect(screen.contains(#/\] +[0-9]+% +[0-9.]+ (B|kB|MB) / [0-9.]+ (kB|MB) +[0-9.]+ MB/s\u{1B}\[K/#))
        #expect(screen.contains("\u{1B}[K\r\u{1B}[Kverify \(store)\r\n"), "erased before the output")
        #expect(withoutBar(screen) == plain.stdout)
        let json = try runOnTerminal(["verify", "--json", store])
        #expect(json.screen.hasPrefix("\rverifying ["))
        #expect(withoutBar(json.screen) == (try Tool.run(["verify", "--json", store])).stdout)
    }

    @Test(.enabled(if: hasScript)) func noProgressAndAShortRunDrawNothingOnATerminal() throws {
        let store = Self.store.path
        let plain = try Tool.run(["verify", store]).stdout.replacingOccurrences(of: "\n", with: "\r\n")
        #expect(try runOnTerminal(["verify", "--no-progress", store]).screen == plain)
        #expect(try runOnTerminal(["dump", "--no-progress", "--objects", store], redirect: "/dev/null").screen.isEmpty)
        // The default half-second delay: a store of 1.2 kB takes a few milliseconds to verify.
        let fixture = Tool.fixtures.appendingPathComponent("v1-clean").path
        let fixturePlain = try Tool.run(["verify", fixture]).stdout.replacingOccurrences(of: "\n", with: "\r\n")
        #expect(try runOnTerminal(["verify", fixture], delay: nil).screen == fixturePlain)
    }

    @Test(.enabled(if: hasScript)) func dumpDrawsABarOnlyWhenItsOutputIsNotTheTerminal() throws {
        let store = Self.store.path
        let expected = try Tool.run(["dump", "--objects", store]).stdout
        let file = Tool.temporaryURL("dump-out").path
        let (status, screen) = try runOnTerminal(["dump", "--objects", store], redirect: file)
        #expect(status == 0)
        #expect(screen.hasPrefix("\rdumping ["))
        #expect(screen.contains("\rwriting objects ["))
        #expect(screen.hasSuffix("\r\u{1B}[K"), "erased at the end")
        #expect(withoutBar(screen).isEmpty)
        #expect(try String(contentsOfFile: file, encoding: .utf8) == expected, "the output is the same")
        let onTerminal = try runOnTerminal(["dump", "--to-seq", "3", store])
        #expect(!onTerminal.screen.contains("\u{1B}[K"), "output on the terminal: no bar among it")
    }

    @Test(.enabled(if: hasScript)) func exportDrawsItsPhasesAndErasesThemUnlessItsOutputIsTheTerminal() throws {
        let store = Self.store.path
        let database = Tool.temporaryURL("export-progress.sqlite").path
        let (status, screen) = try runOnTerminal(["export", store, "--format", "sqlite", "--output", database])
        #expect(status == 0)
        #expect(screen.hasPrefix("\rexporting ["), "\(screen.debugDescription)")
        #expect(screen.contains(#/\rwriting objects \[[=> ]+\] +[0-9]+% +[0-9,]+ / [0-9,]+ objects/#))
        #expect(screen.hasSuffix("\r\u{1B}[K"), "erased at the end")
        #expect(withoutBar(screen).isEmpty)
        let jsonl = Tool.temporaryURL("export-progress.jsonl").path
        let toFile = try runOnTerminal(["export", store, "--format", "jsonl", "--output", jsonl])
        #expect(toFile.screen.hasPrefix("\rexporting [") && withoutBar(toFile.screen).isEmpty)
        #expect(
            try String(contentsOfFile: jsonl, encoding: .utf8)
                == (try Tool.run(["export", store, "--format", "jsonl"])).stdout)
        // JSON Lines on the terminal itself: no bar among them.
        let fixture = Tool.fixtures.appendingPathComponent("v1-clean").path
        let onTerminal = try runOnTerminal(["export", fixture, "--format", "jsonl"])
        #expect(onTerminal.status == 0 && !onTerminal.screen.contains("\u{1B}[K"))
        #expect(
            try runOnTerminal(["export", "--no-progress", store, "--format", "jsonl"], redirect: "/dev/null").screen
                .isEmpty)
    }

    @Test(.enabled(if: hasScript)) func compactShowsItsPhasesThenTheSummaryOnACleanLine() throws {
        let copy = Tool.temporaryURL("progress-compact-tty")
        try FileManager.default.copyItem(at: Self.store, to: copy)
        let (status, screen) = try runOnTerminal(["compact", copy.path])
        #expect(status == 0)
        #expect(screen.hasPrefix("\rcompacting: checking ["), "\(screen.debugDescription)")
        #expect(screen.contains("\rcompacting: replaying 61 records ("))
        // The library's reports give each phase its total: bytes replayed, objects written.
        #expect(
            screen.contains(
                #/\rcompacting: replaying 61 records \([0-9.]+ kB\) +[0-9]+% +[0-9.]+ (B|kB) / [0-9.]+ kB/#),
            "\(screen.debugDescription)")
        #expect(
            screen.contains(#/\rcompacting: writing live objects +[0-9]+% +[0-9,]+ / [0-9,]+ objects/#),
            "\(screen.debugDescription)")
        #expect(withoutBar(screen).hasPrefix("compacted \(copy.path): "))
        #expect(try Tool.run(["verify", copy.path]).status == 0)
    }
}
