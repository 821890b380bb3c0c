/// A fast hasher for unique keys: 64-bit cells and short byte strings.
///
/// The unique indexes and the bulk importer hash millions of keys; `Hasher` (SipHash-1-3) was
/// 8% of a 1M import's instructions (callgrind). This mixes each word with a multiply and a
/// rotate and finishes with MurmurHash3's 64-bit finalizer, a few instructions per cell, and
/// still spreads consecutive integers over the low bits an open-addressing table masks. Byte
/// strings are mixed in by `combine(bytes:)`, which reads raw memory and therefore lives in
/// ByteArena.swift.
///
/// Not a defense against chosen-key flooding beyond the per-table random `seed`; the keys of an
/// embedded store come from its own application.
@usableFromInline
struct _KeyHasher {
    @usableFromInline var state: UInt64

    @inlinable @inline(__always)
    init(seed: UInt64) { state = seed }

    @inlinable @inline(__always)
    mutating func combine(_ bits: UInt64) {
        let x = (state ^ bits) &* 0x9E37_79B9_7F4A_7C15
        state = (x << 31 | x >> 33) &* 0xBF58_476D_1CE4_E5B9
    }

    @inlinable @inline(__always)
    func finalize() -> Int {
        var x = state
        x ^= x >> 33
        x = x &* 0xFF51_AFD7_ED55_8CCD
        x ^= x >> 33
        x = x &* 0xC4CE_B9FE_1A85_EC53
        x ^= x >> 33
        return Int(truncatingIfNeeded: x)
    }

    /// The hash of a key that is one 64-bit cell.
    @inlinable @inline(__always)
    static func hash(_ bits: UInt64, seed: UInt64) -> Int {
        var h = _KeyHasher(seed: seed)
        h.combine(bits)
        return h.finalize()
    }

    /// A random seed for one table.
    @usableFromInline
    static func randomSeed() -> UInt64 { UInt64.random(in: 0...UInt64.max) }
}
