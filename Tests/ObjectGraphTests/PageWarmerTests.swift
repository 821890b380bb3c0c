import Foundation
import Testing

@testable import ObjectGraph

/// Warming pages on another core (``PageWarmer``) changes no byte of the memory it warms,
/// whether the owner wrote it before, writes it meanwhile, or writes it after.
@Suite("Page warming")
struct PageWarmerTests {
    @Test func warmingLeavesWrittenMemoryAsItWas() throws {
        let values = (0..<(1 << 20)).map { UInt64($0) &* 0x9E37_79B9_7F4A_7C15 }
        values.withUnsafeBufferPointer { buffer in
            let start = Int(bitPattern: buffer.baseAddress)
            let populated = PageWarmer.populate(start, bytes: buffer.count * 8)
            #if os(Linux)
                // Linux 5.14 and later have the call; an older kernel refuses it and nothing happens.
                let version = ProcessInfo.processInfo.operatingSystemVersion
                if (version.majorVersion, version.minorVersion) >= (5, 14) { #expect(populated) }
            #endif
        }
        for (i, v) in values.enumerated() where v != UInt64(i) &* 0x9E37_79B9_7F4A_7C15 {
            Issue.record("value \(i) changed")
            break
        }
    }

    @Test func memoryWarmedWhileItIsWrittenHoldsWhatWasWritten() async throws {
        var values: [UInt64] = []
        values.reserveCapacity(4 << 20)
        // The capacity is warmed from its end while this task fills it from its start.
        PageWarmer.warm(values, 0..<values.capacity)
        for i in 0..<(4 << 20) { values.append(UInt64(i) ^ 0x5555) }
        // Warm it again, written, and give the workers time to run.
        PageWarmer.warm(values, 0..<values.count)
        try await Task.sleep(for: .milliseconds(50))
        #expect(values.indices.allSatisfy { values[$0] == UInt64($0) ^ 0x5555 })
    }

    @Test func anArenaFilledPastSeveralWindowsReadsBackEveryValue() {
        var arena = ByteArena()
        var refs: [UInt64] = []
        // 12 MB in 20-byte values: the arena grows and warms ahead several times.
        for i in 0..<600_000 {
            let text = String(format: "value %013d", i)
            refs.append(text.utf8.withContiguousStorageIfAvailable { arena.append(UnsafeRawBufferPointer($0)) } ?? 0)
        }
        var mismatches = 0
        for (i, ref) in refs.enumerated() {
            let expected = String(format: "value %013d", i)
            let stored = arena.withBytes(ArenaRef(ref)) { String(decoding: $0, as: UTF8.self) }
            if stored != expected { mismatches += 1 }
        }
        #expect(mismatches == 0)
    }
}
