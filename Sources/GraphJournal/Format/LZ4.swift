internal import CLZ4
public import Foundation

/// LZ4 compression through liblz4: the raw block format and the self-describing frame format.
///
/// Two formats, for two jobs:
///
/// - **Blocks** (`LZ4_compress_fast` / `LZ4_decompress_safe`) are the bare compressed sequences.
///   They carry no header, size or checksum, so the caller must store the original size next to
///   the block and check integrity itself. Use them inside a container that already frames and
///   checksums its records, such as the journal.
/// - **Frames** (`LZ4F_*`) are what the `lz4` command-line tool reads and writes: a magic number,
///   a header with its own checksum, a sequence of blocks and an optional content checksum.
///   Use them for whole files.
///
/// ```swift
/// let packed = try LZ4.compressFrame(Array("hello, journal".utf8))
/// let unpacked = try LZ4.decompressFrame(packed)   // the same bytes
/// ```
///
/// Every function validates its input: damaged, truncated or hostile data raises an
/// ``LZ4Error`` and never reads or writes out of bounds.
public enum LZ4 {
    /// The largest input the block API accepts: `LZ4_MAX_INPUT_SIZE`, 2,113,929,216 bytes.
    public static let maxBlockInputSize = Int(LZ4_MAX_INPUT_SIZE)

    // MARK: Block format

    /// Compresses bytes into one raw LZ4 block.
    ///
    /// The result holds no header: store `input`'s length alongside it and pass it back as
    /// `originalSize` to ``decompressBlock(_:originalSize:)``. Empty input compresses to the
    /// one-byte block `[0x00]`.
    ///
    /// ```swift
    /// let block = try LZ4.compressBlock(record)
    /// let again = try LZ4.decompressBlock(block, originalSize: record.count)
    /// ```
    ///
    /// - Parameter input: the bytes to compress, at most ``maxBlockInputSize``.
    /// - Parameter acceleration: `LZ4_compress_fast`'s speed/ratio trade-off; 1 (the default)
    ///   compresses best, each step up is faster and compresses a little less. Values below 1
    ///   mean 1; liblz4 caps large values at 65,537.
    /// - Returns: the compressed block, at most `LZ4_compressBound(input.count)` bytes.
    /// - Throws: ``LZ4Error`` of kind ``LZ4Error/Kind/inputTooLarge`` if `input` is larger than
    ///   ``maxBlockInputSize``.
    public static func compressBlock(
        _ input: some ContiguousBytes,
        acceleration: Int = 1
    ) throws(LZ4Error) -> [UInt8] {
        let result = input.withUnsafeBytes { source in
            compressBlock(source: source, acceleration: acceleration)
        }
        return try result.get()
    }

    /// Decompresses one raw LZ4 block whose original size is known.
    ///
    /// The block must decode to exactly `originalSize` bytes. When it does not, the block is
    /// scanned (without writing) to say why: it stops in the middle of a sequence
    /// (``LZ4Error/Kind/truncatedInput``), it would decode to more bytes
    /// (``LZ4Error/Kind/outputTooSmall``), or it is malformed or decodes to fewer bytes
    /// (``LZ4Error/Kind/corruptInput``). The block format has no checksum, so a damaged block
    /// can also decode "successfully" to different bytes; protect blocks with a checksum of
    /// your own.
    ///
    /// ```swift
    /// let bytes = try LZ4.decompressBlock(block, originalSize: 4096)
    /// ```
    ///
    /// - Parameter input: one compressed block, as produced by
    ///   ``compressBlock(_:acceleration:)``.
    /// - Parameter originalSize: the exact number of bytes the block decodes to.
    /// - Returns: the `originalSize` decompressed bytes.
    /// - Throws: ``LZ4Error`` of kind ``LZ4Error/Kind/truncatedInput``,
    ///   ``LZ4Error/Kind/outputTooSmall`` or ``LZ4Error/Kind/corruptInput`` for bad input (with
    ///   the byte offset of the problem), and ``LZ4Error/Kind/inputTooLarge`` if `input` or
    ///   `originalSize` exceeds the block API's 32-bit limits.
    public static func decompressBlock(
        _ input: some ContiguousBytes,
        originalSize: Int
    ) throws(LZ4Error) -> [UInt8] {
        let result = input.withUnsafeBytes { source in
            decompressBlock(source: source, originalSize: originalSize)
        }
        return try result.get()
    }

    // MARK: Frame format

    /// Compresses bytes into one LZ4 frame, the format of the `lz4` command-line tool.
    ///
    /// The frame records the content size and carries a content checksum (XXH32), so
    /// ``decompressFrame(_:maxOutputSize:)`` detects any damage; `lz4 -d` can read the result.
    ///
    /// ```swift
    /// try Data(LZ4.compressFrame(jsonLines, level: 9)).write(to: url)
    /// ```
    ///
    /// - Parameter input: the bytes to compress.
    /// - Parameter level: the compression level: 0 (the default) is the fast compressor,
    ///   3 through 12 use the slower, tighter high-compression compressor, negative values
    ///   trade ratio for even more speed. liblz4 treats values above 12 as 12.
    /// - Returns: one complete frame.
    /// - Throws: ``LZ4Error`` of kind ``LZ4Error/Kind/library(code:name:)`` if liblz4 reports
    ///   an error (in practice only when it cannot allocate memory).
    public static func compressFrame(
        _ input: some ContiguousBytes,
        level: Int = 0
    ) throws(LZ4Error) -> [UInt8] {
        let result = input.withUnsafeBytes { source in
            compressFrame(source: source, level: level)
        }
        return try result.get()
    }

    /// Decompresses LZ4 frames, such as a file written by the `lz4` command-line tool.
    ///
    /// Decoding is streamed with `LZ4F_decompress`, so frames whose header omits the content
    /// size (as `lz4` writes when compressing a pipe) are fine. Several concatenated frames
    /// decode to the concatenation of their contents, and skippable frames are skipped, as
    /// `lz4 -d` does. Header, block and content checksums are verified when the frame has them.
    ///
    /// ```swift
    /// let index = try LZ4.decompressFrame(Data(contentsOf: packagesURL))
    /// ```
    ///
    /// - Parameter input: one or more complete frames.
    /// - Parameter maxOutputSize: the most bytes to produce before giving up, a guard against
    ///   hostile input that expands enormously. Defaults to no limit.
    /// - Returns: the decompressed content.
    /// - Throws: ``LZ4Error`` of kind ``LZ4Error/Kind/truncatedInput`` if the input is empty or
    ///   ends inside a frame; ``LZ4Error/Kind/library(code:name:)`` for any damage liblz4
    ///   detects (bad magic number, header, block data or checksum, or trailing bytes that are
    ///   not a frame), with `name` such as `ERROR_contentChecksum_invalid`;
    ///   ``LZ4Error/Kind/outputTooSmall`` if the content exceeds `maxOutputSize`.
    public static func decompressFrame(
        _ input: some ContiguousBytes,
        maxOutputSize: Int = .max
    ) throws(LZ4Error) -> [UInt8] {
        let result = input.withUnsafeBytes { source in
            decompressFrame(source: source, maxOutputSize: maxOutputSize)
        }
        return try result.get()
    }
}

// MARK: - Implementation
//
// Raw pointers stay in this section. Each function takes a buffer that is valid for the whole
// call and returns a Result, because `withUnsafeBytes` only rethrows untyped errors.

extension LZ4 {
    /// The output buffer size for streaming frame decompression.
    private static let frameChunkSize = 256 * 1024

    /// Compresses `source` as one block (acceleration 1) appended to `output`, if the block
    /// takes at most `limit` bytes; returns its size, or 0 when it would take more (or `source`
    /// exceeds ``maxBlockInputSize``), in which case nothing is appended.
    ///
    /// A journal record keeps a block only when it is smaller than the payload; compressing
    /// straight into the record buffer with that limit saves allocating, faulting in and copying
    /// a separate block (16 MB for a save of 1M objects).
    static func appendBlock(_ source: UnsafeRawBufferPointer, to output: inout [UInt8], limit: Int) -> Int {
        guard source.count <= maxBlockInputSize, limit > 0 else { return 0 }
        let capacity = min(limit, Int(Int32.max))
        var written: Int32 = 0
        withCharPointer(source) { sourcePointer in
            output.append(addingCapacity: capacity) { span in
                span.withUnsafeMutableBufferPointer { destination, initialized in
                    written = withMutableCharPointer(UnsafeMutableBufferPointer(rebasing: destination[..<capacity])) {
                        destinationPointer in
                        // With less room than LZ4_compressBound, liblz4 returns 0 when the block
                        // does not fit, writing nothing past `capacity`.
                        LZ4_compress_fast(sourcePointer, destinationPointer, Int32(source.count), Int32(capacity), 1)
                    }
                    initialized = Int(max(0, written))
                }
            }
        }
        return Int(max(0, written))
    }

    private static func compressBlock(
        source: UnsafeRawBufferPointer,
        acceleration: Int
    ) -> Result<[UInt8], LZ4Error> {
        guard source.count <= maxBlockInputSize else {
            return .failure(
                LZ4Error(
                    .inputTooLarge,
                    "\(source.count) bytes exceed the block limit of \(maxBlockInputSize) bytes"))
        }
        let sourceSize = Int32(source.count)  // fits: checked against LZ4_MAX_INPUT_SIZE above
        let bound = LZ4_compressBound(sourceSize)
        var written: Int32 = 0
        let output = withCharPointer(source) { sourcePointer in
            [UInt8](unsafeUninitializedCapacity: Int(bound)) { destination, initialized in
                written = withMutableCharPointer(destination) { destinationPointer in
                    LZ4_compress_fast(
                        sourcePointer, destinationPointer, sourceSize, bound,
                        Int32(clamping: max(1, acceleration)))
                }
                initialized = Int(max(0, written))
            }
        }
        // With a destination of LZ4_compressBound bytes, compression cannot fail.
        guard written > 0 else {
            return .failure(
                LZ4Error(
                    .library(code: 1, name: "LZ4_compress_fast"),
                    "LZ4_compress_fast returned \(written)"))
        }
        return .success(output)
    }

    private static func decompressBlock(
        source: UnsafeRawBufferPointer,
        originalSize: Int
    ) -> Result<[UInt8], LZ4Error> {
        guard originalSize >= 0 else {
            return .failure(LZ4Error(.corruptInput, "originalSize \(originalSize) is negative"))
        }
        guard originalSize <= Int(Int32.max) else {
            return .failure(
                LZ4Error(
                    .inputTooLarge, "originalSize \(originalSize) exceeds the block limit of \(Int32.max) bytes"))
        }
        guard source.count <= Int(Int32.max) else {
            return .failure(
                LZ4Error(
                    .inputTooLarge, "\(source.count) bytes exceed the block limit of \(Int32.max) bytes"))
        }
        guard !source.isEmpty else {
            return .failure(LZ4Error(.truncatedInput, "a compressed block is at least 1 byte", offset: 0))
        }
        var failure: LZ4Error?
        let output = [UInt8](unsafeUninitializedCapacity: originalSize) { destination, initialized in
            failure = decompressBlock(source, into: UnsafeMutableBufferPointer(rebasing: destination[..<originalSize]))
            initialized = failure == nil ? originalSize : 0
        }
        if let failure { return .failure(failure) }
        return .success(output)
    }

    /// Decompresses one raw LZ4 block into `destination`, which it must fill exactly: nil on
    /// success, else what ``decompressBlock(_:originalSize:)`` would throw. For a caller that
    /// decompresses many blocks into one reused buffer.
    static func decompressBlock(
        _ source: UnsafeRawBufferPointer, into destination: UnsafeMutableBufferPointer<UInt8>
    ) -> LZ4Error? {
        guard destination.count <= Int(Int32.max) else {
            return LZ4Error(
                .inputTooLarge, "originalSize \(destination.count) exceeds the block limit of \(Int32.max) bytes")
        }
        guard source.count <= Int(Int32.max) else {
            return LZ4Error(.inputTooLarge, "\(source.count) bytes exceed the block limit of \(Int32.max) bytes")
        }
        guard !source.isEmpty else {
            return LZ4Error(.truncatedInput, "a compressed block is at least 1 byte", offset: 0)
        }
        let decoded = withCharPointer(source) { sourcePointer in
            withMutableCharPointer(destination) { destinationPointer in
                LZ4_decompress_safe(sourcePointer, destinationPointer, Int32(source.count), Int32(destination.count))
            }
        }
        if Int(decoded) == destination.count { return nil }
        return diagnoseBlock(source, originalSize: destination.count, decoded: Int(decoded))
    }

    /// Explains why a block did not decode to `originalSize` bytes by walking its sequences
    /// without writing anything (``BlockDiagnosis``).
    private static func diagnoseBlock(
        _ block: UnsafeRawBufferPointer,
        originalSize: Int,
        decoded: Int
    ) -> LZ4Error {
        var walk = BlockDiagnosis(block: block, originalSize: originalSize)
        while true {
            switch walk.readSequence() {
            case .more: continue
            case .last: return walk.verdict(decoded: decoded)
            case .problem(let error): return error
            }
        }
    }

    private static func compressFrame(
        source: UnsafeRawBufferPointer,
        level: Int
    ) -> Result<[UInt8], LZ4Error> {
        var preferences = LZ4F_preferences_t()
        preferences.frameInfo.contentSize = UInt64(source.count)
        preferences.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled
        preferences.compressionLevel = Int32(clamping: level)
        let bound = LZ4F_compressFrameBound(source.count, &preferences)
        if LZ4F_isError(bound) != 0 {
            return .failure(libraryError(bound, "cannot size the frame"))
        }
        var written = 0
        let output = withCharPointer(source) { sourcePointer in
            [UInt8](unsafeUninitializedCapacity: bound) { destination, initialized in
                written = withMutableCharPointer(destination) { destinationPointer in
                    LZ4F_compressFrame(destinationPointer, bound, sourcePointer, source.count, &preferences)
                }
                initialized = LZ4F_isError(written) != 0 ? 0 : written
            }
        }
        if LZ4F_isError(written) != 0 {
            return .failure(libraryError(written, "LZ4F_compressFrame failed"))
        }
        return .success(output)
    }

    private static func decompressFrame(
        source: UnsafeRawBufferPointer,
        maxOutputSize: Int
    ) -> Result<[UInt8], LZ4Error> {
        guard !source.isEmpty else {
            return .failure(LZ4Error(.truncatedInput, "empty input has no frame header", offset: 0))
        }
        var context: OpaquePointer?
        let created = LZ4F_createDecompressionContext(&context, UInt32(LZ4F_VERSION))
        guard LZ4F_isError(created) == 0, let context else {
            return .failure(libraryError(created, "cannot create a decompression context"))
        }
        defer { _ = LZ4F_freeDecompressionContext(context) }

        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: frameChunkSize, alignment: 16)
        defer { chunk.deallocate() }

        var output: [UInt8] = []
        var position = 0
        return withCharPointer(source) { sourceStart in
            while true {
                var consumed = source.count - position
                var produced = chunk.count
                let hint = LZ4F_decompress(
                    context, chunk.baseAddress, &produced, sourceStart + position, &consumed, nil)
                if LZ4F_isError(hint) != 0 {
                    return .failure(libraryError(hint, "damaged frame", offset: position))
                }
                position += consumed
                if produced > 0 {
                    guard produced <= maxOutputSize - output.count else {
                        return .failure(
                            LZ4Error(
                                .outputTooSmall,
                                "content exceeds maxOutputSize \(maxOutputSize) bytes",
                                offset: position))
                    }
                    output.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[..<produced]))
                }
                if hint == 0 {
                    // A frame ended and the context is ready for the next one.
                    if position == source.count { return .success(output) }
                    continue
                }
                if consumed == 0 && produced == 0 {
                    if position == source.count {
                        return .failure(
                            LZ4Error(
                                .truncatedInput,
                                "input ends inside a frame",
                                offset: position))
                    }
                    return .failure(LZ4Error(.corruptInput, "decoder made no progress", offset: position))
                }
            }
        }
    }

    /// Wraps an `LZ4F_*` error result (a negated error code in a `size_t`).
    private static func libraryError(_ result: Int, _ context: String, offset: Int? = nil) -> LZ4Error {
        let name = LZ4F_getErrorName(result).map { String(cString: $0) } ?? "unknown LZ4F error"
        return LZ4Error(.library(code: -result, name: name), context, offset: offset)
    }

    /// Calls `body` with the buffer's start as `const char *`; an empty buffer gets a valid
    /// pointer to a dummy byte, since liblz4 asserts its pointers are not NULL.
    private static func withCharPointer<R>(
        _ buffer: UnsafeRawBufferPointer,
        _ body: (UnsafePointer<CChar>) -> R
    ) -> R {
        if let base = buffer.baseAddress {
            return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) { body($0) }
        }
        var dummy: CChar = 0
        return withUnsafePointer(to: &dummy) { body($0) }
    }

    /// Calls `body` with the buffer's start as `char *`, or a dummy byte for an empty buffer.
    private static func withMutableCharPointer<R>(
        _ buffer: UnsafeMutableBufferPointer<UInt8>,
        _ body: (UnsafeMutablePointer<CChar>) -> R
    ) -> R {
        if let base = buffer.baseAddress {
            return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) { body($0) }
        }
        var dummy: CChar = 0
        return withUnsafeMutablePointer(to: &dummy) { body($0) }
    }
}

/// A walk through an LZ4 block's sequences that writes nothing, to say why the block did not
/// decode to the size expected.
///
/// Block format: each sequence is a token (high nibble literal length, low nibble match
/// length - 4, 15 meaning "more length bytes follow, each added, until one is not 255"),
/// the literals, then a 2-byte little-endian match offset. The last sequence has only
/// literals and ends the block.
private struct BlockDiagnosis {
    /// What reading one sequence found.
    enum Step {
        /// A sequence with a match: more follow.
        case more
        /// The last sequence, literals only: the block ends after it.
        case last
        /// The block is malformed here.
        case problem(LZ4Error)
    }

    /// The compressed block.
    let block: UnsafeRawBufferPointer
    /// The size the block should decode to.
    let originalSize: Int
    /// The read position in the block.
    private var position = 0
    /// The bytes the sequences read so far decode to.
    private var produced = 0

    init(block: UnsafeRawBufferPointer, originalSize: Int) {
        self.block = block
        self.originalSize = originalSize
    }

    /// Reads the next sequence.
    mutating func readSequence() -> Step {
        guard position < block.count else {
            return .problem(LZ4Error(.truncatedInput, "block ends before its final literal run", offset: position))
        }
        let sequenceStart = position
        let token = Int(block[position])
        position += 1
        if let problem = readLiterals(token >> 4) { return .problem(problem) }
        if position == block.count { return .last }  // the last sequence: literals only
        if let problem = readMatch(token & 15, sequenceStart: sequenceStart) { return .problem(problem) }
        return .more
    }

    /// Reads a sequence's literal length (its token's high nibble is `nibble`) and skips the
    /// literals; returns what is wrong, or nil.
    private mutating func readLiterals(_ nibble: Int) -> LZ4Error? {
        guard let literals = extendedLength(nibble) else {
            return LZ4Error(.truncatedInput, "block ends inside a literal length", offset: position)
        }
        guard block.count - position >= literals else {
            return LZ4Error(
                .truncatedInput,
                "sequence needs \(literals) literal bytes, block has \(block.count - position) left",
                offset: position)
        }
        position += literals
        produced += literals
        return nil
    }

    /// Reads a sequence's match offset and length (its token's low nibble is `nibble`);
    /// returns what is wrong, or nil.
    private mutating func readMatch(_ nibble: Int, sequenceStart: Int) -> LZ4Error? {
        guard block.count - position >= 2 else {
            return LZ4Error(.truncatedInput, "block ends inside a match offset", offset: position)
        }
        let offset = Int(block[position]) | Int(block[position + 1]) << 8
        guard offset != 0, offset <= produced else {
            return LZ4Error(
                .corruptInput,
                "match offset \(offset) points before the start of the output (\(produced) bytes decoded)",
                offset: position)
        }
        position += 2
        guard let matchLength = extendedLength(nibble) else {
            return LZ4Error(.truncatedInput, "block ends inside a match length", offset: position)
        }
        produced += matchLength + 4
        if produced > originalSize {
            return LZ4Error(
                .outputTooSmall, "block decodes to more than originalSize \(originalSize) bytes", offset: sequenceStart)
        }
        return nil
    }

    /// Reads a length whose token nibble is `start`, continued in extra bytes when it is 15;
    /// nil when the block ends first.
    private mutating func extendedLength(_ start: Int) -> Int? {
        var length = start
        guard start == 15 else { return length }
        while true {
            guard position < block.count else { return nil }
            let byte = Int(block[position])
            position += 1
            length += byte
            if byte != 255 { return length }
        }
    }

    /// What is wrong with a block whose sequences all read well: the size they decode to, or
    /// else LZ4's end-of-block rules, which liblz4 (returning `decoded`) enforces.
    func verdict(decoded: Int) -> LZ4Error {
        let end = block.count
        if produced > originalSize {
            return LZ4Error(
                .outputTooSmall, "block decodes to \(produced) bytes, more than originalSize \(originalSize)",
                offset: end)
        }
        if produced < originalSize {
            return LZ4Error(
                .corruptInput, "block decodes to \(produced) bytes, but originalSize is \(originalSize)", offset: end)
        }
        return LZ4Error(
            .corruptInput,
            "block breaks LZ4's end-of-block rules (LZ4_decompress_safe returned \(decoded))",
            offset: end)
    }
}
