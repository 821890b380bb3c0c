// Results/peers.json: every run's value behind peers.md's tables and charts, per system, metric
// and N, with their medians; and `peer-comparison render`, which redraws the charts from such
// a file without measuring anything:
//
//     swift run -c release peer-comparison render --from Results/peers.json --out /tmp/charts

import Foundation

/// The samples a report is drawn from, `samples[system][metric][N]` (one value per run, in run
/// order), with the run's sizes and number of repeats.
struct Measurements {
    var sizes: [Int]
    var repeats: Int
    var samples: [System: [String: [Int: [Double]]]]

    /// The median of `metric`'s runs for `system` at `n`; `nil` when there is none.
    func med(_ system: System, _ metric: String, _ n: Int) -> Double? {
        median(samples[system]?[metric]?[n] ?? [])
    }
}

/// The JSON form of a run: peers.json.
///
/// Dictionaries are keyed by `System`'s raw value, the metric's name (as in the worker's
/// `RESULT` lines: the suffix gives the unit, see `units`), and N in decimal. A value that was
/// not measured (a worker that printed no figure) is `null` in `runs`, and `median` is absent
/// where there is no finite median.
struct ResultsFile: Codable {
    /// What a metric's name says of its unit.
    static let units: [String: String] = [
        "*_s": "seconds",
        "*_bytes, used_memory, *_used_memory_peak": "bytes",
        "*_per_s": "transactions per second",
        "rewrite_automatic": "1 when Redis's automatic AOF rewrite was already running at BGREWRITEAOF, else 0",
    ]

    struct Sample: Codable {
        var median: Double?
        var runs: [Double?]
    }

    struct SystemResults: Codable {
        var title: String
        /// metric → N → sample.
        var metrics: [String: [String: Sample]]
    }

    struct Transactions: Codable {
        /// The N of the stores (b) runs on.
        var storeSize: Int
        var fsyncOnCount: Int
        var fsyncOffCount: Int
    }

    /// Bumped when the layout changes.
    var format = 1
    var generated: String
    var libraryCommit: String
    var arguments: [String]
    var repeats: Int
    var sizes: [Int]
    var transactions: Transactions
    var units: [String: String]
    var systems: [String: SystemResults]

    init(
        _ measurements: Measurements, generated: String, libraryCommit: String, arguments: [String],
        transactions: Transactions
    ) {
        self.generated = generated
        self.libraryCommit = libraryCommit
        self.arguments = arguments
        repeats = measurements.repeats
        sizes = measurements.sizes
        self.transactions = transactions
        units = Self.units
        var systems: [String: SystemResults] = [:]
        for system in System.allCases {
            guard let metrics = measurements.samples[system] else { continue }
            systems[system.rawValue] = SystemResults(
                title: system.title,
                metrics: metrics.mapValues { byN in
                    Dictionary(
                        uniqueKeysWithValues: byN.map { n, values in
                            (
                                String(n),
                                Sample(
                                    median: median(values).flatMap { $0.isFinite ? $0 : nil },
                                    runs: values.map { $0.isFinite ? $0 : nil })
                            )
                        })
                })
        }
        self.systems = systems
    }

    /// The samples again, every `null` run as NaN as it was measured.
    func measurements() throws -> Measurements {
        var samples: [System: [String: [Int: [Double]]]] = [:]
        for (key, results) in systems {
            guard let system = System(rawValue: key) else {
                throw ResultsFileError(
                    "unknown system \"\(key)\" (known: \(System.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            for (metric, byN) in results.metrics {
                for (nText, sample) in byN {
                    guard let n = Int(nText) else {
                        throw ResultsFileError("\(key).\(metric): N \"\(nText)\" is not an integer")
                    }
                    samples[system, default: [:]][metric, default: [:]][n] = sample.runs.map { $0 ?? .nan }
                }
            }
        }
        return Measurements(sizes: sizes, repeats: repeats, samples: samples)
    }

    /// The file's text: pretty-printed, keys sorted, so that two runs diff line by line.
    func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    static func read(_ url: URL) throws -> ResultsFile {
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            throw ResultsFileError("cannot read \(url.path): \(error.localizedDescription)")
        }
        do { return try JSONDecoder().decode(ResultsFile.self, from: data) } catch {
            throw ResultsFileError("\(url.path) is not a peer-comparison results file: \(error)")
        }
    }
}

struct ResultsFileError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The report's charts: file name and drawing function, in the order peers.md mentions them.
let charts: [(file: String, draw: @Sendable (Measurements) -> String)] = [
    ("bulk-upsert.svg", bulkUpsertChart),
    ("cold-start.svg", coldStartChart),
    ("memory.svg", memoryChart),
]

/// Writes every chart of `measurements` into `directory` (created if missing); returns the paths.
func writeCharts(_ measurements: Measurements, to directory: URL) throws -> [String] {
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return try charts.map { chart in
        let url = directory.appendingPathComponent(chart.file)
        try chart.draw(measurements).write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }
}

/// `peer-comparison render --from FILE [--out DIR]`: the charts of a results file written by an
/// earlier run, into DIR (default: the file's directory); measures nothing.
func runRender(_ args: [String]) -> Never {
    func value(_ name: String) -> String? {
        guard let i = args.firstIndex(of: name), i + 1 < args.count else { return nil }
        return args[i + 1]
    }
    guard let from = value("--from") else {
        FileHandle.standardError.write(
            Data("usage: peer-comparison render --from Results/peers.json [--out DIR]\n".utf8))
        exit(2)
    }
    let source = URL(fileURLWithPath: from)
    let out = value("--out").map { URL(fileURLWithPath: $0, isDirectory: true) } ?? source.deletingLastPathComponent()
    do {
        let measurements = try ResultsFile.read(source).measurements()
        for path in try writeCharts(measurements, to: out) { print("wrote \(path)") }
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("peer-comparison render: \(error)\n".utf8))
        exit(1)
    }
}
