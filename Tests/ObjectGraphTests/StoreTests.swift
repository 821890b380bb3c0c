import Foundation
import GraphJournal
import ObjectGraph
import Testing

/// This test process's directory of stores, removed when the process exits.
let testStoresRoot: URL = {
    let root = FileManager.default.temporaryDirectory
        .appendingPathComponent("objectgraph-tests-\(ProcessInfo.processInfo.processIdentifier)")
    atexit {
        let root = FileManager.default.temporaryDirectory
            .appendingPathComponent("objectgraph-tests-\(ProcessInfo.processInfo.processIdentifier)")
        try? FileManager.default.removeItem(at: root)
    }
    return root
}()

/// A fresh, empty directory under the system temporary directory (removed at exit).
func temporaryStoreDirectory(_ name: String = #function) -> URL {
    let dir = testStoresRoot.appendingPathComponent("\(name.filter(\.isLetter))-\(UUID().uuidString.prefix(8))")
    try? FileManager.default.removeItem(at: dir)
    return dir
}

let storeSchema: Schema = {
    do { return try Schema(Person.self, Everything.self, Tracked.self) } catch { preconditionFailure("\(error)") }
}()

/// Counts awakeFromFetch calls.
@Entity final class Fetched {
    var label: String = ""
    @Transient var fetchCount = 0
    @Transient var insertCount = 0
    func awakeFromFetch() { fetchCount += 1 }
    func awakeFromInsert() { insertCount += 1 }
}

@Suite("Durable store: save, replay, recovery, one writer")
struct StoreTests {
    @Test func saveCloseReopenRestoresEveryObjectAndValue() throws {
        let dir = temporaryStoreDirectory()
        let date = Date(timeIntervalSince1970: 1_234_567_890.5)
        let uuid = UUID()
        do {
            let store = try ObjectStore.open(at: dir, schema: storeSchema)
            let c = store.context
            for i in 0..<100 {
                let p = try c.insert(Person.self)
                p.id = Int64(i); p.name = "Person \(i)"; p.email = "p\(i)@example.com";
                p.city = i % 2 == 0 ? nil : "City \(i)"
            }
            let e = try c.insert(Everything.self)
            e.flag = true; e.i8 = -8; e.u64 = .max; e.i64 = .min; e.float = 1.5; e.double = -2.25; e.text = "text"
            e.blob = Data([1, 2, 3]); e.date = date; e.uuid = uuid; e.url = URL(string: "https://example.com/a?b=c")
            e.priority = .extra; e.level = .low; e.checksum = Checksum(algorithm: "sha256", hex: "ff"); e.maybeInt = nil
            try c.save()
            for p in try c.objects(of: Person.self) where p.id % 10 == 0 { c.delete(p) }
            for p in try c.objects(of: Person.self) where p.id % 10 == 1 { p.score = 9.5; p.city = nil }
            try c.save()
            try store.close()
        }
        let store = try ObjectStore.open(at: dir, schema: storeSchema)
        defer { try? store.close() }
        let people = try store.context.objects(of: Person.self)
        #expect(people.count == 90)
        let p11 = try #require(people.first { $0.id == 11 })
        #expect(p11.name == "Person 11" && p11.email == "p11@example.com" && p11.score == 9.5 && p11.city == nil)
        let p13 = try #require(people.first { $0.id == 13 })
        #expect(p13.city == "City 13" && p13.score == 0 && p13.age == 18)
        let e = try #require(try store.context.objects(of: Everything.self).first)
        #expect(e.flag && e.i8 == -8 && e.u64 == .max && e.i64 == .min && e.float == 1.5 && e.double == -2.25)
        #expect(e.text == "text" && e.blob == Data([1, 2, 3]) && e.date == date && e.uuid == uuid)
        #expect(e.url?.absoluteString == "https://example.com/a?b=c" && e.priority == .extra && e.level == .low)
        #expect(e.checksum == Checksum(algorithm: "sha256", hex: "ff") && e.maybeInt == nil)
        #expect(!store.context.hasChanges)
        // IDs are stable across the restart and serials continue after the highest.
        #expect(p11.objectID == ObjectID(entityName: "Person", serial: 12))
        #expect(try store.context.insert(Person.self).objectID?.serial == 101)
    }

    // Docs/Semantics.md, rule 1
    @Test func replayNeverCallsAwakeFromInsertAndCallsAwakeFromFetchOncePerObject() throws {
        let dir = temporaryStoreDirectory()
        let schema = try Schema(Fetched.self)
        do {
            let store = try ObjectStore.open(at: dir, schema: schema)
            let f = try store.context.insert(Fetched.self)
            #expect(f.insertCount == 1 && f.fetchCount == 0)
            f.label = "a"
            try store.context.save()
            try store.close()
        }
        let store = try ObjectStore.open(at: dir, schema: schema)
        defer { try? store.close() }
        let objects = try store.context.objects(of: Fetched.self)
        let again = try store.context.objects(of: Fetched.self)
        #expect(objects.count == 1)
        #expect(objects[0] === again[0])
        #expect(objects[0].insertCount == 0)
        #expect(objects[0].fetchCount == 1)
    }

    @Test func secondWriterGetsALockedErrorNamingTheDirectory() throws {
        let dir = temporaryStoreDirectory()
        let store = try ObjectStore.open(at: dir, schema: storeSchema)
        defer { try? store.close() }
        let error = try #require(throws: StoreError.self) { try ObjectStore.open(at: dir, schema: storeSchema) }
        #expect(error.code == .journal)
        #expect(error.message.contains(dir.lastPathComponent))
        try store.close()
        let reopened = try ObjectStore.open(at: dir, schema: storeSchema)
        try reopened.close()
    }

    @Test func storeFilesAreCreatedOwnerOnly() throws {
        let dir = temporaryStoreDirectory()
        let store = try ObjectStore.open(at: dir, schema: storeSchema)
        let p = try store.context.insert(Person.self)
        p.id = 1; p.name = "a"; p.email = "e"
        try store.context.save()
        try store.close()
        for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) {
            let attributes = try FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent(name).path)
            let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
            #expect(mode & 0o077 == 0, "\(name) has mode \(String(mode, radix: 8))")
        }
    }

    @Test func failedWriteLeavesContextAndJournalValidAndTheSaveCanBeRetried() throws {  // Docs/Semantics.md, rule 12
        let dir = temporaryStoreDirectory()
        let plan = JournalIO.FaultPlan()
        var options = StoreOptions()
        options.journal.io = .faulty(plan)
        let store = try ObjectStore.open(at: dir, schema: storeSchema, options: options)
        let c = store.context
        let a = try c.insert(Person.self)
        a.id = 1; a.name = "first"; a.email = "e"
        try c.save()
        let b = try c.insert(Person.self)
        b.id = 2; b.name = "second"; b.email = "e"
        a.name = "first, renamed"
        plan.arm(.error(28 /* ENOSPC */), atCall: 1, of: [.pwrite])
        #expect(throws: StoreError.self) { try c.save() }
        #expect(b.isInserted && a.isUpdated && c.hasChanges)
        plan.disarm()
        try c.save()
        #expect(!c.hasChanges)
        try store.close()
        let reopened = try ObjectStore.open(at: dir, schema: storeSchema)
        defer { try? reopened.close() }
        #expect(try reopened.context.objects(of: Person.self).map(\.name).sorted() == ["first, renamed", "second"])
    }

    @Test func failedFsyncMakesSaveThrowWithNothingCommitted() throws {
        let dir = temporaryStoreDirectory()
        let plan = JournalIO.FaultPlan()
        var options = StoreOptions(durability: .always)
        options.journal.io = .faulty(plan)
        let store = try ObjectStore.open(at: dir, schema: storeSchema, options: options)
        defer { try? store.close() }
        let a = try store.context.insert(Person.self)
        a.id = 1; a.name = "a"; a.email = "e"
        plan.arm(.error(5 /* EIO */), atCall: 1, of: [.fdatasync, .fsync])
        #expect(throws: StoreError.self) { try store.context.save() }
        #expect(a.isInserted)
        plan.disarm()
        try store.context.save()
        #expect(!a.isInserted)
    }

    @Test func compactionKeepsEveryLiveObjectAndTheSerialCounter() throws {
        let dir = temporaryStoreDirectory()
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        do {
            let store = try ObjectStore.open(at: dir, schema: storeSchema, options: options)
            let c = store.context
            for round in 0..<5 {
                for i in 0..<200 {
                    let p = try c.insert(Person.self)
                    p.id = Int64(round * 1000 + i); p.name = "P\(i)"; p.email = "e\(round)"
                }
                try c.save()
                for p in try c.objects(of: Person.self) { p.score += 1 }
                try c.save()
            }
            // Delete the newest objects so the highest serial is no longer live.
            for p in try c.objects(of: Person.self) where p.id >= 4000 { c.delete(p) }
            try c.save()
            let before = store.stats.bytesOnDisk
            try store.compact()
            #expect(store.stats.bytesOnDisk < before)
            // A pending change is not part of the base, and stays pending.
            let pending = try c.insert(Person.self)
            pending.id = -1; pending.name = "pending"; pending.email = "e"
            try store.compact()
            #expect(pending.isInserted)
            c.rollback()
            try store.close()
        }
        let store = try ObjectStore.open(at: dir, schema: storeSchema, options: options)
        defer { try? store.close() }
        let people = try store.context.objects(of: Person.self)
        #expect(people.count == 800)
        #expect(people.allSatisfy { $0.score == Double(5 - $0.id / 1000) })
        #expect(try store.context.insert(Person.self).objectID?.serial == 1002)
    }

    @Test func automaticCompactionRunsWhenTheJournalOutgrowsItsBaseline() throws {
        let dir = temporaryStoreDirectory()
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = 2
        options.autoCompactionMinimumBytes = 64 << 10
        let store = try ObjectStore.open(at: dir, schema: storeSchema, options: options)
        defer { try? store.close() }
        let p = try store.context.insert(Person.self)
        p.id = 1; p.name = "x"; p.email = "e"
        for i in 0..<3000 {
            p.name = "name \(i) " + String(repeating: "x", count: 40)
            try store.context.save()
        }
        #expect(store.stats.bytesOnDisk < 256 << 10)
    }

    @Test func savesThatOnlyAddObjectsDoNotStartAnAutomaticCompaction() throws {
        let dir = temporaryStoreDirectory()
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = 2
        options.autoCompactionMinimumBytes = 16 << 10
        let store = try ObjectStore.open(at: dir, schema: storeSchema, options: options)
        defer { try? store.close() }
        // Inserts only, far past the ratio and the minimum: nothing is superseded, so a
        // compaction would write the same objects again.
        for round in 0..<40 {
            for i in 0..<200 {
                let p = try store.context.insert(Person.self)
                p.id = Int64(round * 1000 + i)
                p.name = "person \(round)-\(i) \(String(repeating: "x", count: 20 + i % 30))"
                p.email = "p\(round)-\(i)@example.org"
            }
            try store.context.save()
        }
        let grown = store.stats
        #expect(grown.bytesOnDisk > 4 * (16 << 10))
        #expect(grown.records >= 40)
        // Updates supersede what the journal holds: past the ratio, it compacts.
        let people = try store.context.objects(of: Person.self)
        for _ in 0..<6 {
            for p in people { p.score += 1 }
            try store.context.save()
        }
        #expect(store.stats.records < grown.records)
    }
}
