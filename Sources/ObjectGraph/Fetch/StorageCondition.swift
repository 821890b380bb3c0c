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
            return op.holds(Int64(bitPattern: row.cell(slot)), k)
        case .uint(let slot, let op, let k, let optional):
            if row.isNull(slot) { return optional ? op == .notEqual : op.holds(0, k) }
            return op.holds(row.cell(slot), k)
        case .double(let slot, let op, let k, let optional):
            if row.isNull(slot) { return optional ? op == .notEqual : op.holds(0, k) }
            return op.holds(Double(bitPattern: row.cell(slot)), k)
        case .float(let slot, let op, let k, let optional):
            if row.isNull(slot) { return optional ? op == .notEqual : op.holds(0, k) }
            return op.holds(Double(Float(bitPattern: UInt32(truncatingIfNeeded: row.cell(slot)))), k)
        case .bool(let slot, let op, let k, let optional):
            if row.isNull(slot) { return optional ? op == .notEqual : (op == .equal) == (k == false) }
            return (op == .equal) == ((row.cell(slot) != 0) == k)
        case .string(let slot, let op, let k, let optional):
            if row.isNull(slot) { return optional ? op == .notEqual : Self.compare(ArenaRef(0), in: row.arena, op, k) }
            return Self.compare(ArenaRef(row.cell(slot)), in: row.arena, op, k)
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

    /// Compares the UTF-8 stored at `ref` in `arena` (`ArenaRef(0)`: the empty string) with a
    /// constant under Swift's `String` semantics (canonical equivalence, Unicode scalar
    /// order): the bytes decide when they are equal or both sides are ASCII, otherwise the
    /// stored bytes are decoded and compared as `String`s.
    static func compare(_ ref: ArenaRef, in arena: ArenaBytes, _ op: Operator, _ k: StringConstant) -> Bool {
        switch arena.byteOrder(of: ref, against: k.utf8, utf8IsASCII: k.isASCII) {
        case .equal: return op == .equal || op == .lessOrEqual || op == .greaterOrEqual
        case .less: return op == .notEqual || op == .less || op == .lessOrEqual
        case .greater: return op == .notEqual || op == .greater || op == .greaterOrEqual
        case .undecided: return op.holds(arena.string(ref), k.string)
        }
    }
}
