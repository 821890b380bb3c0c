internal import GraphJournal

/// Appends little-endian integers, LEB128 varints and byte strings to a growing buffer: the
/// writer of the payloads ``PayloadReader`` reads.
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

    /// The bytes `value` takes as a varint.
    static func varintSize(_ value: UInt64) -> Int {
        var v = value
        var n = 1
        while v >= 0x80 {
            v >>= 7
            n += 1
        }
        return n
    }

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
