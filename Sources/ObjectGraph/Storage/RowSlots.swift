/// One value per row of a table, where most rows hold the same value, `absent`, for most of
/// their life: only the rows up to the last one given another value are stored, and every row
/// past them reads as `absent`.
///
/// A table keeps two such columns: its rows' instance slots (nil until an object is
/// materialized for the row) and their before-image numbers (-1 until the row is changed in a
/// transaction). A new row costs neither of them anything, so an open of 1M objects no longer
/// writes 12 MB of nils and -1s that nothing reads, and a store that is opened to serve a few
/// lookups keeps that memory until it materializes or changes objects. Rows past the stored
/// ones are added when one of them is given a value through the subscript; ``clear(_:)`` gives
/// a row `absent` again without adding any.
struct RowSlots<Element> {
    /// The stored rows: row `r` is `stored[r]` when `r < stored.count`, else `absent`.
    private(set) var stored: [Element] = []
    /// The value of every row not stored.
    let absent: Element

    init(absent: Element) { self.absent = absent }

    /// `rows` as the stored rows.
    init(_ rows: [Element], absent: Element) {
        stored = rows
        self.absent = absent
    }

    /// Row `row`'s value. Accessing it for writing stores every row up to it first.
    subscript(row: Int) -> Element {
        @inline(__always) get { row < stored.count ? stored[row] : absent }
        _modify {
            if row == stored.count {
                stored.append(absent)  // rows taken in order (every object materialized): the fast append
            } else if row > stored.count {
                stored.append(contentsOf: repeatElement(absent, count: row + 1 - stored.count))
            }
            yield &stored[row]
        }
    }

    /// Gives `row` the value `absent`, storing nothing new.
    @inline(__always)
    mutating func clear(_ row: Int) {
        if row < stored.count { stored[row] = absent }
    }

    /// The stored rows' values, for code that reads them by address; rows at and past the
    /// buffer's count are `absent`.
    func withUnsafeBufferPointer<R, E: Error>(_ body: (UnsafeBufferPointer<Element>) throws(E) -> R) throws(E) -> R {
        // The closure's typed throw passed through a standard-library call that rethrows untyped.
        let result: Result<R, E> = stored.withUnsafeBufferPointer { buffer in
            do throws(E) { return .success(try body(buffer)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// ``withUnsafeBufferPointer(_:)``, as bytes.
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        stored.withUnsafeBytes(body)
    }
}
