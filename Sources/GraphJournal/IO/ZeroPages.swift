internal import Glibc

/// Large arrays of zeros that take no memory until written.
///
/// Memory fresh from the kernel reads as zero and costs nothing until first touched; a page
/// only read maps the kernel's shared zero page. Filling a new array with zeros writes every
/// page instead. ``zeros(count:capacity:)`` hands back an array whose whole pages are given
/// to the kernel as zero (`madvise(MADV_DONTNEED)`: for private anonymous memory, which the
/// heap is, the next read of such a page sees zeros), writing only the partial pages at its
/// ends. The pages lie inside the array's own storage, so no allocator data is touched.
package enum ZeroPages {
    /// Below this many bytes an array is zeroed by writing.
    package static let minimumBytes = 64 << 10

    /// `count` zero elements, with room for `capacity`.
    package static func zeros<Element: FixedWidthInteger>(count: Int, capacity: Int) -> [Element] {
        [Element](unsafeUninitializedCapacity: max(count, capacity)) { buffer, initialized in
            zero(UnsafeMutableBufferPointer(rebasing: buffer[..<count]))
            initialized = count
        }
    }

    /// `count` elements: those of `old` (at most `count`), then zeros. Only the elements of
    /// `old` that are not zero are written; the rest stay on zero pages.
    package static func zeros<Element: FixedWidthInteger>(count: Int, keepingNonzeroOf old: [Element]) -> [Element] {
        var grown: [Element] = zeros(count: count, capacity: count)
        grown.withUnsafeMutableBufferPointer { new in
            old.withUnsafeBufferPointer { old in
                for i in 0..<min(old.count, new.count) where old[i] != 0 { new[i] = old[i] }
            }
        }
        return grown
    }

    /// Makes `buffer` all zeros, giving its whole pages back instead of writing them.
    package static func zero<Element: FixedWidthInteger>(_ buffer: UnsafeMutableBufferPointer<Element>) {
        guard let base = buffer.baseAddress else { return }
        let bytes = buffer.count * MemoryLayout<Element>.stride
        #if os(Linux)
            if bytes >= minimumBytes {
                let page = UInt(sysconf(Int32(_SC_PAGESIZE)))
                let start = UInt(bitPattern: base)
                let first = (start + page - 1) & ~(page - 1)
                let end = (start + UInt(bytes)) & ~(page - 1)
                if end > first, let pages = UnsafeMutableRawPointer(bitPattern: first),
                    madvise(pages, Int(end - first), MADV_DONTNEED) == 0
                {
                    let raw = UnsafeMutableRawPointer(base)
                    raw.initializeMemory(as: UInt8.self, repeating: 0, count: Int(first - start))
                    (raw + Int(end - start)).initializeMemory(
                        as: UInt8.self, repeating: 0, count: Int(start + UInt(bytes) - end))
                    return
                }
            }
        #endif
        buffer.initialize(repeating: 0)
    }
}
