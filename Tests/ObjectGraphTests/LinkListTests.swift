import Foundation
import ObjectGraphTestSupport
import PropertyBased
import Testing

@testable import ObjectGraph

// An object's own list of links at every length: plain, indexed (a set side) and chunked (a
// long ordered side), against an array; and a long ordered relationship in a store, whose
// removals must not shift the whole list.

/// Applies operation `code` to `list` and to `model` alike (`ordered`: the model is an array in
/// order; otherwise only its members count). `fresh` hands out members never used before.
private func apply(
    _ code: Int, _ list: inout LinkList, ordered: Bool, _ model: inout [Int32], fresh: inout Int32
) -> String {
    let n = model.count
    switch code % 8 {
    case 0, 1:
        // A run of appends, long enough to cross the chunking threshold in a few steps.
        let k = 1 + (code / 8) % 700
        for _ in 0..<k {
            list.append(fresh, ordered: ordered)
            model.append(fresh)
            fresh += 1
        }
        return "append \(k)"
    case 2:
        guard ordered else { return "skip" }
        let at = n == 0 ? 0 : (code / 8) % (n + 1)
        list.insert(fresh, at: at)
        model.insert(fresh, at: at)
        fresh += 1
        return "insert at \(at)"
    case 3:
        guard n > 0 else { return "skip" }
        let victim = model[(code / 8) % n]
        let expected = model.firstIndex(of: victim)
        let got = list.remove(victim, ordered: ordered)
        if ordered {
            #expect(got == expected, "remove \(victim): position")
            model.remove(at: expected ?? 0)
        } else {
            #expect(got != nil, "remove \(victim)")
            model.removeAll { $0 == victim }
        }
        return "remove \(victim)"
    case 4:
        guard ordered, n > 0 else { return "skip" }
        let at = (code / 8) % n
        #expect(list.remove(at: at) == model.remove(at: at), "remove at \(at)")
        return "remove at \(at)"
    case 5:
        guard ordered, n > 1 else { return "skip" }
        let from = (code / 8) % n, to = (code / 64) % n
        list.move(from: from, to: to)
        model.insert(model.remove(at: from), at: to)
        return "move \(from) to \(to)"
    case 6:
        // Lookups: a member's position, one absent, and the member at a position.
        if n > 0 {
            let i = (code / 8) % n
            if ordered {
                #expect(list.position(of: model[i]) == i, "position of \(model[i])")
                #expect(list[i] == model[i], "member at \(i)")
            } else {
                let p = list.position(of: model[i])
                #expect(p.map { list[$0] } == model[i], "position of \(model[i])")
            }
        }
        #expect(list.position(of: fresh + 1_000_000) == nil, "an absent member")
        return "lookups"
    default:
        // Removing down to a few members crosses the thresholds back.
        let keep = (code / 8) % 64
        while model.count > keep {
            let victim = model[model.count / 2]
            _ = list.remove(victim, ordered: ordered)
            model.removeAll { $0 == victim }
        }
        return "shrink to \(keep)"
    }
}

@Suite("Link lists: plain, indexed and chunked alike")
struct LinkListTests {
    @Test(arguments: [true, false])
    func randomOperationsMatchAnArray(ordered: Bool) async {
        await propertyCheck(count: 60, input: Gen.int(in: 0...1_000_000).array(of: 1...60)) { codes in
            // Half the runs start past the chunking threshold.
            let initial = Int32(codes[0] % (2 * LinkList.chunkedFrom + 1000))
            var model = (0..<initial).map { $0 }
            var list = LinkList(ordered: ordered, members: model)
            var fresh = initial
            for (step, code) in codes.enumerated() {
                let what = apply(code, &list, ordered: ordered, &model, fresh: &fresh)
                #expect(list.count == model.count, "step \(step) (\(what)): count")
                if ordered {
                    #expect(list.array == model, "step \(step) (\(what)): members in order")
                } else {
                    #expect(list.array.sorted() == model.sorted(), "step \(step) (\(what)): members")
                }
            }
        }
    }

    @Test func aLongOrderedListIsChunkedAndAShortOneIsNot() {
        var list = LinkList(ordered: true, members: (0..<Int32(LinkList.chunkedFrom - 1)).map { $0 })
        #expect(!list.isChunked)
        list.append(-1, ordered: true)
        #expect(list.isChunked)
        #expect(list.position(of: -1) == LinkList.chunkedFrom - 1)
        #expect(MemoryLayout<LinkList>.stride == 16, "a list is two references")
        // Splits keep the order: inserts at the front grow the first chunk past its maximum.
        let inserted = Int32(3 * ChunkedList.maximum)
        for m in 0..<inserted { list.insert(100_000 + m, at: 0) }
        let last: Int32 = 100_000 + inserted - 1
        #expect(Array(list.array.prefix(3)) == [last, last - 1, last - 2])
        #expect(list.position(of: 0) == 3 * ChunkedList.maximum)
        while list.count >= LinkList.unchunkedBelow { _ = list.remove(at: list.count / 3) }
        #expect(!list.isChunked)
        let set = LinkList(ordered: false, members: (0..<Int32(LinkList.chunkedFrom * 2)).map { $0 })
        #expect(!set.isChunked)
    }

    /// Removing one member of a 100k-member ordered list costs about what it costs in a 10k one
    /// (a shift of the whole list would make it ten times as much): the fastest of several
    /// passes of 2,000 removals each, compared.
    @Test func removingFromALongOrderedListDoesNotShiftTheWholeList() {
        func fastestPass(_ n: Int) -> Double {
            var best = Double.infinity
            for pass in 0..<5 {
                var list = LinkList(ordered: true, members: (0..<Int32(n)).map { $0 })
                var generator = SeededGenerator(seed: UInt64(pass))
                let victims = (0..<2000).map { _ in Int32(generator.next() % UInt64(n)) }
                _ = list.position(of: 0)  // the member index, built once
                let start = DispatchTime.now().uptimeNanoseconds
                for v in victims { _ = list.remove(v, ordered: true) }
                best = min(best, Double(DispatchTime.now().uptimeNanoseconds - start))
            }
            return best
        }
        let small = fastestPass(10_000), large = fastestPass(100_000)
        #expect(
            large < small * 4,
            "2,000 removals: \(Int(small / 1000)) µs from 10k members, \(Int(large / 1000)) µs from 100k")
    }
}

@Suite("Links: a long ordered to-many in a store")
struct LongOrderedListTests {
    /// A playlist of 5,000 tracks (chunked): removals, inserts and moves with rollbacks,
    /// savepoints and saves keep the order an array would, through reopen and compaction.
    @Test func aLongOrderedListKeepsItsOrderThroughRollbackSaveAndReopen() throws {
        let dir = temporaryStoreDirectory("long-ordered")
        defer { try? FileManager.default.removeItem(at: dir) }
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        let schema = try Schema(Playlist.self, Track.self)
        var model: [String] = []
        do {
            let store = try ObjectStore.open(at: dir, schema: schema, options: options)
            let c = store.context
            let mix = try c.insert(Playlist.self) { $0.name = "mix" }
            let tracks = try (0..<5000).map { i in try c.insert(Track.self) { $0.title = "t\(i)" } }
            mix.tracks = tracks
            model = tracks.map(\.title)
            try c.save()
            var generator = SeededGenerator(seed: 7)
            func titles() -> [String] { mix.tracks.map(\.title) }
            for round in 0..<12 {
                let saved = model
                // Removals of random members, one at a time.
                for _ in 0..<40 {
                    let i = Int(generator.next() % UInt64(model.count))
                    let track = try #require(mix.tracks.first { $0.title == model[i] })
                    try c.remove(track, from: "tracks", of: mix)
                    model.remove(at: i)
                }
                // An insert and a move inside a savepoint that is rolled back.
                let before = model
                try? c.transaction { _ in
                    let t = try c.insert(Track.self) { $0.title = "x\(round)" }
                    try c.add(t, to: "tracks", of: mix, at: 3)
                    try c.move(in: "tracks", of: mix, from: 10, to: 2000)
                    throw CancellationError()
                }
                #expect(titles() == before, "round \(round): the savepoint's changes undone")
                // Moves and an insert that stay.
                try c.move(in: "tracks", of: mix, from: 0, to: model.count - 1)
                model.append(model.removeFirst())
                let t = try c.insert(Track.self) { $0.title = "n\(round)" }
                try c.add(t, to: "tracks", of: mix, at: 100)
                model.insert("n\(round)", at: 100)
                #expect(titles() == model, "round \(round): after the changes")
                if round % 3 == 2 {
                    c.rollback()
                    model = saved
                    #expect(titles() == model, "round \(round): rolled back")
                } else {
                    try c.save()
                }
            }
            try store.close()
        }
        for compact in [false, true] {
            let store = try ObjectStore.open(at: dir, schema: schema, options: options)
            if compact { try store.compact() }
            let mix = try #require(try store.context.objects(of: Playlist.self).first)
            #expect(mix.tracks.map(\.title) == model, "reopened\(compact ? " and compacted" : "")")
            try store.close()
        }
    }

    /// Assigning a shuffled array to a long ordered relationship moves only the members outside
    /// a longest run in order, each to just after its predecessor: the order is the array's, at
    /// once, after a save and reopen, and a rollback restores the old one.
    @Test func assigningAShuffledArrayToALongOrderedListTakesItsOrder() throws {
        let dir = temporaryStoreDirectory("long-ordered-assign")
        defer { try? FileManager.default.removeItem(at: dir) }
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        let schema = try Schema(Playlist.self, Track.self)
        var generator = SeededGenerator(seed: 11)
        var shuffled: [String] = []
        do {
            let store = try ObjectStore.open(at: dir, schema: schema, options: options)
            let c = store.context
            let mix = try c.insert(Playlist.self) { $0.name = "mix" }
            let tracks = try (0..<20_000).map { i in try c.insert(Track.self) { $0.title = "t\(i)" } }
            mix.tracks = tracks
            try c.save()
            var order = tracks
            for i in stride(from: order.count - 1, to: 0, by: -1) {
                order.swapAt(i, Int(generator.next() % UInt64(i + 1)))
            }
            let start = ContinuousClock.now
            mix.tracks = order
            #expect(
                ContinuousClock.now - start < .seconds(60),
                "assigning 20,000 members in a new order (a quadratic reorder takes minutes)")
            #expect(mix.tracks.map(\.title) == order.map(\.title))
            c.rollback()
            #expect(mix.tracks.map(\.title) == tracks.map(\.title), "rolled back")
            mix.tracks = order.reversed()
            shuffled = order.reversed().map(\.title)
            try c.save()
            try store.close()
        }
        let store = try ObjectStore.open(at: dir, schema: schema, options: options)
        #expect(try store.context.objects(of: Playlist.self).first?.tracks.map(\.title) == shuffled, "reopened")
        try store.close()
    }
}
