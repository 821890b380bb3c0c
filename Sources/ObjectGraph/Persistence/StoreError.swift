/// An error opening, saving or compacting a store, naming the file, byte offset, entity or
/// attribute concerned.
public struct StoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure.
    public enum Code: String, Sendable, Hashable {
        /// A record's payload does not decode (a bug or damage the checksum did not catch).
        case corruptPayload
        /// The journal was written with a schema the current model cannot read.
        case incompatibleSchema
        /// The journal layer failed (corruption, lock held by another process, I/O error).
        case journal
        /// The store was used after `close()`.
        case closed
    }

    /// The kind of failure.
    public let code: Code
    /// What went wrong, with file, offset, entity and attribute where known.
    public let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
