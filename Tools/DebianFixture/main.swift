// debian-fixture: turns a Debian `Packages` index into the demo's JSON Lines fixture.

import Foundation
import GraphJournal

let usage = """
    usage: debian-fixture PACKAGES[.lz4] [--count N] [--max-closure N] [--output PATH]

    Converts a Debian Packages index into a dependency-closed slice, written as JSON Lines
    compressed into one LZ4 frame.

    Arguments:
      PACKAGES           a deb822 Packages index; a name ending in .lz4 is an LZ4 frame, as in
                         /var/lib/apt/lists/*_Packages.lz4
    Options:
      --count N          how many packages to keep (default 4000)
      --max-closure N    the most packages one candidate may pull in with its dependencies
                         (default: 5% of --count, at least 1)
      --output PATH      where to write (default Fixtures/debian-packages.jsonl.lz4)
      -h, --help         print this help

    Selection: candidates are taken in order of Priority (required, important, standard,
    optional, extra), then of the 64-bit FNV-1a hash of the package name (a spread over all
    sections and letters that is the same on every machine). Each candidate comes in together
    with every real package its Depends reach (first alternative of "a | b"; virtual packages
    are skipped), if that adds at most --max-closure packages and still fits in --count;
    otherwise it is skipped. So every dependency that names a real package resolves inside the
    slice. Where a name appears twice in the index, the first stanza wins.

    Output: one JSON object per line, sorted by name, with the sorted keys architecture,
    depends, description, homepage, installedSize, maintainer, name, priority, section, sha256,
    size, version (missing optional fields are null).
    """

/// A failure to report on stderr, with the exit status to use.
struct ToolFailure: Error {
    var message: String
    var status: Int32 = 1
}

struct Options {
    var input: String
    var count = 4000
    var maxClosure: Int?
    var output = "Fixtures/debian-packages.jsonl.lz4"

    static func parse(_ arguments: [String]) throws(ToolFailure) -> Options {
        var input: String?
        var options = Options(input: "")
        var remaining = arguments[...]
        func value(for flag: String) throws(ToolFailure) -> String {
            guard let next = remaining.popFirst() else {
                throw ToolFailure(message: "\(flag) needs a value\n\n\(usage)", status: 64)
            }
            return next
        }
        func positive(_ text: String, _ flag: String) throws(ToolFailure) -> Int {
            guard let number = Int(text), number > 0 else {
                throw ToolFailure(message: "\(flag) needs a positive whole number, got \"\(text)\"", status: 64)
            }
            return number
        }
        while let argument = remaining.popFirst() {
            switch argument {
            case "-h", "--help":
                throw ToolFailure(message: usage, status: 0)
            case "--count":
                options.count = try positive(value(for: argument), argument)
            case "--max-closure":
                options.maxClosure = try positive(value(for: argument), argument)
            case "--output":
                options.output = try value(for: argument)
            default:
                guard !argument.hasPrefix("-") else {
                    throw ToolFailure(message: "unknown option \(argument)\n\n\(usage)", status: 64)
                }
                guard input == nil else {
                    throw ToolFailure(message: "only one PACKAGES file, got \(argument) too\n\n\(usage)", status: 64)
                }
                input = argument
            }
        }
        guard let input else {
            throw ToolFailure(message: "missing PACKAGES file\n\n\(usage)", status: 64)
        }
        options.input = input
        return options
    }
}

func readIndex(_ path: String) throws(ToolFailure) -> [UInt8] {
    guard FileManager.default.fileExists(atPath: path) else {
        throw ToolFailure(message: "\(path): no such file")
    }
    let data: Data
    do {
        data = try Data(contentsOf: URL(fileURLWithPath: path))
    } catch {
        throw ToolFailure(message: "\(path): cannot read: \(error.localizedDescription)")
    }
    guard path.hasSuffix(".lz4") else { return [UInt8](data) }
    do {
        return try LZ4.decompressFrame(data)
    } catch {
        throw ToolFailure(message: "\(path): not a valid LZ4 frame: \(error)")
    }
}

func run(_ options: Options) throws(ToolFailure) {
    let bytes = try readIndex(options.input)
    let records: [FixtureRecord]
    do {
        let stanzas = try PackagesIndex.parse(bytes, path: options.input)
        records = try stanzas.map { stanza throws(IndexError) in try FixtureRecord(stanza, path: options.input) }
    } catch {
        throw ToolFailure(message: error.description)
    }

    let selection = SliceSelection(
        records: records, count: options.count,
        maxClosure: options.maxClosure ?? max(1, options.count / 20))
    let kept = selection.select().map { records[$0] }

    let keptNames = Set(kept.map(\.name))
    let edges = kept.reduce(0) { $0 + $1.depends.count }
    let resolved = kept.reduce(0) { $0 + $1.depends.filter(keptNames.contains).count }

    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    var jsonLines: [UInt8] = []
    for record in kept {
        do {
            jsonLines += try encoder.encode(record)
        } catch {
            throw ToolFailure(message: "cannot encode package \(record.name): \(error)")
        }
        jsonLines.append(0x0A)
    }
    let compressed: [UInt8]
    do {
        compressed = try LZ4.compressFrame(jsonLines, level: 12)
    } catch {
        throw ToolFailure(message: "cannot compress the fixture: \(error)")
    }

    let outputURL = URL(fileURLWithPath: options.output)
    do {
        try FileManager.default.createDirectory(
            at: outputURL.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(compressed).write(to: outputURL, options: .atomic)
    } catch {
        throw ToolFailure(message: "\(options.output): cannot write: \(error.localizedDescription)")
    }
    print(
        "debian-fixture: read \(records.count) packages (\(bytes.count) bytes) from \(options.input); "
            + "kept \(kept.count), \(resolved) of \(edges) Depends resolve inside the slice; "
            + "wrote \(jsonLines.count) bytes of JSON Lines as \(compressed.count) bytes of LZ4 to \(options.output)")
}

do {
    try run(Options.parse(Array(CommandLine.arguments.dropFirst())))
} catch {
    if error.status == 0 {
        print(error.message)
    } else {
        FileHandle.standardError.write(Data("debian-fixture: \(error.message)\n".utf8))
    }
    exit(error.status)
}
