public import Foundation
public import GraphJournal
public import ObjectGraph

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Durable-store helpers shared by the benchmarks, `objectgraph-profile` and `peer-comparison`:
/// temporary store directories, a store holding the people workload, and the disk's raw
/// `fdatasync` rate.
public enum Stores {
    /// A new, empty, unique directory under the system's temporary directory
    /// (`FileManager.default.temporaryDirectory`), for one store. Remove it with ``remove(_:)``.
    public static func temporaryDirectory(_ label: String) -> URL {
        let base = FileManager.default.temporaryDirectory
        let name = "objectgraph-bench-\(getpid())-\(label)-\(UInt32.random(in: 0 ... .max))"
        let url = base.appendingPathComponent(name, isDirectory: true)
        try? FileManager.default.removeItem(at: url)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Removes `url` and everything under it (errors ignored).
    public static func remove(_ url: URL) {
        try? FileManager.default.removeItem(at: url)
    }

    /// Store options with `durability` and automatic compaction off, so that a benchmark
    /// measures only what it asks for.
    public static func options(_ durability: JournalOptions.Durability) -> StoreOptions {
        var options = StoreOptions(durability: durability)
        options.autoCompactionRatio = nil
        return options
    }

    /// Opens the store in `directory` for the people schema (or `schema`).
    public static func open(
        _ directory: URL, durability: JournalOptions.Durability = .always, schema: Schema = People.schema()
    ) throws -> ObjectStore {
        try ObjectStore.open(at: directory, schema: schema, options: options(durability))
    }

    /// Creates a store in `directory` holding records `0..<count` (one insert per record and
    /// one save), and closes it. Returns its bytes on disk.
    @discardableResult
    public static func create(
        _ directory: URL, count: Int, durability: JournalOptions.Durability = .none
    ) throws -> Int64 {
        let store = try open(directory, durability: durability)
        try People.insert(0..<count, into: store.context)
        try store.context.save()
        let bytes = store.stats.bytesOnDisk
        try store.close()
        return bytes
    }

    /// Bytes of every regular file under `directory`.
    public static func bytesOnDisk(_ directory: URL) -> Int64 {
        guard
            let e = FileManager.default.enumerator(
                at: directory, includingPropertiesForKeys: [.fileSizeKey, .isRegularFileKey])
        else { return 0 }
        var total: Int64 = 0
        for case let url as URL in e {
            let v = try? url.resourceValues(forKeys: [.fileSizeKey, .isRegularFileKey])
            if v?.isRegularFile == true { total += Int64(v?.fileSize ?? 0) }
        }
        return total
    }

    /// The disk's raw durable-append rate: `iterations` × (a `bytes`-byte `pwrite` appended to
    /// a new file in `directory`, then `fdatasync`), what a journal append with `.always`
    /// costs at the least. Returns syncs per second (0 when the file cannot be written).
    public static func rawFdatasyncRate(in directory: URL, iterations: Int = 2_000, bytes: Int = 64) -> Double {
        guard let probe = SyncProbe(in: directory, bytes: bytes), let s = probe.run(iterations) else { return 0 }
        return Double(iterations) / s
    }

    /// `saves` durable saves (`save(k)` for k in 0..<saves) against the raw append+fdatasync
    /// rate of the same disk, interleaved in `rounds` rounds (raw syncs, then saves) so that
    /// both see the same (noisy, shared) disk: the ratio is robust to the disk's drift, the
    /// absolute rates are not. Returns (raw syncs/s, saves/s).
    public static func savesAgainstRawSync(
        in directory: URL, saves: Int, rawSyncs: Int = 2_000, rounds: Int = 10, save: (Int) throws -> Void
    ) throws -> (raw: Double, saves: Double) {
        guard let probe = SyncProbe(in: directory, bytes: 64) else { return (0, 0) }
        var rawSeconds = 0.0, saveSeconds = 0.0, done = 0
        for r in 0..<rounds {
            guard let s = probe.run(rawSyncs / rounds) else { return (0, 0) }
            rawSeconds += s
            let end = saves * (r + 1) / rounds
            let start = ContinuousClock.now
            while done < end {
                try save(done)
                done += 1
            }
            saveSeconds += seconds(since: start)
        }
        return (Double(rawSyncs / rounds * rounds) / rawSeconds, Double(saves) / saveSeconds)
    }
}

/// A file in a store's directory that takes small appends, each followed by `fdatasync`.
final class SyncProbe {
    let path: String
    let fd: Int32
    let buffer: [UInt8]
    var offset: off_t = 0

    init?(in directory: URL, bytes: Int) {
        path = directory.appendingPathComponent("fdatasync-probe-\(UInt32.random(in: 0 ... .max))").path
        fd = Glibc.open(path, O_CREAT | O_TRUNC | O_WRONLY, 0o600)
        buffer = [UInt8](repeating: 0x5A, count: bytes)
        guard fd >= 0 else { return nil }
    }

    deinit {
        if fd >= 0 {
            Glibc.close(fd)
            unlink(path)
        }
    }

    /// `iterations` appends with an `fdatasync` each; seconds, or nil on an I/O error.
    func run(_ iterations: Int) -> Double? {
        let start = ContinuousClock.now
        for _ in 0..<iterations {
            let n = buffer.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, offset) }
            guard n == buffer.count, fdatasync(fd) == 0 else { return nil }
            offset += off_t(n)
        }
        return seconds(since: start)
    }
}

/// Seconds since `start` on the continuous clock.
public func seconds(since start: ContinuousClock.Instant) -> Double {
    seconds(start.duration(to: .now))
}

/// A duration in seconds.
public func seconds(_ d: Duration) -> Double {
    Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
}
