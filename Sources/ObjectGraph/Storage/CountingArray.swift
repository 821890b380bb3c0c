/// A dense array of integers that stores nothing while each element is its position plus
/// ``offset``, and becomes an ordinary array the first time one is not.
///
/// A table keeps two maps between rows and serials: the serial of each row, and the row of
/// each serial. When serials were issued in row order and no row was ever freed (a store
/// bulk-loaded into an empty entity, or opened from a journal that inserted its objects in
/// serial order, which a compacted or bulk-loaded one does), row `r` has serial `r + 1` and
/// serial `s` is row `s - 1`: both maps are counting, so they cost no memory (12 MB for 1M
/// objects) and an open writes none of them. The first change that breaks the pattern (a row
/// freed, a serial out of order) writes the elements out once; from then on the array behaves
/// like `[Element]`. A compaction that leaves the pattern restored (``init(_:offset:)``) stores
/// nothing again.
struct CountingArray<Element: FixedWidthInteger>: RandomAccessCollection {
    /// What the element at position `i` is while counting: `Element(i) + offset`.
    let offset: Element
    /// The elements once written out; empty while counting.
    private(set) var stored: [Element] = []
    /// The number of elements while counting.
    private var countingCount = 0
    /// Whether every element is its position plus ``offset`` and none is stored.
    private(set) var isCounting = true

    /// An empty array.
    init(offset: Element) { self.offset = offset }

    /// `elements`, stored only if some element is not its position plus `offset`.
    init(_ elements: [Element], offset: Element) {
        self.offset = offset
        if Self.counts(elements, from: 0, offset: offset) {
            countingCount = elements.count
        } else {
            stored = elements
            isCounting = false
        }
    }

    var startIndex: Int { 0 }
    var endIndex: Int { isCounting ? countingCount : stored.count }

    /// The element at `i`. Writing an element that breaks the pattern writes out the array.
    subscript(i: Int) -> Element {
        @inline(__always) get {
            guard isCounting else { return stored[i] }
            precondition(i >= 0 && i < countingCount, "Index out of range")
            return Element(truncatingIfNeeded: i) &+ offset
        }
        set {
            if isCounting {
                precondition(i >= 0 && i < countingCount, "Index out of range")
                if newValue == Element(truncatingIfNeeded: i) &+ offset { return }
                writeOut()
            }
            stored[i] = newValue
        }
    }

    /// The room for elements before the storage must grow: the count while counting.
    var capacity: Int { isCounting ? countingCount : stored.capacity }

    /// Makes room for `n` elements once the array is stored; nothing while counting.
    mutating func reserveCapacity(_ n: Int) {
        if !isCounting { stored.reserveCapacity(n) }
    }

    mutating func append(_ element: Element) {
        if isCounting {
            if element == Element(truncatingIfNeeded: countingCount) &+ offset {
                countingCount += 1
                return
            }
            writeOut()
        }
        stored.append(element)
    }

    /// Appends `elements`; still counting if each continues the pattern (read once to check).
    mutating func append<C: Collection<Element>>(contentsOf elements: C) {
        if isCounting {
            if Self.counts(elements, from: countingCount, offset: offset) {
                countingCount += elements.count
                return
            }
            writeOut()
        }
        stored.append(contentsOf: elements)
    }

    /// Appends the next `n` elements of the pattern. Returns false, appending nothing, when
    /// the array is not counting.
    mutating func appendCounting(_ n: Int) -> Bool {
        guard isCounting else { return false }
        countingCount += n
        return true
    }

    /// Calls `body` with the elements' storage, written out first.
    mutating func withUnsafeMutableBufferPointer<R>(
        _ body: (inout UnsafeMutableBufferPointer<Element>) throws -> R
    ) rethrows -> R {
        if isCounting { writeOut() }
        return try stored.withUnsafeMutableBufferPointer(body)
    }

    /// Stores the elements: from now on this is an ordinary array.
    private mutating func writeOut() {
        let n = countingCount, offset = self.offset
        stored = [Element](unsafeUninitializedCapacity: n) { buffer, count in
            for i in 0..<n { buffer[i] = Element(truncatingIfNeeded: i) &+ offset }
            count = n
        }
        isCounting = false
        countingCount = 0
    }

    /// Whether the i-th of `elements` is `start + i + offset` for every i.
    private static func counts<C: Collection<Element>>(_ elements: C, from start: Int, offset: Element) -> Bool {
        var expected = Element(truncatingIfNeeded: start) &+ offset
        for e in elements {
            guard e == expected else { return false }
            expected &+= 1
        }
        return true
    }
}
