import Dispatch
import Foundation
import GraphJournal
import ObjectGraph

/// A read-only replay of a journal: decodes every record against the schema in force and keeps
/// the live objects (or only their serials), without the application's code and without
/// opening the store for writing. `stats`, `verify` and `dump --objects` share it.
///
/// It checks what opening the store would check beyond the framing, with the library's rules
/// (`RecordRules`, which also word the problems): a transaction follows a schema record and
/// decodes against it (every count and serial within its bounds), inserts a serial that is not
/// live, updates and deletes serials that are; and for the relationships stored as links
/// (``LinkState``), links and orders objects that are live, removes pairs that are linked, adds
/// pairs that are not. The one rule it cannot apply is an enum attribute's raw value being a
/// case: the cases are in the application's code, which the tool does not have.
struct JournalReplay {
    /// The live objects of one entity.
    struct Table {
        var name: String
        /// The attributes of the schema in force (or, for an entity the latest schema dropped,
        /// of the last schema that had it).
        var attributes: [AttributeDescription]
        /// Live objects by serial; the values align with ``attributes`` (empty arrays when the
        /// replay keeps no values).
        var objects: [UInt64: [AttributeValue?]] = [:]
        /// Whether the schema in force has this entity.
        var inSchema = true
        /// Live serials as a bitmap, when the replay keeps no values (serials are dense).
        var liveBits: [UInt64] = []
        var liveBitCount = 0

        /// How many objects are live.
        var count: Int { objects.isEmpty ? liveBitCount : objects.count }

        /// Marks each of `serials` live, in order, and returns those that already were or are not
        /// below 2^32 (in order), in one pass over the bitmap (grown first for the largest).
        mutating func insertBits(_ serials: some Collection<UInt64>) -> [UInt64] {
            if let rejected = serials.withContiguousStorageIfAvailable({ insertBits(in: $0) }) { return rejected }
            return Array(serials).withUnsafeBufferPointer { insertBits(in: $0) }
        }

        /// ``insertBits(_:)-(some Collection<UInt64>)`` for a run of consecutive serials, without
        /// listing them unless some are already live.
        mutating func insertBits(_ run: ClosedRange<UInt64>) -> [UInt64] {
            guard run.upperBound < 1 << 32 else { return insertBits(Array(run)) }
            let words = Int(run.upperBound >> 6) + 1
            if words > liveBits.count {
                liveBits.append(contentsOf: repeatElement(0, count: max(words - liveBits.count, liveBits.count)))
            }
            if liveBits.withUnsafeMutableBufferPointer({ Self.setRun(run, in: $0) }) {
                liveBitCount += run.count
                return []
            }
            return Array(run).withUnsafeBufferPointer { insertBits(in: $0) }
        }

        /// Serials come in runs of consecutive numbers (a save inserts objects with fresh serials):
        /// a run whose bits are all clear is marked a 64-bit word at a time; any other run, one
        /// serial at a time.
        private mutating func insertBits(in serials: UnsafeBufferPointer<UInt64>) -> [UInt64] {
            var rejected: [UInt64] = []
            var i = 0
            while i < serials.count {
                let first = serials[i]
                guard first < 1 << 32 else {
                    rejected.append(first)
                    i += 1
                    continue
                }
                var end = i + 1
                var last = first
                while end < serials.count {
                    let next = serials[end]
                    guard next == last &+ 1, next < 1 << 32 else { break }
                    last = next
                    end += 1
                }
                let words = Int(last >> 6) + 1
                if words > liveBits.count {
                    liveBits.append(contentsOf: repeatElement(0, count: max(words - liveBits.count, liveBits.count)))
                }
                let added = liveBits.withUnsafeMutableBufferPointer { bits in
                    Self.setRun(first...last, in: bits)
                        ? end - i : Self.setEach(serials[i..<end], in: bits, rejected: &rejected)
                }
                liveBitCount += added
                i = end
            }
            return rejected
        }

        /// Sets the bits of `run` and returns true if they were all clear; else changes nothing.
        private static func setRun(_ run: ClosedRange<UInt64>, in bits: UnsafeMutableBufferPointer<UInt64>) -> Bool {
            /// The mask of `run`'s bits in word `w`.
            func mask(_ w: Int) -> UInt64 {
                let low = max(run.lowerBound, UInt64(w) << 6) & 63, high = min(run.upperBound, UInt64(w) << 6 + 63) & 63
                return (UInt64.max >> (63 - high)) & (UInt64.max << low)
            }
            let firstWord = Int(run.lowerBound >> 6), lastWord = Int(run.upperBound >> 6)
            for w in firstWord...lastWord where bits[w] & mask(w) != 0 { return false }
            for w in firstWord...lastWord { bits[w] |= mask(w) }
            return true
        }

        /// Sets the bits of `serials` one at a time, appending those already set to `rejected`;
        /// returns how many it set.
        private static func setEach(
            _ serials: Slice<UnsafeBufferPointer<UInt64>>, in bits: UnsafeMutableBufferPointer<UInt64>,
            rejected: inout [UInt64]
        ) -> Int {
            var added = 0
            for serial in serials {
                let bit = UInt64(1) << (serial & 63)
                if bits[Int(serial >> 6)] & bit != 0 {
                    rejected.append(serial)
                } else {
                    bits[Int(serial >> 6)] |= bit
                    added += 1
                }
            }
            return added
        }

        /// Those of `serials` that are not live, in order, in one pass over the bitmap.
        func missingBits(_ serials: some Sequence<UInt64>) -> [UInt64] {
            liveBits.withUnsafeBufferPointer { bits in
                serials.filter { serial in
                    let word = Int(serial >> 6)
                    return word >= bits.count || bits[word] & (UInt64(1) << (serial & 63)) == 0
                }
            }
        }

        /// Marks each of `serials` dead, in order, and returns those that were not live (in
        /// order), in one pass over the bitmap.
        mutating func removeBits(_ serials: some Sequence<UInt64>) -> [UInt64] {
            var rejected: [UInt64] = []
            var removed = 0
            liveBits.withUnsafeMutableBufferPointer { bits in
                for serial in serials {
                    let word = Int(serial >> 6), bit = UInt64(1) << (serial & 63)
                    guard word < bits.count, bits[word] & bit != 0 else {
                        rejected.append(serial)
                        continue
                    }
                    bits[word] &= ~bit
                    removed += 1
                }
            }
            liveBitCount -= removed
            return rejected
        }
    }

    /// A record that does not decode or contradicts the records before it.
    struct Problem {
        var file: String
        var offset: Int64
        var sequence: UInt64
        var message: String
    }

    /// Whether attribute values are kept (`stats`, `dump --objects`) or only serials (`verify`).
    let keepValues: Bool
    /// Whether live serials are tracked at all (`dump` of transactions only decodes).
    let trackObjects: Bool
    /// The schema in force.
    private(set) var schema: StoredSchema?
    private(set) var tables: [Table] = []
    private var tableIndex: [String: Int] = [:]
    /// The relationships the schema in force stores as links, in its order, with their links.
    /// Kept only when objects are tracked.
    private(set) var links: [LinkState] = []
    /// ``links`` by ``linkKey(_:_:)`` of the schema in force's sides.
    private var linkIndex: [String: Int] = [:]
    /// Per entity name: the links it is a side of, with the side.
    private var linkSides: [String: [(link: Int, side: Int)]] = [:]
    private(set) var problems: [Problem] = []
    /// Problems not kept once ``problemLimit`` were kept.
    private(set) var problemsNotShown = 0
    private let problemLimit = 100
    private(set) var schemaRecords = 0
    /// Per schema record read, in order: the model version it names (the last of its
    /// ``StoredSchema/versions``), nil for an unversioned or undecodable one.
    private(set) var schemaRecordVersions: [String?] = []
    private(set) var transactions = 0
    private(set) var baseRecords = 0
    /// Records of a type this tool skips, other than origin records.
    private(set) var skippedRecords = 0
    /// Origin records (type 0x80): in a replica or a restored store, where each record that came
    /// from a stream came from (Docs/JournalFormat.md, "Origin records").
    private(set) var originRecords = 0
    /// The journal's origin after the records read, as `Journal.origin` finds it: the payload
    /// of the origin record of the last data record that had one.
    private(set) var origin: [UInt8]?
    /// An origin record's payload that no data record followed yet.
    private var pendingOrigin: [UInt8]?
    /// The segment of the record read last.
    private var lastFile: String?

    init(keepValues: Bool, trackObjects: Bool = true) {
        self.keepValues = keepValues
        self.trackObjects = trackObjects || keepValues
    }

    /// Applies one record, decoding it here; returns the decoded change set of a transaction
    /// or base record (nil for other records and for records that do not decode).
    @discardableResult
    mutating func apply(_ record: JournalReadRecord) -> ChangeSet? {
        apply(record, decoded: decode(record, schema: schema))
    }

    /// Decodes a transaction or base record against `schema`; nil for other records.
    static func decode(_ record: JournalReadRecord, schema: StoredSchema?) -> Result<ChangeSet, StoreError>? {
        guard record.entry.kind == .transaction || record.entry.kind == .base, let schema else { return nil }
        do { return .success(try schema.decodeTransaction(record.payload)) } catch { return .failure(error) }
    }

    private func decode(_ record: JournalReadRecord, schema: StoredSchema?) -> Result<ChangeSet, StoreError>? {
        Self.decode(record, schema: schema)
    }

    /// Applies one record whose payload was decoded already (by ``decode(_:schema:)`` with the
    /// schema in force); returns its change set, as ``apply(_:)``.
    @discardableResult
    mutating func apply(_ record: JournalReadRecord, decoded: Result<ChangeSet, StoreError>?) -> ChangeSet? {
        noteOrigins(record.entry, payload: record.entry.type == originType ? record.payload : nil)
        switch record.entry.kind {
        case .schema:
            applySchema(record.payload, record.entry)
            return nil
        case .transaction, .base:
            if record.entry.kind == .base { baseRecords += 1 } else { transactions += 1 }
            guard schema != nil, let decoded else {
                report(record, "\(record.entry.kind.label) record precedes any schema record")
                return nil
            }
            let changes: ChangeSet
            switch decoded {
            case .success(let c): changes = c
            case .failure(let error):
                report(
                    record, "\(record.entry.kind.label) does not decode against the schema in force: \(error.message)")
                return nil
            }
            if trackObjects {
                for entity in changes.entities { apply(entity, record) }
                for l in changes.links { apply(l, record.entry) }
            }
            return changes
        case nil:
            if record.entry.type != originType { skippedRecords += 1 }
            return nil
        }
    }

    /// The type of origin records.
    private var originType: UInt8 { 0x80 }

    /// Follows the journal's origin (Docs/JournalFormat.md, "Origin records") through one
    /// record, before it is applied; `payload` is an origin record's.
    private mutating func noteOrigins(_ entry: JournalReport.Entry, payload: [UInt8]?) {
        // A base is written whole: a pending origin at its end holds.
        if let lastFile, lastFile != entry.file, lastFile.hasSuffix(".base") { settleOrigin() }
        lastFile = entry.file
        if entry.type == originType {
            originRecords += 1
            pendingOrigin = payload ?? []
        } else if entry.kind == .transaction || entry.kind == .base {
            settleOrigin()
        }
    }

    private mutating func settleOrigin() {
        if let pending = pendingOrigin, !pending.isEmpty { origin = pending }
        pendingOrigin = nil
    }

    /// Settles what the end of the journal settles: a pending origin at the end of a base.
    mutating func finishOrigins() {
        if lastFile?.hasSuffix(".base") == true { settleOrigin() }
    }

    /// Checks one record without building its values (`verify`): reports exactly what
    /// ``apply(_:)`` would, from a validating skim of the payload as it is lent, piece by piece
    /// (``StoredSchema/validateTransaction(_:into:)``), instead of a decoded change set.
    /// `outline` is scratch space, reused from record to record.
    ///
    /// A payload whose pieces end early (a chunk that does not decompress) is ignored as if it
    /// had never been lent: the journal reports it, as it reports the payloads it cannot
    /// decompress before lending them.
    ///
    /// Under a schema with relationships stored as links the outline is not enough (it does
    /// not list link changes): each payload is read whole and decoded as ``apply(_:)`` does.
    mutating func check(_ entry: JournalReport.Entry, payload: JournalPayload, outline: inout TransactionOutline) {
        precondition(!keepValues, "check(_:payload:outline:) tracks serials only")
        if entry.type == originType {
            // A payload that does not decompress counts as empty, as `Journal.origin` counts it.
            noteOrigins(entry, payload: payload.readRest() ?? [])
            return
        }
        noteOrigins(entry, payload: nil)
        switch entry.kind {
        case .schema:
            guard let bytes = payload.readRest() else { return }
            applySchema(bytes, entry)
        case .transaction, .base:
            if let schema, !schema.links.isEmpty, trackObjects {
                // The outline does not list link changes: a payload of a schema with links is
                // decoded in full, once it is known to decompress.
                guard let bytes = payload.readRest() else { return }
                let record = JournalReadRecord(entry: entry, payload: bytes)
                apply(record, decoded: decode(record, schema: schema))
                return
            }
            // Nothing is counted or reported before the whole payload is known to decompress.
            var malformed: StoreError?
            if let schema {
                do { _ = try schema.validateTransaction(payload, into: &outline) } catch { malformed = error }
            }
            guard payload.finish() else { return }
            if entry.kind == .base { baseRecords += 1 } else { transactions += 1 }
            guard let schema else {
                report(entry, "\(entry.kind.label) record precedes any schema record")
                return
            }
            if let malformed {
                report(entry, "\(entry.kind.label) does not decode against the schema in force: \(malformed.message)")
                return
            }
            guard trackObjects else { return }
            for block in outline.blocks {
                let name = schema.entities[block.entity].name
                guard let t = tableIndex[name] else {
                    report(entry, "changes entity \(name), which the schema in force does not have")
                    continue
                }
                if let run = block.insertedRun {
                    for serial in tables[t].insertBits(run) {
                        report(entry, RecordRules.insertOfLiveSerial(name, serial).reason)
                    }
                    trackSerials(
                        t, name, entry, inserted: EmptyCollection(), updated: outline.serials[block.updated],
                        deleted: outline.serials[block.deleted])
                } else {
                    trackSerials(
                        t, name, entry, inserted: outline.serials[block.inserted],
                        updated: outline.serials[block.updated],
                        deleted: outline.serials[block.deleted])
                }
            }
        case nil:
            guard payload.finish() else { return }
            skippedRecords += 1
        }
    }

    private mutating func applySchema(_ payload: [UInt8], _ entry: JournalReport.Entry) {
        schemaRecords += 1
        do {
            let decoded = try StoredSchema.decode(payload)
            schemaRecordVersions.append(decoded.versionIdentifier)
            install(decoded)
        } catch {
            schemaRecordVersions.append(nil)
            report(entry, "schema record does not decode: \(error.message)")
        }
    }

    /// The tables of the entities of the schema in force, in schema order, then those of
    /// entities it dropped that still hold objects.
    var liveTables: [Table] {
        tables.filter { $0.inSchema } + tables.filter { !$0.inSchema && $0.count > 0 }
    }

    private mutating func report(_ record: JournalReadRecord, _ message: String) {
        report(record.entry, message)
    }

    private mutating func report(_ entry: JournalReport.Entry, _ message: String) {
        guard problems.count < problemLimit else { problemsNotShown += 1; return }
        problems.append(Problem(file: entry.file, offset: entry.offset, sequence: entry.sequence, message: message))
    }

    /// Makes `stored` the schema in force, carrying the live objects over by attribute name
    /// (or declared original name), as opening the store with that model would.
    private mutating func install(_ stored: StoredSchema) {
        schema = stored
        var newTables: [Table] = []
        var newIndex: [String: Int] = [:]
        for entity in stored.entities {
            var table = Table(name: entity.name, attributes: entity.attributes)
            if let old = tableIndex[entity.name].map({ tables[$0] }) {
                if keepValues && old.attributes.map(\.name) != entity.attributes.map(\.name) {
                    let sources: [Int?] = entity.attributes.map { a in
                        old.attributes.firstIndex { $0.name == a.name }
                            ?? a.originalName.flatMap { o in old.attributes.firstIndex { $0.name == o } }
                    }
                    for (serial, values) in old.objects {
                        table.objects[serial] = entity.attributes.indices.map { i in
                            sources[i].map { values[$0] } ?? entity.attributes[i].defaultValue
                        }
                    }
                } else {
                    table.objects = old.objects
                }
                table.liveBits = old.liveBits
                table.liveBitCount = old.liveBitCount
            }
            newIndex[entity.name] = newTables.count
            newTables.append(table)
        }
        for old in tables where newIndex[old.name] == nil {
            var orphan = old
            orphan.inSchema = false
            newIndex[old.name] = newTables.count
            newTables.append(orphan)
        }
        let oldTables = tables
        tables = newTables
        tableIndex = newIndex
        if trackObjects { installLinks(stored, oldTables: oldTables) }
    }

    /// Applies one entity's changes to its live-serial bitmap (serials below 2^32; larger ones
    /// are implausible), when the replay keeps no values.
    ///
    /// Each list is applied in one pass over the bitmap's memory (``Table/insertBits(_:)``):
    /// a million inserts were 48 instructions each when every serial went through
    /// `tables[t].insertBit`, a uniqueness check of `tables` and of the bitmap per serial.
    private mutating func trackSerials(
        _ t: Int, _ name: String, _ entry: JournalReport.Entry,
        inserted: some Collection<UInt64>, updated: some Sequence<UInt64>, deleted: some Sequence<UInt64>
    ) {
        for serial in tables[t].insertBits(inserted) {
            report(entry, RecordRules.insertOfLiveSerial(name, serial).reason)
        }
        for serial in tables[t].missingBits(updated) {
            report(entry, RecordRules.updateOfMissingSerial(name, serial).reason)
        }
        for serial in tables[t].removeBits(deleted) {
            report(entry, RecordRules.deleteOfMissingSerial(name, serial).reason)
        }
        dropLinks(of: name, deleted)
    }

    private mutating func apply(_ changes: EntityChanges, _ record: JournalReadRecord) {
        guard let t = tableIndex[changes.entityName] else {
            report(record, "changes entity \(changes.entityName), which the schema in force does not have")
            return
        }
        let name = changes.entityName
        guard keepValues else {
            trackSerials(
                t, name, record.entry, inserted: changes.insertedSerials, updated: changes.updates.lazy.map(\.serial),
                deleted: changes.deletedSerials)
            return
        }
        let width = changes.attributeNames.count
        for (i, serial) in changes.insertedSerials.enumerated() {
            let values = Array(changes.insertedValues[(i * width)..<((i + 1) * width)])
            if tables[t].objects.updateValue(values, forKey: serial) != nil {
                report(record, RecordRules.insertOfLiveSerial(name, serial).reason)
            }
        }
        for update in changes.updates {
            guard tables[t].objects[update.serial] != nil else {
                report(record, RecordRules.updateOfMissingSerial(name, update.serial).reason)
                continue
            }
            tables[t].objects[update.serial]![update.attribute] = update.value
        }
        for serial in changes.deletedSerials where tables[t].objects.removeValue(forKey: serial) == nil {
            report(record, RecordRules.deleteOfMissingSerial(name, serial).reason)
        }
        dropLinks(of: name, changes.deletedSerials)
    }
}

extension JournalReplay.Table {
    /// An estimate of the bytes this entity's block takes in a compaction's snapshot payload,
    /// before compression: serials and null bitmaps estimated, values sized by the library's
    /// payload encoding (``AttributeType/payloadSize(of:)``).
    var estimatedSnapshotBytes: Int64 {
        let count = objects.count
        var total = Int64(2 + 5 + varintSize(UInt64(count)) + 2)
        guard count > 0 else { return total }
        total += Int64(count)  // serial deltas, one byte each when dense
        var nullColumns = Set<Int>()
        for values in objects.values {
            for (i, value) in values.enumerated() {
                if let value { total += Int64(encodedSize(value, attributes[i].type)) } else { nullColumns.insert(i) }
            }
        }
        total += Int64(attributes.count) + Int64(nullColumns.count * ((count + 7) / 8))
        return total
    }

    private func varintSize(_ value: UInt64) -> Int {
        var v = value
        var n = 1
        while v >= 0x80 { v >>= 7; n += 1 }
        return n
    }

    /// The value's size in the payload, from the library's own encoding.
    private func encodedSize(_ value: AttributeValue, _ type: AttributeType) -> Int {
        type.payloadSize(of: value) ?? 0
    }
}

/// Feeds records to a ``JournalReplay``, decoding the payloads of consecutive transaction and
/// base records on every core (decoding is most of the work) and applying them in order.
struct ParallelReplay {
    var replay: JournalReplay
    private var pending: [JournalReadRecord] = []
    private var pendingBytes = 0
    private let workers = max(1, ProcessInfo.processInfo.activeProcessorCount)
    /// Whether the consumer needs the decoded values (false: they are freed on the workers).
    private let emitsValues: Bool

    init(_ replay: JournalReplay, emitsValues: Bool = true) {
        self.replay = replay
        self.emitsValues = emitsValues || replay.keepValues
    }

    /// Takes one record; `emit` is called for every record, in order, with its change set and the schema in force,
    /// once it is applied (possibly later, at a later ``feed(_:emit:)`` or at ``finish(emit:)``).
    mutating func feed(
        _ record: JournalReadRecord, emit: (JournalReadRecord, ChangeSet?, StoredSchema?) throws -> Void
    ) throws {
        if record.entry.kind == .schema || workers == 1 {
            try finish(emit: emit)
            let changes = replay.apply(record)
            try emit(record, changes, replay.schema)
            return
        }
        pending.append(record)
        pendingBytes += record.payload.count
        if pending.count >= 64 || pendingBytes >= 16 << 20 { try finish(emit: emit) }
    }

    /// Decodes and applies the records held back, then emits them.
    mutating func finish(emit: (JournalReadRecord, ChangeSet?, StoredSchema?) throws -> Void) throws {
        guard !pending.isEmpty else { return }
        let records = pending
        let schema = replay.schema
        let strip = !emitsValues
        pending.removeAll(keepingCapacity: true)
        pendingBytes = 0
        var results = [Result<ChangeSet, StoreError>?](repeating: nil, count: records.count)
        results.withUnsafeMutableBufferPointer { buffer in
            nonisolated(unsafe) let out = buffer  // each iteration writes its own element
            DispatchQueue.concurrentPerform(iterations: records.count) { i in
                var decoded = JournalReplay.decode(records[i], schema: schema)
                if strip, case .success(var changes) = decoded {
                    for e in changes.entities.indices {
                        changes.entities[e].insertedValues = []
                        for u in changes.entities[e].updates.indices { changes.entities[e].updates[u].value = nil }
                    }
                    decoded = .success(changes)
                }
                out[i] = decoded
            }
        }
        for (record, decoded) in zip(records, results) {
            let changes = replay.apply(record, decoded: decoded)
            try emit(record, changes, replay.schema)
        }
    }
}

// MARK: Links

extension JournalReplay.Table {
    /// Whether `serial` is live in the bitmap (when the replay keeps no values).
    func hasBit(_ serial: UInt64) -> Bool {
        let word = Int(serial >> 6)
        return serial < 1 << 32 && word < liveBits.count && liveBits[word] & (UInt64(1) << (serial & 63)) != 0
    }
}

extension JournalReplay {
    /// Whether the object `serial` of `entity` is live.
    private func isLive(_ entity: String, _ serial: UInt64) -> Bool {
        guard let t = tableIndex[entity] else { return false }
        return isLive(table: t, serial)
    }

    /// Whether the object `serial` of the entity of `tables[t]` is live.
    private func isLive(table t: Int, _ serial: UInt64) -> Bool {
        keepValues ? tables[t].objects[serial] != nil : tables[t].hasBit(serial)
    }

    /// Makes the links of `stored` those in force: a relationship an earlier schema stored as
    /// links keeps its links (matched by its two sides, in either order), one that was a to-one
    /// relationship before takes its values as links (as the library migrates it), and those
    /// `stored` no longer has are dropped (the library no longer reads them).
    private mutating func installLinks(_ stored: StoredSchema, oldTables: [Table]) {
        var old = links
        var taken = Set<Int>()
        var newLinks: [LinkState] = []
        for l in stored.links {
            let fresh = LinkState(link: l, in: stored)
            let key = Self.linkKey(fresh.entityNames, l.names)
            let swapped = Self.linkKey(fresh.entityNames.reversed(), l.names.reversed())
            if let i = old.indices.first(where: {
                !taken.contains($0) && [key, swapped].contains(Self.linkKey(old[$0].entityNames, old[$0].link.names))
            }) {
                taken.insert(i)
                var state = old[i]
                if Self.linkKey(state.entityNames, state.link.names) != key { state.swapSides() }
                state.setOrdered(l.ordered)
                state.link = l
                state.entityNames = fresh.entityNames
                state.description = fresh.description
                newLinks.append(state)
                continue
            }
            var state = fresh
            migrateToOne(into: &state, stored: stored, oldTables: oldTables)
            newLinks.append(state)
        }
        old.removeAll()
        links = newLinks
        linkIndex = [:]
        linkSides = [:]
        for (k, state) in links.enumerated() {
            linkIndex[Self.linkKey(state.entityNames, state.link.names)] = k
            for side in 0..<2 { linkSides[state.entityNames[side], default: []].append((k, side)) }
        }
    }

    /// A relationship new to the links whose side was a to-one slot of the previous schema: each
    /// object's value becomes its link, in the order of the objects' serials. Without values
    /// (`verify`) the links are not known: the relationship is marked inexact.
    private func migrateToOne(into state: inout LinkState, stored: StoredSchema, oldTables: [Table]) {
        for side in 0..<2 {
            let entity = state.entityNames[side], name = state.link.names[side]
            guard let old = oldTables.first(where: { $0.name == entity && $0.inSchema }),
                let j = old.attributes.firstIndex(where: { $0.name == name && $0.destinationEntity != nil }),
                stored.entities[state.link.entities[side]].attributes.contains(where: { $0.name == name }) == false
            else { continue }
            guard keepValues else {
                if old.count > 0 { state.exact = false }
                continue
            }
            for serial in old.objects.keys.sorted() {
                let destination: UInt64
                switch old.objects[serial]?[j] {
                case .uint(let v)?: destination = v
                case .int(let v)? where v > 0: destination = UInt64(v)
                default: continue
                }
                guard isLive(state.entityNames[1 - side], destination) else { continue }
                if side == 0 { state.add(serial, destination) } else { state.add(destination, serial) }
            }
        }
    }

    /// Takes the deleted objects `serials` of `entity` out of every list.
    private mutating func dropLinks(of entity: String, _ serials: some Sequence<UInt64>) {
        guard let sides = linkSides[entity] else { return }
        for serial in serials {
            for (k, side) in sides { links[k].drop(side, serial) }
        }
    }

    /// Applies one relationship's link changes of a record, as the library's replay does,
    /// reporting what the library refuses: a link of an object that does not exist, the removal
    /// of a pair that is not linked, the addition of one that is, an order edit of a member the
    /// list does not have or past its end.
    private mutating func apply(_ changes: LinkChanges, _ entry: JournalReport.Entry) {
        guard let k = linkIndex[Self.linkKey(changes.entityNames, changes.relationshipNames)] else {
            report(
                entry,
                "changes the links of \(changes.entityNames[0]).\(changes.relationshipNames[0]), which the schema in force does not store as links"
            )
            return
        }
        links[k].pairsRemoved += changes.removed.count
        links[k].pairsAdded += changes.added.count
        links[k].orderEdits += changes.orders.count
        let names = links[k].entityNames, prefix = links[k].shortName + ": ", exact = links[k].exact
        let sideTables = names.map { tableIndex[$0] }
        /// Whether `serial` of `side` is live; reports it when not.
        // The rules and their words are the library's (`RecordRules`); only the facts are this
        // replay's. Where the links are not known exactly, the rules that need them are not
        // applied.
        func exists(_ side: Int, _ serial: UInt64) -> Bool {
            let live = sideTables[side].map { isLive(table: $0, serial) } ?? false
            if let v = RecordRules.linkedObject(names[side], serial, isLive: live) { report(entry, prefix + v.reason) }
            return live
        }
        func pair(_ p: LinkChanges.Pair) -> String { "\(names[0])/\(p.serial0) and \(names[1])/\(p.serial1)" }
        for p in changes.removed where exists(0, p.serial0) && exists(1, p.serial1) {
            let removed = links[k].remove(p.serial0, p.serial1)
            if exact, let v = RecordRules.unlink(pair(p), linked: removed) { report(entry, prefix + v.reason) }
        }
        for p in changes.added where exists(0, p.serial0) && exists(1, p.serial1) {
            let serials = [p.serial0, p.serial1]
            let holding = (0..<2).first { links[k].link.toOne[$0] && !links[k].members($0, serials[$0]).isEmpty }
            if exact,
                let v = RecordRules.link(
                    pair(p), linked: links[k].contains(p.serial0, p.serial1),
                    toOneHolding: holding.map { (entity: names[$0], name: links[k].link.names[$0]) })
            {
                report(entry, prefix + v.reason)
                continue
            }
            links[k].add(p.serial0, p.serial1)
        }
        for o in changes.orders where (0..<2).contains(o.side) {
            guard exists(o.side, o.owner), o.placements.allSatisfy({ exists(1 - o.side, $0.member) }) else { continue }
            let applies = links[k].reorder(o.side, o.owner, o.placements)
            if exact, let v = RecordRules.order(names[o.side], o.owner, applies: applies) {
                report(entry, prefix + v.reason)
            }
        }
    }
}
