import Foundation
import GraphJournal
import ObjectGraph
import Testing

/// `stats`, `verify` and `dump` on a store whose journal has an origin record (type 0x80), as a
/// replica's or a restored store's has: written here through the journal's API, without servers.
struct OriginRecordTests {
    /// An origin payload as a follower writes it: "OGR1", the writer's record and the stream
    /// message (`u64` little-endian each), then the stream's name when given.
    private func replicaOrigin(writer: UInt64, message: UInt64, stream: String?) -> [UInt8] {
        var bytes = Array("OGR1".utf8)
        for v in [writer, message] { for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) } }
        return bytes + Array((stream ?? "").utf8)
    }

    /// A people store compacted into a base that carries `origin`, then one more save (which
    /// has no origin: the journal's origin stays the base's). Its records: the base's schema
    /// record (sequence 6), origin record (7) and base record (8), then the save (9).
    private func storeWithOrigin(_ origin: [UInt8]) throws -> URL {
        let dir = Tool.temporaryURL("origin")
        try Tool.writePeopleStore(at: dir, objects: 20, saves: 2)
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        let first = try ObjectStore.open(at: dir, schema: try Schema(Person.self), options: options)
        try first.compact()
        try first.close()
        var schema: [UInt8] = []
        var base: [[UInt8]] = []
        _ = try Journal.readRecords(directory: dir.path) { record in
            if record.entry.kind == .schema { schema = record.payload }
            if record.entry.kind == .base { base.append(record.payload) }
        }
        let journal = try Journal.open(directory: dir)
        try journal.compact(base: base, schema: schema, origin: origin, proceed: { true })
        try journal.close()
        let second = try ObjectStore.open(at: dir, schema: try Schema(Person.self), options: options)
        let p = try second.context.insert(Person.self)
        p.id = 99
        try second.context.save()
        try second.close()
        return dir
    }

    @Test func aReplicasOriginNamesItsStreamAndTheWritersSequence() throws {
        let dir = try storeWithOrigin(replicaOrigin(writer: 41, message: 97, stream: "PKGD"))
        let stats = try Tool.run(["stats", dir.path])
        #expect(stats.status == 0, "\(stats.stderr)")
        #expect(
            stats.stdout.contains("records           4 (1 schema, 1 transaction, 1 base, 1 origin)\n"),
            "\(stats.stdout)")
        #expect(stats.stdout.contains("last sequence     9 (this store's own numbering)\n"), "\(stats.stdout)")
        #expect(
            stats.stdout.contains("replica of        stream PKGD: origin records say where each record came from\n"),
            "\(stats.stdout)")
        #expect(
            stats.stdout.contains(
                "writer sequence   41 (the writer's record applied last, from stream message 97)\n"), "\(stats.stdout)")
        let json = try Tool.run(["stats", "--json", dir.path])
        #expect(
            json.stdout.contains(
                #""lastSequence":9,"originRecords":1,"origin":{"stream":"PKGD","writerSequence":41,"streamSequence":97},"#
            ), "\(json.stdout)")

        let verify = try Tool.run(["verify", dir.path])
        #expect(verify.status == 0, "\(verify.stderr)")
        #expect(
            verify.stdout.contains(
                "records: 4 (1 schema, 1 transaction, 1 base, 1 origin, 0 skipped), last sequence 9\n"),
            "\(verify.stdout)")
        #expect(
            verify.stdout.contains(
                "origin records: where each record that came from a stream came from (the writer's sequence and the stream message); sequences here are this store's own; a replica of stream PKGD, the writer's record 41 applied last (stream message 97)\n"
            ), "\(verify.stdout)")
        let verifyJSON = try Tool.run(["verify", "--json", dir.path])
        #expect(
            verifyJSON.stdout.contains(#""baseRecords":1,"originRecords":1,"skippedRecords":0,"#),
            "\(verifyJSON.stdout)")

        let dump = try Tool.run(["dump", dir.path])
        #expect(dump.status == 0, "\(dump.stderr)")
        #expect(
            dump.stdout.contains(#"{"seq":7,"kind":"origin","stream":"PKGD","writerSeq":41,"streamSeq":97}"# + "\n"))
        #expect(!dump.stdout.contains("skipped"), "\(dump.stdout)")
    }

    @Test func anOriginWithoutAStreamNameOrOfAnotherFormatIsShownForWhatItIs() throws {
        let unnamed = try storeWithOrigin(replicaOrigin(writer: 7, message: 9, stream: nil))
        let stats = try Tool.run(["stats", unnamed.path])
        #expect(
            stats.stdout.contains("replica of        a stream (its name is not recorded): "), "\(stats.stdout)")
        #expect(stats.stdout.contains("writer sequence   7 ("), "\(stats.stdout)")
        let dump = try Tool.run(["dump", unnamed.path])
        #expect(dump.stdout.contains(#"{"seq":7,"kind":"origin","stream":null,"writerSeq":7,"streamSeq":9}"#))

        let foreign = try storeWithOrigin(Array("elsewhere".utf8))
        let foreignStats = try Tool.run(["stats", foreign.path])
        #expect(
            foreignStats.stdout.contains("origin            9 bytes, not a replica's position in a stream\n"),
            "\(foreignStats.stdout)")
        #expect(!foreignStats.stdout.contains("replica of"))
        let foreignDump = try Tool.run(["dump", foreign.path])
        #expect(foreignDump.stdout.contains(#"{"seq":7,"kind":"origin","bytes":9}"#), "\(foreignDump.stdout)")
    }
}
