import Foundation
import Testing

@testable import ObjectGraph

/// `EntityTable.toManyHolds(row:_:exactly:)`, which a mapping asks of every object it connects
/// again, reads a link list in place for up to 32 targets: it must agree with the comparison it
/// replaces (the visible members, in order when the relationship is ordered, as a set when
/// not) on lists with deleted members, reordered, missing, extra and foreign targets.
@Suite struct ToManyHoldsTests {
    /// A deterministic generator (SplitMix64).
    struct Generator {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(bound))
        }
    }

    /// What `toManyHolds` answered before it read lists in place.
    static func reference(_ table: EntityTable, row: Int, _ r: ResolvedRelationship, _ targets: [Int]) -> Bool {
        let current = table.toManyDestinations(row: row, r)
        if r.isOrdered { return current == targets }
        return current.count == targets.count && current.sorted() == targets.sorted()
    }

    @Test(arguments: [false, true])
    func theInPlaceCheckAgreesWithTheVisibleMembers(ordered: Bool) throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        print("ToManyHoldsTests seed \(seed) (ordered: \(ordered))")
        var g = Generator(state: seed)
        let context = ModelContext(
            schema: try Schema(LpArticle.self, LpLabel.self, LpAlbum.self, LpSong.self, LpCrate.self))
        var owners: [any Entity] = []
        var members: [[any Entity]] = []
        if ordered {
            let songs = (0..<40).map { i in LpSong().with { $0.n = i } }
            for s in songs { try context.insert(s) }
            for i in 0..<30 {
                let album = LpAlbum()
                album.n = i
                try context.insert(album)
                album.songs = (0..<g.next(12)).map { _ in songs[g.next(songs.count)] }.uniqued()
                owners.append(album)
                members.append(album.songs)
            }
            try context.save()
            for s in songs where g.next(6) == 0 { context.delete(s) }
        } else {
            let labels = (0..<40).map { i in LpLabel().with { $0.n = i } }
            for l in labels { try context.insert(l) }
            for i in 0..<30 {
                let article = LpArticle()
                article.n = i
                try context.insert(article)
                article.labels = (0..<g.next(12)).map { _ in labels[g.next(labels.count)] }.uniqued()
                owners.append(article)
                members.append(article.labels)
            }
            try context.save()
            for l in labels where g.next(6) == 0 { context.delete(l) }
        }
        let (table, relationship) = try #require(owners.first?.relationship(forKey: ordered ? "songs" : "labels"))
        #expect(relationship.isOrdered == ordered)
        var agreed = 0
        for (owner, list) in zip(owners, members) {
            let row = owner._backing.rowIndex
            let destination = list.first.map { $0._backing.managedTable } ?? nil
            let all = list.map { $0._backing.rowIndex }
            let visible = all.filter { destination?.isVisible(row: $0) ?? false }
            var candidates: [[Int]] = [
                visible, visible.reversed(), all, [], Array(visible.dropFirst()), visible + [10_000],
            ]
            if visible.count > 1 { candidates.append(visible.shuffledDeterministically(&g)) }
            for _ in 0..<6 {
                candidates.append((0..<g.next(8)).map { _ in g.next(45) }.uniqued())
            }
            for targets in candidates {
                let expected = Self.reference(table, row: row, relationship, targets)
                #expect(
                    table.toManyHolds(row: row, relationship, exactly: targets) == expected,
                    "seed \(seed): row \(row) holds \(visible), asked about \(targets)")
                agreed += 1
            }
        }
        #expect(agreed > 200)
    }
}

extension Array where Element: AnyObject {
    /// The elements, each once, in their first order.
    fileprivate func uniqued() -> [Element] {
        var seen = Set<ObjectIdentifier>()
        return filter { seen.insert(ObjectIdentifier($0)).inserted }
    }
}

extension Array where Element == Int {
    fileprivate func uniqued() -> [Int] {
        var seen = Set<Int>()
        return filter { seen.insert($0).inserted }
    }

    fileprivate func shuffledDeterministically(_ g: inout ToManyHoldsTests.Generator) -> [Int] {
        var copy = self
        for i in stride(from: copy.count - 1, to: 0, by: -1) { copy.swapAt(i, g.next(i + 1)) }
        return copy
    }
}

extension Entity {
    fileprivate func with(_ body: (Self) -> Void) -> Self {
        body(self)
        return self
    }
}
