import GraphJournal
import Testing

/// Tests of the liblz4 wrapper: round trips, interoperability with the `lz4` CLI, and damage
/// that must raise an `LZ4Error` instead of crashing.
@Suite("LZ4")
struct LZ4Tests {
    // MARK: Fixtures

    /// A repeatable generator (SplitMix64), so a failure reproduces byte for byte.
    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static func randomBytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var generator = SeededGenerator(state: seed)
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// English-like text with repeats at many distances, so blocks hold real matches.
    static let prose: [UInt8] = {
        var generator = SeededGenerator(state: 7)
        let words = [
            "object", "graph", "journal", "append", "entity", "relationship",
            "fault", "context", "save", "merge", "undo", "lz4", "block", "frame",
        ]
        var text = ""
        while text.utf8.count < 3000 {
            text += words[Int.random(in: 0..<words.count, using: &generator)]
            text += Int.random(in: 0..<5, using: &generator) == 0 ? ".\n" : " "
        }
        return Array(text.utf8)
    }()

    /// `printf 'ObjectGraph reads lz4 frames. ' x3 + '\n' | lz4 -c` from lz4 v1.9.4: a frame
    /// with no content size in its header (the CLI cannot know it for a pipe), independent
    /// blocks and a content checksum.
    static let cliFrame: [UInt8] = [
        0x04, 0x22, 0x4d, 0x18, 0x64, 0x40, 0xa7, 0x29, 0x00, 0x00, 0x00, 0xff,
        0x0f, 0x4f, 0x62, 0x6a, 0x65, 0x63, 0x74, 0x47, 0x72, 0x61, 0x70, 0x68,
        0x20, 0x72, 0x65, 0x61, 0x64, 0x73, 0x20, 0x6c, 0x7a, 0x34, 0x20, 0x66,
        0x72, 0x61, 0x6d, 0x65, 0x73, 0x2e, 0x20, 0x1e, 0x00, 0x24, 0x50, 0x6d,
        0x65, 0x73, 0x2e, 0x0a, 0x00, 0x00, 0x00, 0x00, 0xcd, 0xd0, 0x12, 0x16,
    ]
    static let cliFrameContent = Array(
        "ObjectGraph reads lz4 frames. ObjectGraph reads lz4 frames. ObjectGraph reads lz4 frames.\n".utf8)

    // MARK: Block round trips

    /// Inputs every round trip must restore exactly.
    enum Sample: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case empty, oneByte, oneMegabyteRandom, oneMegabyteRepeatingPattern, fiveMegabytesOfZeros, prose

        var testDescription: String { rawValue }

        var bytes: [UInt8] {
            switch self {
            case .empty: []
            case .oneByte: [0x2A]
            case .oneMegabyteRandom: LZ4Tests.randomBytes(1 << 20, seed: 1)
            case .oneMegabyteRepeatingPattern:
                Array(repeating: Array("abcabcabd".utf8), count: 116_509).joined().map { $0 }
            case .fiveMegabytesOfZeros: [UInt8](repeating: 0, count: 5 << 20)  // > one 4 MB frame block
            case .prose: LZ4Tests.prose
            }
        }
    }

    @Test("block round trip restores input", arguments: Sample.allCases)
    func blockRoundTripRestoresInput(sample: Sample) throws {
        let input = sample.bytes
        let block = try LZ4.compressBlock(input)
        let restored = try LZ4.decompressBlock(block, originalSize: input.count)
        #expect(restored == input)
    }

    @Test func emptyInputCompressesToSingleZeroByteBlock() throws {
        #expect(try LZ4.compressBlock([UInt8]()) == [0x00])
    }

    @Test func repetitiveInputShrinksAtLeastHundredfold() throws {
        let input = [UInt8](repeating: 0x41, count: 1 << 20)
        let block = try LZ4.compressBlock(input)
        #expect(block.count * 100 < input.count)
    }

    @Test func higherAccelerationStillRoundTrips() throws {
        let block = try LZ4.compressBlock(Self.prose, acceleration: 50)
        #expect(try LZ4.decompressBlock(block, originalSize: Self.prose.count) == Self.prose)
    }

    // MARK: Block damage

    @Test func emptyBlockIsTruncated() {
        #expect(throws: LZ4Error.self) { try LZ4.decompressBlock([UInt8](), originalSize: 0) }
        let error = try? #require(throws: LZ4Error.self) {
            try LZ4.decompressBlock([UInt8](), originalSize: 10)
        }
        #expect(error?.kind == .truncatedInput)
    }

    @Test func blockWithTooSmallOriginalSizeIsOutputTooSmall() throws {
        let block = try LZ4.compressBlock(Self.prose)
        let error = try #require(throws: LZ4Error.self) {
            try LZ4.decompressBlock(block, originalSize: Self.prose.count - 1)
        }
        #expect(error.kind == .outputTooSmall)
    }

    @Test func blockWithTooLargeOriginalSizeIsCorrupt() throws {
        let block = try LZ4.compressBlock(Self.prose)
        let error = try #require(throws: LZ4Error.self) {
            try LZ4.decompressBlock(block, originalSize: Self.prose.count + 1)
        }
        #expect(error.kind == .corruptInput)
    }

    @Test func negativeOriginalSizeThrowsInsteadOfTrapping() throws {
        let block = try LZ4.compressBlock(Self.prose)
        #expect(throws: LZ4Error.self) { try LZ4.decompressBlock(block, originalSize: -1) }
    }

    @Test func truncatedBlockAtEveryLengthThrows() throws {
        let block = try LZ4.compressBlock(Self.prose)
        for length in 0..<block.count {
            #expect(throws: LZ4Error.self, "prefix of \(length) bytes") {
                try LZ4.decompressBlock(block[..<length], originalSize: Self.prose.count)
            }
        }
    }

    /// Blocks have no checksum, so a flipped bit may go unnoticed: it can decode to other
    /// bytes of the right length, or even to the same bytes (a match offset moved to an
    /// identical earlier word, or the unused match-length nibble of the final token). What must
    /// hold is that decoding never reads or writes out of bounds and never returns a wrong size.
    @Test func bitFlippedBlockThrowsOrDecodesToOriginalSize() throws {
        let block = try LZ4.compressBlock(Self.prose)
        var thrown = 0
        var changed = 0
        for bit in 0..<(block.count * 8) {
            var damaged = block
            damaged[bit / 8] ^= 1 << UInt8(bit % 8)
            do {
                let decoded = try LZ4.decompressBlock(damaged, originalSize: Self.prose.count)
                #expect(decoded.count == Self.prose.count, "flipping bit \(bit)")
                if decoded != Self.prose { changed += 1 }
            } catch {
                thrown += 1
            }
        }
        #expect(thrown > 0)
        #expect(changed > 0)
    }

    @Test func randomBytesAsBlockNeverCrash() {
        for seed in UInt64(0)..<200 {
            let garbage = Self.randomBytes(Int(seed % 64) + 1, seed: seed)
            _ = try? LZ4.decompressBlock(garbage, originalSize: 256)
        }
    }

    // MARK: Frames

    @Test("frame round trip restores input", arguments: Sample.allCases)
    func frameRoundTripRestoresInput(sample: Sample) throws {
        let input = sample.bytes
        let frame = try LZ4.compressFrame(input)
        #expect(try LZ4.decompressFrame(frame) == input)
    }

    @Test func highCompressionFrameRoundTripsAndIsSmaller() throws {
        let fast = try LZ4.compressFrame(Self.prose)
        let tight = try LZ4.compressFrame(Self.prose, level: 12)
        #expect(tight.count < fast.count)
        #expect(try LZ4.decompressFrame(tight) == Self.prose)
    }

    @Test func frameWrittenByLZ4CLIWithUnknownContentSizeDecodes() throws {
        #expect(try LZ4.decompressFrame(Self.cliFrame) == Self.cliFrameContent)
    }

    @Test func concatenatedFramesDecodeToConcatenatedContent() throws {
        let second = try LZ4.compressFrame(Self.prose)
        #expect(try LZ4.decompressFrame(Self.cliFrame + second) == Self.cliFrameContent + Self.prose)
    }

    @Test func frameFollowedByGarbageIsRejected() throws {
        let frame = try LZ4.compressFrame(Self.prose)
        let error = try #require(throws: LZ4Error.self) {
            try LZ4.decompressFrame(frame + [0xDE, 0xAD, 0xBE, 0xEF, 0x00, 0x00, 0x00, 0x00])
        }
        guard case .library(_, let name) = error.kind else {
            Issue.record("expected a library error, got \(error)")
            return
        }
        #expect(name == "ERROR_frameType_unknown")
        #expect(error.description.contains("ERROR_frameType_unknown"))
    }

    @Test func emptyFrameInputIsTruncated() throws {
        let error = try #require(throws: LZ4Error.self) { try LZ4.decompressFrame([UInt8]()) }
        #expect(error.kind == .truncatedInput)
    }

    @Test func truncatedCLIFrameAtEveryLengthThrows() {
        for length in 0..<Self.cliFrame.count {
            #expect(throws: LZ4Error.self, "prefix of \(length) bytes") {
                try LZ4.decompressFrame(Self.cliFrame[..<length])
            }
        }
    }

    @Test func truncatedFrameAtEveryLengthThrowsTruncatedInput() throws {
        let frame = try LZ4.compressFrame(Self.prose)
        for length in 0..<frame.count {
            let error = try #require(throws: LZ4Error.self, "prefix of \(length) bytes") {
                try LZ4.decompressFrame(frame[..<length])
            }
            #expect(error.kind == .truncatedInput, "prefix of \(length) bytes: \(error)")
        }
    }

    /// Frames carry header and content checksums, so unlike a bare block a damaged frame never
    /// decodes to wrong content: a flip either throws or (when it hits a spot that does not
    /// change the decoded bytes, see the block test above) yields exactly the original.
    @Test func bitFlippedFrameThrowsOrDecodesToOriginal() throws {
        let frame = try LZ4.compressFrame(Self.prose)
        var thrown = 0
        for bit in 0..<(frame.count * 8) {
            var damaged = frame
            damaged[bit / 8] ^= 1 << UInt8(bit % 8)
            do {
                let decoded = try LZ4.decompressFrame(damaged)
                #expect(decoded == Self.prose, "flipping bit \(bit) decoded to wrong content")
            } catch {
                thrown += 1
            }
        }
        #expect(thrown * 100 > frame.count * 8 * 95, "most flips must be detected")
    }

    @Test func bitFlippedFrameHeaderAlwaysThrows() throws {
        let frame = try LZ4.compressFrame(Self.prose)
        // Magic number (4), FLG, BD, content size (8), header checksum: 15 bytes.
        for bit in 0..<(15 * 8) {
            var damaged = frame
            damaged[bit / 8] ^= 1 << UInt8(bit % 8)
            #expect(throws: LZ4Error.self, "flipping header bit \(bit)") { try LZ4.decompressFrame(damaged) }
        }
    }

    @Test func contentChecksumMismatchIsNamed() throws {
        var damaged = try LZ4.compressFrame(Self.prose)
        damaged[damaged.count - 1] ^= 0xFF  // last byte of the XXH32 content checksum
        let error = try #require(throws: LZ4Error.self) { try LZ4.decompressFrame(damaged) }
        #expect(error.kind == .library(code: 18, name: "ERROR_contentChecksum_invalid"))
    }

    @Test func frameLargerThanMaxOutputSizeIsOutputTooSmall() throws {
        let frame = try LZ4.compressFrame([UInt8](repeating: 7, count: 1 << 20))
        let error = try #require(throws: LZ4Error.self) {
            try LZ4.decompressFrame(frame, maxOutputSize: 1000)
        }
        #expect(error.kind == .outputTooSmall)
    }

    @Test func errorDescriptionNamesKindAndOffset() {
        let error = LZ4Error(.truncatedInput, "input ends inside a frame", offset: 41)
        #expect(error.description == "LZ4 truncated input: input ends inside a frame (at byte 41)")
    }
}
