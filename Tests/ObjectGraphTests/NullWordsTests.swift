import Foundation
import Testing

@testable import ObjectGraph

#if canImport(Glibc)
    import Glibc
#endif

/// The null words of a table's first large block start as zero pages: an entity whose values
/// are never nil keeps none of them resident, and nils written at replay or later read back.
@Suite("Null words of a large replayed block")
struct NullWordsTests {
    /// Enough rows that their null words start as zero pages.
    static let count = 20_000

    private func reopen(_ dir: URL) throws -> ObjectStore {
        try ObjectStore.open(at: dir, schema: try Schema(Person.self), options: StoreOptions(durability: .none))
    }

    private func cities(_ context: ModelContext) throws -> [Int64: String?] {
        Dictionary(uniqueKeysWithValues: try context.objects(of: Person.self).map { ($0.id, $0.city) })
    }

    @Test func nilsWrittenAtReplayAndAfterReadBack() throws {
        let dir = temporaryStoreDirectory("null-words")
        defer { try? FileManager.default.removeItem(at: dir) }
        var expected: [Int64: String?] = [:]
        do {
            let store = try reopen(dir)
            for i in 0..<Int64(Self.count) {
                let p = Person(id: i, name: "n\(i)", email: "e\(i)")
                p.city = i % 7 == 0 ? nil : "c\(i)"
                try store.context.insert(p)
                expected[i] = p.city
            }
            try store.context.save()
            try store.close()
        }
        do {
            let store = try reopen(dir)
            #expect(try cities(store.context) == expected)
            for p in try store.context.objects(of: Person.self) where p.id < 3 {
                p.city = p.city == nil ? "now \(p.id)" : nil
                expected[p.id] = p.city
            }
            try store.context.save()
            try store.close()
        }
        let store = try reopen(dir)
        defer { try? store.close() }
        #expect(try cities(store.context) == expected)
    }

    @Test func anEntityWithoutNilsKeepsItsNullWordsOutOfMemory() throws {
        let dir = temporaryStoreDirectory("null-words-none")
        defer { try? FileManager.default.removeItem(at: dir) }
        do {
            let store = try reopen(dir)
            for i in 0..<Int64(Self.count) {
                let p = Person(id: i, name: "n\(i)", email: "e\(i)")
                p.city = "c\(i)"
                try store.context.insert(p)
            }
            try store.context.save()
            try store.close()
        }
        let store = try reopen(dir)
        defer { try? store.close() }
        let table = try store.context.table(for: Person.self)
        #if os(Linux)
            let page = Int(sysconf(Int32(_SC_PAGESIZE)))
            let (resident, pages) = table.nulls.withUnsafeBufferPointer { words -> (Int, Int) in
                let start = (Int(bitPattern: words.baseAddress) + page - 1) / page * page
                let end = (Int(bitPattern: words.baseAddress) + words.count * 8) / page * page
                guard end > start, let pointer = UnsafeMutableRawPointer(bitPattern: start) else { return (0, 0) }
                var vector = [UInt8](repeating: 0, count: (end - start) / page)
                guard mincore(pointer, end - start, &vector) == 0 else { return (-1, vector.count) }
                return (vector.reduce(0) { $0 + Int($1 & 1) }, vector.count)
            }
            #expect(pages > 0)
            #expect(resident == 0, "\(resident) of \(pages) pages of null words are resident after the open")
        #endif
        // They read as not nil, and a nil set now is kept.
        let people = try store.context.objects(of: Person.self)
        #expect(people.allSatisfy { $0.city != nil })
        people[5].city = nil
        try store.context.save()
        #expect(people[5].city == nil && people[6].city == "c6")
    }
}
