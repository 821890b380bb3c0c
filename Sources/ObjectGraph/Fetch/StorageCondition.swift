import Foundation

/// A condition on one row, evaluated on the table's cells without creating an instance: the
/// form common `#Predicate` shapes are translated into.
indirect enum StorageCondition {
    enum Operator {
        case equal, notEqual, less, lessOrEqual, greater, greaterOrEqual

        /// The operator with its operands swapped (`3 < x` is `x > 3`).
        var flipped: Operator {
            switch self {
            case .equal, .notEqual: self
            case .less: .greater
            case .lessOrEqual: .greaterOrEqual
            case .greater: .less
            case .greaterOrEqual: .lessOrEqual
            }
        }

        @inline(__always)
        func holds<V: Comparable>(_ a: V, _ b: V) -> Bool {
            switch self {
            case .equal: a == b
            case .notEqual: a != b
            case .less: a < b
            case .lessOrEqual: a <= b
            case .greater: a > b
            case .greaterOrEqual: a >= b
            }
        }
    }

    /// A string constant with what the comparison needs precomputed.
    struct StringConstant {
        let string: String
        let utf8: [UInt8]
        let isASCII: Bool
    }

    case constant(Bool)
    /// Signed integer attribute (any width): cell is the `Int64` bit pattern.
    case int(slot: Int, Operator, Int64, optional: Bool)
    /// Unsigned integer attribute (any width).
    case uint(slot: Int, Operator, UInt64, optional: Bool)
    /// `Double` or `Date` (seconds since the reference date) attribute.
    case double(slot: Int, Operator, Double, optional: Bool)
    /// `Float` attribute, compared after exact widening to `Double`.
    case float(slot: Int, Operator, Double, optional: Bool)
    /// `Bool` attribute.
    case bool(slot: Int, Operator, Bool, optional: Bool)
    /// `String` attribute, with Swift's `String` comparison semantics.
    case string(slot: Int, Operator, StringConstant, optional: Bool)
    /// Whether an attribute is unset (`nil`).
    case isNull(slot: Int)
    case and(StorageCondition, StorageCondition)
    case or(StorageCondition, StorageCondition)
    case not(StorageCondition)
}

/// One row's cells, null bits and the arena they point into.
struct RowCells {
    let cells: UnsafePointer<UInt64>
    let nulls: UnsafePointer<UInt64>
    let arena: UnsafeRawBufferPointer

    @inline(__always)
    func isNull(_ slot: Int) -> Bool { nulls[slot &>> 6] & (1 &<< UInt64(slot & 63)) != 0 }
}

extension StorageCondition {
    /// Whether the row meets the condition. An unset non-optional attribute reads as its type's
    /// zero value, like the typed accessor; an unset optional one is `nil`, which is equal to
    /// nothing but `nil` and unequal to every value.
    func matches(_ row: RowCells) -> Bool {
        switch self {
        case .constant(let b):
            return b
        case .int(let slot, let op, let k, let optional):
            if row.isNull(slot) { return optional ? op == .notEqual : op.holds(0, k) }
            return op.holds(Int64(bitPattern: row.cells[slot]), k)
        case .uint(let slot, let op, let k, let optional):
            if row.isNull(slot) { return optional ? op == .notEqual : op.holds(0, k) }
            return op.holds(row.cells[slot], k)
        case .double(let slot, let op, let k, let optional):
            if row.isNull(slot) { return optional ? op == .notEqual : op.holds(0, k) }
            return op.holds(Double(bitPattern: row.cells[slot]), k)
        case .float(let slot, let op, let k, let optional):
            if row.isNull(slot) { return optional ? op == .notEqual : op.holds(0, k) }
            return op.holds(Double(Float(bitPattern: UInt32(truncatingIfNeeded: row.cells[slot]))), k)
        case .bool(let slot, let op, let k, let optional):
            if row.isNull(slot) { return optional ? op == .notEqual : (op == .equal) == (k == false) }
            return (op == .equal) == ((row.cells[slot] != 0) == k)
        case .string(let slot, let op, let k, let optional):
            if row.isNull(slot) {
                return optional ? op == .notEqual : Self.compare(UnsafeRawBufferPointer(start: nil, count: 0), op, k)
            }
            return Self.compare(ByteArena.bytes(ArenaRef(row.cells[slot]), in: row.arena), op, k)
        case .isNull(let slot):
            return row.isNull(slot)
        case .and(let a, let b):
            return a.matches(row) && b.matches(row)
        case .or(let a, let b):
            return a.matches(row) || b.matches(row)
        case .not(let a):
            return !a.matches(row)
        }
    }

    /// Compares stored UTF-8 with a constant under Swift's `String` semantics (canonical
    /// equivalence, Unicode scalar order): bytes decide when both sides are ASCII, otherwise the
    /// stored bytes are decoded and compared as `String`s.
    static func compare(_ stored: UnsafeRawBufferPointer, _ op: Operator, _ k: StringConstant) -> Bool {
        let n = min(stored.count, k.utf8.count)
        let c = k.utf8.withUnsafeBytes { kb -> Int32 in
            guard n > 0 else { return 0 }
            return memcmp(stored.baseAddress!, kb.baseAddress!, n)
        }
        if c == 0 && stored.count == k.utf8.count {
            return op == .equal || op == .lessOrEqual || op == .greaterOrEqual
        }
        if k.isASCII && isASCII(stored) {
            let order = c != 0 ? c : (stored.count < k.utf8.count ? -1 : 1)
            switch op {
            case .equal: return false
            case .notEqual: return true
            case .less, .lessOrEqual: return order < 0
            case .greater, .greaterOrEqual: return order > 0
            }
        }
        return op.holds(String(decoding: stored, as: UTF8.self), k.string)
    }

    @inline(__always)
    static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
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
