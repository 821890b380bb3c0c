/// A record's payload, lent to a reader piece by piece by
/// ``Journal/streamPayloads(directory:io:keyring:_:)``.
///
/// A chunked payload (one save of tens of thousands of objects, ``ChunkedPayload``) comes one
/// decompressed 1 MiB chunk at a time, the next chunks being decompressed on another core
/// meanwhile, instead of whole: a payload of tens of MB is never materialized, which saves
/// the kernel zeroing that much fresh memory first. Any other payload comes in one
/// piece.
///
/// A chunk that does not decompress ends the pieces early. The journal then reports the record
/// as corrupt, as it reports a payload it cannot decompress before lending it, and a reader
/// must discard what it read of it: ``finish()`` says whether that happened.
///
/// ```swift
/// let report = try Journal.streamPayloads(directory: "/var/lib/app/store") { entry, payload in
///     var zeros = 0
///     while let found = payload.withNextPiece({ piece in
///         (0..<piece.byteCount).count { piece.unsafeLoad(fromByteOffset: $0, as: UInt8.self) == 0 }
///     }) { zeros += found }
///     guard payload.finish() else { return }  // does not decompress: reported, ignore it
///     print(entry.sequence, payload.count, zeros)
/// }
/// ```
///
/// Not `Sendable`: the journal reuses one instance from record to record; it and the pieces it
/// lends are valid only during the call they are lent to.
public final class JournalPayload {
    /// The payload's length in bytes, decompressed: the sum of its pieces' lengths.
    public private(set) var count = 0
    /// The pieces lent in order, when the payload is not a chunk stream.
    private var pieces: [UnsafeRawBufferPointer] = []
    /// The index of the piece ``next()`` lends next.
    private var nextPiece = 0
    /// The chunks of a chunked payload, decompressed as they are lent.
    private var chunks: ChunkStream?

    /// A payload lent in the given pieces, in order (for the package's readers written
    /// against this type and their tests); the bytes must stay valid while the payload is read.
    ///
    /// - Parameter pieces: the payload's bytes, in order; empty pieces are skipped.
    package init(pieces: [UnsafeRawBufferPointer]) {
        reset(pieces: pieces)
    }

    /// A payload of `count` bytes whose pieces may end before it, as a chunked payload's do
    /// at a chunk that does not decompress (for the tests of readers).
    init(pieces: [UnsafeRawBufferPointer], count: Int) {
        reset(pieces: pieces)
        self.count = count
    }

    /// An empty payload, for the journal to reset from record to record.
    init() {}

    /// Lends the next bytes of the payload to `body`, right after those lent before; returns
    /// what `body` returns, or nil without calling it at the end or at a chunk that does not
    /// decompress.
    ///
    /// ```swift
    /// var read = 0
    /// while let count = payload.withNextPiece({ $0.byteCount }) { read += count }
    /// ```
    ///
    /// - Parameter body: reads the piece, valid only during the call.
    /// - Returns: what `body` returns; nil when no piece is left.
    /// - Throws: what `body` throws.
    public func withNextPiece<R, Failure: Error>(_ body: (RawSpan) throws(Failure) -> R) throws(Failure) -> R? {
        guard let piece = next() else { return nil }
        return try body(RawSpan(_unsafeBytes: piece))
    }

    /// The next bytes of the payload, right after those the previous call returned (which are
    /// no longer valid); nil at the end, or at a chunk that does not decompress. For the
    /// package's own readers, which hold a piece across calls of their own.
    package func next() -> UnsafeRawBufferPointer? {
        if let chunks { return chunks.next() }
        while nextPiece < pieces.count {
            nextPiece += 1
            if !pieces[nextPiece - 1].isEmpty { return pieces[nextPiece - 1] }
        }
        return nil
    }

    /// Reads what was not read yet and says whether the whole payload decompressed: false when
    /// a chunk does not, so the journal reports the record as corrupt and what was read of it
    /// must be ignored. No piece is lent after it.
    public func finish() -> Bool {
        if let chunks { return chunks.finish() }
        nextPiece = pieces.count
        return pieces.reduce(0) { $0 + $1.count } == count
    }

    /// The rest of the payload in one array (the whole payload before any piece is read), or nil
    /// when a chunk does not decompress; ``finish()`` then returns false.
    public func readRest() -> [UInt8]? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        while let piece = next() { bytes.append(contentsOf: piece) }
        return finish() ? bytes : nil
    }

    /// Why the payload ended early, once ``finish()`` returned false.
    var failure: String? { chunks?.failure }

    /// Lends `pieces` next.
    func reset(pieces: [UnsafeRawBufferPointer]) {
        chunks = nil
        self.pieces = pieces
        nextPiece = 0
        count = pieces.reduce(0) { $0 + $1.count }
    }

    /// Lends one piece next, without allocating.
    func reset(_ bytes: UnsafeRawBufferPointer) {
        chunks = nil
        pieces.removeAll(keepingCapacity: true)
        pieces.append(bytes)
        nextPiece = 0
        count = bytes.count
    }

    /// Lends a chunked payload's chunks next, decompressed as they are read.
    func reset(chunks: ChunkStream, rawLength: Int) {
        self.chunks = chunks
        pieces.removeAll(keepingCapacity: true)
        nextPiece = 0
        count = rawLength
    }
}
