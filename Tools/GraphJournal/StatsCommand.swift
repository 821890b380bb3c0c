import ArgumentParser
import Foundation
import GraphJournal
import GraphJournalProgress
import ObjectGraph
import ObjectGraphReplication

/// `graph-journal stats DIR`: counts, sizes and live objects per entity.
struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Prints a store's segments, records, entities with live object counts, bytes on disk and compression.",
        discussion: """
            Read-only: takes no lock and writes nothing; it replays the journal in memory to count \
            live objects. "live bytes" estimates what a compaction would write: the live objects \
            in the journal's encoding, compressed at the journal's overall compression ratio, plus \
            the segment and record headers and the schema record. "superseded bytes" is the rest \
            of the bytes on disk: history a compaction would drop. "schema versions" lists the \
            model versions the store went through, oldest first (1 → 2 → 3: a store migrated \
            twice), then the version each schema record of the live journal names; a store \
            written without versions is "unversioned". Each relationship stored as \
            links (many-to-many, ordered to-many) is listed with its two sides, its links after \
            the replay, and the pairs added and removed and the order edits its records hold. On \
            a damaged journal the figures cover the valid prefix and the health line says what \
            is wrong.

            A replica (a follower's directory) or a restored store numbers its records its own \
            way and puts an origin record before each record that came from a stream: where it \
            came from. Its "last sequence" is its own; "replica of" names the stream and \
            "writer sequence" the writer's record applied last and the stream message that \
            carried it (the journal's origin). --json adds "originRecords" and "origin" \
            ({"stream","writerSequence","streamSequence"}) for such a store.

            An encrypted store: "encryption" names the keys its live records are sealed with, \
            per segment (read from the clear seal headers, so stats shows it without a key), \
            and --json adds "keyIDs" and "segmentKeys". The figures that need payloads (live \
            objects, schema, links) need the key (--key-file or --key-env); without it they \
            cover only the records not sealed, and "sealed records" says how many were not \
            opened.

            \(ToolExit.helpText)
            """
    )

    @OptionGroup var store: StoreDirectory

    @OptionGroup var keys: KeyOptions

    @Flag(help: "Print the figures as one JSON object.")
    var json = false

    func run() throws {
        try runReporting(jsonDirectory: json ? store.path : nil) {
            var pipeline = ParallelReplay(JournalReplay(keepValues: true))
            let report = try Journal.readRecords(directory: store.path, keyring: try keys.keyring()) {
                try pipeline.feed($0) { _, _, _ in }
            }
            try pipeline.finish { _, _, _ in }
            var replay = pipeline.replay
            replay.finishOrigins()
            let figures = StatsFigures(directory: store.path, report: report, replay: replay)
            var out = StandardOutput()
            if json { figures.writeJSON(to: &out.json) } else { figures.writeText(to: &out) }
            try out.flush()
        }
    }
}

/// The figures `stats` prints.
struct StatsFigures {
    var directory: String
    var files: [String]
    var bytesOnDisk: Int64
    var records: Int
    var schemaRecords: Int
    var transactions: Int
    var baseRecords: Int
    var rawPayloadBytes: Int64
    var storedPayloadBytes: Int64
    var lastSequence: UInt64
    var formatVersion: Int
    /// The model versions the store went through, oldest first, as the last schema record
    /// lists them (``StoredSchema/versions``); empty for an unversioned store.
    var schemaVersions: [String]
    /// Per schema record of the live journal, in order: the version it names (nil: none).
    var schemaRecordVersions: [String?]
    var entities: [(name: String, live: Int, inSchema: Bool)]
    /// The relationships stored as links in the schema in force: their sides, their links
    /// after the replay, and what the records held.
    var links: [LinkState]
    var liveBytesEstimate: Int64
    var health: String
    /// Origin records: how many, and the journal's origin after them (a replica or a restored
    /// store's), decoded when a follower or a restore wrote it.
    var originRecords: Int
    var origin: [UInt8]?
    var replicaOrigin: ReplicaOrigin? { origin.flatMap { ReplicaOrigin(payload: $0) } }
    /// A replicated writer's files: the epoch it ships under, and the report it left when it
    /// lost its stream.
    var writerEpoch: WriterEpoch?
    var fenced: FencedReport?
    /// The keys the live sealed records name, sorted (empty: the store is not encrypted), and
    /// per segment, in order, the keys its sealed records name.
    var keyIDs: [String]
    var segmentKeys: [(file: String, keys: [String])]
    /// The sealed records, and those not opened for want of a key.
    var sealedRecords: Int
    var sealedRecordsNotOpened: Int

    init(directory: String, report: JournalReport, replay: JournalReplay) {
        self.directory = directory
        files = report.files
        let sizes = segmentSizes(directory: directory, files: report.files)
        bytesOnDisk = report.files.reduce(0) { $0 + (sizes[$1] ?? 0) }
        records = report.entries.count
        schemaRecords = replay.schemaRecords
        transactions = replay.transactions
        baseRecords = replay.baseRecords
        rawPayloadBytes = report.entries.reduce(0) { $0 + Int64($1.rawLength) }
        storedPayloadBytes = report.entries.reduce(0) { $0 + Int64($1.storedLength) }
        lastSequence = report.entries.last?.sequence ?? 0
        originRecords = replay.originRecords
        origin = replay.origin
        writerEpoch = WriterEpoch.read(from: URL(fileURLWithPath: directory))
        fenced = FencedReport.read(from: URL(fileURLWithPath: directory))
        formatVersion = report.formatVersion
        keyIDs = report.keyIDs
        segmentKeys = report.files.map { file in
            (file, Array(Set(report.entries.lazy.filter { $0.file == file }.compactMap(\.keyID))).sorted())
        }
        sealedRecords = report.entries.lazy.filter(\.sealed).count
        sealedRecordsNotOpened = report.sealedRecordsNotOpened
        schemaVersions = replay.schema?.versions ?? []
        schemaRecordVersions = replay.schemaRecordVersions
        let tables = replay.liveTables
        entities = tables.map { ($0.name, $0.count, $0.inSchema) }
        links = replay.links
        // What a compaction writes: a base segment (header, schema record, one snapshot record)
        // and an empty log segment.
        let ratio = storedPayloadBytes > 0 ? Double(rawPayloadBytes) / Double(storedPayloadBytes) : 1
        let snapshotRaw =
            2 + tables.reduce(Int64(0)) { $0 + $1.estimatedSnapshotBytes }
            + links.reduce(Int64(links.isEmpty ? 0 : 1)) { $0 + $1.estimatedSnapshotBytes }
        let snapshotStored =
            snapshotRaw < 64 ? snapshotRaw : min(snapshotRaw, Int64((Double(snapshotRaw) / max(ratio, 1)).rounded()))
        let schemaStored = report.entries.last { $0.kind == .schema }.map { Int64($0.storedLength) } ?? 0
        liveBytesEstimate = tables.isEmpty && schemaStored == 0 ? 48 : 48 + 24 + schemaStored + 24 + snapshotStored + 48
        switch report.verdict {
        case .clean: health = replay.problems.isEmpty ? "clean" : "corrupt (a record does not decode; run verify)"
        case .tornTailOnly: health = replay.problems.isEmpty ? "torn-tail (run verify)" : "corrupt (run verify)"
        case .corrupt: health = "corrupt (figures cover the valid prefix; run verify)"
        }
    }

    var compressionRatio: Double { storedPayloadBytes > 0 ? Double(rawPayloadBytes) / Double(storedPayloadBytes) : 1 }
    var supersededBytes: Int64 { max(0, bytesOnDisk - liveBytesEstimate) }

    /// "1 → 2 → 3 (schema record: version 3)": the versions the store went through, then the
    /// version each live schema record names; "unversioned" for a store written without versions.
    var versionHistory: String {
        let named = schemaRecordVersions.map { $0.map { "version \($0)" } ?? "unversioned" }
        if schemaVersions.isEmpty && schemaRecordVersions.allSatisfy({ $0 == nil }) { return "unversioned" }
        let history = schemaVersions.isEmpty ? "unversioned" : schemaVersions.joined(separator: " → ")
        return history + " (schema record\(named.count == 1 ? "" : "s"): \(named.joined(separator: ", ")))"
    }

    func writeText(to out: inout StandardOutput) {
        var rows: [(String, String)] = []
        func row(_ label: String, _ value: String) { rows.append((label, value)) }
        row("store", directory)
        row("format version", "\(formatVersion)")
        row("segments", "\(files.count) (\(files.joined(separator: ", ")))")
        let origins = originRecords > 0 ? ", \(originRecords) origin" : ""
        row(
            "records",
            "\(records) (\(schemaRecords) schema, \(transactions) transaction, \(baseRecords) base\(origins))")
        row("transactions", "\(transactions)")
        if let replica = replicaOrigin {
            row("last sequence", "\(lastSequence) (this store's own numbering)")
            row(
                "replica of",
                (replica.stream.map { "stream \($0)" } ?? "a stream (its name is not recorded)")
                    + ": origin records say where each record came from")
            row(
                "writer sequence",
                "\(replica.writerSequence) (the writer's record applied last, from stream message \(replica.streamSequence))"
            )
        } else if let origin {
            row("last sequence", "\(lastSequence)")
            row("origin", "\(origin.count) bytes, not a replica's position in a stream")
        } else {
            row("last sequence", "\(lastSequence)")
        }
        if let writerEpoch {
            row(
                "writer of",
                "stream \(writerEpoch.stream) at epoch \(writerEpoch.epoch), lease holder \(writerEpoch.holder)"
                    + (replicaOrigin != nil ? " (a replica promoted to writer)" : ""))
        }
        if let fenced { row("fenced", "\(fenced)") }
        if !keyIDs.isEmpty {
            row(
                "encryption",
                "encrypted, sealed with key\(keyIDs.count == 1 ? "" : "s") \(keyIDs.joined(separator: ", ")) ("
                    + segmentKeys.map { "\($0.file): \($0.keys.isEmpty ? "none" : $0.keys.joined(separator: ", "))" }
                    .joined(separator: "; ") + ")")
            row(
                "sealed records",
                sealedRecordsNotOpened > 0
                    ? "\(sealedRecords), \(sealedRecordsNotOpened) not opened (no key given: the figures below cover only the records not sealed)"
                    : "\(sealedRecords), opened")
        }
        row("schema versions", versionHistory)
        row("bytes on disk", formatBytes(bytesOnDisk))
        row("payload bytes", "\(rawPayloadBytes) raw, \(storedPayloadBytes) stored")
        row("compression", String(format: "%.2f : 1", compressionRatio))
        row("live bytes", "~" + formatBytes(liveBytesEstimate) + " (estimate: what compact would write)")
        row("superseded bytes", "~" + formatBytes(supersededBytes))
        for (label, value) in rows { out.text(label.padding(toLength: 18, withPad: " ", startingAt: 0) + value + "\n") }
        out.text("entities\n")
        let width = max(16, (entities.map(\.name.count).max() ?? 0) + 2)
        for e in entities {
            out.text(
                "  " + e.name.padding(toLength: width, withPad: " ", startingAt: 0)
                    + "\(e.live) live object\(e.live == 1 ? "" : "s")"
                    + (e.inSchema ? "" : " (not in the latest schema)") + "\n")
        }
        if !links.isEmpty {
            out.text("links\n")
            let width = (links.map(\.description.count).max() ?? 0) + 2
            for l in links {
                out.text(
                    "  " + l.description.padding(toLength: width, withPad: " ", startingAt: 0)
                        + "\(l.count) link\(l.count == 1 ? "" : "s") (records: \(l.pairsAdded) added, \(l.pairsRemoved) removed, "
                        + "\(l.orderEdits) order edit\(l.orderEdits == 1 ? "" : "s"))\n")
            }
        }
        out.text("health".padding(toLength: 18, withPad: " ", startingAt: 0) + health + "\n")
    }

    func writeJSON(to w: inout JSONWriter) {
        w.raw("{\"directory\":"); w.string(directory)
        w.raw(",\"formatVersion\":"); w.int(Int64(formatVersion))
        w.raw(",\"segments\":[")
        for (i, file) in files.enumerated() { if i > 0 { w.raw(",") }; w.string(file) }
        w.raw("],\"records\":"); w.int(Int64(records))
        w.raw(",\"schemaRecords\":"); w.int(Int64(schemaRecords))
        w.raw(",\"transactions\":"); w.int(Int64(transactions))
        w.raw(",\"baseRecords\":"); w.int(Int64(baseRecords))
        w.raw(",\"lastSequence\":"); w.uint(lastSequence)
        if originRecords > 0 || origin != nil {
            w.raw(",\"originRecords\":"); w.int(Int64(originRecords))
            w.raw(",\"origin\":")
            if let replica = replicaOrigin {
                w.raw("{\"stream\":"); if let stream = replica.stream { w.string(stream) } else { w.raw("null") }
                w.raw(",\"writerSequence\":"); w.uint(replica.writerSequence)
                w.raw(",\"streamSequence\":"); w.uint(replica.streamSequence)
                w.raw("}")
            } else {
                w.raw("null")
            }
        }
        if let writerEpoch {
            w.raw(",\"writerEpoch\":{\"stream\":"); w.string(writerEpoch.stream)
            w.raw(",\"epoch\":"); w.uint(writerEpoch.epoch)
            w.raw(",\"holder\":"); w.string(writerEpoch.holder)
            w.raw("}")
        }
        if let fenced {
            w.raw(",\"fenced\":{\"stream\":"); w.string(fenced.stream)
            w.raw(",\"epoch\":"); w.uint(fenced.epoch)
            w.raw(",\"reason\":"); w.string(fenced.reason)
            w.raw(",\"shippedSequence\":"); w.uint(fenced.shippedSequence)
            w.raw(",\"lastSequence\":"); w.uint(fenced.lastSequence)
            w.raw("}")
        }
        if !keyIDs.isEmpty {
            w.raw(",\"keyIDs\":[")
            for (i, id) in keyIDs.enumerated() { if i > 0 { w.raw(",") }; w.string(id) }
            w.raw("],\"segmentKeys\":{")
            for (i, segment) in segmentKeys.enumerated() {
                if i > 0 { w.raw(",") }
                w.string(segment.file); w.raw(":[")
                for (j, id) in segment.keys.enumerated() { if j > 0 { w.raw(",") }; w.string(id) }
                w.raw("]")
            }
            w.raw("},\"sealedRecords\":"); w.int(Int64(sealedRecords))
            w.raw(",\"sealedRecordsNotOpened\":"); w.int(Int64(sealedRecordsNotOpened))
        }
        w.raw(",\"schemaVersionsSeen\":"); w.int(Int64(schemaRecords))
        w.raw(",\"schemaVersions\":[")
        for (i, v) in schemaVersions.enumerated() { if i > 0 { w.raw(",") }; w.string(v) }
        w.raw("],\"schemaRecordVersions\":[")
        for (i, v) in schemaRecordVersions.enumerated() {
            if i > 0 { w.raw(",") }
            if let v { w.string(v) } else { w.raw("null") }
        }
        w.raw("]")
        w.raw(",\"bytesOnDisk\":"); w.int(bytesOnDisk)
        w.raw(",\"rawPayloadBytes\":"); w.int(rawPayloadBytes)
        w.raw(",\"storedPayloadBytes\":"); w.int(storedPayloadBytes)
        w.raw(",\"compressionRatio\":"); w.double((compressionRatio * 1000).rounded() / 1000)
        w.raw(",\"liveBytesEstimate\":"); w.int(liveBytesEstimate)
        w.raw(",\"supersededBytesEstimate\":"); w.int(supersededBytes)
        w.raw(",\"entities\":[")
        for (i, e) in entities.enumerated() {
            if i > 0 { w.raw(",") }
            w.raw("{\"entity\":"); w.string(e.name)
            w.raw(",\"live\":"); w.int(Int64(e.live))
            w.raw(",\"inSchema\":"); w.bool(e.inSchema)
            w.raw("}")
        }
        w.raw("]")
        if !links.isEmpty {
            w.raw(",\"links\":[")
            for (i, l) in links.enumerated() {
                if i > 0 { w.raw(",") }
                w.raw("{\"relationship\":"); w.string(l.description)
                w.raw(",\"sides\":")
                writeSides(l.entityNames, l.link, to: &w)
                w.raw(",\"links\":"); w.int(Int64(l.count))
                w.raw(",\"pairsAdded\":"); w.int(Int64(l.pairsAdded))
                w.raw(",\"pairsRemoved\":"); w.int(Int64(l.pairsRemoved))
                w.raw(",\"orderEdits\":"); w.int(Int64(l.orderEdits))
                w.raw("}")
            }
            w.raw("]")
        }
        w.raw(",\"health\":"); w.string(String(health.prefix { $0 != " " }))
        w.raw("}\n")
    }
}

/// Writes a relationship's two sides as a JSON array: side 0 (the relationship met first in
/// schema order), then its inverse, each with its entity, relationship name and kind.
func writeSides(_ entityNames: [String], _ link: StoredSchema.Link, to w: inout JSONWriter) {
    w.raw("[")
    for side in 0..<2 {
        if side > 0 { w.raw(",") }
        w.raw("{\"entity\":"); w.string(entityNames[side])
        w.raw(",\"relationship\":"); w.string(link.names[side])
        w.raw(",\"ordered\":"); w.bool(link.ordered[side])
        w.raw(",\"toOne\":"); w.bool(link.toOne[side])
        w.raw("}")
    }
    w.raw("]")
}
