import Foundation
@testable import ObjectGraph
import Testing

/// Warming pages on another core (``PageWarmer``) changes no byte of the memory it warms,
/// whether the owner wrote it before, writes it meanwhile, or writes it after.
@Suite("Page warming")
struct PageWarmerTests {
    @Test func warmingLeavesWrittenMemoryAsItWas() throws {
        let values = (0..<(1 << 20)).map { UInt64($0) &* 0x9E37_79B9_7F4A_7C15 }
        values.withUnsafeBufferPointer { buffer in
            let start = Int(bitPattern: buffer.baseAddress)
            let populated = PageWarmer.populate(start, bytes: buffer.count * 8)
            #if os(Linux)
            // Linux 5.14 and later have the call; an older kernel refuses it and nothing happens.
            let version = ProcessInfo.processInfo.operatingSystemVersion
            if (version.majorVersion, version.minorVersion) >= (5, 14) { #expect(populated) }
            #endif
        }
        for (i, v) in values.enumerated() where v != UInt64(i) &* 0x9E37_79B9_7F4A_7C15 {
            Issue.record("value \(i) changed")
            break
        }
    }

    @Test func memoryWarmedWhileItIsWrittenHoldsWhatWasWritten() async throws {
        var values: [UInt64] = []
        values.reserveCapacity(4 << 20)
        // The capacity is warmed from its end while this task fills it from its start.
        PageWarmer.warm(values, 0..<values.capacity)
        for i in 0..<(4 << 20) { values.append(UInt64(i) ^ 0x5555) }
        // Warm it again, written, and give the workers time to run.
        PageWarmer.warm(values, 0..<values.count)
        try await Task.sleep(for: .milliseconds(50))
        #expect(values.indices.allSatisfy { values[$0] == UInt64($0) ^ 0x5555 })
    }

    @Test func anArenaFilledPastSeveralWindowsReadsBackEveryValue() {
        var arena = ByteArena()
        var refs: [UInt64] = []
        // 12 MB in 20-byte values: the arena grows and warms ahead several times.
        for i in 0..<600_000 {
            let text = String(format: "value %013d", i)
            refs.append(text.utf8.withContiguousStorageIfAvailable { arena.append(UnsafeRawBufferPointer($0)) } ?? 0)
        }
        var mismatches = 0
        for (i, ref) in refs.enumerated() {
            let expected = String(format: "value %013d", i)
            let stored = arena.withBytes(ArenaRef(ref)) { String(decoding: $0, as: UTF8.self) }
            if stored != expected { mismatches += 1 }
        }
        #expect(mismatches == 0)
    }
}

/// After a large open the tables give back the room replay reserved past their strings; the
/// store goes on taking new strings, and every value reads back after another reopen.
@Suite("Large opens")
struct LargeOpenTests {
    @Test func aLargeStoreTakesNewStringsAfterItsOpenGaveRoomBack() throws {
        let dir = temporaryStoreDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let schema = try Schema(Person.self)
        let options = StoreOptions(durability: .none)
        let count = ObjectStore.trimmedOpenRows + 1_000
        do {
            let store = try ObjectStore.open(at: dir, schema: schema, options: options)
            for i in 0..<count {
                let p = try store.context.insert(Person.self)
                p.id = Int64(i)
                p.name = "person number \(i) with a name past sixteen bytes"
                p.email = "p\(i)@example.com"
            }
            try store.context.save()
            try store.close()
        }
        do {
            let store = try ObjectStore.open(at: dir, schema: schema, options: options)
            for i in count..<(count + 5_000) {
                let p = try store.context.insert(Person.self)
                p.id = Int64(i)
                p.name = "person number \(i) with a name past sixteen bytes"
                p.email = "p\(i)@example.com"
            }
            try store.context.save()
            try store.close()
        }
        let store = try ObjectStore.open(at: dir, schema: schema, options: options)
        defer { try? store.close() }
        let people = try store.context.fetch(Person.self) { _ in true }
        #expect(people.count == count + 5_000)
        let names = Set(people.map(\.name))
        #expect(names.count == count + 5_000)
        #expect(names.contains("person number \(count + 4_999) with a name past sixteen bytes"))
        #expect(people.allSatisfy { $0.email.hasPrefix("p") && $0.email.hasSuffix("@example.com") })
    }
}
