/// An error from compressing or decompressing LZ4 data.
///
/// Every failure of ``LZ4`` is reported as a value: bad, truncated or hostile input never traps.
/// The ``kind`` says what went wrong so callers can `catch` a specific case, ``offset`` says
/// where in the input the decoder stopped (when it is known), and ``message`` is a sentence for
/// people.
///
/// ```swift
/// do {
///     let text = try LZ4.decompressFrame(bytes)
/// } catch where error.kind == .truncatedInput {
///     // The writer died mid-frame: treat as end of file.
/// }
/// ```
public struct LZ4Error: Error, CustomStringConvertible, Sendable, Hashable {
    /// The category of an ``LZ4Error``.
    public enum Kind: Sendable, Hashable {
        /// The input is not valid LZ4 data: a bad sequence, an offset pointing before the start
        /// of the output, or a block that decodes to a different size than declared.
        case corruptInput
        /// The input ends in the middle of a block or frame.
        case truncatedInput
        /// The data decodes to more bytes than the caller allowed (`originalSize` for blocks,
        /// `maxOutputSize` for frames).
        case outputTooSmall
        /// The input is larger than LZ4 can compress in one block (`LZ4_MAX_INPUT_SIZE`,
        /// 2,113,929,216 bytes).
        case inputTooLarge
        /// liblz4's frame API reported an error.
        ///
        /// - Parameter code: the `LZ4F_errorCodes` value (for example 18 for
        ///   `ERROR_contentChecksum_invalid` in liblz4 1.9.4).
        /// - Parameter name: the library's name for the code, from `LZ4F_getErrorName`.
        case library(code: Int, name: String)
    }

    /// What went wrong.
    public var kind: Kind
    /// A human-readable explanation, without the offset (``description`` adds it).
    public var message: String
    /// The byte offset in the input at which the problem was found, when known.
    ///
    /// Block errors point at the damaged sequence. Frame errors give the offset at which the
    /// failing `LZ4F_decompress` call started, so the damage is at or shortly after it.
    public var offset: Int?

    /// Creates an error.
    ///
    /// - Parameter kind: what went wrong.
    /// - Parameter message: a human-readable explanation.
    /// - Parameter offset: the byte offset in the input at which the problem was found, if known.
    public init(_ kind: Kind, _ message: String, offset: Int? = nil) {
        self.kind = kind
        self.message = message
        self.offset = offset
    }

    /// The message, prefixed with the kind and followed by the input offset when known, for
    /// example `LZ4 truncated input: frame ends before its end mark (at byte 41)`.
    public var description: String {
        let label: String
        switch kind {
        case .corruptInput: label = "corrupt input"
        case .truncatedInput: label = "truncated input"
        case .outputTooSmall: label = "output too small"
        case .inputTooLarge: label = "input too large"
        case .library(let code, let name): label = "library error \(name) (\(code))"
        }
        if let offset {
            return "LZ4 \(label): \(message) (at byte \(offset))"
        }
        return "LZ4 \(label): \(message)"
    }
}
