import ArgumentParser
import GraphJournal
import GraphJournalProgress
import ObjectGraph
import ObjectGraphReplication

/// `graph-journal dump DIR`: the journal as JSON Lines, for `jq`.
struct Dump: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Writes every record, or with --objects every live object, as one JSON object per line.",
        discussion: """
            Read-only: takes no lock and writes nothing to the store.

            Records: {"seq":2,"kind":"transaction","entities":[{"entity":"Person",\
            "inserted":[{"serial":1,"values":{...}}],"updated":[{"serial":3,"values":{...}}],\
            "deleted":[5]}]}; base records (written by compaction) have kind "base"; schema \
            records are {"seq":1,"kind":"schema","entities":[{"entity":"Person","attributes":\
            [{"name":"id","type":"int64","optional":false}]}],"versions":["1","2"]}: "versions" \
            lists the model versions the store went through when that schema was written, oldest \
            first, the last one the schema's own ([] for a store written without versions). \
            --schema writes only the schema records.

            A replica (a follower's directory) or a restored store has an origin record before \
            each record that came from a stream: {"seq":4,"kind":"origin","stream":"PKGD",\
            "writerSeq":2,"streamSeq":7}: the record after it is the writer's record 2, carried \
            by stream message 7 ("stream" is null when the origin does not name it). An empty \
            origin ("the record after me has none") is {"seq":4,"kind":"origin","none":true}; \
            one of another format {"seq":4,"kind":"origin","bytes":20}. Records of a type the \
            tool does not know are {"seq":4,"kind":"skipped","type":129}.

            Relationships stored as links (many-to-many, ordered to-many): the schema line \
            lists them, "links":[{"relationship":"Playlist.tracks (ordered) ↔ Track.playlists \
            (set)","sides":[{"entity":"Playlist","relationship":"tracks","ordered":true,\
            "toOne":false},{...}]}]; a record that changes them has "links":[{"relationship":\
            ...,"removed":[[{"entity":"Playlist","serial":1},{"entity":"Track","serial":4}]],\
            "added":[...],"orders":[{"side":0,"entity":"Playlist","serial":1,"relationship":\
            "tracks","placements":[{"entity":"Track","serial":3,"index":0}]}]}], applied in that \
            order: removals, additions appended to both lists, then each order edit takes the \
            members it names out and puts them back at their index. A deleted object's links \
            are not listed: they go with it.

            Objects (--objects): {"entity":"Person","serial":1,"attributes":{...}}, by entity \
            then serial; an entity with relationships stored as links adds "links":{"tracks":\
            [3,1,2]}: the serials of the related objects, in order on an ordered side, by serial \
            otherwise; a to-one side is one serial or null.

            Values are JSON natives: strings, numbers, booleans, null; data as base64, dates as \
            ISO 8601 in UTC, UUIDs and URLs as strings; NaN and infinities as the strings "NaN", \
            "Infinity", "-Infinity".

            An encrypted store needs its key (--key-file or --key-env): without it dump writes \
            nothing of a sealed record; it stops at the end with exit 1 and names the keys the \
            sealed records need (the records written before the store was encrypted, if any, \
            were written).

            On a damaged journal the valid prefix is written; a torn tail is noted on standard \
            error (exit 0), corruption is described there (exit 3).

            When standard error is a terminal, standard output is not (redirected to a file or \
            a pipe), and the dump takes longer than half a second, a progress bar on standard \
            error shows the bytes of the journal dumped out of its segments' size on disk, and \
            the rate (with --objects, then the objects written); it is erased before any note. \
            What is written to standard output is the same with or without it. --no-progress \
            turns it off.

            \(ToolExit.helpText)
            """
    )

    @OptionGroup var store: StoreDirectory

    @OptionGroup var keys: KeyOptions

    @Flag(help: "Write the live objects (the state after the last record, or after --to-seq) instead of the records.")
    var objects = false

    @Flag(
        name: .customLong("schema"),
        help: "Write only the schema records, each with the model versions the store went through.")
    var schemaOnly = false

    @Option(
        name: .customLong("entity"),
        help: ArgumentHelp("Write only this entity's changes or objects.", valueName: "name"))
    var entity: String?

    @Option(
        name: .customLong("from-seq"),
        help: ArgumentHelp("Write only records with this sequence number or later.", valueName: "n"))
    var fromSequence: UInt64?

    @Option(
        name: .customLong("to-seq"),
        help: ArgumentHelp(
            "Write only records up to this sequence number; with --objects, the objects as of it.", valueName: "n"))
    var toSequence: UInt64?

    @OptionGroup var progressOptions: ProgressOptions

    func validate() throws {
        if objects && schemaOnly {
            throw ValidationError("--schema and --objects write different things; choose one.")
        }
        if objects && fromSequence != nil {
            throw ValidationError(
                "--from-seq does not apply to --objects (objects are a state, not a range); use --to-seq.")
        }
        if let from = fromSequence, let to = toSequence, from > to {
            throw ValidationError("--from-seq \(from) is after --to-seq \(to).")
        }
    }

    func run() throws {
        try runReporting {
            var out = StandardOutput()
            var pipeline = ParallelReplay(JournalReplay(keepValues: objects, trackObjects: objects))
            var entitySeen = false
            let from = fromSequence ?? 0
            let to = toSequence ?? .max
            var progress = JournalProgress(
                directory: store.path, label: "dumping", options: progressOptions, outputIsStandardOutput: true)
            defer { progress?.finish() }
            // Called for every record in order, once it is decoded (in batches, on every core).
            let emit = { (record: JournalReadRecord, changes: ChangeSet?, schema: StoredSchema?) throws in
                defer { progress?.passed(record.entry) }
                let sequence = record.entry.sequence
                if let entity, !entitySeen, schema?.entities.contains(where: { $0.name == entity }) == true {
                    entitySeen = true
                }
                guard !objects, sequence >= from else { return }
                switch record.entry.kind {
                case .schema:
                    if let schema { writeSchema(schema, sequence: sequence, to: &out.json) }
                case .transaction, .base:
                    if !schemaOnly, let changes, let schema {
                        try writeChanges(
                            changes, schema: schema, sequence: sequence, kind: record.entry.kind.label, to: &out
                        ) { fraction in
                            progress?.within(record.entry, fraction: fraction)
                        }
                    }
                case nil:
                    guard !schemaOnly else { break }
                    out.json.raw("{\"seq\":"); out.json.uint(sequence)
                    if record.entry.type == 0x80 {
                        writeOrigin(record.payload, to: &out.json)
                    } else {
                        out.json.raw(",\"kind\":\"skipped\",\"type\":"); out.json.uint(UInt64(record.entry.type))
                    }
                    out.json.raw("}\n")
                }
                try out.flushIfFull()
            }
            let report = try Journal.readRecords(directory: store.path, keyring: try keys.keyring()) { record in
                if record.entry.sequence > to { return }
                try pipeline.feed(record, emit: emit)
            }
            try pipeline.finish(emit: emit)
            if report.sealedRecordsNotOpened > 0 {
                try out.flush()
                progress?.finish()
                throw ToolFailure(
                    .failure,
                    "\(store.path) is encrypted: \(report.sealedRecordsNotOpened) records are sealed with key \(report.keyIDs.joined(separator: ", ")); give the key with --key-file or --key-env to dump them"
                )
            }
            let replay = pipeline.replay
            if objects {
                let tables = replay.liveTables.filter { entity == nil || $0.name == entity }
                progress?.bar.phase(
                    "writing objects", total: tables.reduce(Int64(0)) { $0 + Int64($1.count) }, unit: .items("objects"))
                var written: Int64 = 0
                for table in tables {
                    try writeObjects(table, links: replay.links, to: &out) { count in
                        written += Int64(count)
                        progress?.bar.update(done: written)
                    }
                }
            }
            try out.flush()
            progress?.finish()
            if let entity, !entitySeen {
                throw ToolFailure(.failure, "no entity named '\(entity)' in the journal's schema")
            }
            var exit = ToolExit.success
            for problem in report.problems {
                let at = problem.offset.map { " at byte \($0)" } ?? ""
                switch problem.kind {
                case .leftoverFile: continue
                case .unlistedSegment:
                    printError(
                        "graph-journal: note: \(problem.file) is not listed in MANIFEST but continues the sequence; its records were written"
                    )
                case .tornTail:
                    printError(
                        "graph-journal: note: torn tail in \(problem.file)\(at) (\(problem.message)); the records before it were written"
                    )
                case .corruption:
                    printError(
                        "graph-journal: corruption in \(problem.file)\(at): \(problem.message); only the records before it were written"
                    )
                    exit = .corrupt
                }
            }
            for problem in replay.problems {
                printError(
                    "graph-journal: payload problem in \(problem.file) at byte \(problem.offset) (record \(problem.sequence)): \(problem.message)"
                )
                exit = .corrupt
            }
            if exit != .success { throw ExitCode(exit.rawValue) }
        }
    }

    /// An origin record's fields after its sequence: the stream, the writer's record and the
    /// stream message when a follower or a restore wrote it.
    private func writeOrigin(_ payload: [UInt8], to w: inout JSONWriter) {
        w.raw(",\"kind\":\"origin\"")
        if payload.isEmpty {
            w.raw(",\"none\":true")
        } else if let origin = ReplicaOrigin(payload: payload) {
            w.raw(",\"stream\":"); if let stream = origin.stream { w.string(stream) } else { w.raw("null") }
            w.raw(",\"writerSeq\":"); w.uint(origin.writerSequence)
            w.raw(",\"streamSeq\":"); w.uint(origin.streamSequence)
        } else {
            w.raw(",\"bytes\":"); w.int(Int64(payload.count))
        }
    }

    private func writeSchema(_ schema: StoredSchema, sequence: UInt64, to w: inout JSONWriter) {
        let entities = schema.entities.filter { entity == nil || $0.name == entity }
        if entity != nil && entities.isEmpty { return }
        let links = schema.links.filter { l in
            entity == nil || l.entities.contains { schema.entities[$0].name == entity }
        }
        w.raw("{\"seq\":"); w.uint(sequence)
        w.raw(",\"kind\":\"schema\",\"entities\":[")
        for (i, e) in entities.enumerated() {
            if i > 0 { w.raw(",") }
            w.raw("{\"entity\":"); w.string(e.name)
            w.raw(",\"attributes\":[")
            for (j, a) in e.attributes.enumerated() {
                if j > 0 { w.raw(",") }
                w.raw("{\"name\":"); w.string(a.name)
                w.raw(",\"type\":"); w.string(a.type.rawValue)
                w.raw(",\"optional\":"); w.bool(a.isOptional)
                if let d = a.defaultValue { w.raw(",\"default\":"); w.value(d) }
                if let o = a.originalName { w.raw(",\"originalName\":"); w.string(o) }
                // A to-one relationship's values are serials of this entity.
                if let d = a.destinationEntity { w.raw(",\"destination\":"); w.string(d) }
                w.raw("}")
            }
            w.raw("]}")
        }
        w.raw("]")
        if !links.isEmpty {
            // The relationships stored as links, in the order the records' link changes name them.
            w.raw(",\"links\":[")
            for (i, l) in links.enumerated() {
                if i > 0 { w.raw(",") }
                w.raw("{\"relationship\":"); w.string(l.describe(in: schema))
                w.raw(",\"sides\":")
                writeSides(l.entities.map { schema.entities[$0].name }, l, to: &w)
                w.raw("}")
            }
            w.raw("]")
        }
        // The model versions the store went through, oldest first; [] when unversioned.
        w.raw(",\"versions\":[")
        for (i, v) in schema.versions.enumerated() { if i > 0 { w.raw(",") }; w.string(v) }
        w.raw("]}\n")
    }

    /// Writes one record's changes as a line. A record of many inserts is written with
    /// `out` flushed as it fills (a save of a million objects is one record), and `advance` is
    /// told the fraction of the inserts written so far, every ``progressStep`` of them.
    private func writeChanges(
        _ changes: ChangeSet, schema: StoredSchema, sequence: UInt64, kind: String, to out: inout StandardOutput,
        advance: (Double) -> Void
    ) throws {
        let blocks = changes.entities.filter { entity == nil || $0.entityName == entity }
        let links = changes.links.filter { entity == nil || $0.entityNames.contains(entity ?? "") }
        if entity != nil && blocks.isEmpty && links.isEmpty { return }
        let inserts = blocks.reduce(0) { $0 + $1.insertedSerials.count }
        var insertsWritten = 0
        out.json.raw("{\"seq\":"); out.json.uint(sequence)
        out.json.raw(",\"kind\":"); out.json.string(kind)
        out.json.raw(",\"entities\":[")
        for (i, c) in blocks.enumerated() {
            if i > 0 { out.json.raw(",") }
            let width = c.attributeNames.count
            out.json.raw("{\"entity\":"); out.json.string(c.entityName)
            out.json.raw(",\"inserted\":[")
            for (k, serial) in c.insertedSerials.enumerated() {
                if k > 0 { out.json.raw(",") }
                out.json.raw("{\"serial\":"); out.json.uint(serial)
                out.json.raw(",\"values\":{")
                for j in 0..<width {
                    if j > 0 { out.json.raw(",") }
                    out.json.key(c.attributeNames[j])
                    out.json.value(c.insertedValues[k * width + j])
                }
                out.json.raw("}}")
                insertsWritten += 1
                if insertsWritten % Self.progressStep == 0 {
                    try out.flushIfFull()
                    advance(Double(insertsWritten) / Double(inserts))
                }
            }
            out.json.raw("],\"updated\":[")
            var index = 0
            var first = true
            while index < c.updates.count {
                let serial = c.updates[index].serial
                if !first { out.json.raw(",") }
                first = false
                out.json.raw("{\"serial\":"); out.json.uint(serial)
                out.json.raw(",\"values\":{")
                var firstField = true
                while index < c.updates.count && c.updates[index].serial == serial {
                    if !firstField { out.json.raw(",") }
                    firstField = false
                    let update = c.updates[index]
                    out.json.key(update.attribute < width ? c.attributeNames[update.attribute] : "#\(update.attribute)")
                    out.json.value(update.value)
                    index += 1
                }
                out.json.raw("}}")
            }
            out.json.raw("],\"deleted\":[")
            for (k, serial) in c.deletedSerials.enumerated() {
                if k > 0 { out.json.raw(",") }
                out.json.uint(serial)
            }
            out.json.raw("]}")
        }
        out.json.raw("]")
        if !links.isEmpty {
            out.json.raw(",\"links\":[")
            for (i, l) in links.enumerated() {
                if i > 0 { out.json.raw(",") }
                try writeLinkChanges(l, schema: schema, to: &out)
            }
            out.json.raw("]")
        }
        out.json.raw("}\n")
    }

    /// Writes one relationship's link changes: its two sides (as the schema line describes
    /// them), the pairs removed and added (each object as entity and serial, side 0 first),
    /// and the order edits; `out` is flushed as it fills (a base record holds every link).
    private func writeLinkChanges(_ l: LinkChanges, schema: StoredSchema, to out: inout StandardOutput) throws {
        let stored = schema.links.first { link in
            link.names == l.relationshipNames && link.entities.map { schema.entities[$0].name } == l.entityNames
        }
        out.json.raw("{\"relationship\":")
        out.json.string(
            stored?.describe(in: schema)
                ?? "\(l.entityNames[0]).\(l.relationshipNames[0]) ↔ \(l.entityNames[1]).\(l.relationshipNames[1])")
        func object(_ side: Int, _ serial: UInt64, to w: inout JSONWriter) {
            w.raw("{\"entity\":"); w.string(l.entityNames[side])
            w.raw(",\"serial\":"); w.uint(serial)
            w.raw("}")
        }
        for (key, pairs) in [("removed", l.removed), ("added", l.added)] {
            out.json.raw(",")
            out.json.key(key)
            out.json.raw("[")
            for (i, p) in pairs.enumerated() {
                if i > 0 { out.json.raw(",") }
                out.json.raw("[")
                object(0, p.serial0, to: &out.json)
                out.json.raw(",")
                object(1, p.serial1, to: &out.json)
                out.json.raw("]")
                if i % Self.progressStep == Self.progressStep - 1 { try out.flushIfFull() }
            }
            out.json.raw("]")
        }
        out.json.raw(",\"orders\":[")
        for (i, o) in l.orders.filter({ (0..<2).contains($0.side) }).enumerated() {
            try out.flushIfFull()
            if i > 0 { out.json.raw(",") }
            out.json.raw("{\"side\":"); out.json.int(Int64(o.side))
            out.json.raw(",\"entity\":"); out.json.string(l.entityNames[o.side])
            out.json.raw(",\"serial\":"); out.json.uint(o.owner)
            out.json.raw(",\"relationship\":"); out.json.string(l.relationshipNames[o.side])
            out.json.raw(",\"placements\":[")
            for (j, p) in o.placements.enumerated() {
                if j > 0 { out.json.raw(",") }
                out.json.raw("{\"entity\":"); out.json.string(l.entityNames[1 - o.side])
                out.json.raw(",\"serial\":"); out.json.uint(p.member)
                out.json.raw(",\"index\":"); out.json.int(Int64(p.index))
                out.json.raw("}")
            }
            out.json.raw("]}")
        }
        out.json.raw("]}")
    }

    /// How many objects `dump` writes between two reports of its progress.
    static let progressStep = 4096

    /// Writes the live objects of one table, by serial; `advance` is told how many were
    /// written since it was last told, every ``progressStep`` objects and at the end.
    private func writeObjects(
        _ table: JournalReplay.Table, links: [LinkState], to out: inout StandardOutput, advance: (Int) -> Void
    ) throws {
        // The relationships stored as links this entity is a side of, by name: each object's
        // list (serials of the other side), a to-one side as one serial or null.
        let sides: [(link: Int, side: Int, key: [UInt8])] =
            table.inSchema
            ? links.indices.flatMap { k in
                (0..<2).filter { links[k].entityNames[$0] == table.name }.map { side in
                    var key = JSONWriter(capacity: 32)
                    key.key(links[k].link.names[side])
                    return (k, side, key.bytes)
                }
            } : []
        var prefix = JSONWriter(capacity: 64)
        prefix.raw("{\"entity\":"); prefix.string(table.name); prefix.raw(",\"serial\":")
        let names: [[UInt8]] = table.attributes.map { a in
            var k = JSONWriter(capacity: 32)
            k.key(a.name)
            return k.bytes
        }
        var sinceAdvance = 0
        for serial in table.objects.keys.sorted() {
            let values = table.objects[serial]!
            out.json.bytes.append(contentsOf: prefix.bytes)
            out.json.uint(serial)
            out.json.raw(",\"attributes\":{")
            for (j, value) in values.enumerated() {
                if j > 0 { out.json.raw(",") }
                out.json.bytes.append(contentsOf: names[j])
                out.json.value(value)
            }
            out.json.raw("}")
            if !sides.isEmpty {
                out.json.raw(",\"links\":{")
                for (i, s) in sides.enumerated() {
                    if i > 0 { out.json.raw(",") }
                    out.json.bytes.append(contentsOf: s.key)
                    let members = links[s.link].members(s.side, serial)
                    if links[s.link].link.toOne[s.side] {
                        if let m = members.first { out.json.uint(m) } else { out.json.raw("null") }
                        continue
                    }
                    out.json.raw("[")
                    for (j, m) in members.enumerated() {
                        if j > 0 { out.json.raw(",") }
                        out.json.uint(m)
                    }
                    out.json.raw("]")
                }
                out.json.raw("}")
            }
            out.json.raw("}\n")
            try out.flushIfFull()
            sinceAdvance += 1
            if sinceAdvance == Self.progressStep {
                advance(sinceAdvance)
                sinceAdvance = 0
            }
        }
        if sinceAdvance > 0 { advance(sinceAdvance) }
    }
}
