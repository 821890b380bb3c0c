import Foundation
import Testing

@testable import GraphJournal

@Suite struct JournalRoundTripTests {
    @Test func manyRecordsOfVariousSizesComeBackInOrderAfterReopen() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let sizes = [0, 1, 12, 13, 63, 64, 65, 100, 4096, 70_000, 1 << 20]
        var expected: [[UInt8]] = []
        var sequences: [UInt64] = []
        do {
            let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
            for round in 0..<3 {
                for (index, size) in sizes.enumerated() {
                    let bytes = payload(round * 100 + index, count: size, compressible: index % 2 == 0)
                    sequences.append(try journal.append(bytes))
                    expected.append(bytes)
                }
            }
            #expect(try journal.records().transactions == expected)
            try journal.close()
        }
        #expect(sequences == Array(1...UInt64(sequences.count)))
        let journal = try Journal.open(directory: directory)
        defer { try? journal.close() }
        let records = try journal.records()
        #expect(records.transactions == expected)
        #expect(records.map(\.sequence) == sequences)
        let next = try journal.append([1, 2, 3])
        #expect(next == UInt64(sequences.count + 1))
        let stats = journal.stats
        #expect(stats.records == expected.count + 1)
        #expect(stats.lastSequence == next)
        #expect(stats.storedPayloadBytes < stats.rawPayloadBytes)
        #expect(journal.openReport.isClean)
    }

    @Test func schemaRecordIsWrittenOnlyWhenTheSchemaChanges() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let v1 = Array("schema one".utf8), v2 = Array("schema two".utf8)
        do {
            let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
            #expect(journal.schema == nil)
            try journal.append([1], schema: v1)
            try journal.append([2], schema: v1)
            try journal.append([3])
            try journal.append([4], schema: v2)
            #expect(journal.schema == v2)
            try journal.close()
        }
        let journal = try Journal.open(directory: directory)
        defer { try? journal.close() }
        let records = try journal.records()
        #expect(records.map(\.kind) == [.schema, .transaction, .transaction, .transaction, .schema, .transaction])
        #expect(records.map(\.sequence) == [1, 2, 3, 4, 5, 6])
        #expect(journal.schema == v2)
        #expect(journal.stats.schemaVersionsSeen == 2)
    }

    @Test func segmentsRollPastTheSizeLimitAndReadBackAcrossThem() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let options = JournalOptions(durability: .none, segmentSize: 4096)
        var expected: [[UInt8]] = []
        do {
            let journal = try Journal.open(directory: directory, options: options)
            for index in 0..<200 {
                let bytes = payload(index, count: 100, compressible: false)
                try journal.append(bytes)
                expected.append(bytes)
            }
            #expect(journal.stats.segments > 3)
            try journal.close()
        }
        #expect(try recordsAfterReopen(directory, options: options).transactions == expected)
        #expect(try Journal.inspect(directory: directory).verdict == .clean)
    }

    @Test func compactionReplacesHistoryByBaseAndLaterAppendsFollowIt() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
        for index in 0..<50 { try journal.append(payload(index, count: 100), schema: [1]) }
        let base = (0..<10).map { payload(1000 + $0, count: 300) }
        try journal.compact(base: base, schema: [2])
        try journal.append([9, 9, 9])
        #expect(journal.schema == [2])
        try journal.close()
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        #expect(names == ["0000000002.base", "0000000003.log", "LOCK", "MANIFEST"])
        let records = try recordsAfterReopen(directory)
        #expect(records.map(\.kind) == [.schema] + Array(repeating: .base, count: 10) + [.transaction])
        #expect(records.filter { $0.kind == .base }.map(\.payload) == base)
        #expect(records.last?.payload == [9, 9, 9])
        #expect(records.map(\.sequence) == Array(52...63))
    }

    @Test func filesAreCreated0600AndTheDirectory0700() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let journal = try Journal.open(directory: directory)
        try journal.append([1, 2, 3])
        try journal.compact(base: [[4]], schema: [5])
        try journal.close()
        #expect(permissions(directory) == 0o700)
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            #expect(permissions(directory + "/" + name) == 0o600, "\(name)")
        }
    }

    @Test func secondWriterGetsLockedErrorNamingTheDirectoryUntilTheFirstCloses() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let first = try Journal.open(directory: directory)
        // flock locks belong to the open file description: a second open() in the same
        // process conflicts on Linux, as a second process would.
        #expect {
            _ = try Journal.open(directory: directory)
        } throws: { error in
            guard let error = error as? JournalError else { return false }
            return error.code == .locked && error.description.contains(directory)
        }
        try first.close()
        let second = try Journal.open(directory: directory)
        try second.close()
    }

    @Test func droppingAJournalWithoutCloseReleasesTheLock() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        do {
            let journal = try Journal.open(directory: directory)
            try journal.append([1])
        }
        let again = try Journal.open(directory: directory)
        #expect(try again.records().transactions == [[1]])
        try again.close()
    }

    @Test func appendsFromManyThreadsWithAlwaysDurabilityAllLandAndShareFsyncs() async throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .always))
        let threads = 8, perThread = 50
        let sequences = await withTaskGroup(of: [UInt64].self) { group in
            for thread in 0..<threads {
                group.addTask {
                    var mine: [UInt64] = []
                    for index in 0..<perThread {
                        mine.append(try! journal.append(payload(thread * 1000 + index, count: 100)))
                    }
                    return mine
                }
            }
            var all: [UInt64] = []
            for await part in group { all += part }
            return all
        }
        #expect(Set(sequences).count == threads * perThread)
        try journal.close()
        let records = try recordsAfterReopen(directory)
        #expect(records.count == threads * perThread)
        #expect(records.map(\.sequence) == Array(1...UInt64(threads * perThread)))
    }

    @Test func inspectListsEveryRecordWithFileOffsetAndKind() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        try writeSmallJournal(directory, count: 5)
        let report = try Journal.inspect(directory: directory)
        #expect(report.verdict == .clean)
        #expect(
            report.entries.map(\.kind) == [
                .schema, .transaction, .transaction, .transaction, .transaction, .transaction,
            ])
        #expect(report.entries.first?.offset == 48)
        #expect(report.entries.allSatisfy { $0.file == "0000000001.log" })
    }
}
