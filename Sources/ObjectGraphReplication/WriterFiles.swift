public import Foundation

/// What a writer that lost its stream left behind (the `FENCED` file beside its journal): the
/// stream, the epoch it wrote under, who took the stream over, and the records it saved
/// locally that the stream never acknowledged. They stay in its journal, never deleted and
/// never shipped: ``ReplicatedStore/open(at:schema:options:target:)`` refuses the directory
/// (``ReplicationError/Code/fenced``) while the file is there, `graph-journal stats` shows it,
/// and `graph-journal dump DIR --from-seq N` (N = `shippedSequence + 1`) lists the records.
public struct FencedReport: Codable, Sendable, Hashable, CustomStringConvertible {
    /// The stream the writer shipped to.
    public var stream: String
    /// Who this writer was (its lease holder).
    public var holder: String
    /// The epoch it wrote under.
    public var epoch: UInt64
    /// Why it stopped: who took the stream, or how it learned that.
    public var reason: String
    /// The last record the stream acknowledged (the writer's sequence).
    public var shippedSequence: UInt64
    /// The local journal's last record when the writer stopped.
    public var lastSequence: UInt64
    /// When it stopped.
    public var at: Date

    /// Records saved locally and never shipped: `shippedSequence + 1 ... lastSequence`.
    public var unshippedRecords: UInt64 { lastSequence > shippedSequence ? lastSequence - shippedSequence : 0 }

    public var description: String {
        "\(reason); \(unshippedRecords) record\(unshippedRecords == 1 ? "" : "s") saved here were never shipped (\(shippedSequence + 1)...\(lastSequence)) and are kept in this directory"
    }

    /// The report a fenced writer left in `directory`, if any.
    public static func read(from directory: URL) -> FencedReport? {
        guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent(WriterFiles.fenced).path)
        else {
            return nil
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try? decoder.decode(FencedReport.self, from: data)
    }
}

/// The files a writer with a lease keeps beside its journal (Docs/JournalFormat.md,
/// "Directory"): `EPOCH`, the newest epoch it wrote under (written before its first publish
/// under it), and `FENCED` once it lost the stream.
enum WriterFiles {
    static let epoch = "EPOCH"
    static let fenced = "FENCED"

    struct Epoch: Codable, Hashable {
        var stream: String
        var epoch: UInt64
        var holder: String
    }

    static func readEpoch(_ directory: String) -> Epoch? {
        guard let data = FileManager.default.contents(atPath: directory + "/" + epoch) else { return nil }
        return try? JSONDecoder().decode(Epoch.self, from: data)
    }

    static func writeEpoch(_ value: Epoch, in directory: String) throws {
        try write(try JSONEncoder().encode(value), name: epoch, in: directory)
    }

    static func writeFenced(_ report: FencedReport, in directory: String) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try write(try encoder.encode(report), name: fenced, in: directory)
    }

    /// Writes `name` whole or not at all: a temporary file, fsynced, renamed over it, and the
    /// directory fsynced.
    private static func write(_ data: Data, name: String, in directory: String) throws {
        let path = directory + "/" + name
        let temporary = path + ".tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: data) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: temporary])
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: temporary))
        try handle.synchronize()
        try handle.close()
        guard rename(temporary, path) == 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
        }
        let fd = open(directory, O_RDONLY)
        if fd >= 0 {
            _ = fsync(fd)
            close(fd)
        }
    }
}
