import Foundation
import GraphJournal
import ObjectGraph

/// Runs the built `graph-journal` binary and gives back its exit code and whole output.
enum Tool {
    /// `graph-journal`, built beside this test bundle (the test target depends on it).
    static let binary: URL = {
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 where !FileManager.default.fileExists(atPath: dir.appendingPathComponent("graph-journal").path) {
            dir = dir.deletingLastPathComponent()
        }
        return dir.appendingPathComponent("graph-journal")
    }()

    /// The repository's `Fixtures/journals`.
    static let fixtures = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/journals")

    /// The expected outputs beside the tests.
    static let expectedDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
        "Expected")

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
        var stdoutBytes: Data
    }

    /// Runs the tool with `arguments`; standard input is `/dev/null` unless `stdin` is given;
    /// `environment` is added to this process's environment.
    static func run(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:]) throws -> Result {
        let process = try start(arguments, stdin: stdin, environment: environment)
        process.process.waitUntilExit()
        return try process.finish()
    }

    struct Running {
        var process: Process
        var out: URL
        var err: URL

        func finish() throws -> Result {
            let stdout = try Data(contentsOf: out)
            let stderr = try Data(contentsOf: err)
            try? FileManager.default.removeItem(at: out)
            try? FileManager.default.removeItem(at: err)
            return Result(
                status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                stderr: String(decoding: stderr, as: UTF8.self), stdoutBytes: stdout)
        }
    }

    /// Starts the tool without waiting; output goes to temporary files.
    static func start(
        _ arguments: [String], stdin: String? = nil, environment: [String: String] = [:]
    ) throws -> Running {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let out = temporaryURL("out"), err = temporaryURL("err")
        try FileManager.default.createDirectory(at: out.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data().write(to: out)
        try Data().write(to: err)
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        if let stdin {
            let pipe = Pipe()
            process.standardInput = pipe
            try process.run()
            pipe.fileHandleForWriting.write(Data(stdin.utf8))
            try pipe.fileHandleForWriting.close()
        } else {
            process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
            try process.run()
        }
        return Running(process: process, out: out, err: err)
    }

    static func temporaryURL(_ name: String) -> URL {
        let parent = temporaryRoot
        try? FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
        return parent.appendingPathComponent("\(name)-\(UUID().uuidString.prefix(8))")
    }

    /// This test process's directory of stores and outputs, removed when the process exits.
    static let temporaryRoot: URL = {
        atexit {
            try? FileManager.default.removeItem(
                at: FileManager.default.temporaryDirectory
                    .appendingPathComponent("graph-journal-tests-\(ProcessInfo.processInfo.processIdentifier)"))
        }
        return FileManager.default.temporaryDirectory
            .appendingPathComponent("graph-journal-tests-\(ProcessInfo.processInfo.processIdentifier)")
    }()

    /// A copy of a fixture in a temporary directory (for commands that may write).
    static func copy(_ fixture: String) throws -> URL {
        let dir = temporaryURL(fixture)
        try FileManager.default.createDirectory(at: dir.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: fixtures.appendingPathComponent(fixture), to: dir)
        return dir
    }

    /// Every file of a directory with its bytes (to prove a command wrote nothing).
    static func contents(of dir: URL) throws -> [String: Data] {
        var result: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) {
            result[name] = try Data(contentsOf: dir.appendingPathComponent(name))
        }
        return result
    }

    /// The expected output file `name`; with `GRAPH_JOURNAL_UPDATE_EXPECTED=1`, `actual` is
    /// written there first (review the diff before committing).
    static func expected(_ name: String, actual: String) throws -> String {
        let url = expectedDirectory.appendingPathComponent(name)
        if ProcessInfo.processInfo.environment["GRAPH_JOURNAL_UPDATE_EXPECTED"] == "1" {
            try FileManager.default.createDirectory(at: expectedDirectory, withIntermediateDirectories: true)
            try Data(actual.utf8).write(to: url)
        }
        return try String(contentsOf: url, encoding: .utf8)
    }

    /// Every live object of a store opened with the library (no model code), by entity and
    /// serial, with every attribute value.
    static func libraryObjects(_ dir: URL) throws -> [String: [UInt64: [String: AttributeValue?]]] {
        var options = StoreOptions()
        options.autoCompactionRatio = nil
        let store = try ObjectStore.openDynamic(at: dir, options: options)
        defer { try? store.close() }
        return try objects(of: store.context)
    }

    /// Every live object of a context, by entity name and serial, with every attribute value.
    static func objects(of context: ModelContext) throws -> [String: [UInt64: [String: AttributeValue?]]] {
        var result: [String: [UInt64: [String: AttributeValue?]]] = [:]
        for entity in context.schema.entities {
            var objects: [UInt64: [String: AttributeValue?]] = [:]
            for object in try context.objects(ofEntityNamed: entity.name) {
                var values: [String: AttributeValue?] = [:]
                for a in entity.attributes { values[a.name] = try object.attributeValue(forKey: a.name) }
                objects[object.objectID!.serial] = values
            }
            result[entity.name] = objects
        }
        return result
    }
}
