import Foundation
import Glibc
import ObjectGraphTestSupport
import Synchronization
import Testing

@testable import GraphJournal

/// Shipping a journal to replicas: ``JournalOptions/onDurable``, the wire form
/// (``ShippedRecord``), ``Journal/append(shipped:schema:origin:)`` and origin records.
@Suite struct ShippingTests {
    // MARK: onDurable

    @Test func onDurableUnderAlwaysDeliversEverySchemaAndTransactionOnceInOrderBeforeAppendReturns() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let delivered = DeliveryLog()
        let journal = try Journal.open(directory: directory, options: delivered.options(.always))
        for index in 0..<24 {
            let schema = Array("schema v\(index / 8)".utf8)
            let sequence = try journal.append(payload(index, count: [0, 5, 80, 300][index % 4]), schema: schema)
            #expect(delivered.sequences.last == sequence, "record \(sequence) was delivered before append returned")
        }
        let records = try journal.records()
        try journal.close()
        // 24 transactions and 3 schema records, as the journal reads them back, each once.
        #expect(records.count == 27)
        #expect(try delivered.decoded() == records)
        #expect(delivered.sequences == Array(1...27))
    }

    @Test func concurrentAppendsUnderAlwaysAreDeliveredStrictlyIncreasingWithGapsOnlyForOriginRecords() throws {
        let directory = temporaryJournalPath()
        let sourceDirectory = temporaryJournalPath()
        defer { removeDirectory(directory); removeDirectory(sourceDirectory) }
        try writeSmallJournal(sourceDirectory, count: 40)
        let shipped = try shippedRecords(of: sourceDirectory).filter { $0.kind == .transaction }
        let delivered = DeliveryLog()
        let journal = try Journal.open(directory: directory, options: delivered.options(.always))
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for index in 0..<40 {
                do {
                    let sequence: UInt64
                    if thread < 2 {
                        // Two schemas in turn: schema records interleave with the transactions.
                        sequence = try journal.append(
                            payload(thread * 100 + index, count: 10 + index * 7), schema: [UInt8(thread)])
                    } else {
                        let record = shipped[index]
                        sequence = try journal.append(
                            shipped: record, schema: Array("schema v1".utf8),
                            origin: Array("thread \(thread) record \(record.sequence)".utf8))
                    }
                    if !delivered.contains(sequence) {
                        failures.withLock { $0.append("record \(sequence) not delivered when append returned") }
                    }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
        }
        #expect(failures.withLock { $0 } == [])
        let records = try journal.records()
        let last = journal.stats.lastSequence
        try journal.close()
        let sequences = delivered.sequences
        #expect(zip(sequences, sequences.dropFirst()).allSatisfy { $0 < $1 }, "delivered in strictly increasing order")
        #expect(try delivered.decoded() == records, "every schema and transaction record, as read back")
        let originSequences = try Journal.inspect(directory: directory).entries
            .filter { $0.type == JournalFormat.RecordType.origin.rawValue }.map(\.sequence)
        #expect(originSequences.count == 80)
        #expect(Set(sequences).isDisjoint(with: originSequences))
        #expect((Set(sequences).union(originSequences)).sorted() == Array(1...last), "the only gaps are origin records")
    }

    @Test func onDurableUnderNoneDeliversNothingUntilSyncAndCloseDeliversTheRest() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let delivered = DeliveryLog()
        let journal = try Journal.open(directory: directory, options: delivered.options(.none))
        for index in 0..<5 { try journal.append(payload(index, count: 100), schema: [1]) }
        #expect(delivered.sequences == [])
        try journal.sync()
        #expect(delivered.sequences == Array(1...6))
        try journal.sync()
        #expect(delivered.sequences == Array(1...6), "a sync with nothing new delivers nothing")
        for index in 5..<8 { try journal.append(payload(index, count: 100), schema: [2]) }
        #expect(delivered.sequences == Array(1...6))
        let records = try journal.records()
        try journal.close()
        #expect(delivered.sequences == Array(1...10))
        #expect(try delivered.decoded() == records)
    }

    @Test func onDurableUnderBatchedIsDeliveredByTheFlusherWithoutFurtherAppends() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let delivered = DeliveryLog()
        let journal = try Journal.open(directory: directory, options: delivered.options(.batched(milliseconds: 100)))
        for index in 0..<3 { try journal.append(payload(index, count: 100), schema: [1]) }
        let deadline = ContinuousClock.now + eventBound
        while delivered.sequences.count < 4 && ContinuousClock.now < deadline { usleep(10_000) }
        #expect(delivered.sequences == Array(1...4), "the flusher's sync delivered them")
        #expect(try delivered.decoded() == journal.records())
        try journal.close()
        #expect(delivered.sequences == Array(1...4))
    }

    @Test func onDurableUnderNoneDeliversAtARollAndAtACompactionButNeverBaseRecords() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let delivered = DeliveryLog()
        let journal = try Journal.open(directory: directory, options: delivered.options(.none, segmentSize: 600))
        try journal.append(payload(1, count: 200, compressible: false), schema: Array("schema v1".utf8))
        try journal.append(payload(2, count: 200, compressible: false))
        #expect(delivered.sequences == [])
        // The third record does not fit: the roll syncs the first segment.
        try journal.append(payload(3, count: 200, compressible: false))
        #expect(journal.stats.segments == 2)
        #expect(delivered.sequences == [1, 2, 3])
        try journal.append(payload(4, count: 10))
        #expect(delivered.sequences == [1, 2, 3])
        // Compaction syncs the log first; its base records (6: schema, 7: base) are not delivered.
        try journal.compact(base: [payload(9, count: 50)], schema: Array("schema v1".utf8))
        #expect(delivered.sequences == [1, 2, 3, 4, 5])
        try journal.append(payload(5, count: 10))
        try journal.close()
        #expect(delivered.sequences == [1, 2, 3, 4, 5, 8])
        #expect(
            delivered.records.map(\.kind) == [
                .schema, .transaction, .transaction, .transaction, .transaction, .transaction,
            ])
        #expect(
            try delivered.records.map { try $0.payload() } == [
                Array("schema v1".utf8), payload(1, count: 200, compressible: false),
                payload(2, count: 200, compressible: false),
                payload(3, count: 200, compressible: false), payload(4, count: 10), payload(5, count: 10),
            ])
    }

    @Test func aFailedFdatasyncUnderAlwaysNeverDeliversTheTruncatedRecords() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let plan = JournalIO.FaultPlan()
        let delivered = DeliveryLog()
        let journal = try Journal.open(directory: directory, options: delivered.options(.always, io: .faulty(plan)))
        try journal.append([1], schema: [0xA])
        #expect(delivered.sequences == [1, 2])
        plan.arm(.error(EIO), atCall: 1, of: [.fdatasync])
        // A new schema and a transaction, cut off together.
        #expect(throws: JournalError.self) { try journal.append([2], schema: [0xB]) }
        #expect(plan.hasFired)
        #expect(delivered.sequences == [1, 2])
        try journal.sync()
        #expect(delivered.sequences == [1, 2], "a later sync does not deliver what was cut off")
        #expect(try journal.append([3], schema: [0xB]) == 4)
        #expect(delivered.sequences == [1, 2, 3, 4])
        try journal.close()
        #expect(try delivered.decoded() == recordsAfterReopen(directory))
        #expect(try delivered.records.map { try $0.payload() } == [[0xA], [1], [0xB], [3]])
    }

    @Test func aFailedSyncUnderNoneDeliversNothingItWasToCover() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let plan = JournalIO.FaultPlan()
        let delivered = DeliveryLog()
        let journal = try Journal.open(directory: directory, options: delivered.options(.none, io: .faulty(plan)))
        try journal.append([1])
        try journal.sync()
        try journal.append([2])
        plan.arm(.error(EIO), atCall: 1, of: [.fdatasync])
        #expect(throws: JournalError.self) { try journal.sync() }
        try? journal.close()
        #expect(delivered.sequences == [1])
    }

    // MARK: Wire form

    @Test func wireFormsRoundTripAndTheirPayloadsAreWhatWasAppended() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let payloads: [[UInt8]] = [
            [], payload(1, count: 5), payload(2, count: 200), payload(3, count: 200, compressible: false),
            payload(4, count: JournalFormat.chunkedThreshold + 12_345),
        ]
        let delivered = DeliveryLog()
        let journal = try Journal.open(directory: directory, options: delivered.options(.none))
        for bytes in payloads { try journal.append(bytes, schema: Array("schema v1".utf8)) }
        try journal.sync()
        var shipped: [ShippedRecord] = []
        try journal.forEachShippedRecord(after: 0) { shipped.append($0) }
        #expect(shipped.map(\.sequence) == Array(1...6))
        #expect(shipped.map(\.kind) == [.schema] + Array(repeating: .transaction, count: 5))
        #expect(shipped == delivered.records, "onDurable hands out the same bytes the files hold")
        for record in shipped {
            let copy = try ShippedRecord(wire: record.wire)
            #expect(copy == record)
            #expect(copy.sequence == record.sequence && copy.kind == record.kind)
            #expect(record.storedLength == record.wire.count - JournalFormat.recordHeaderSize)
            // The checksum is seeded with salt 0: CRC32C(8 zero bytes ++ bytes 4... of the record).
            let crc = record.wire[4...].withUnsafeBytes { CRC32C.extend(CRC32C.seed(salt: 0), $0) }
            #expect(
                Array(record.wire[0..<4]) == [
                    UInt8(crc & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 24),
                ])
        }
        #expect(try shipped.dropFirst().map { try $0.payload() } == payloads)
        #expect(shipped.dropFirst().map(\.rawLength) == payloads.map(\.count))
        #expect(try shipped[0].payload() == Array("schema v1".utf8))
        // Flags as stored: raw, raw, one LZ4 block, raw (incompressible), LZ4 chunks.
        #expect(shipped.dropFirst().map { $0.wire[JournalFormat.RecordHeaderField.flags] } == [0, 0, 1, 0, 2])
        #expect(shipped[3].storedLength < shipped[3].rawLength && shipped[5].storedLength < shipped[5].rawLength)

        var after: [UInt64] = []
        try journal.forEachShippedRecord(after: 4) { after.append($0.sequence) }
        #expect(after == [5, 6])

        // After a compaction: base records are shipped from the files, origin records never.
        try journal.compact(
            base: [payload(7, count: 300), payload(8, count: 3)], schema: Array("schema v2".utf8), origin: [1, 2, 3]
        ) { true }
        try journal.append(payload(9, count: 40))
        var compacted: [ShippedRecord] = []
        try journal.forEachShippedRecord(after: 0) { compacted.append($0) }
        #expect(compacted.map(\.kind) == [.schema, .base, .base, .transaction])
        #expect(compacted.map(\.sequence) == [7, 9, 10, 11], "sequence 8 is the base's origin record")
        #expect(
            try compacted.map { try ShippedRecord(wire: $0.wire).payload() }
                == [Array("schema v2".utf8), payload(7, count: 300), payload(8, count: 3), payload(9, count: 40)])
        try journal.close()
    }

    @Test(arguments: [20, 200])
    func everyBitFlipAndEveryTruncationOfAWireRecordIsRejectedAsCorrupt(size: Int) throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
        try journal.append(payload(1, count: size))
        var shipped: [ShippedRecord] = []
        try journal.forEachShippedRecord(after: 0) { shipped.append($0) }
        try journal.close()
        let wire = try #require(shipped.first).wire
        #expect(wire[JournalFormat.RecordHeaderField.flags] == (size >= 64 ? 1 : 0))
        var accepted: [String] = []
        func check(_ bytes: [UInt8], _ what: String) {
            do {
                _ = try ShippedRecord(wire: bytes)
                accepted.append(what)
            } catch {
                if error.code != .corrupt { accepted.append("\(what): \(error)") }
            }
        }
        for bit in 0..<(wire.count * 8) {
            var flipped = wire
            flipped[bit / 8] ^= UInt8(1 << (bit % 8))
            check(flipped, "bit \(bit) flipped")
        }
        for length in 0..<wire.count { check(Array(wire[..<length]), "cut to \(length) bytes") }
        check(wire + [0], "one byte appended")
        #expect(accepted == [])
    }

    @Test func wireFormsOfRecordsThatAreNotShippedAreRejected() throws {
        let seed = ShippedRecord.wireSeed
        for type in [JournalFormat.RecordType.origin, .transaction] {
            var bytes: [UInt8] = []
            RecordCodec.append(to: &bytes, seed: seed, sequence: 5, type: type, payload: [1, 2, 3])
            if type == .transaction {
                bytes[JournalFormat.RecordHeaderField.type] = 4  // neither known nor skippable
                RecordCodec.reseal(&bytes, at: 0, seed: seed)
            }
            #expect {
                try ShippedRecord(wire: bytes)
            } throws: { error in
                (error as? JournalError)?.code == .corrupt
            }
        }
        var salted: [UInt8] = []
        RecordCodec.append(
            to: &salted, seed: CRC32C.seed(salt: 42), sequence: 5, type: .transaction, payload: [1, 2, 3])
        #expect(throws: JournalError.self, "a segment's record, still sealed with its salt") {
            try ShippedRecord(wire: salted)
        }
    }

    // MARK: Appending shipped records

    @Test func shippedRecordsAppendedToAnotherJournalReadBackVerbatim() throws {
        let source = temporaryJournalPath()
        let replica = temporaryJournalPath()
        defer { removeDirectory(source); removeDirectory(replica) }
        let payloads: [[UInt8]] = [
            payload(1, count: 5), payload(2, count: 200), payload(3, count: 200, compressible: false), [],
            payload(4, count: JournalFormat.chunkedThreshold + 1), payload(5, count: 90),
        ]
        do {
            let journal = try Journal.open(directory: source, options: JournalOptions(durability: .none))
            for (index, bytes) in payloads.enumerated() {
                try journal.append(bytes, schema: Array("schema v\(index / 3)".utf8))
            }
            try journal.close()
        }
        let shipped = try shippedRecords(of: source)
        let delivered = DeliveryLog()
        let journal = try Journal.open(directory: replica, options: delivered.options(.always))
        #expect(journal.origin == nil)
        try replicate(shipped, into: journal)
        #expect(journal.origin == Array("source 8".utf8))
        let sourceRecords = try recordsAfterReopen(source)
        let replicaRecords = try journal.records()
        #expect(replicaRecords.map(\.payload) == sourceRecords.map(\.payload))
        #expect(replicaRecords.map(\.kind) == sourceRecords.map(\.kind))
        // Each shipped transaction is preceded by its origin record: local sequences differ.
        #expect(replicaRecords.map(\.sequence) == [1, 3, 5, 7, 8, 10, 12, 14])

        // Stored as shipped (no second compression): same lengths, flags and stored bytes.
        var local: [ShippedRecord] = []
        try journal.forEachShippedRecord(after: 0) { local.append($0) }
        #expect(local == delivered.records, "the replica's own onDurable hands out its resealed records")
        for (mine, theirs) in zip(local, shipped) where theirs.kind == .transaction {
            #expect(mine.wire[4..<8] == theirs.wire[4..<8])
            #expect(mine.wire[16...] == theirs.wire[16...])
            #expect(try mine.payload() == theirs.payload())
        }
        try journal.close()
        #expect(try Journal.inspect(directory: replica).verdict == .clean)
        let reopened = try Journal.open(directory: replica, options: JournalOptions(durability: .none))
        #expect(reopened.origin == Array("source 8".utf8))
        #expect(try reopened.records() == replicaRecords)
        try reopened.close()
    }

    @Test func theOriginSurvivesReopenAndCompactionAndCompactWithAnOriginSetsIt() throws {
        let directory = temporaryJournalPath()
        let source = temporaryJournalPath()
        defer { removeDirectory(directory); removeDirectory(source) }
        try writeSmallJournal(source, count: 10)
        let shipped = try shippedRecords(of: source)
        let options = JournalOptions(durability: .none)
        var journal = try Journal.open(directory: directory, options: options)
        try replicate(shipped, into: journal)
        // An origin of the largest size, compressible: stored as an LZ4 block, read back whole.
        let large = (0..<1024).map { UInt8($0 % 16) }
        try journal.append(shipped: shipped.last!, schema: nil, origin: large)
        try journal.append(payload(1, count: 30), schema: nil)
        #expect(journal.origin == large, "a record without an origin keeps the last one")
        try journal.close()
        journal = try Journal.open(directory: directory, options: options)
        #expect(journal.origin == large)

        try journal.compact(base: [payload(2, count: 100)], schema: Array("schema v1".utf8))
        #expect(journal.origin == large)
        try journal.close()
        journal = try Journal.open(directory: directory, options: options)
        #expect(journal.origin == large)
        let baseEntries = try Journal.inspect(directory: directory).entries.filter { $0.file.hasSuffix(".base") }
        #expect(baseEntries.map(\.type) == [3, 0x80, 2], "schema, origin, base records")
        #expect(baseEntries[1].compressed)

        #expect(try !journal.compact(base: [payload(3, count: 100)], schema: [1], origin: [9]) { false })
        #expect(journal.origin == large, "an abandoned compaction changes nothing")
        #expect(
            try journal.compact(base: [payload(3, count: 100)], schema: [1], origin: Array("snapshot 77".utf8)) { true }
        )
        #expect(journal.origin == Array("snapshot 77".utf8))
        try journal.close()
        journal = try Journal.open(directory: directory, options: options)
        #expect(journal.origin == Array("snapshot 77".utf8))
        #expect(try journal.records().map(\.payload) == [[1], payload(3, count: 100)])
        try journal.close()
    }

    @Test
    func compactionWithAnEmptyBaseKeepsTheOrigin() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let options = JournalOptions(durability: .none)
        var journal = try Journal.open(directory: directory, options: options)
        try journal.append(shipped: try wireTransaction([1, 2, 3]), schema: [1], origin: Array("stream 1".utf8))
        try journal.compact(base: [], schema: [1])
        #expect(journal.origin == Array("stream 1".utf8), "compaction keeps the origin")
        try journal.close()
        journal = try Journal.open(directory: directory, options: options)
        #expect(journal.origin == Array("stream 1".utf8), "compaction keeps the origin, after reopen")
        try journal.compact(base: [], schema: [1], origin: Array("snapshot 2".utf8)) { true }
        #expect(journal.origin == Array("snapshot 2".utf8), "compact(origin:) sets it")
        try journal.close()
        journal = try Journal.open(directory: directory, options: options)
        #expect(journal.origin == Array("snapshot 2".utf8), "compact(origin:) sets it, after reopen")
        try journal.close()
    }

    @Test func originsOverOneKibibyteAreRefusedAndNothingIsWritten() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
        let record = try wireTransaction([1, 2, 3])
        #expect(try journal.append(shipped: record, schema: nil, origin: [UInt8](repeating: 7, count: 1024)) == 2)
        #expect {
            try journal.append(shipped: record, schema: nil, origin: [UInt8](repeating: 8, count: 1025))
        } throws: { error in
            (error as? JournalError)?.code == .payloadTooLarge
        }
        #expect {
            try journal.compact(base: [], schema: [1], origin: [UInt8](repeating: 8, count: 1025)) { true }
        } throws: { error in
            (error as? JournalError)?.code == .payloadTooLarge
        }
        #expect(journal.stats.lastSequence == 2)
        #expect(journal.origin == [UInt8](repeating: 7, count: 1024))
        try journal.close()
    }

    @Test func aShippedRecordThatIsNotATransactionIsRefused() throws {
        let source = temporaryJournalPath()
        let directory = temporaryJournalPath()
        defer { removeDirectory(source); removeDirectory(directory) }
        do {
            let journal = try Journal.open(directory: source, options: JournalOptions(durability: .none))
            try journal.compact(base: [payload(1, count: 100)], schema: [1])
            try journal.close()
        }
        let shipped = try shippedRecords(of: source)
        #expect(shipped.map(\.kind) == [.schema, .base])
        let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
        try journal.append([1], schema: [1])
        let before = journal.stats
        for record in shipped {
            #expect {
                try journal.append(shipped: record, schema: nil, origin: [5])
            } throws: { error in
                (error as? JournalError)?.code == .corrupt
            }
        }
        #expect(journal.stats == before)
        #expect(journal.origin == nil)
        #expect(try journal.append([2]) == 3, "the journal stays usable")
        try journal.close()
    }

    @Test(arguments: [JournalIO.Operation.pwrite, .fdatasync])
    func aFailedShippedAppendUnderAlwaysLeavesTheOriginAsItWas(failing operation: JournalIO.Operation) throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let plan = JournalIO.FaultPlan()
        let delivered = DeliveryLog()
        let journal = try Journal.open(directory: directory, options: delivered.options(.always, io: .faulty(plan)))
        let record = try wireTransaction(payload(1, count: 300))
        try journal.append(shipped: record, schema: [1], origin: Array("A".utf8))
        plan.arm(.error(EIO), atCall: 1, of: [operation])
        #expect(throws: JournalError.self) { try journal.append(shipped: record, schema: [2], origin: Array("B".utf8)) }
        #expect(plan.hasFired)
        #expect(journal.origin == Array("A".utf8))
        #expect(journal.schema == [1])
        #expect(delivered.sequences == [1, 3])
        #expect(try journal.append([7]) == 4)
        #expect(journal.origin == Array("A".utf8))
        try journal.close()
        let reopened = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
        #expect(reopened.origin == Array("A".utf8))
        #expect(try reopened.records().map(\.payload) == [[1], payload(1, count: 300), [7]])
        try reopened.close()
    }

    @Test func aStreamedChunkedAppendIsDeliveredWhole() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let large = payload(2, count: JournalFormat.chunkedThreshold + 3 * JournalFormat.chunkSize / 2)
        let delivered = DeliveryLog()
        let journal = try Journal.open(directory: directory, options: delivered.options(.always))
        var stream = PayloadStream()
        stream.bytes = large
        stream.cutIfFull()
        try journal.append(stream, schema: [1])
        var shipped: [ShippedRecord] = []
        try journal.forEachShippedRecord(after: 0) { shipped.append($0) }
        try journal.close()
        #expect(delivered.records == shipped)
        #expect(delivered.records.last?.wire[JournalFormat.RecordHeaderField.flags] == JournalFormat.flagChunked)
        #expect(try delivered.records.last.map { try ShippedRecord(wire: $0.wire).payload() } == large)
    }

    // MARK: Torn appends

    @Test func aTornShippedAppendLeavesTheOriginAtItsPreviousValue() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let options = JournalOptions(durability: .none)
        let record = try wireTransaction(payload(1, count: 3000, compressible: false))
        var journal = try Journal.open(directory: directory, options: options)
        try journal.append(shipped: record, schema: [1], origin: Array("A".utf8))
        try journal.close()
        try appendTornShippedAppend(directory, origin: Array("B".utf8), record: record)
        journal = try Journal.open(directory: directory, options: options)
        #expect(journal.openReport.tornTail != nil)
        #expect(journal.origin == Array("A".utf8), "the origin record of a torn append is ignored")
        #expect(try journal.records().transactions == [payload(1, count: 3000, compressible: false)])
        // A later origin record replaces the leftover one.
        try journal.append(shipped: record, schema: [1], origin: Array("C".utf8))
        #expect(journal.origin == Array("C".utf8))
        try journal.close()
        journal = try Journal.open(directory: directory, options: options)
        #expect(journal.origin == Array("C".utf8))
        #expect(try journal.records().transactions.count == 2)
        try journal.close()
        #expect(try Journal.inspect(directory: directory).verdict == .clean)
    }

    @Test func aCrashInsideAShippedAppendLeavesTheOriginAtItsPreviousValue() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let record = try wireTransaction(payload(1, count: 3000, compressible: false))
        let crash = CrashAfterPartialWrite()
        var journal = try Journal.open(directory: directory, options: JournalOptions(durability: .always, io: crash.io))
        try journal.append(shipped: record, schema: [1], origin: Array("A".utf8))
        crash.arm()
        // One pwrite carries the origin record and the transaction: half of it reaches the file.
        #expect(throws: JournalError.self) { try journal.append(shipped: record, schema: [1], origin: Array("B".utf8)) }
        #expect(crash.wrote > 0)
        try? journal.close()
        journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
        #expect(journal.openReport.tornTail != nil)
        #expect(journal.origin == Array("A".utf8))
        try journal.close()
    }

    @Test
    func aPlainAppendAfterATornShippedAppendDoesNotTakeItsOrigin() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let options = JournalOptions(durability: .none)
        let record = try wireTransaction(payload(1, count: 3000, compressible: false))
        var journal = try Journal.open(directory: directory, options: options)
        try journal.append(shipped: record, schema: [1], origin: Array("A".utf8))
        try journal.close()
        try appendTornShippedAppend(directory, origin: Array("B".utf8), record: record)
        journal = try Journal.open(directory: directory, options: options)
        #expect(journal.origin == Array("A".utf8))
        try journal.append([9], schema: [1])
        #expect(journal.origin == Array("A".utf8), "B came with a record that never reached the journal")
        try journal.close()
        journal = try Journal.open(directory: directory, options: options)
        #expect(journal.origin == Array("A".utf8), "B came with a record that never reached the journal, after reopen")
        try journal.close()
    }

    // MARK: Readers

    @Test func aJournalWithOriginRecordsOpensAndReplaysWithTheOriginRecordsSkipped() throws {
        let source = temporaryJournalPath()
        let directory = temporaryJournalPath()
        defer { removeDirectory(source); removeDirectory(directory) }
        let written = try writeSmallJournal(source, count: 12)
        let shipped = try shippedRecords(of: source)
        do {
            let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
            try replicate(shipped, into: journal)
            try journal.close()
        }
        let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
        #expect(journal.openReport.isClean)
        let records = try journal.records()
        #expect(records.transactions == written)
        #expect(records.map(\.kind) == [.schema] + Array(repeating: .transaction, count: 12))
        #expect(journal.stats.records == records.count + 12, "origin records are counted")
        #expect(journal.stats.lastSequence == 25)
        try journal.close()

        let report = try Journal.inspect(directory: directory)
        #expect(report.verdict == .clean)
        let origins = report.entries.filter { $0.type == JournalFormat.RecordType.origin.rawValue }
        #expect(origins.count == 12)
        #expect(origins.allSatisfy { $0.kind == nil }, "a skipped record type has no kind")
        var read: [(UInt8, [UInt8])] = []
        _ = try Journal.readRecords(directory: directory) { read.append(($0.entry.type, $0.payload)) }
        #expect(
            read.filter { $0.0 == 0x80 }.map(\.1)
                == shipped.filter { $0.kind == .transaction }.map { Array("source \($0.sequence)".utf8) })
        #expect(read.filter { $0.0 == 1 }.map(\.1) == written)
    }
}

// MARK: - Helpers

/// What ``JournalOptions/onDurable`` delivered, in order.
private final class DeliveryLog: Sendable {
    private let state = Mutex<[ShippedRecord]>([])

    var records: [ShippedRecord] { state.withLock { $0 } }
    var sequences: [UInt64] { records.map(\.sequence) }

    func contains(_ sequence: UInt64) -> Bool { state.withLock { $0.contains { $0.sequence == sequence } } }

    /// The delivered records as ``Journal/forEachRecord(_:)`` gives them.
    func decoded() throws -> [JournalRecord] {
        try records.map { JournalRecord(sequence: $0.sequence, kind: $0.kind, payload: try $0.payload()) }
    }

    func options(
        _ durability: JournalOptions.Durability, io: JournalIO = .system, segmentSize: Int = 64 << 20
    ) -> JournalOptions {
        var options = JournalOptions(durability: durability, segmentSize: segmentSize, io: io)
        options.onDurable = { [self] batch in
            #expect(!batch.isEmpty, "no empty delivery")
            state.withLock { $0.append(contentsOf: batch) }
        }
        return options
    }
}

/// The wire forms of every schema, transaction and base record of a journal.
private func shippedRecords(of directory: String) throws -> [ShippedRecord] {
    let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
    defer { try? journal.close() }
    var records: [ShippedRecord] = []
    try journal.forEachShippedRecord(after: 0) { records.append($0) }
    return records
}

/// Appends the transactions of `records` to `journal`, each with the schema shipped before it
/// and the origin `"source <its sequence>"`.
private func replicate(_ records: [ShippedRecord], into journal: Journal) throws {
    var schema: [UInt8]?
    for record in records {
        switch record.kind {
        case .schema: schema = try record.payload()
        case .transaction:
            try journal.append(shipped: record, schema: schema, origin: Array("source \(record.sequence)".utf8))
        case .base: break
        }
    }
}

/// The wire form of a transaction record carrying `bytes` (stored as a segment would store them).
private func wireTransaction(_ bytes: [UInt8], sequence: UInt64 = 1) throws -> ShippedRecord {
    var wire: [UInt8] = []
    RecordCodec.append(to: &wire, seed: ShippedRecord.wireSeed, sequence: sequence, type: .transaction, payload: bytes)
    return try ShippedRecord(wire: wire)
}

/// What a crash in the middle of `append(shipped:schema:origin:)` leaves at the end of the last
/// segment: a complete origin record carrying `origin`, then the first half of the transaction
/// record, both sealed with the segment's salt.
private func appendTornShippedAppend(_ directory: String, origin: [UInt8], record: ShippedRecord) throws {
    let segment = try #require(try liveSegments(directory).last)
    var bytes = readBytes(segment)
    let salt = bytes[JournalFormat.SegmentHeaderField.salt..<(JournalFormat.SegmentHeaderField.salt + 8)]
        .reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    let seed = CRC32C.seed(salt: salt)
    let sequence = try #require(try Journal.inspect(directory: directory).entries.last).sequence + 1
    var tail: [UInt8] = []
    RecordCodec.append(to: &tail, seed: seed, sequence: sequence, type: .origin, payload: origin)
    let start = tail.count
    tail.append(contentsOf: record.wire)
    tail.storeLittleEndian(sequence + 1, at: start + JournalFormat.RecordHeaderField.sequence)
    RecordCodec.reseal(&tail, at: start, seed: seed)
    bytes.append(contentsOf: tail[..<(start + record.wire.count / 2)])
    writeBytes(segment, bytes)
}

/// An I/O layer that, once armed, writes half of the next `pwrite` and then fails every call
/// but `close`, as a process that dies in the middle of a write.
private final class CrashAfterPartialWrite: Sendable {
    private struct State { var armed = false; var dead = false; var wrote = 0 }
    private let state = Mutex(State())

    func arm() { state.withLock { $0.armed = true } }
    var wrote: Int { state.withLock { $0.wrote } }

    var io: JournalIO {
        var io = JournalIO.system
        let system = JournalIO.system
        @Sendable func check(_ operation: String) throws(JournalIO.Failure) {
            if self.state.withLock({ $0.dead }) {
                throw JournalIO.Failure(errno: EIO, operation: operation + " (after a crash)")
            }
        }
        io.pwrite = { fd, buffer, offset throws(JournalIO.Failure) in
            try check("pwrite")
            let armed = self.state.withLock { s in
                let armed = s.armed
                if armed { s.armed = false; s.dead = true }
                return armed
            }
            guard armed else { return try system.pwrite(fd, buffer, offset) }
            let written = try system.pwrite(fd, UnsafeRawBufferPointer(rebasing: buffer[..<(buffer.count / 2)]), offset)
            self.state.withLock { $0.wrote = written }
            throw JournalIO.Failure(errno: EIO, operation: "pwrite (crash)")
        }
        io.ftruncate = { fd, length throws(JournalIO.Failure) in
            try check("ftruncate"); try system.ftruncate(fd, length)
        }
        io.fdatasync = { fd throws(JournalIO.Failure) in
            try check("fdatasync"); try system.fdatasync(fd)
        }
        io.fsync = { fd throws(JournalIO.Failure) in
            try check("fsync"); try system.fsync(fd)
        }
        io.fileSize = { fd throws(JournalIO.Failure) in
            try check("fileSize"); return try system.fileSize(fd)
        }
        io.rename = { from, to throws(JournalIO.Failure) in
            try check("rename"); try system.rename(from, to)
        }
        io.unlink = { path throws(JournalIO.Failure) in
            try check("unlink"); try system.unlink(path)
        }
        return io
    }
}
