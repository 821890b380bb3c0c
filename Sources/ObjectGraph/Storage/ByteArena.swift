import Foundation

// The arena that holds variable-length values, and the reads of raw bytes that go with it:
// ``ArenaBytes`` (many values in one closure), the key hasher's byte strings, and a `memcpy`
// append to a byte array. Code elsewhere reaches the bytes through these named operations.

/// A reference to bytes in a ``ByteArena``, packed into one 64-bit cell: the offset in the
/// high 40 bits, the length in the low 24. Lengths of 2^24 − 1 bytes or more store the marker
/// `0xFFFFFF` and put the real length as a 64-bit prefix in front of the bytes.
struct ArenaRef {
    static let lengthBits: UInt64 = 24
    static let longMarker: UInt64 = (1 << 24) - 1

    let bits: UInt64

    init(_ bits: UInt64) { self.bits = bits }

    init(offset: Int, length: Int) {
        bits = UInt64(offset) << Self.lengthBits | UInt64(length)
    }

    var offset: Int { Int(bits >> Self.lengthBits) }
    var rawLength: Int { Int(bits & Self.longMarker) }
    var isLong: Bool { bits & Self.longMarker == Self.longMarker }

    /// The byte count, without reading a long value's prefix (an approximation used only
    /// for garbage accounting).
    var length: Int { isLong ? Int(Self.longMarker) : rawLength }
}

/// An append-only byte buffer holding the variable-length attribute values of one entity.
///
/// Values are never modified in place: a new value is appended and the old bytes become
/// garbage, so a before-image stays valid for the whole transaction and rollback simply
/// truncates the buffer. The entity table compacts it after a save when most of it is garbage.
struct ByteArena {
    /// The arena's memory: `count` bytes in use, room for `capacity`. A class so that it can
    /// free its memory; one table owns one arena, which is never copied (only moved), so the
    /// reference semantics never show. Written through a raw pointer, so that an append is a
    /// bounds check and a `memcpy`: through `Array.append` it cost about 125 instructions per
    /// string (uniqueness and capacity checks, the append machinery; callgrind).
    ///
    /// Grown with `realloc`: a large block is moved by remapping its pages (glibc's `mremap`),
    /// neither copied nor touched again, and room not yet used costs no memory. Allocating a
    /// new block and copying, as before, touched about twice the final size in fresh pages: a
    /// 1M import's 40 MB of strings took 26k page faults instead of 10k (perf), each ~1.4 µs
    /// on this VM.
    private final class Storage {
        var base: UnsafeMutableRawPointer?
        var capacity = 0

        deinit { free(base) }

        func grow(to length: Int, keeping count: Int) {
            guard let grown = realloc(base, length) else {
                // Out of memory: as Swift's own allocations do, stop rather than corrupt.
                preconditionFailure("ByteArena: cannot allocate \(length) bytes")
            }
            base = grown
            capacity = length
        }
    }

    private let storage = Storage()
    /// The arena's length in bytes.
    private(set) var count = 0
    /// Where the bytes start now: the storage's address, copied here by every growth. A table
    /// reads its own arena through this stored field and ``count`` (``bytes(_:base:count:)``)
    /// because a method of the arena takes a copy of it, which retains and releases the
    /// storage around the read: a pair of atomic operations per string read. Only the arena
    /// that grew has the new address, so only an arena's owner reads it (the copies that read
    /// handles take go through ``withBytes(_:_:)``).
    private(set) var unretainedBase: UnsafeMutableRawPointer?
    /// The bytes it has room for before it grows.
    var capacity: Int { storage.capacity }
    /// Bytes no live row references any more (an estimate maintained by the table).
    var garbage = 0

    mutating func reserve(_ n: Int) {
        if n > storage.capacity { grow(to: n) }
    }

    /// Makes room for at least `n` more bytes, growing geometrically (replay calls this once
    /// per record with an upper bound; reserving exactly each time would copy the arena per
    /// record).
    mutating func reserveAdditional(_ n: Int) {
        let needed = count + n
        guard needed > storage.capacity else { return }
        grow(to: max(needed, storage.capacity * 2))
    }

    private mutating func grow(to length: Int) {
        storage.grow(to: length, keeping: count)
        unretainedBase = storage.base
    }

    /// Appends `buffer` and returns its reference.
    mutating func append(_ buffer: UnsafeRawBufferPointer) -> UInt64 {
        let offset = count
        let long = UInt64(buffer.count) >= ArenaRef.longMarker
        let needed = buffer.count + (long ? 8 : 0)
        if offset + needed > storage.capacity {
            grow(to: max(offset + needed, 2 * storage.capacity, 64))
        }
        guard let base = storage.base else { return ArenaRef(offset: offset, length: 0).bits }  // capacity ≥ 64
        var at = offset
        if long {
            base.storeBytes(of: UInt64(buffer.count).littleEndian, toByteOffset: at, as: UInt64.self)
            at += 8
        }
        if let source = buffer.baseAddress { (base + at).copyMemory(from: source, byteCount: buffer.count) }
        count = offset + needed
        if count > warmedTo { warmAhead() }
        return ArenaRef(offset: offset, length: long ? Int(ArenaRef.longMarker) : buffer.count).bits
    }

    /// Appends the value `ref` points to in another arena's bytes; returns its reference here.
    mutating func append(_ source: ArenaBytes, _ ref: ArenaRef) -> UInt64 { append(source.bytes(ref)) }

    /// Calls `body` with the bytes `ref` points to.
    func withBytes<R>(_ ref: ArenaRef, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(ArenaBytes(all).bytes(ref))
    }

    /// The bytes `ref` points to in the arena whose ``unretainedBase`` and ``count`` are `base`
    /// and `count`. Valid while that arena is neither grown nor released.
    @inline(__always)
    static func bytes(_ ref: ArenaRef, base: UnsafeMutableRawPointer?, count: Int) -> UnsafeRawBufferPointer {
        ArenaBytes(UnsafeRawBufferPointer(start: base, count: count)).bytes(ref)
    }

    /// Calls `body` with a view of the whole arena, for reading many values.
    @inline(__always)
    func read<R, E: Error>(_ body: (ArenaBytes) throws(E) -> R) throws(E) -> R {
        try withExtendedLifetime(storage) { () throws(E) -> R in try body(ArenaBytes(all)) }
    }

    /// Past this length, an append has the next pages warmed (``warmAhead()``).
    private var warmedTo = 0
    /// How far ahead of the bytes in use the arena has pages warmed.
    static let warmWindow = 4 << 20

    /// Has another core fault in up to ``warmWindow`` bytes of the room past the bytes in use
    /// (``PageWarmer``), and sets the next mark half a window on. An arena filled in bulk (a
    /// replay, an import) thus finds its pages mapped, and holds at most a window of warmed
    /// pages it may never use.
    @inline(never)
    private mutating func warmAhead() {
        let end = min(storage.capacity, count + Self.warmWindow)
        warmedTo = max(count + (end - count) / 2, count + 1)
        guard let base = storage.base, end - count >= PageWarmer.minimumBytes else {
            warmedTo = max(warmedTo, storage.capacity)
            return
        }
        PageWarmer.warm(UnsafeRawPointer(base) + count, bytes: end - count, hugePages: false)
    }

    /// Where the bytes start now; for prefetch hints only (it moves when the arena grows).
    var baseAddress: UnsafeRawPointer? { storage.base.map { UnsafeRawPointer($0) } }

    /// The bytes in use. Valid while the arena is neither grown nor released.
    private var all: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: storage.base, count: count) }

    /// Whether the bytes at `ref` equal `other`.
    func equal(_ ref: ArenaRef, _ other: UnsafeRawBufferPointer) -> Bool {
        withBytes(ref) { mine in
            guard mine.count == other.count else { return false }
            guard let a = mine.baseAddress, let b = other.baseAddress else { return true }  // both empty
            return memcmp(a, b, mine.count) == 0
        }
    }

    /// Whether the bytes at `ref` equal `other`, in the arena whose ``unretainedBase`` and
    /// ``count`` are `base` and `count` (for the arena's owner: see ``unretainedBase``).
    @inline(__always)
    static func equal(
        _ ref: ArenaRef, _ other: UnsafeRawBufferPointer, base: UnsafeMutableRawPointer?, count: Int
    ) -> Bool {
        let mine = bytes(ref, base: base, count: count)
        guard mine.count == other.count else { return false }
        guard let a = mine.baseAddress, let b = other.baseAddress else { return true }  // both empty
        return memcmp(a, b, mine.count) == 0
    }

    /// Whether the bytes at two references are equal.
    func equal(_ a: ArenaRef, _ b: ArenaRef) -> Bool {
        withBytes(b) { equal(a, $0) }
    }

    /// Gives back the room past the bytes in use (`realloc` to the length), when it is more
    /// than a few bytes.
    mutating func shrinkToFit() {
        guard storage.capacity > max(count, 64) + 64 else { return }
        grow(to: max(count, 64))
    }

    /// Discards everything after `count` bytes (rollback).
    mutating func truncate(to count: Int, garbage: Int) {
        self.count = min(self.count, count)  // the bytes past it are room to append into again
        self.garbage = garbage
    }
}

/// A whole arena's bytes for the span of one closure (``ByteArena/read(_:)``): the values its
/// references point to, read without a call per value. Valid only inside that closure, and
/// only while nothing appends to the arena.
struct ArenaBytes {
    /// The arena's bytes in use.
    private let all: UnsafeRawBufferPointer

    /// A view of `all`, an arena's bytes in use.
    fileprivate init(_ all: UnsafeRawBufferPointer) { self.all = all }

    /// The bytes `ref` points to.
    @inline(__always)
    fileprivate func bytes(_ ref: ArenaRef) -> UnsafeRawBufferPointer {
        var start = ref.offset
        var length = ref.rawLength
        if ref.isLong {
            length = Int(UInt64(littleEndian: all.loadUnaligned(fromByteOffset: start, as: UInt64.self)))
            start += 8
        }
        return UnsafeRawBufferPointer(rebasing: all[start..<start + length])
    }

    /// The length in bytes of the value at `ref`.
    @inline(__always)
    func count(_ ref: ArenaRef) -> Int { bytes(ref).count }

    /// The value at `ref` decoded as UTF-8.
    func string(_ ref: ArenaRef) -> String { String(decoding: bytes(ref), as: UTF8.self) }

    /// Writes the value at `ref` at `p + offset` as a payload blob (its length as a varint,
    /// then its bytes) and advances `offset`; the caller has made room for
    /// `count(ref) + ByteWriter.maxVarintCount` bytes.
    @inline(__always)
    func putBlob(_ ref: ArenaRef, _ p: UnsafeMutableRawPointer, _ offset: inout Int) {
        let value = bytes(ref)
        ByteWriter.putVarint(UInt64(value.count), p, &offset)
        if let source = value.baseAddress, value.count > 0 {
            (p + offset).copyMemory(from: source, byteCount: value.count)
            offset += value.count
        }
    }

    /// How the UTF-8 at `ref` orders against `utf8` when the bytes decide it: equal bytes, or
    /// byte order when both sides are ASCII (`utf8IsASCII` says so of `utf8`); otherwise
    /// `.undecided`, and only a `String` comparison can tell (canonical equivalence, Unicode
    /// scalar order). `ArenaRef(0)` is the empty string.
    @inline(__always)
    func byteOrder(of ref: ArenaRef, against utf8: [UInt8], utf8IsASCII: Bool) -> ByteOrder {
        let stored = bytes(ref)
        let n = min(stored.count, utf8.count)
        let c = utf8.withUnsafeBytes { kb -> Int32 in
            guard n > 0 else { return 0 }
            return memcmp(stored.baseAddress!, kb.baseAddress!, n)
        }
        if c == 0 && stored.count == utf8.count { return .equal }
        guard utf8IsASCII && Self.isASCII(stored) else { return .undecided }
        return (c != 0 ? c < 0 : stored.count < utf8.count) ? .less : .greater
    }

    /// How the strings at `a` and `b` order under Swift's `String` semantics (canonical
    /// equivalence, Unicode scalar order): -1, 0 or 1. The bytes decide when they are equal or
    /// both ASCII; otherwise both are decoded and compared as `String`s. `ArenaRef(0)` is the
    /// empty string.
    func stringOrder(_ a: ArenaRef, _ b: ArenaRef) -> Int {
        let x = bytes(a), y = bytes(b)
        let n = min(x.count, y.count)
        var c: Int32 = 0
        if n > 0, let xb = x.baseAddress, let yb = y.baseAddress { c = memcmp(xb, yb, n) }
        if c == 0 && x.count == y.count { return 0 }
        if Self.isASCII(x) && Self.isASCII(y) {
            if c != 0 { return c < 0 ? -1 : 1 }
            return x.count < y.count ? -1 : 1
        }
        let s = string(a), t = string(b)
        return s < t ? -1 : (s == t ? 0 : 1)
    }

    /// How the string at `ref` orders against a constant under Swift's `String` semantics:
    /// -1, 0 or 1 (``stringOrder(_:_:)`` against a constant).
    func stringOrder(_ ref: ArenaRef, against utf8: [UInt8], utf8IsASCII: Bool, string: String) -> Int {
        switch byteOrder(of: ref, against: utf8, utf8IsASCII: utf8IsASCII) {
        case .equal: return 0
        case .less: return -1
        case .greater: return 1
        case .undecided:
            let s = self.string(ref)
            return s < string ? -1 : (s == string ? 0 : 1)
        }
    }

    /// The first 16 bytes at `ref` as two big-endian words (zero-padded), whether all the
    /// bytes are ASCII and none is NUL (then the words order as the strings do, up to their
    /// 16th byte), and whether there are at most 16 bytes.
    func prefixWords(_ ref: ArenaRef) -> (high: UInt64, low: UInt64, plainASCII: Bool, short: Bool) {
        let b = bytes(ref)
        var high: UInt64 = 0, low: UInt64 = 0
        for i in 0..<min(16, b.count) {
            if i < 8 {
                high |= UInt64(b[i]) << UInt64(56 - 8 * i)
            } else {
                low |= UInt64(b[i]) << UInt64(56 - 8 * (i - 8))
            }
        }
        var plain = Self.isASCII(b)
        if plain { for byte in b where byte == 0 { plain = false; break } }
        return (high, low, plain, b.count <= 16)
    }

    /// The answer of ``byteOrder(of:against:utf8IsASCII:)``: how stored bytes order against
    /// a constant.
    enum ByteOrder {
        case equal, less, greater
        /// Not ASCII on both sides and not equal: a `String` comparison must decide.
        case undecided
    }

    /// Whether every byte is below 0x80 (eight at a time, then the tail).
    @inline(__always)
    private static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        let n = bytes.count
        while i + 8 <= n {
            if bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return false }
            i += 8
        }
        while i < n {
            if bytes[i] & 0x80 != 0 { return false }
            i += 1
        }
        return true
    }
}

extension _KeyHasher {
    /// Mixes in a byte string: its 8-byte words, then the tail and the length.
    @inlinable
    mutating func combine(bytes: UnsafeRawBufferPointer) {
        var i = 0
        let n = bytes.count
        while i + 8 <= n {
            combine(bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            i += 8
        }
        if i < n {
            var tail: UInt64 = 0
            var shift: UInt64 = 0
            while i < n {
                tail |= UInt64(bytes[i]) << shift
                shift += 8
                i += 1
            }
            combine(tail)
        }
        combine(UInt64(n))  // keeps ("ab", "c") apart from ("a", "bc")
    }
}

extension [UInt8] {
    /// Appends raw bytes with one `memcpy`. `append(contentsOf:)` with a raw (or typed) buffer
    /// copies element by element through the generic `Sequence` path: 190 (84) instructions for
    /// a 15-byte string (callgrind), about a tenth of a 1M import.
    @inline(__always)
    mutating func appendBytes(_ buffer: UnsafeRawBufferPointer) {
        let n = buffer.count
        guard n > 0, let source = buffer.baseAddress else { return }
        append(addingCapacity: n) { span in
            span.withUnsafeMutableBufferPointer { destination, initialized in
                guard let target = destination.baseAddress else { return }  // n > 0: never nil
                UnsafeMutableRawPointer(target).copyMemory(from: source, byteCount: n)
                initialized = n
            }
        }
    }
}
