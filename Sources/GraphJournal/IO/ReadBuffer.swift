internal import Glibc

/// A large byte buffer reused across reads: the window a segment file is streamed through, a
/// whole segment file, or a decompressed payload.
///
/// The memory is an anonymous mapping that the kernel is asked (``HugePages``) to back with
/// 2 MiB transparent huge pages, so first touching 50 MB costs a few dozen page faults instead
/// of twelve thousand. Without huge pages it behaves as ordinary memory.
///
/// Not `Sendable`: one reader owns it. The memory it lends is valid until the next
/// ``reserve(_:)`` or the buffer's end.
final class ReadBuffer {
    private static let hugePage = 2 << 20

    /// The mapping (nil before the first reserve, or when it fell back to `allocate`).
    private var mapping: (base: UnsafeMutableRawPointer, length: Int)?
    private var start: UnsafeMutableRawPointer?
    /// The usable bytes at `start`.
    private(set) var capacity = 0

    init() {}

    deinit { release() }

    /// The buffer, at least `count` bytes long; grows (dropping the contents) when too small.
    func reserve(_ count: Int) -> UnsafeMutableRawBufferPointer {
        reserve(count, keeping: 0)
    }

    /// The buffer, at least `count` bytes long; when it has to grow, its first `kept` bytes
    /// are copied to the new memory (a window that must hold one more record than it did).
    func reserve(_ count: Int, keeping kept: Int) -> UnsafeMutableRawBufferPointer {
        if count > capacity {
            let old = (mapping: mapping, start: start, capacity: capacity)
            mapping = nil
            start = nil
            capacity = 0
            grow(to: max(count, 2 * old.capacity))
            if let from = old.start, let to = start {
                to.copyMemory(from: from, byteCount: min(max(kept, 0), old.capacity))
            }
            Self.release(mapping: old.mapping, start: old.start)
        }
        return UnsafeMutableRawBufferPointer(start: start, count: capacity)
    }

    /// Maps (or allocates) new memory of at least `count` bytes; the old memory must have been
    /// released or handed over first.
    private func grow(to count: Int) {
        let hugePage = Self.hugePage
        // One huge page more than needed, so the buffer can start at a 2 MiB boundary.
        let length = (count + hugePage - 1) / hugePage * hugePage + hugePage
        guard let base = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
            base != MAP_FAILED
        else {
            start = UnsafeMutableRawPointer.allocate(byteCount: count, alignment: 16)
            capacity = count
            return
        }
        let skip = Int((UInt(hugePage) - UInt(bitPattern: base) % UInt(hugePage)) % UInt(hugePage))
        HugePages.advise(base + skip, bytes: length - skip)  // advice only: failure is harmless
        mapping = (base, length)
        start = base + skip
        capacity = length - skip
    }

    private func release() {
        Self.release(mapping: mapping, start: start)
        mapping = nil
        start = nil
        capacity = 0
    }

    private static func release(mapping: (base: UnsafeMutableRawPointer, length: Int)?, start: UnsafeMutableRawPointer?)
    {
        if let mapping {
            munmap(mapping.base, mapping.length)
        } else {
            start?.deallocate()
        }
    }
}
