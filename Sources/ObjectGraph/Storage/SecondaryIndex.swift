/// How the cells of an index key's attribute order (``SecondaryIndex``).
enum IndexKeyKind: Sendable {
    /// Signed integers, as `Int64`.
    case signed
    /// Unsigned integers, as `UInt64`.
    case unsigned
    /// `Double`, and `Date` as its seconds since the reference date.
    case double
    /// `Float`, widened to `Double`.
    case float
    /// `Bool`: `false` before `true`.
    case bool
    /// `String`, under Swift's `String` comparison (canonical equivalence, scalar order).
    case string

    init(_ type: AttributeType) {
        switch type {
        case .int8, .int16, .int32, .int64: self = .signed
        case .uint8, .uint16, .uint32, .uint64: self = .unsigned
        case .double, .date: self = .double
        case .float: self = .float
        case .bool: self = .bool
        case .string, .data, .uuid, .url, .stringList, .intList: self = .string
        }
    }
}

/// A value an index key is compared with: the order key of a fixed-size value
/// (``SecondaryIndex/orderKey(_:_:)``), or a string constant.
enum IndexProbe {
    case fixed(UInt64)
    case string(StorageCondition.StringConstant)
}

/// One declared non-unique index (``IndexDescription``): the entity's live rows ordered by
/// (key, row), in memory only.
///
/// Kept cheap to maintain: a change of a row's key does not move it. The row is marked *dirty*
/// instead (``touch(_:)``), and stays in ``sorted`` at a place that may no longer fit its key.
/// A lookup binary-searches ``sorted`` comparing only clean entries, and checks the dirty rows
/// one by one. At the lookup after more than ``refreshBound`` rows became dirty, the index is
/// brought up to date: the dirty rows are dropped, sorted, and placed by binary search among
/// the clean ones (O(n + d log n)). Past ``abandonBound`` dirty rows (a bulk import) the index
/// stops tracking and is rebuilt from the table at its next lookup, so an import pays one
/// comparison per new row and the first fetch pays the sort.
///
/// Rows stay in the index while they are deleted in the pending transaction (the committed
/// view still sees them); visibility is checked per lookup, like a scan does. A freed row is
/// dirty until the next refresh drops it.
final class SecondaryIndex {
    let description: IndexDescription
    /// The key attributes' slots, most significant first.
    let slots: [Int]
    let kinds: [IndexKeyKind]
    let optional: [Bool]
    /// Whether ``sorted`` is the index (up to its dirty rows); false: rebuilt at the next lookup.
    var isBuilt = false
    /// Live rows in (key, row) order, except that dirty rows may be anywhere (or freed).
    @exclusivity(unchecked) var sorted: [Int32] = []
    /// Per row, 1 when the row is in ``dirty``; rows past its end are clean.
    @exclusivity(unchecked) var marks: [UInt8] = []
    /// The rows whose key may have changed since ``sorted`` was brought up to date.
    @exclusivity(unchecked) var dirty: [Int32] = []

    init(description: IndexDescription, slots: [Int], entity: EntityDescription) {
        self.description = description
        self.slots = slots
        kinds = slots.map { IndexKeyKind(entity.attributes[$0].type) }
        optional = slots.map { entity.attributes[$0].isOptional }
    }

    /// Dirty rows a lookup tolerates before bringing ``sorted`` up to date.
    var refreshBound: Int { max(Self.minimumRefreshBound, sorted.count / 64) }
    /// Dirty rows past which tracking them costs more than rebuilding.
    var abandonBound: Int { max(Self.minimumAbandonBound, sorted.count / 4) }

    #if DEBUG
        // Small in debug builds, so that tests with a few hundred objects go through every state
        // (dirty rows searched, refreshed, abandoned); fetch results do not depend on them.
        static let minimumRefreshBound = 8
        static let minimumAbandonBound = 48
    #else
        static let minimumRefreshBound = 1024
        static let minimumAbandonBound = 4096
    #endif

    @inline(__always)
    func isDirty(_ row: Int) -> Bool { row < marks.count && marks[row] != 0 }

    /// Notes that `row`'s key may have changed (or the row was allocated or freed).
    @inline(__always)
    func touch(_ row: Int) {
        guard isBuilt, !isDirty(row) else { return }
        mark(row)
    }

    private func mark(_ row: Int) {
        if row >= marks.count {
            marks.append(contentsOf: repeatElement(0, count: max(row + 1, marks.count * 2) - marks.count))
        }
        marks[row] = 1
        dirty.append(Int32(row))
        if dirty.count > abandonBound { discard() }
    }

    /// Forgets the index; the next lookup rebuilds it from the table.
    func discard() {
        isBuilt = false
        sorted = []
        marks = []
        dirty = []
    }

    /// The order key of a fixed-size cell of `kind`: unsigned integers that order as the
    /// values do. `-0.0` and `0.0` share a key (they are equal), NaNs come after `+infinity`.
    @inline(__always)
    static func orderKey(_ bits: UInt64, _ kind: IndexKeyKind) -> UInt64 {
        switch kind {
        case .signed: return bits ^ (1 << 63)
        case .unsigned: return bits
        case .bool: return bits != 0 ? 1 : 0
        case .double: return orderKey(double: Double(bitPattern: bits))
        case .float: return orderKey(double: Double(Float(bitPattern: UInt32(truncatingIfNeeded: bits))))
        case .string: return 0
        }
    }

    /// ``orderKey(_:_:)`` of a `Double`.
    @inline(__always)
    static func orderKey(double d: Double) -> UInt64 {
        if d.isNaN { return .max }
        if d == 0 { return 1 << 63 }
        let b = d.bitPattern
        return b & (1 << 63) != 0 ? ~b : b | (1 << 63)
    }
}
