import ObjectGraphTestSupport
import Testing

@testable import GraphJournal

@Suite struct CRC32CTests {
    @Test func knownAnswersMatchTheCastagnoliCheckValues() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum((0..<32).map { UInt8($0) }) == 0x46DD_794E)
        #expect(CRC32C.checksum([]) == 0)
    }

    @Test func extendingInPiecesEqualsOneChecksumAtAnyLengthAndSplit() {
        var generator = SeededGenerator(seed: 42)
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let whole = CRC32C.checksum(bytes)
            // Bytewise reference: the plain table-driven algorithm.
            var reference: UInt32 = ~0
            for byte in bytes {
                reference ^= UInt32(byte)
                for _ in 0..<8 { reference = reference & 1 == 1 ? (reference >> 1) ^ 0x82F6_3B78 : reference >> 1 }
            }
            #expect(whole == ~reference, "length \(length)")
            for split in stride(from: 0, through: length, by: 7) {
                let pieces = bytes.withUnsafeBytes { raw in
                    CRC32C.extend(
                        CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[..<split])),
                        UnsafeRawBufferPointer(rebasing: raw[split...]))
                }
                #expect(pieces == whole, "length \(length) split \(split)")
            }
        }
    }

    @Test func hardwareAndTablesAgreeAtEveryLengthAndAlignment() throws {
        guard CRC32C.hasHardware else { return }  // nothing to compare on this CPU
        var generator = SeededGenerator(seed: 7)
        let bytes = (0..<(300 + 16)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        try bytes.withUnsafeBytes { raw in
            for start in 0..<16 {
                for length in 0...300 {
                    let slice = UnsafeRawBufferPointer(rebasing: raw[start..<(start + length)])
                    for seed: UInt32 in [0, 0xFFFF_FFFF, UInt32.random(in: 0 ... .max, using: &generator)] {
                        let hardware = try #require(CRC32C.extendWithHardware(seed, slice))
                        #expect(
                            hardware == CRC32C.extendWithTables(seed, slice),
                            "start \(start) length \(length) seed \(seed)")
                    }
                }
            }
        }
        #expect(Array("123456789".utf8).withUnsafeBytes { CRC32C.extendWithHardware(0, $0) } == 0xE306_9283)
    }

    /// Buffers long enough for the three-stream loops (blocks of 3 × 256 and 3 × 8,192 bytes),
    /// at lengths around their edges and at every alignment, give the tables' checksum.
    @Test func hardwareAndTablesAgreeAcrossTheThreeStreamBlocks() throws {
        guard CRC32C.hasHardware else { return }
        var generator = SeededGenerator(seed: 11)
        let bytes = (0..<(100_000 + 8)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let lengths = [767, 768, 769, 775, 1536, 2000, 24_575, 24_576, 24_577, 24_576 + 768, 49_152 + 767, 100_000]
        try bytes.withUnsafeBytes { raw in
            for start in 0..<8 {
                for length in lengths {
                    let slice = UnsafeRawBufferPointer(rebasing: raw[start..<(start + length)])
                    for seed: UInt32 in [0, UInt32.random(in: 0 ... .max, using: &generator)] {
                        let hardware = try #require(CRC32C.extendWithHardware(seed, slice))
                        #expect(
                            hardware == CRC32C.extendWithTables(seed, slice),
                            "start \(start) length \(length) seed \(seed)")
                    }
                }
            }
        }
    }
}
