/// Bytes as the journal's payloads write them (varints, zig-zag varints, length-prefixed
/// strings), for tests that build a payload by hand, well-formed or damaged on purpose.
public struct PayloadBytes {
    public var bytes: [UInt8] = []

    public init() {}

    public mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    public mutating func varint(_ value: Int) { varint(UInt64(value)) }

    public mutating func signed(_ value: Int64) { varint(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }

    public mutating func string(_ s: String) {
        varint(s.utf8.count)
        bytes += Array(s.utf8)
    }
}
