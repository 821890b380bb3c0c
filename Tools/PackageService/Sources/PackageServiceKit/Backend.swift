public import Foundation

/// A package as `GET /packages/{name}` and `GET /packages` answer it. The ObjectGraph backend
/// fills it with `decode(as:)` from a snapshot's object, the GRDB backend from a row: the keys
/// are the entity's attribute names and the table's column names.
public struct PackageBody: Codable, Sendable, Hashable {
    public var name: String
    public var version: String
    public var architecture: String
    public var section: String
    public var priority: String?
    public var installedSize: Int64?
    public var size: Int64
    public var maintainer: String
    public var homepage: URL?
    public var summary: String
    public var depends: [String]
    public var sha256: String
}

/// What one entity's part of a sync did. `deleted` counts the objects the sweep removed: those
/// the document no longer lists.
public struct SyncCountsBody: Codable, Sendable, Hashable {
    public var inserted = 0
    public var updated = 0
    /// Listed with the version already stored (packages), or listed again (maintainers).
    public var unchanged = 0
    public var deleted = 0

    public init(inserted: Int = 0, updated: Int = 0, unchanged: Int = 0, deleted: Int = 0) {
        self.inserted = inserted
        self.updated = updated
        self.unchanged = unchanged
        self.deleted = deleted
    }
}

/// The answer of `POST /sync`.
public struct SyncBody: Codable, Sendable, Hashable {
    public var packages: SyncCountsBody
    public var maintainers: SyncCountsBody
    /// The records the document held.
    public var records: Int
    /// Milliseconds from the first byte parsed to the durable save.
    public var milliseconds: Double
    /// ObjectGraph: the version of the snapshot that shows this sync. GRDB: nil.
    public var snapshotVersion: UInt64?
}

/// How publishing snapshots has gone (ObjectGraph only).
public struct PublishStatsBody: Codable, Sendable, Hashable {
    /// Snapshots published after a save since the store opened.
    public var publishes: Int
    public var lastPublishMicroseconds: Double
    public var totalPublishMilliseconds: Double
}

/// The answer of `GET /stats`.
public struct StatsBody: Codable, Sendable, Hashable {
    public var backend: String
    public var packages: Int
    public var maintainers: Int
    /// ObjectGraph: the version of the snapshot the counts come from. GRDB: nil.
    public var snapshotVersion: UInt64?
    public var snapshotPublishing: PublishStatsBody?
    /// The store's directory (ObjectGraph) or the database file (GRDB).
    public var store: String
    /// The size of the files in the store's directory.
    public var bytesOnDisk: Int64
}

/// The body of every error answer: `{"error": "…"}`, with where a malformed document went wrong.
public struct ErrorBody: Codable, Sendable, Hashable {
    public var error: String
    /// For malformed JSON: the offset of the first byte that cannot be read.
    public var byteOffset: Int?
    /// The index of the record (array element) that failed.
    public var record: Int?
    /// The key of that record that failed.
    public var key: String?

    public init(error: String, byteOffset: Int? = nil, record: Int? = nil, key: String? = nil) {
        self.error = error
        self.byteOffset = byteOffset
        self.record = record
        self.key = key
    }
}

/// A request the service refuses: answered with the status of its kind and its body as JSON.
public struct RequestRejected: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable {
        /// 400: a bad query, a document that is not JSON, or a record that does not fit.
        case badRequest
        /// 404: no such package.
        case notFound
        /// 409: applying the document would be harmful (an empty document wiping the store).
        case conflict
        /// 405 (with `Allow: GET, HEAD`): a write sent to a read replica; writes go to the primary.
        case readOnly
    }

    public var kind: Kind
    public var body: ErrorBody

    public init(_ kind: Kind, _ body: ErrorBody) {
        self.kind = kind
        self.body = body
    }

    public var description: String { body.error }
}

/// The answer of `GET /health`: 200 when the service can serve, 503 when it cannot (a replica
/// whose follower stopped for good, a primary whose stream holds another writer's history).
public struct HealthBody: Codable, Sendable, Hashable {
    /// `ok` (200) or `failing` (503).
    public var status: String
    /// `standalone`, `primary` (ships its journal to a stream) or `replica` (follows one).
    public var role: String
    /// `objectgraph` or `grdb`.
    public var backend: String
    /// The last journal record this service's data holds, in the writer's numbering: the
    /// journal's last record (standalone, primary), the writer's record applied last (replica).
    /// GRDB: nil.
    public var lastSequence: UInt64?
    /// The JetStream stream (primary, replica).
    public var stream: String?
    /// Primary: the writer's last record the stream acknowledged.
    public var shippedSequence: UInt64?
    /// Primary: records saved but not acknowledged yet.
    public var backlogRecords: Int?
    /// Replica: stream messages not applied yet.
    public var lagMessages: UInt64?
    /// Replica: the stream's last message when the follower last looked.
    public var streamLastSequence: UInt64?
    /// Replica: seconds since the server stored the message applied last (nil before the first).
    public var appliedMessageAgeSeconds: Double?
    /// Why the service cannot serve (503), or the last transient error (servers away).
    public var error: String?

    public init(
        status: String = "ok", role: String, backend: String, lastSequence: UInt64? = nil, stream: String? = nil,
        shippedSequence: UInt64? = nil, backlogRecords: Int? = nil, lagMessages: UInt64? = nil,
        streamLastSequence: UInt64? = nil, appliedMessageAgeSeconds: Double? = nil, error: String? = nil
    ) {
        self.status = status
        self.role = role
        self.backend = backend
        self.lastSequence = lastSequence
        self.stream = stream
        self.shippedSequence = shippedSequence
        self.backlogRecords = backlogRecords
        self.lagMessages = lagMessages
        self.streamLastSequence = streamLastSequence
        self.appliedMessageAgeSeconds = appliedMessageAgeSeconds
        self.error = error
    }

    /// Whether the service can serve (`status` is `ok`).
    public var isHealthy: Bool { status == "ok" }
}

/// The storage behind the routes: the same endpoints over ObjectGraph or over SQLite.
///
/// Reads must not wait for a sync going on: the ObjectGraph backend reads the last published
/// snapshot, the GRDB backend a WAL reader connection of its `DatabasePool`.
public protocol PackageBackend: Sendable {
    /// `objectgraph` or `grdb`.
    var name: String { get }
    /// The package named `name`, or nil.
    func package(named name: String) async throws -> PackageBody?
    /// The packages of `section` (all when nil), sorted by name, at most `limit`.
    func packages(section: String?, limit: Int) async throws -> [PackageBody]
    /// Makes the stored packages those `document` (a JSON array of ``PackageRecord``) lists:
    /// inserts the new ones, updates those whose version changed, deletes those it no longer
    /// lists, and maintainers with them; one durable transaction.
    ///
    /// - Throws: ``RequestRejected`` for a document that is not JSON or holds a record that does
    ///   not fit, or an empty document while packages are stored.
    func sync(_ document: Data) async throws -> SyncBody
    /// Counts and where the data lives.
    func stats() async throws -> StatsBody
    /// Whether no package is stored (the service then loads the fixture).
    func isEmpty() async throws -> Bool
    /// Flushes and closes the storage.
    func close() async throws
    /// Whether the backend can serve, its role and position (`GET /health`, `GET /metrics`).
    func health() async -> HealthBody
}

extension PackageBackend {
    /// A standalone backend that has no journal position to report: healthy while it answers.
    public func health() async -> HealthBody {
        HealthBody(role: "standalone", backend: name)
    }
}

/// The backends `--backend` names.
public enum BackendKind: String, Sendable, CaseIterable {
    case objectgraph
    case grdb
}

/// The answer to a sync document that lists nothing while packages are stored.
func emptyDocumentMessage(wouldDelete count: Int) -> String {
    "the document lists no package: it would delete all \(count) stored packages, so nothing was changed"
}

/// The answer to a sync document that would delete more than half of the stored packages:
/// far more often a truncated or wrong document than the truth (the library's default sweep
/// limit, which both backends apply).
func sweepRefusedMessage(wouldDelete count: Int, of stored: Int) -> String {
    "the document would delete \(count) of the \(stored) stored packages, more than half, so nothing was changed"
}

/// Why a `POST /sync` body is not a JSON array, or nil when it starts like one (what follows is
/// the backend's to parse). A sync document lists the whole set; a single object, `null` or a
/// number mapped as a one-element list would sweep everything else.
func notAnArrayProblem(_ body: Data) -> String? {
    let whitespace: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D]
    guard let first = body.first(where: { !whitespace.contains($0) }) else {
        return "the body is empty; a sync document is a JSON array of package records"
    }
    let found: String
    switch first {
    case UInt8(ascii: "["): return nil
    case UInt8(ascii: "{"): found = "an object"
    case UInt8(ascii: "n"): found = "null"
    case UInt8(ascii: "\""): found = "a string"
    case UInt8(ascii: "t"), UInt8(ascii: "f"): found = "a boolean"
    case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): found = "a number"
    default: found = "something that is not JSON"
    }
    return "the body must be a JSON array of package records, not \(found)"
}

/// The total size of the regular files directly in `directory`.
func bytesOnDisk(_ directory: URL) -> Int64 {
    let files =
        (try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: [.fileSizeKey])) ?? []
    return files.reduce(Int64(0)) { total, file in
        total + Int64((try? file.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0)
    }
}
