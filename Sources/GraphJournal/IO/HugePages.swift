internal import Glibc

/// Transparent huge pages for large buffers that are about to be filled.
///
/// Memory fresh from the kernel costs its first writer a page fault per 4 KiB page: taking a
/// zeroed page and mapping it, about 1 µs on a virtual machine, so a 16 MB read or a 50 MB
/// column costs thousands of faults. A range marked with `madvise(MADV_HUGEPAGE)` is backed
/// by 2 MiB pages where the kernel can: one fault, and one page-table entry, per 2 MiB.
///
/// Only the whole huge pages inside a range are marked, so no memory outside it becomes
/// resident when its first byte is touched: the caller names room it will fill (or has just
/// asked for and will write whole), never spare capacity. Where transparent huge pages are
/// off (`never` in `/sys/kernel/mm/transparent_hugepage/enabled`) or missing, or the kernel
/// refuses the advice, nothing changes: the pages stay small and the contents are the same.
///
/// A process started with `OBJECTGRAPH_HUGE_PAGES=off` (or `0`, `never`) marks nothing: on a
/// virtual machine whose host backs a huge page slowly, a fault can cost several times its
/// 512 small ones (`Docs/Performance.md`, "Transparent huge pages for the open's write-once
/// buffers").
package enum HugePages {
    /// `MADV_HUGEPAGE` (linux/mman.h).
    static let advice: Int32 = 14

    /// Ranges shorter than this are not marked: they hold at most one whole huge page.
    package static let minimumBytes = 4 << 20

    /// The size of a transparent huge page (`hpage_pmd_size`, 2 MiB on x86-64), or nil where
    /// transparent huge pages are off or missing, or the process turned them off.
    package static let size: Int? = {
        #if os(Linux)
            if let setting = getenv("OBJECTGRAPH_HUGE_PAGES").map({ String(cString: $0).lowercased() }),
                ["off", "0", "never", "no", "false"].contains(setting)
            {
                return nil
            }
            let base = "/sys/kernel/mm/transparent_hugepage/"
            guard let mode = readSmallFile(base + "enabled"), !mode.contains("[never]"),
                let text = readSmallFile(base + "hpage_pmd_size"),
                let size = Int(text.filter { !$0.isWhitespace }),
                size > 4096, size & (size - 1) == 0
            else { return nil }
            return size
        #else
            return nil
        #endif
    }()

    /// Marks the whole huge pages within the `bytes` bytes at `start` for transparent huge
    /// pages. The memory must be mapped and writable (a buffer this process allocated).
    package static func advise(_ start: UnsafeRawPointer, bytes: Int) {
        #if os(Linux)
            guard bytes >= minimumBytes, let size = size else { return }
            let address = UInt(bitPattern: start)
            let mask = UInt(size - 1)
            let first = (address + mask) & ~mask
            let end = (address + UInt(bytes)) & ~mask
            guard end > first, let pointer = UnsafeMutableRawPointer(bitPattern: first) else { return }
            _ = madvise(pointer, Int(end - first), advice)  // advice only: a refusal is harmless
        #endif
    }

    /// Marks the huge pages of the first `count` elements of an array's buffer.
    @usableFromInline
    package static func advise<Element>(_ buffer: UnsafeMutableBufferPointer<Element>, count: Int) {
        guard let base = buffer.baseAddress else { return }
        advise(UnsafeRawPointer(base), bytes: min(count, buffer.count) * MemoryLayout<Element>.stride)
    }

    /// `count` elements of `value`, the memory marked first when it is large: a hash table's
    /// buckets, written whole at once. Inlinable, so that the fill is specialized for the
    /// caller's element type: generic, it copied each element through the type's value witness.
    @inlinable
    package static func filledArray<Element: BitwiseCopyable>(repeating value: Element, count: Int) -> [Element] {
        [Element](unsafeUninitializedCapacity: count) { buffer, initialized in
            advise(buffer, count: count)
            buffer.initialize(repeating: value)
            initialized = count
        }
    }

    /// The text of a small file (a sysfs setting), or nil when it cannot be read.
    private static func readSmallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 128)
        let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        return String(decoding: bytes[..<n], as: UTF8.self)
    }
}
