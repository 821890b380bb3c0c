internal import GraphJournal

/// Reads the journal's payloads: a transaction or base payload, whole or lent piece by piece
/// (``JournalPayload``), and a schema record. The one reader of those formats: every read is
/// bounds-checked and fails with the payload offset and a reason, whatever the pieces.
///
/// Offsets and every bound (lengths, counts limited by the payload's size) are those of the
/// whole payload, whose length is known before its first piece. A read that runs past the
/// current piece continues in the next one; values are skipped or counted (a null bitmap's
/// bits) piece by piece, and a byte string is copied only when it straddles two pieces. The
/// fast paths read the current piece over locals.
///
/// The raw memory it reads (the payload, or the piece being read) is reached only through
/// this type: what it lends out (``withBlob(_:)``) is valid during the call it is lent to.
struct PayloadReader {
    /// A malformation: where in the payload, and what.
    struct Malformed: Error, CustomStringConvertible {
        /// The payload offset of the first byte that could not be read as the format says.
        let offset: Int
        /// What is wrong there.
        let reason: String
        var description: String { "malformed payload at byte \(offset): \(reason)" }
    }

    /// Why a read failed: the payload is malformed, or its pieces ended before its length (a
    /// chunk that does not decompress; the journal reports that).
    enum Failure: Error {
        /// The payload is malformed at an offset.
        case malformed(Malformed)
        /// The pieces ended before the payload's length.
        case piecesEnded
        /// The payload is well-formed there, but what it says breaks a rule of the journal
        /// (``RecordRules``): a serial out of bounds, or a change the objects do not allow.
        case violation(offset: Int, RecordViolation)
    }

    /// The payload whose pieces are read; nil when the reader was given the whole payload.
    private let payload: JournalPayload?
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

    /// A reader of a whole payload, in one buffer that stays valid while it is read.
    init(_ bytes: UnsafeRawBufferPointer) {
        payload = nil
        piece = bytes
        count = bytes.count
    }

    /// Reads a whole payload held in an array.
    static func read<T>(_ bytes: [UInt8], _ body: (inout PayloadReader) throws(Failure) -> T) throws(Failure) -> T {
        let result: Result<T, Failure> = bytes.withUnsafeBytes { buffer in
            var r = PayloadReader(buffer)
            do throws(Failure) { return .success(try body(&r)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// The payload offset of the next byte read.
    var offset: Int { pieceStart + position }

    /// Whether every byte of the payload was read.
    var isAtEnd: Bool { offset >= count }

    /// The failure for a malformation at payload offset `offset`.
    static func malformed(_ offset: Int, _ reason: String) -> Failure {
        .malformed(Malformed(offset: offset, reason: reason))
    }

    /// The failure for a record that breaks `violation` at payload offset `offset`.
    static func violation(_ offset: Int, _ violation: RecordViolation) -> Failure {
        .violation(offset: offset, violation)
    }

    /// The bytes of the payload not read yet: what bounds every count read next.
    var remaining: Int { count - offset }

    /// A serial (a varint) within `1...RecordRules.maximumSerial`.
    @inline(__always)
    mutating func serial() throws(Failure) -> UInt64 {
        let start = offset
        let v = try varint()
        guard RecordRules.isValidSerial(v) else { throw Self.violation(start, RecordRules.serialOutOfBounds(v)) }
        return v
    }

    /// Moves to the next non-empty piece, when the current one is read to its end.
    private mutating func advance() throws(Failure) {
        pieceStart += piece.count
        position = 0
        piece = UnsafeRawBufferPointer(start: nil, count: 0)
        while piece.isEmpty {
            guard let next = payload?.next() else { throw .piecesEnded }
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

    /// One byte.
    mutating func byte() throws(Failure) -> UInt8 {
        if position < piece.count {
            defer { position += 1 }
            return piece[position]
        }
        guard let b = try byteFromNextPiece() else { throw Self.malformed(offset, "truncated byte") }
        return b
    }

    /// A LEB128 varint of at most 10 bytes that fits in 64 bits.
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

    /// A zig-zag varint: `0, -1, 1, -2, …` as `0, 1, 2, 3, …`.
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
    /// first read that fails, or with "serial N" at the delta that makes a serial outside
    /// `1...RecordRules.maximumSerial`.
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
                    guard RecordRules.isValidSerial(UInt64(bitPattern: previous)) else {
                        position = p
                        throw Self.violation(pieceStart + start, RecordRules.serialOutOfBounds(previous))
                    }
                    out[i] = UInt64(previous)
                    i += 1
                }
                position = p
                if i == out.count { return }
            }
            let start = offset
            previous = previous &+ (try signed())
            guard RecordRules.isValidSerial(UInt64(bitPattern: previous)) else {
                throw Self.violation(start, RecordRules.serialOutOfBounds(previous))
            }
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

    /// Skips a length-prefixed byte string, failing as ``withBlob(_:)`` does; returns its
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
    mutating func skipBlobs(
        _ values: Int, length: Int? = nil, wrongLength: (Int) -> String = { _ in "" }
    ) throws(Failure) {
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
    /// that many ``fixed64()`` or ``fixed32()`` reads do: at the first value that does not fit.
    @inline(__always)
    mutating func skipFixed(count values: Int, width: Int) throws(Failure) {
        let available = count - offset
        guard available / width >= values else {
            throw Self.malformed(offset + available / width * width, "truncated \(width * 8)-bit value")
        }
        try skip(values * width)
    }
}

// MARK: - Values and the payload's structures

extension PayloadReader {
    /// A little-endian integer of `T`'s width (4 or 8 bytes).
    @inline(__always)
    private mutating func fixed<T: FixedWidthInteger & UnsignedInteger>(_: T.Type) throws(Failure) -> T {
        let width = MemoryLayout<T>.size
        if piece.count - position >= width {
            defer { position += width }
            return T(littleEndian: piece.loadUnaligned(fromByteOffset: position, as: T.self))
        }
        guard count - offset >= width else { throw Self.malformed(offset, "truncated \(width * 8)-bit value") }
        var v: T = 0
        for i in 0..<width { v |= T(try byte()) << (8 * i) }
        return v
    }

    /// 8 bytes, little-endian.
    @inline(__always)
    mutating func fixed64() throws(Failure) -> UInt64 { try fixed(UInt64.self) }

    /// 4 bytes, little-endian.
    @inline(__always)
    mutating func fixed32() throws(Failure) -> UInt32 { try fixed(UInt32.self) }

    /// Reads a length-prefixed byte string and lends its bytes to `body` (valid only during the
    /// call). No copy unless the string straddles two pieces.
    @inline(__always)
    mutating func withBlob<T>(_ body: (UnsafeRawBufferPointer) throws(Failure) -> T) throws(Failure) -> T {
        // The common case: a string under 128 bytes (a one-byte length) inside this piece.
        if position < piece.count {
            let n = Int(piece[position])
            if n < 0x80, piece.count - position - 1 >= n {
                let start = position + 1
                position = start + n
                return try body(UnsafeRawBufferPointer(rebasing: piece[start..<(start + n)]))
            }
        }
        return try withBlobInGeneral(body)
    }

    /// ``withBlob(_:)`` for a longer string, one that straddles pieces, or a malformed length.
    @inline(never)
    private mutating func withBlobInGeneral<T>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> T
    ) throws(Failure) -> T {
        let start = offset
        let n = try self.count(limit: count)
        guard count - offset >= n else { throw Self.malformed(start, "byte string of \(n) bytes runs past the end") }
        if piece.count - position >= n {
            defer { position += n }
            return try body(UnsafeRawBufferPointer(rebasing: piece[position..<(position + n)]))
        }
        var bytes: [UInt8] = []
        try gather(n, appendingTo: &bytes)
        let result: Result<T, Failure> = bytes.withUnsafeBytes { buffer in
            do throws(Failure) { return .success(try body(buffer)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Appends the next `n` bytes, which the caller checked the payload holds, piece by piece.
    private mutating func gather(_ n: Int, appendingTo bytes: inout [UInt8]) throws(Failure) {
        bytes.reserveCapacity(bytes.count + n)
        var left = n
        while left > 0 {
            if position == piece.count { try advance() }
            let take = min(left, piece.count - position)
            bytes.append(contentsOf: piece[position..<(position + take)])
            position += take
            left -= take
        }
    }

    /// A length-prefixed UTF-8 string.
    mutating func string() throws(Failure) -> String {
        let start = offset
        return try withBlob { bytes throws(Failure) in
            guard let s = String(validating: bytes, as: UTF8.self) else { throw Self.malformed(start, "invalid UTF-8") }
            return s
        }
    }

    /// A column's null flag: 0 (no bitmap follows) or 1 (a bitmap follows).
    @inline(__always)
    mutating func nullFlag() throws(Failure) -> Bool {
        let start = offset
        let flag = try byte()
        guard flag <= 1 else { throw Self.malformed(start, "null flag \(flag)") }
        return flag == 1
    }

    /// Reads a null bitmap of `bits` bits (1 = nil) into `storage` (its capacity reused) and
    /// returns it; bits past `bits` in its last byte are ignored.
    mutating func nullBitmap(_ bits: Int, into storage: inout [UInt8]) throws(Failure) -> NullBitmap {
        let n = (bits + 7) / 8
        guard count - offset >= n else { throw Self.malformed(offset, "truncated null bitmap") }
        storage.removeAll(keepingCapacity: true)
        try gather(n, appendingTo: &storage)
        if bits % 8 != 0 { storage[n - 1] &= UInt8(1 << (bits % 8)) - 1 }
        return NullBitmap(bytes: storage)
    }

    /// Reads a serial list (a count, then zig-zag deltas from 0, each serial within
    /// `1...RecordRules.maximumSerial`), appending its serials to `serials`; returns how many.
    /// The count is bounded by the bytes left (each serial takes at least one).
    @inline(__always)
    mutating func serialList(appendingTo serials: inout [UInt64]) throws(Failure) -> Int {
        let n = try self.count(limit: remaining)
        try serialList(count: n, appendingTo: &serials)
        return n
    }

    /// Reads the `n` deltas of a serial list whose count was read (and bounded) by the caller,
    /// appending its serials to `serials`.
    @inline(__always)
    mutating func serialList(count n: Int, appendingTo serials: inout [UInt64]) throws(Failure) {
        guard n <= remaining else { throw Self.malformed(offset, "\(n) serials in \(remaining) bytes") }
        let first = serials.count
        serials.append(contentsOf: repeatElement(0, count: n))
        try serials.withUnsafeMutableBufferPointer { out throws(Failure) in
            try readSerials(into: UnsafeMutableBufferPointer(rebasing: out[first...]))
        }
    }

    /// Reads the `n` deltas of a serial list as ``serialList(count:appendingTo:)`` does, with
    /// the same failures, but returns the run `first...last` without storing a serial when
    /// they are consecutive (as a save of new objects writes them). Returns the run, or nil
    /// (then the serials were appended).
    mutating func serialRun(count n: Int, appendingTo serials: inout [UInt64]) throws(Failure) -> ClosedRange<UInt64>? {
        guard n > 0 else { return nil }
        guard n <= remaining else { throw Self.malformed(offset, "\(n) serials in \(remaining) bytes") }
        let start = offset
        let first = try signed()  // the first delta is from 0
        guard RecordRules.isValidSerial(UInt64(bitPattern: first)) else {
            throw Self.violation(start, RecordRules.serialOutOfBounds(first))
        }
        // Deltas of +1 after it are skipped without storing, as far as the largest serial; past
        // it the rest is read as a list, whose reads report the serial out of bounds.
        let room = Int(RecordRules.maximumSerial - UInt64(first))
        let k = try skipSerialIncrements(limit: min(n - 1, room))
        if k == n - 1 { return UInt64(first)...UInt64(first + Int64(k)) }
        serials.append(contentsOf: UInt64(first)...UInt64(first + Int64(k)))
        let rest = serials.count
        serials.append(contentsOf: repeatElement(0, count: n - 1 - k))
        try serials.withUnsafeMutableBufferPointer { out throws(Failure) in
            try readSerials(into: UnsafeMutableBufferPointer(rebasing: out[rest...]), after: first + Int64(k))
        }
        return nil
    }

    /// One value of a fixed-width or varint encoding, as its cell's bits (a byte string is
    /// skipped, and its length returned).
    @inline(__always)
    mutating func cell(_ encoding: PayloadEncoding) throws(Failure) -> UInt64 {
        switch encoding {
        case .bool:
            let start = offset
            let b = try byte()
            guard b <= 1 else { throw Self.malformed(start, "boolean byte \(b)") }
            return UInt64(b)
        case .signedVarint: return UInt64(bitPattern: try signed())
        case .varint: return try varint()
        case .fixed64: return try fixed64()
        case .fixed32: return UInt64(try fixed32())
        case .bytes, .bytes16, .stringList, .intList: return UInt64(try withBytesValue(encoding) { $0.count })
        }
    }

    /// Reads a value of a byte-string encoding and lends its bytes to `body`, checking a
    /// ``PayloadEncoding/bytes16`` string's length and that a list cell decodes
    /// (``ListCoding/validate(_:_:)``; a violation whose entity and attribute the decoder fills
    /// in, ``PayloadDecoder``).
    @inline(__always)
    mutating func withBytesValue<T>(
        _ encoding: PayloadEncoding, _ body: (UnsafeRawBufferPointer) throws(Failure) -> T
    ) throws(Failure) -> T {
        let start = offset
        return try withBlob { bytes throws(Failure) in
            switch encoding {
            case .bytes16 where bytes.count != 16: throw Self.malformed(start, "UUID of \(bytes.count) bytes")
            case .stringList, .intList:
                if let problem = ListCoding.validate(bytes, encoding == .stringList ? .stringList : .intList) {
                    throw Self.violation(start, RecordRules.malformedList(problem))
                }
            default: break
            }
            return try body(bytes)
        }
    }

    /// One value of `type`, built.
    mutating func value(_ type: AttributeType) throws(Failure) -> AttributeValue {
        let encoding = type.payloadEncoding
        switch encoding {
        case .bytes, .bytes16, .stringList, .intList:
            return try withBytesValue(encoding) { AttributeValue.decode(.bytes($0), as: type) }
        default: return AttributeValue.decode(.fixed(try cell(encoding)), as: type)
        }
    }

    /// Skips `values` values of an encoding, failing where reading them would, with the same
    /// offset and reason.
    @inline(__always)
    mutating func skipValues(_ encoding: PayloadEncoding, count values: Int) throws(Failure) {
        switch encoding {
        case .bool:
            for _ in 0..<values { _ = try cell(.bool) }
        case .signedVarint, .varint:
            try skipVarints(values)
        case .fixed64:
            try skipFixed(count: values, width: 8)
        case .fixed32:
            try skipFixed(count: values, width: 4)
        case .bytes:
            try skipBlobs(values)
        case .bytes16:
            try skipBlobs(values, length: 16) { "UUID of \($0) bytes" }
        case .stringList, .intList:
            // Each checked: a list cell that does not decode is refused wherever it is read.
            for _ in 0..<values { try withBytesValue(encoding) { _ in } }
        }
    }
}

/// A column's null bitmap, one bit per inserted object (1 = nil), read by
/// ``PayloadReader/nullBitmap(_:into:)``.
struct NullBitmap {
    /// The bitmap's bytes; bits past the column's length are zero.
    let bytes: [UInt8]

    /// How many values are nil.
    var nullCount: Int {
        bytes.withUnsafeBytes { b in
            var total = 0
            var i = 0
            while b.count - i >= 8 {
                total += b.loadUnaligned(fromByteOffset: i, as: UInt64.self).nonzeroBitCount
                i += 8
            }
            while i < b.count {
                total += b[i].nonzeroBitCount
                i += 1
            }
            return total
        }
    }

    /// Whether value `i` is nil.
    @inline(__always)
    func isNull(_ i: Int) -> Bool { bytes[i &>> 3] & (1 &<< UInt8(i & 7)) != 0 }
}
