public import Foundation
public import GRDB
public import Logging

/// The same packages in SQLite through GRDB, for comparison: a `DatabasePool` (WAL mode: reads
/// on reader connections do not wait for the writer), `synchronous=FULL` (every commit is
/// fsynced, as every ObjectGraph save is), a unique index on `package.name`.
public final class GRDBBackend: PackageBackend {
    public var name: String { BackendKind.grdb.rawValue }
    public let pool: DatabasePool
    public let path: String
    private let directory: URL
    /// The SQLite library's version (`sqlite_version()`).
    public let sqliteVersion: String

    /// Opens (or creates) `packages.sqlite` in `directory`.
    ///
    /// - Throws: GRDB's `DatabaseError` when the file cannot be opened or the schema created.
    public init(directory: URL, logger: Logger) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.directory = directory
        path = directory.appendingPathComponent("packages.sqlite").path
        var configuration = Configuration()
        configuration.label = "packages"
        pool = try DatabasePool(path: path, configuration: configuration)
        try pool.writeWithoutTransaction { db in
            // Set after the open and read back: GRDB turns WAL on with synchronous=NORMAL.
            try db.execute(sql: "PRAGMA synchronous = FULL")
            guard try Int.fetchOne(db, sql: "PRAGMA synchronous") == 2 else {
                throw DatabaseError(message: "synchronous is not FULL")
            }
            try db.execute(sql: Self.schema)
        }
        let (mode, version) = try pool.read { db in
            (
                try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "?",
                try String.fetchOne(db, sql: "SELECT sqlite_version()") ?? "?"
            )
        }
        sqliteVersion = version
        logger.info("opened SQLite", metadata: ["path": "\(path)", "journal_mode": "\(mode)", "sqlite": "\(version)"])
    }

    static let schema = """
        CREATE TABLE IF NOT EXISTS maintainer (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
        CREATE TABLE IF NOT EXISTS package (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            version TEXT NOT NULL,
            architecture TEXT NOT NULL,
            section TEXT NOT NULL,
            priority TEXT,
            installedSize INTEGER,
            size INTEGER NOT NULL,
            maintainer TEXT NOT NULL,
            homepage TEXT,
            summary TEXT NOT NULL,
            depends TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            maintainerId INTEGER REFERENCES maintainer(id));
        CREATE UNIQUE INDEX IF NOT EXISTS package_name ON package(name);
        CREATE INDEX IF NOT EXISTS package_section_name ON package(section, name);
        """

    private static let columns =
        "name, version, architecture, section, priority, installedSize, size, maintainer, homepage, summary, depends, sha256"

    private static let selectByName = "SELECT \(columns) FROM package WHERE name = ?"
    private static let selectBySection = "SELECT \(columns) FROM package WHERE section = ? ORDER BY name LIMIT ?"
    private static let selectAll = "SELECT \(columns) FROM package ORDER BY name LIMIT ?"

    public func package(named name: String) async throws -> PackageBody? {
        try await pool.read { db in
            try PackageBody.fetchOne(db.cachedStatement(sql: Self.selectByName), arguments: [name])
        }
    }

    public func packages(section: String?, limit: Int) async throws -> [PackageBody] {
        try await pool.read { db in
            if let section {
                return try PackageBody.fetchAll(
                    db.cachedStatement(sql: Self.selectBySection), arguments: [section, limit])
            }
            return try PackageBody.fetchAll(db.cachedStatement(sql: Self.selectAll), arguments: [limit])
        }
    }

    /// `JSONDecoder` into ``PackageRecord`` values, then one transaction: the stored versions
    /// and maintainer IDs read once into dictionaries; each maintainer inserted unless present;
    /// each package inserted, updated when its version differs, or left; then the packages the
    /// document does not list deleted, and the maintainers left without a package. Prepared
    /// (cached) statements, one `JSONEncoder` for the `depends` column of the rows written.
    public func sync(_ document: Data) async throws -> SyncBody {
        let start = ContinuousClock.now
        let records: [PackageRecord]
        do {
            records = try JSONDecoder().decode([PackageRecord].self, from: document)
        } catch let error as DecodingError {
            throw RequestRejected(.badRequest, Self.explain(error))
        }
        let (packages, maintainers) = try await pool.write { db -> (SyncCountsBody, SyncCountsBody) in
            var packages = SyncCountsBody()
            var maintainers = SyncCountsBody()
            var versions: [String: String] = [:]
            let rows = try Row.fetchCursor(db, sql: "SELECT name, version FROM package")
            while let row = try rows.next() { versions[row[0]] = row[1] as String }
            if records.isEmpty, !versions.isEmpty {
                throw RequestRejected(.conflict, ErrorBody(error: emptyDocumentMessage(wouldDelete: versions.count)))
            }
            var maintainerIDs: [String: Int64] = [:]
            let owners = try Row.fetchCursor(db, sql: "SELECT name, id FROM maintainer")
            while let row = try owners.next() { maintainerIDs[row[0]] = row[1] as Int64 }

            let addMaintainer = try db.cachedStatement(sql: "INSERT INTO maintainer (name) VALUES (?)")
            let insert = try db.cachedStatement(
                sql: """
                    INSERT INTO package (\(Self.columns), maintainerId) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """)
            let update = try db.cachedStatement(
                sql: """
                    UPDATE package SET version = ?, architecture = ?, section = ?, priority = ?, installedSize = ?, size = ?,
                        maintainer = ?, homepage = ?, summary = ?, depends = ?, sha256 = ?, maintainerId = ? WHERE name = ?
                    """)
            let encoder = JSONEncoder()
            var listed = Set<String>(minimumCapacity: records.count)
            var seenMaintainers = Set<String>()
            for r in records {
                let owner: Int64
                if let id = maintainerIDs[r.maintainer] {
                    owner = id
                    if seenMaintainers.insert(r.maintainer).inserted { maintainers.unchanged += 1 }
                } else {
                    try addMaintainer.execute(arguments: [r.maintainer])
                    owner = db.lastInsertedRowID
                    maintainerIDs[r.maintainer] = owner
                    seenMaintainers.insert(r.maintainer)
                    maintainers.inserted += 1
                }
                guard listed.insert(r.name).inserted else { continue }  // named twice: the first one counts
                switch versions[r.name] {
                case nil:
                    let depends = String(decoding: try encoder.encode(r.depends), as: UTF8.self)
                    try insert.execute(arguments: [
                        r.name, r.version, r.architecture, r.section, r.priority, r.installedSize, r.size, r.maintainer,
                        r.homepage, r.description, depends, r.sha256, owner,
                    ])
                    packages.inserted += 1
                case r.version?:
                    packages.unchanged += 1
                default:
                    let depends = String(decoding: try encoder.encode(r.depends), as: UTF8.self)
                    try update.execute(arguments: [
                        r.version, r.architecture, r.section, r.priority, r.installedSize, r.size, r.maintainer,
                        r.homepage, r.description, depends, r.sha256, owner, r.name,
                    ])
                    packages.updated += 1
                }
            }
            // The library's default sweep limit, applied the same way: at most half of the
            // packages stored before this sync (throwing rolls the transaction back).
            let doomed = versions.keys.filter { !listed.contains($0) }
            let stored = packages.updated + packages.unchanged + doomed.count
            if doomed.count > stored / 2 {
                throw RequestRejected(
                    .conflict, ErrorBody(error: sweepRefusedMessage(wouldDelete: doomed.count, of: stored)))
            }
            let delete = try db.cachedStatement(sql: "DELETE FROM package WHERE name = ?")
            for name in doomed { try delete.execute(arguments: [name]) }
            packages.deleted = doomed.count
            try db.execute(
                sql:
                    "DELETE FROM maintainer WHERE id NOT IN (SELECT maintainerId FROM package WHERE maintainerId IS NOT NULL)"
            )
            maintainers.deleted = db.changesCount
            return (packages, maintainers)
        }
        return SyncBody(
            packages: packages, maintainers: maintainers, records: records.count,
            milliseconds: (ContinuousClock.now - start).milliseconds.rounded(places: 3), snapshotVersion: nil)
    }

    /// Where `JSONDecoder` says a document went wrong. It gives no byte offset for malformed
    /// JSON, so that answer has none.
    private static func explain(_ error: DecodingError) -> ErrorBody {
        func location(_ path: [any CodingKey]) -> (Int?, String?) {
            let record = path.first?.intValue
            let key = path.dropFirst().map(\.stringValue).joined(separator: ".")
            return (record, key.isEmpty ? nil : key)
        }
        switch error {
        case .keyNotFound(let key, let context):
            let (record, _) = location(context.codingPath)
            return ErrorBody(error: "missing key \"\(key.stringValue)\"", record: record, key: key.stringValue)
        case .valueNotFound(let type, let context):
            let (record, key) = location(context.codingPath)
            return ErrorBody(error: "null where \(type) is required", record: record, key: key)
        case .typeMismatch(let type, let context):
            let (record, key) = location(context.codingPath)
            return ErrorBody(error: "not \(type)", record: record, key: key)
        case .dataCorrupted(let context):
            let (record, key) = location(context.codingPath)
            return ErrorBody(error: context.debugDescription, record: record, key: key)
        @unknown default:
            return ErrorBody(error: "\(error)")
        }
    }

    public func stats() async throws -> StatsBody {
        let (packages, maintainers) = try await pool.read { db in
            (
                try Int.fetchOne(db, sql: "SELECT count(*) FROM package") ?? 0,
                try Int.fetchOne(db, sql: "SELECT count(*) FROM maintainer") ?? 0
            )
        }
        return StatsBody(
            backend: name, packages: packages, maintainers: maintainers, snapshotVersion: nil, snapshotPublishing: nil,
            store: path, bytesOnDisk: bytesOnDisk(directory))
    }

    public func isEmpty() async throws -> Bool {
        try await pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM package") ?? 0 } == 0
    }

    public func close() async throws {
        try pool.close()
    }
}

/// Rows read by column position in the order of `GRDBBackend.columns` (name, version,
/// architecture, section, priority, installedSize, size, maintainer, homepage, summary, depends,
/// sha256), instead of through `Decodable`; `depends` is the JSON array the sync wrote.
extension PackageBody: FetchableRecord {
    public init(row: Row) throws {
        let depends: String = row[10]
        self.init(
            name: row[0], version: row[1], architecture: row[2], section: row[3], priority: row[4],
            installedSize: row[5], size: row[6], maintainer: row[7],
            homepage: (row[8] as String?).flatMap { URL(string: $0) }, summary: row[9],
            depends: try dependsDecoder.decode([String].self, from: Data(depends.utf8)), sha256: row[11])
    }
}

/// One decoder for every row's `depends` (JSONDecoder is thread-safe to share).
private let dependsDecoder = JSONDecoder()
