import Foundation
import Testing

@testable import ObjectGraph

/// A table reads its own arena through two stored fields, ``ByteArena/unretainedBase`` and
/// ``ByteArena/count``, instead of a copy of the arena. That address must follow every way the
/// arena's memory moves: appends that grow it, reservations, giving room back, a rollback's
/// truncation.
@Suite("Byte arena")
struct ByteArenaTests {
    /// Every value read through the stored fields equals what `withBytes` reads, and the
    /// stored address is the storage's.
    private func expectReadsAgree(_ arena: ByteArena, _ values: [(ref: UInt64, bytes: [UInt8])], _ step: String) {
        #expect(UnsafeRawPointer(arena.unretainedBase) == arena.baseAddress, "\(step): address")
        var mismatches = 0
        for (ref, expected) in values {
            let direct = ByteArena.bytes(ArenaRef(ref), base: arena.unretainedBase, count: arena.count)
            let copied = arena.withBytes(ArenaRef(ref)) { [UInt8]($0) }
            if [UInt8](direct) != expected || copied != expected { mismatches += 1 }
        }
        #expect(mismatches == 0, "\(step): \(mismatches) of \(values.count) values read back wrong")
    }

    private func append(_ bytes: [UInt8], to arena: inout ByteArena) -> UInt64 {
        bytes.withUnsafeBytes { arena.append($0) }
    }

    @Test func theStoredAddressFollowsEveryGrowth() {
        var arena = ByteArena()
        #expect(arena.unretainedBase == nil)
        expectReadsAgree(arena, [], "empty")
        var values: [(ref: UInt64, bytes: [UInt8])] = []
        // Many small appends: the arena doubles from 64 bytes to a few MB, moving each time.
        for i in 0..<200_000 {
            let bytes = Array("value \(i)".utf8)
            values.append((append(bytes, to: &arena), bytes))
        }
        expectReadsAgree(arena, values, "after appends")
        arena.reserve(arena.capacity * 2 + 1)
        expectReadsAgree(arena, values, "after reserve")
        arena.reserveAdditional(arena.capacity)
        expectReadsAgree(arena, values, "after reserveAdditional")
        arena.shrinkToFit()
        #expect(arena.capacity == arena.count)
        expectReadsAgree(arena, values, "after shrinkToFit")
        // A value past the 24-bit length field: stored behind its 64-bit length.
        let long = (0..<(1 << 24) + 5).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        values.append((append(long, to: &arena), long))
        #expect(ArenaRef(values[values.count - 1].ref).isLong)
        expectReadsAgree(arena, values, "after a long value")
        // A rollback drops the long value; appends then reuse the room.
        let kept = values.count - 1
        arena.truncate(to: Int(ArenaRef(values[kept].ref).offset), garbage: 0)
        values.removeLast()
        for i in 0..<1_000 {
            let bytes = Array("again \(i)".utf8)
            values.append((append(bytes, to: &arena), bytes))
        }
        expectReadsAgree(arena, values, "after truncate and appends")
        #expect(values.count == kept + 1_000)
    }
}
