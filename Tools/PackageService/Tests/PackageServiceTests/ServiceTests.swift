import Foundation
import Logging
import PackageServiceKit
import Testing

/// Every endpoint through real HTTP on a loopback port, against each backend: the answers of the
/// two must be the same, but for what only ObjectGraph has (snapshot versions, byte offsets).
@Suite("package-service over HTTP")
struct ServiceTests {
    static let backends = BackendKind.allCases

    @Test("GET /packages/{name} answers the fixture's record", arguments: backends)
    func getPackageAnswersTheFixtureRecord(_ kind: BackendKind) async throws {
        let adduser = try #require(fixtureRecords.first { $0.name == "adduser" })
        try await withService(kind) { client in
            let answer = try await client.get("/packages/adduser")
            #expect(answer.status == 200)
            #expect(answer.contentType?.hasPrefix("application/json") == true)
            let package = try answer.decode(PackageBody.self)
            #expect(package.name == "adduser")
            #expect(package.version == adduser.version)
            #expect(package.section == adduser.section)
            #expect(package.priority == adduser.priority)
            #expect(package.installedSize == adduser.installedSize)
            #expect(package.size == adduser.size)
            #expect(package.maintainer == adduser.maintainer)
            #expect(package.homepage == nil)
            #expect(package.summary == adduser.description)
            #expect(package.depends == adduser.depends)
            #expect(package.sha256 == adduser.sha256)

            // A name with '+', percent-encoded as a client may send it.
            let gpp = try await client.get("/packages/g%2B%2B")
            #expect(gpp.status == 200)
            #expect(try gpp.decode(PackageBody.self).name == "g++")
        }
    }

    @Test("every package of the fixture is found by name, through the backend and over HTTP", arguments: backends)
    func everyFixturePackageIsFound(_ kind: BackendKind) async throws {
        let logger = Logger(label: "package-service-tests") { _ in SwiftLogNoOpLogHandler() }
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let backend = try await openBackend(kind, directory: directory, fixture: bundledFixture, logger: logger)
        var missing: [String] = []
        for record in fixtureRecords where try await backend.package(named: record.name)?.version != record.version {
            missing.append(record.name)
        }
        try await backend.close()
        #expect(missing.isEmpty)
        // The fixture's 2,049th package: its insert grows the snapshot's unique index, at the
        // first row of a new page of the snapshot's rows.
        try await withService(kind) { client in
            let answer = try await client.get("/packages/libpmix-dev")
            #expect(answer.status == 200)
        }
    }

    @Test("GET /packages/{name} of an unknown name is 404 with a JSON error", arguments: backends)
    func getUnknownPackageIs404(_ kind: BackendKind) async throws {
        try await withService(kind) { client in
            let answer = try await client.get("/packages/no-such-package")
            #expect(answer.status == 404)
            #expect(answer.contentType?.hasPrefix("application/json") == true)
            #expect(try answer.decode(ErrorBody.self).error == "no package named 'no-such-package'")
        }
    }

    @Test("GET /packages filters by section, sorts by name and limits", arguments: backends)
    func listFiltersSortsAndLimits(_ kind: BackendKind) async throws {
        let byName = fixtureRecords.sorted { $0.name < $1.name }
        let admin = byName.filter { $0.section == "admin" }.map(\.name)
        let libs = byName.filter { $0.section == "libs" }.map(\.name)
        try await withService(kind) { client in
            let five = try await client.get("/packages?section=admin&limit=5").decode(PackageList.self)
            #expect(five.section == "admin" && five.limit == 5 && five.count == 5)
            #expect(five.packages.map(\.name) == Array(admin.prefix(5)))

            let byDefault = try await client.get("/packages?section=admin").decode(PackageList.self)
            #expect(byDefault.limit == 50)
            #expect(byDefault.packages.map(\.name) == Array(admin.prefix(50)))

            let most = try await client.get("/packages?section=libs&limit=1000").decode(PackageList.self)
            #expect(libs.count > 1000)
            #expect(most.packages.map(\.name) == Array(libs.prefix(1000)))

            let all = try await client.get("/packages?limit=7").decode(PackageList.self)
            #expect(all.section == nil)
            #expect(all.packages.map(\.name) == Array(byName.prefix(7).map(\.name)))

            let none = try await client.get("/packages?section=no-such-section").decode(PackageList.self)
            #expect(none.count == 0 && none.packages.isEmpty)
        }
    }

    @Test("GET /packages refuses a limit outside 1…1000 with 400", arguments: backends)
    func listRejectsABadLimit(_ kind: BackendKind) async throws {
        try await withService(kind) { client in
            for limit in ["0", "1001", "abc", "-3", "", "5.5"] {
                let answer = try await client.get("/packages?section=admin&limit=\(limit)")
                #expect(answer.status == 400, "limit '\(limit)'")
                let error = try answer.decode(ErrorBody.self)
                #expect(error.key == "limit")
                #expect(error.error.contains("1 to 1000"))
            }
        }
    }

    @Test("POST /sync inserts, updates and deletes, and later GETs see it", arguments: backends)
    func syncChangesWhatALaterGetReturns(_ kind: BackendKind) async throws {
        var records = fixtureRecords
        let updated = try #require(records.firstIndex { $0.name == "adduser" })
        records[updated].version = "3.134+test1"
        let removed = try #require(records.firstIndex { $0.name == "g++" })
        records.remove(at: removed)
        var added = records[0]
        added.name = "package-service-example"
        added.version = "1.0"
        added.maintainer = "Example Maintainer <example@invalid>"
        records.append(added)
        let document = try PackageRecord.jsonArray(records)

        try await withService(kind) { client in
            let before = try await client.get("/stats").decode(StatsBody.self)
            let answer = try await client.post("/sync", document)
            #expect(answer.status == 200)
            let sync = try answer.decode(SyncBody.self)
            #expect(sync.records == 4000)
            #expect(sync.packages == SyncCountsBody(inserted: 1, updated: 1, unchanged: 3998, deleted: 1))
            #expect(sync.maintainers.inserted == 1)
            if kind == .objectgraph {
                #expect(sync.snapshotVersion == (before.snapshotVersion ?? 0) + 1)
            }

            #expect(try await client.get("/packages/adduser").decode(PackageBody.self).version == "3.134+test1")
            #expect(try await client.get("/packages/g%2B%2B").status == 404)
            let new = try await client.get("/packages/package-service-example").decode(PackageBody.self)
            #expect(new.version == "1.0" && new.maintainer == "Example Maintainer <example@invalid>")
            let after = try await client.get("/stats").decode(StatsBody.self)
            #expect(after.packages == 4000)
            #expect(after.maintainers == before.maintainers + 1)

            // The same document again changes nothing.
            let again = try await client.post("/sync", document).decode(SyncBody.self)
            #expect(again.packages == SyncCountsBody(inserted: 0, updated: 0, unchanged: 4000, deleted: 0))
        }
    }

    @Test("POST /sync of malformed JSON is 400, with the byte offset, and changes nothing", arguments: backends)
    func syncRejectsMalformedJSON(_ kind: BackendKind) async throws {
        try await withService(kind) { client in
            //                        0123456789012345
            let document = Data(#"[{"name": "x" "version": "1"}]"#.utf8)
            let answer = try await client.post("/sync", document)
            #expect(answer.status == 400)
            let error = try answer.decode(ErrorBody.self)
            #expect(!error.error.isEmpty)
            if kind == .objectgraph {
                // The first byte that cannot be read: the '"' of "version", where a ',' belongs.
                #expect(error.byteOffset == 14)
            }
            #expect(try await client.get("/stats").decode(StatsBody.self).packages == 4000)
        }
    }

    @Test("POST /sync of a record missing a required key is 400 naming the record", arguments: backends)
    func syncRejectsARecordThatDoesNotFit(_ kind: BackendKind) async throws {
        var records = Array(fixtureRecords.prefix(3))
        records[1].name = "package-service-incomplete"
        var document = try PackageRecord.jsonArray(records)
        // The second record without its sha256.
        let text = String(decoding: document, as: UTF8.self)
        let sha = "\"sha256\":\"\(records[1].sha256)\","
        #expect(text.contains(sha))
        document = Data(text.replacingOccurrences(of: sha, with: "").utf8)
        try await withService(kind) { client in
            let answer = try await client.post("/sync", document)
            #expect(answer.status == 400)
            let error = try answer.decode(ErrorBody.self)
            #expect(error.record == 1)
            #expect(error.key == "sha256")
            #expect(try await client.get("/packages/package-service-incomplete").status == 404)
            #expect(try await client.get("/stats").decode(StatsBody.self).packages == 4000)
        }
    }

    @Test("POST /sync of an empty array is refused with 409 instead of deleting everything", arguments: backends)
    func syncOfNothingIsRefused(_ kind: BackendKind) async throws {
        try await withService(kind) { client in
            let answer = try await client.post("/sync", Data("[]".utf8))
            #expect(answer.status == 409)
            #expect(try answer.decode(ErrorBody.self).error.contains("would delete all 4000 stored packages"))
            #expect(try await client.get("/stats").decode(StatsBody.self).packages == 4000)
        }
    }

    @Test("POST /sync of one object, {}, null or a number is 400 and deletes nothing", arguments: backends)
    func aSyncBodyThatIsNotAnArrayIsRefusedWith400(_ kind: BackendKind) async throws {
        let one = try PackageRecord.jsonArray(Array(fixtureRecords.prefix(1)))
        let text = String(decoding: one, as: UTF8.self)
        // The single record as an object, not a one-element array.
        let object = Data(text.dropFirst().dropLast().utf8)
        try await withService(kind) { client in
            for body in [object, Data("{}".utf8), Data("null".utf8), Data(" 42".utf8), Data("".utf8)] {
                let answer = try await client.post("/sync", body)
                #expect(answer.status == 400, "\(String(decoding: body.prefix(20), as: UTF8.self))")
                #expect(try answer.decode(ErrorBody.self).error.contains(body.isEmpty ? "empty" : "JSON array"))
            }
            #expect(try await client.get("/stats").decode(StatsBody.self).packages == 4000)
        }
    }

    @Test("POST /sync of a document that would delete most packages is refused with 409", arguments: backends)
    func aSyncThatWouldDeleteMostPackagesIsRefused(_ kind: BackendKind) async throws {
        let document = try PackageRecord.jsonArray(Array(fixtureRecords.prefix(3)))
        try await withService(kind) { client in
            let answer = try await client.post("/sync", document)
            #expect(answer.status == 409)
            #expect(try answer.decode(ErrorBody.self).error.contains("would delete 3997 of the 4000 stored packages"))
            #expect(try await client.get("/stats").decode(StatsBody.self).packages == 4000)
        }
    }

    @Test("a body above the limit is 413 and an unknown path 404, both with a JSON error", arguments: backends)
    func refusalsOutsideTheRoutesAreJSON(_ kind: BackendKind) async throws {
        let document = try PackageRecord.jsonArray(Array(fixtureRecords.prefix(10)))
        try await withService(kind, maxSyncBytes: 1024) { client in
            #expect(document.count > 1024)
            let tooLarge = try await client.post("/sync", document)
            #expect(tooLarge.status == 413)
            #expect(try tooLarge.decode(ErrorBody.self).error == "the body is larger than the service accepts")
            let unknown = try await client.get("/no-such-route")
            #expect(unknown.status == 404)
            #expect(unknown.contentType?.hasPrefix("application/json") == true)
            let stats = try await client.get("/stats").decode(StatsBody.self)
            #expect(stats.packages == 4000)
        }
    }

    @Test("GET /stats counts the objects and says where the store is", arguments: backends)
    func statsCountAndLocate(_ kind: BackendKind) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let maintainers = Set(fixtureRecords.map(\.maintainer)).count
        try await withService(kind, directory: directory) { client in
            let stats = try await client.get("/stats").decode(StatsBody.self)
            #expect(stats.backend == kind.rawValue)
            #expect(stats.packages == 4000)
            #expect(stats.maintainers == maintainers)
            #expect(stats.store.hasPrefix(directory.path))
            #expect(stats.bytesOnDisk > 0)
            switch kind {
            case .objectgraph:
                // Version 0 is the empty store at open; the fixture's load is the first save.
                #expect(stats.snapshotVersion == 1)
                #expect(stats.snapshotPublishing?.publishes == 1)
            case .grdb:
                #expect(stats.snapshotVersion == nil && stats.snapshotPublishing == nil)
            }
        }
    }

    @Test("a restarted service serves what the last sync left, without loading the fixture again", arguments: backends)
    func restartKeepsTheLastSync(_ kind: BackendKind) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var records = fixtureRecords
        let updated = try #require(records.firstIndex { $0.name == "adduser" })
        records[updated].version = "3.134+restart"
        records.removeLast()
        let document = try PackageRecord.jsonArray(records)
        try await withService(kind, directory: directory) { client in
            let answer = try await client.post("/sync", document)
            #expect(answer.status == 200)
        }
        try await withService(kind, directory: directory) { client in
            let adduser = try await client.get("/packages/adduser").decode(PackageBody.self)
            let stats = try await client.get("/stats").decode(StatsBody.self)
            #expect(adduser.version == "3.134+restart")
            #expect(stats.packages == 3999)
        }
    }
}
