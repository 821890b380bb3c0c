internal import GraphJournal

/// Reads a payload lent piece by piece (``JournalPayload``) as ``ByteReader`` reads one buffer:
/// the same reads, failing at the same payload offsets with the same reasons.
///
/// Offsets and every bound (lengths, counts limited by the payload's size) are those of the
/// whole payload, whose length is known before its first piece. A read that runs past the
/// current piece continues in the next one; values are skipped or counted (a null bitmap's
/// bits) piece by piece, so nothing is ever copied to make it contiguous. The fast paths are
/// ``ByteReader``'s, on the current piece.
struct PayloadReader {
    /// Why a read failed: the payload is malformed, or its pieces ended before its length (a
    /// chunk that does not decompress; the journal reports that).
    enum Failure: Error {
        /// The payload is malformed at an offset.
        case malformed(ByteReader.Malformed)
        /// The pieces ended before the payload's length.
        case piecesEnded
    }

    /// The payload whose pieces are read.
    private let payload: JournalPayload
    /// The payload's length.
    let count: Int
    /// The piece being read (empty before the first).
    private var piece = UnsafeRawBufferPointer(start: nil, count: 0)
    /// The payload offset of `piece`'s first byte.
    private var pieceStart = 0
    /// The read position in `piece`.
    private var position = 0

    /// A reader of `payload` from its first piece on.
    init(_ payload: JournalPayload) {
        self.payload = payload
        count = payload.count
    }

    /// The payload offset of the next byte read.
    var offset: Int { pieceStart + position }

    /// Whether every byte of the payload was read.
    var isAtEnd: Bool { offset >= count }

    /// The failure for a malformation at payload offset `offset`.
    private static func malformed(_ offset: Int, _ reason: String) -> Failure {
        .malformed(ByteReader.Malformed(offset: offset, reason: reason))
    }

    /// Moves to the next non-empty piece, when the current one is read to its end.
    private mutating func advance() throws(Failure) {
        pieceStart += piece.count
        position = 0
        piece = UnsafeRawBufferPointer(start: nil, count: 0)
        while piece.isEmpty {
            guard let next = payload.next() else { throw .piecesEnded }
            piece = next
        }
    }

    /// The next byte when the current piece has none left, or nil at the payload's end.
    @inline(never)
    private mutating func byteFromNextPiece() throws(Failure) -> UInt8? {
        guard offset < count else { return nil }
        try advance()
        position = 1
        return piece[0]
    }

    /// One byte, as ``ByteReader/byte()``.
    mutating func byte() throws(Failure) -> UInt8 {
        if position < piece.count {
            defer { position += 1 }
            return piece[position]
        }
        guard let b = try byteFromNextPiece() else { throw Self.malformed(offset, "truncated byte") }
        return b
    }

    /// A LEB128 varint, as ``ByteReader/varint()``.
    @inline(__always)
    mutating func varint() throws(Failure) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b: UInt8
            if position < piece.count {
                b = piece[position]
                position += 1
            } else {
                guard let next = try byteFromNextPiece() else { throw Self.malformed(offset, "truncated varint") }
                b = next
            }
            if shift == 63 && b > 1 { throw Self.malformed(offset - 1, "varint overflows 64 bits") }
            result |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return result }
            shift += 7
            if shift > 63 { throw Self.malformed(offset, "varint longer than 10 bytes") }
        }
    }

    /// A varint that must fit in `Int` and not exceed `limit`.
    @inline(__always)
    mutating func count(limit: Int = Int(Int32.max)) throws(Failure) -> Int {
        let start = offset
        let v = try varint()
        guard v <= UInt64(limit) else { throw Self.malformed(start, "count \(v) exceeds \(limit)") }
        return Int(v)
    }

    /// A zig-zag varint, as ``ByteReader/signed()``.
    @inline(__always)
    mutating func signed() throws(Failure) -> Int64 {
        let v = try varint()
        return Int64(bitPattern: v >> 1) ^ -Int64(bitPattern: v & 1)
    }

    /// Skips `n` bytes, which the caller checked the payload holds.
    @inline(__always)
    private mutating func skip(_ n: Int) throws(Failure) {
        var n = n
        while n > piece.count - position {
            n -= piece.count - position
            position = piece.count
            try advance()
        }
        position += n
    }

    /// Reads a serial list's deltas (zig-zag varints) into `out`, each serial the running sum
    /// of the deltas from 0, failing as the transaction codec's serial reading does: at the
    /// first read that fails, or with "serial N" at the delta that makes a serial below 1.
    ///
    /// The common case, a varint of at most 9 bytes with 10 bytes left in the piece, is
    /// decoded over locals (the reader's state stays in registers); the others go through
    /// ``signed()``.
    mutating func readSerials(into out: UnsafeMutableBufferPointer<UInt64>, after first: Int64 = 0) throws(Failure) {
        var previous = first
        var i = 0
        while i < out.count {
            if let base = piece.baseAddress {
                var p = position
                let end = piece.count
                while i < out.count, end - p >= 10 {
                    let start = p
                    var v = UInt64(base.load(fromByteOffset: p, as: UInt8.self))
                    p += 1
                    if v >= 0x80 {
                        v &= 0x7F
                        var shift: UInt64 = 7
                        var b: UInt64
                        repeat {
                            b = UInt64(base.load(fromByteOffset: p, as: UInt8.self))
                            p += 1
                            v |= (b & 0x7F) << shift
                            shift += 7
                        } while b >= 0x80 && shift < 63
                        if b >= 0x80 {
                            p = start  // ten bytes or more: the general path says what is wrong
                            break
                        }
                    }
                    previous = previous &+ (Int64(bitPattern: v >> 1) ^ -Int64(bitPattern: v & 1))
                    guard previous >= 1 else {
                        position = p
                        throw Self.malformed(pieceStart + start, "serial \(previous)")
                    }
                    out[i] = UInt64(previous)
                    i += 1
                }
                position = p
                if i == out.count { return }
            }
            let start = offset
            previous = previous &+ (try signed())
            guard previous >= 1 else { throw Self.malformed(start, "serial \(previous)") }
            out[i] = UInt64(previous)
            i += 1
        }
    }

    /// Skips up to `limit` serial deltas of +1 (the byte 2: a zig-zag varint), stopping before
    /// any other byte or at the payload's end; returns how many it skipped. Never fails: each
    /// byte it skips is a valid delta that ``readSerials(into:after:)`` would have read.
    mutating func skipSerialIncrements(limit: Int) throws(Failure) -> Int {
        var skipped = 0
        while skipped < limit {
            if position == piece.count {
                guard offset < count else { return skipped }
                try advance()
            }
            guard let base = piece.baseAddress else { return skipped }
            var p = position
            let end = min(piece.count, p + (limit - skipped))
            while p < end, base.load(fromByteOffset: p, as: UInt8.self) == 2 { p += 1 }
            skipped += p - position
            let stopped = p < piece.count
            position = p
            if stopped { return skipped }
        }
        return skipped
    }

    /// Skips a length-prefixed byte string, failing as ``ByteReader/blob()`` does; returns its
    /// length.
    @inline(__always)
    mutating func skipBlob() throws(Failure) -> Int {
        let start = offset
        let n = try count(limit: count)
        guard count - offset >= n else { throw Self.malformed(start, "byte string of \(n) bytes runs past the end") }
        try skip(n)
        return n
    }

    /// Skips `values` length-prefixed byte strings, failing where that many ``skipBlob()``
    /// calls would; with `length`, each must be that long (a UUID), else the failure names the
    /// string's offset and `wrongLength` its length.
    ///
    /// The common case, a string under 128 bytes (a one-byte length) that ends inside the
    /// current piece, is one load and one add in a loop over locals; anything else (a longer
    /// string, a piece boundary, a malformed length) goes through ``skipBlob()``.
    @inline(__always)
    mutating func skipBlobs(_ values: Int, length: Int? = nil, wrongLength: (Int) -> String = { _ in "" }) throws(Failure) {
        var left = values
        while left > 0 {
            if length == nil, let base = piece.baseAddress {
                var p = position
                let end = piece.count
                while left > 0 && p < end {
                    let n = Int(base.load(fromByteOffset: p, as: UInt8.self))
                    guard n < 0x80, end - p > n else { break }
                    p += 1 + n
                    left -= 1
                }
                position = p
                if left == 0 { return }
            }
            let start = offset
            let n = try skipBlob()
            if let length, n != length { throw Self.malformed(start, wrongLength(n)) }
            left -= 1
        }
    }

    /// Skips `values` varints, failing where that many ``varint()`` calls would.
    ///
    /// The common case, a varint that ends inside the current piece within 9 bytes (so it
    /// cannot overflow), is scanned over locals; anything else goes through ``varint()``.
    @inline(__always)
    mutating func skipVarints(_ values: Int) throws(Failure) {
        var left = values
        while left > 0 {
            if let base = piece.baseAddress {
                var p = position
                let end = piece.count
                scan: while left > 0 {
                    var q = p
                    while true {
                        guard q < end, q - p < 9 else { break scan }
                        let b = base.load(fromByteOffset: q, as: UInt8.self)
                        q += 1
                        if b < 0x80 { break }
                    }
                    p = q
                    left -= 1
                }
                position = p
                if left == 0 { return }
            }
            _ = try varint()
            left -= 1
        }
    }

    /// Skips `count` fixed-width values of `width` bytes, failing as
    /// ``ByteReader/skipFixed(count:width:)`` does.
    @inline(__always)
    mutating func skipFixed(count values: Int, width: Int) throws(Failure) {
        let available = count - offset
        guard available / width >= values else {
            throw Self.malformed(offset + available / width * width, "truncated \(width * 8)-bit value")
        }
        try skip(values * width)
    }

    /// Reads a null bitmap of `bits` bits (``ByteReader/bitmap(_:)``) and returns how many of
    /// them are set; bits past `bits` in its last byte are ignored, as decoding ignores them.
    mutating func setBitsOfBitmap(_ bits: Int) throws(Failure) -> Int {
        let n = (bits + 7) / 8
        guard count - offset >= n else { throw Self.malformed(offset, "truncated null bitmap") }
        var total = 0
        var left = n
        var last: UInt8 = 0
        while left > 0 {
            if position == piece.count { try advance() }
            let take = min(left, piece.count - position)
            let bytes = UnsafeRawBufferPointer(rebasing: piece[position..<(position + take)])
            var i = 0
            while take - i >= 8 {
                total += bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self).nonzeroBitCount
                i += 8
            }
            while i < take {
                total += bytes[i].nonzeroBitCount
                i += 1
            }
            last = bytes[take - 1]
            position += take
            left -= take
        }
        if bits % 8 != 0 { total -= (last >> UInt8(bits % 8)).nonzeroBitCount }
        return total
    }
}
