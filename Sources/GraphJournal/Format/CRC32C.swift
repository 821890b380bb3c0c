internal import CCRC32C

/// CRC32C (Castagnoli), the checksum of every journal record.
///
/// On x86 CPUs with SSE4.2 the CRC32 instruction computes it (the C target `CCRC32C`, on three
/// independent streams at once, many times faster than the tables here); elsewhere it is
/// portable Swift. Slicing-by-8: eight
/// 256-entry tables let the loop consume eight bytes per step with eight independent table
/// lookups. Check value: `CRC32C.checksum("123456789")` is `0xE3069283`.
enum CRC32C {
    /// Whether this CPU has the CRC32 instruction (checked once).
    static let hasHardware = ccrc32c_has_hardware() != 0

    /// The reflected Castagnoli polynomial.
    static let polynomial: UInt32 = 0x82F6_3B78

    /// Eight tables of 256 entries, table k at index k * 256.
    static let table: [UInt32] = {
        var table = [UInt32](repeating: 0, count: 8 * 256)
        for index in 0..<256 {
            var crc = UInt32(index)
            for _ in 0..<8 {
                crc = crc & 1 == 1 ? (crc >> 1) ^ polynomial : crc >> 1
            }
            table[index] = crc
        }
        for slice in 1..<8 {
            for index in 0..<256 {
                let previous = table[(slice - 1) * 256 + index]
                table[slice * 256 + index] = (previous >> 8) ^ table[Int(previous & 0xFF)]
            }
        }
        return table
    }()

    /// The CRC32C of `bytes`.
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        extend(0, bytes)
    }

    /// The CRC32C of the concatenation of the bytes that gave `crc` and `bytes`
    /// (LevelDB's `crc32c::Extend`).
    static func extend(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return crc }
        if hasHardware { return ccrc32c_extend(crc, base, bytes.count) }
        return extendWithTables(crc, bytes)
    }

    /// ``extend(_:_:)`` with the CRC32 instruction; nil on a CPU without it. For tests.
    static func extendWithHardware(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32? {
        guard hasHardware else { return nil }
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return crc }
        return ccrc32c_extend(crc, base, bytes.count)
    }

    /// ``extend(_:_:)`` in portable Swift, the slicing-by-8 tables.
    static func extendWithTables(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return crc }
        var crc = ~crc
        let count = bytes.count
        var position = 0
        table.withUnsafeBufferPointer { t in
            while count - position >= 8 {
                let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: position, as: UInt64.self))
                let low = UInt32(truncatingIfNeeded: word) ^ crc
                let high = UInt32(truncatingIfNeeded: word >> 32)
                crc =
                    t[7 * 256 + Int(low & 0xFF)]
                    ^ t[6 * 256 + Int((low >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((low >> 16) & 0xFF)]
                    ^ t[4 * 256 + Int(low >> 24)]
                    ^ t[3 * 256 + Int(high & 0xFF)]
                    ^ t[2 * 256 + Int((high >> 8) & 0xFF)]
                    ^ t[1 * 256 + Int((high >> 16) & 0xFF)]
                    ^ t[Int(high >> 24)]
                position += 8
            }
            while position < count {
                let byte = base.load(fromByteOffset: position, as: UInt8.self)
                crc = t[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8)
                position += 1
            }
        }
        return ~crc
    }

    /// The CRC32C of a byte array.
    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0) }
    }

    /// The starting CRC for a segment's records: the CRC32C of its salt's 8 little-endian bytes.
    static func seed(salt: UInt64) -> UInt32 {
        withUnsafeBytes(of: salt.littleEndian) { checksum($0) }
    }
}

/// Little-endian reads and writes, the only byte order of the format.
extension Array where Element == UInt8 {
    mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    mutating func storeLittleEndian<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        Swift.withUnsafeBytes(of: value.littleEndian) { source in
            for index in 0..<source.count { self[offset + index] = source[index] }
        }
    }
}

extension UnsafeRawBufferPointer {
    /// Reads a little-endian integer; the caller has checked that it fits.
    func littleEndian<T: FixedWidthInteger>(at offset: Int, as type: T.Type = T.self) -> T {
        T(littleEndian: loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}
