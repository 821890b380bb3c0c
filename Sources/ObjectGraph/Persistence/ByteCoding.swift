internal import GraphJournal

/// Appends little-endian integers, LEB128 varints and byte strings to a growing buffer.
struct ByteWriter {
    var bytes: [UInt8] = []
    /// Where a large payload goes in compressed chunks (``init(streaming:)``): `bytes` then
    /// holds only what was written since the last cut.
    private var stream: PayloadStream?

    init(capacity: Int = 0) { bytes.reserveCapacity(capacity) }

    /// A writer whose bytes go to a ``PayloadStream`` when there are enough of them: a save
    /// calls ``cutIfFull()`` between values and ends with ``finish()``.
    init(streaming capacity: Int) {
        let stream = PayloadStream(capacity: capacity)
        bytes = stream.bytes  // the room it reserved
        self.stream = stream
        self.stream?.bytes = []
    }

    /// Hands whole chunks to the stream once `bytes` holds a chunk's worth (the stream waits
    /// for its threshold before the first cut). One comparison when there is nothing to do.
    @inline(__always)
    mutating func cutIfFull() {
        if bytes.count >= PayloadStream.chunkSize, stream != nil { cut() }
    }

    private mutating func cut() {
        guard var s = stream else { return }
        stream = nil  // `s` the only reference to the stream's buffer: moved, not copied
        s.bytes = bytes
        bytes = []
        s.cutIfFull()
        bytes = s.bytes
        s.bytes = []
        stream = s
    }

    /// The stream with every byte written (``init(streaming:)``).
    mutating func finish() -> PayloadStream {
        var s = stream ?? PayloadStream()
        stream = nil
        s.bytes = bytes
        bytes = []
        return s
    }

    @inline(__always)
    mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    @inline(__always)
    mutating func varint(_ value: Int) { varint(UInt64(value)) }

    /// Zig-zag encodes a signed value so that small magnitudes stay short.
    @inline(__always)
    mutating func signed(_ value: Int64) { varint(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }

    @inline(__always)
    mutating func fixed64(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.appendBytes($0) }
    }

    @inline(__always)
    mutating func fixed32(_ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { bytes.appendBytes($0) }
    }

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    mutating func blob(_ buffer: UnsafeRawBufferPointer) {
        varint(buffer.count)
        bytes.appendBytes(buffer)
    }

    mutating func string(_ s: String) {
        var copy = s
        copy.withUTF8 { blob(UnsafeRawBufferPointer($0)) }
    }

    /// Lets `body` write up to `maxCount` bytes straight into the buffer, at the end; `body`
    /// returns how many it wrote. For long runs of values: one capacity check for all of them
    /// instead of one per appended byte.
    @inline(__always)
    mutating func append(upTo maxCount: Int, _ body: (UnsafeMutableRawPointer) -> Int) {
        guard maxCount > 0 else { return }
        bytes.append(addingCapacity: maxCount) { span in
            span.withUnsafeMutableBufferPointer { destination, initialized in
                initialized = body(UnsafeMutableRawPointer(destination.baseAddress!))
            }
        }
    }

    /// The most bytes a varint takes.
    static let maxVarintCount = 10

    /// Writes `value` as a varint at `p + offset`, advancing `offset`.
    @inline(__always)
    static func putVarint(_ value: UInt64, _ p: UnsafeMutableRawPointer, _ offset: inout Int) {
        var v = value
        while v >= 0x80 {
            p.storeBytes(of: UInt8(truncatingIfNeeded: v) | 0x80, toByteOffset: offset, as: UInt8.self)
            offset += 1
            v >>= 7
        }
        p.storeBytes(of: UInt8(v), toByteOffset: offset, as: UInt8.self)
        offset += 1
    }

    /// Writes `value` zig-zag encoded (``signed(_:)``) at `p + offset`, advancing `offset`.
    @inline(__always)
    static func putSigned(_ value: Int64, _ p: UnsafeMutableRawPointer, _ offset: inout Int) {
        putVarint(UInt64(bitPattern: (value << 1) ^ (value >> 63)), p, &offset)
    }
}

/// Reads what ``ByteWriter`` wrote; every read is bounds-checked and throws on truncated or
/// malformed input, naming the byte offset.
struct ByteReader {
    struct Malformed: Error, CustomStringConvertible {
        let offset: Int
        let reason: String
        var description: String { "malformed payload at byte \(offset): \(reason)" }
    }

    let buffer: UnsafeRawBufferPointer
    var offset = 0

    init(_ buffer: UnsafeRawBufferPointer) { self.buffer = buffer }

    var isAtEnd: Bool { offset >= buffer.count }

    @inline(__always)
    mutating func varint() throws(Malformed) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard offset < buffer.count else { throw Malformed(offset: offset, reason: "truncated varint") }
            let b = buffer[offset]
            offset += 1
            if shift == 63 && b > 1 { throw Malformed(offset: offset - 1, reason: "varint overflows 64 bits") }
            result |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return result }
            shift += 7
            if shift > 63 { throw Malformed(offset: offset, reason: "varint longer than 10 bytes") }
        }
    }

    /// A varint that must fit in `Int` and not exceed `limit`.
    @inline(__always)
    mutating func count(limit: Int = Int(Int32.max)) throws(Malformed) -> Int {
        let start = offset
        let v = try varint()
        guard v <= UInt64(limit) else { throw Malformed(offset: start, reason: "count \(v) exceeds \(limit)") }
        return Int(v)
    }

    @inline(__always)
    mutating func signed() throws(Malformed) -> Int64 {
        let v = try varint()
        return Int64(bitPattern: v >> 1) ^ -Int64(bitPattern: v & 1)
    }

    @inline(__always)
    mutating func fixed64() throws(Malformed) -> UInt64 {
        guard buffer.count - offset >= 8 else { throw Malformed(offset: offset, reason: "truncated 64-bit value") }
        let v = buffer.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
        offset += 8
        return UInt64(littleEndian: v)
    }

    @inline(__always)
    mutating func fixed32() throws(Malformed) -> UInt32 {
        guard buffer.count - offset >= 4 else { throw Malformed(offset: offset, reason: "truncated 32-bit value") }
        let v = buffer.loadUnaligned(fromByteOffset: offset, as: UInt32.self)
        offset += 4
        return UInt32(littleEndian: v)
    }

    mutating func byte() throws(Malformed) -> UInt8 {
        guard offset < buffer.count else { throw Malformed(offset: offset, reason: "truncated byte") }
        defer { offset += 1 }
        return buffer[offset]
    }

    /// A length-prefixed byte string, as a slice of the payload (no copy).
    @inline(__always)
    mutating func blob() throws(Malformed) -> UnsafeRawBufferPointer {
        let start = offset
        let n = try count(limit: buffer.count)
        guard buffer.count - offset >= n else { throw Malformed(offset: start, reason: "byte string of \(n) bytes runs past the end") }
        defer { offset += n }
        return UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + n])
    }

    mutating func string() throws(Malformed) -> String {
        let start = offset
        let b = try blob()
        guard let s = String(validating: b, as: UTF8.self) else { throw Malformed(offset: start, reason: "invalid UTF-8") }
        return s
    }

    /// `count` bits, one per object, as packed bytes.
    mutating func bitmap(_ count: Int) throws(Malformed) -> UnsafeRawBufferPointer {
        let n = (count + 7) / 8
        guard buffer.count - offset >= n else { throw Malformed(offset: offset, reason: "truncated null bitmap") }
        defer { offset += n }
        return UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + n])
    }

    /// Skips `count` fixed-width values of `width` (4 or 8) bytes, failing like that many
    /// ``fixed32()`` or ``fixed64()`` reads: at the first value that does not fit.
    @inline(__always)
    mutating func skipFixed(count: Int, width: Int) throws(Malformed) {
        let available = buffer.count - offset
        guard available / width >= count else {
            throw Malformed(offset: offset + available / width * width, reason: "truncated \(width * 8)-bit value")
        }
        offset += count * width
    }
}
