import Foundation
internal import GraphJournal

/// Faults in memory on another core, before the thread that will fill it gets there.
///
/// A fresh page costs its first writer a fault: the kernel takes a zeroed page and maps it,
/// about 1.5 µs here (perf: page faults and zeroing were a quarter of the time of a 1M-object
/// open, which fills 150 MB). `madvise(MADV_POPULATE_WRITE)` (Linux 5.14) has the kernel do
/// that work for a range without writing it: what a page holds is never changed, so it is safe
/// while the owner writes the same memory, and harmless if the memory was freed meanwhile:
/// the call then fails (the range is no longer mapped, or not writable) and the rest is
/// skipped, or it maps pages of whatever was mapped there since, without changing them (a
/// shared file mapping may then be written back unchanged). The call runs on a Dispatch worker, so
/// that on a machine with an idle core the filling thread finds the pages mapped.
///
/// Only room the owner will fill soon is warmed: the pages count as resident memory from then
/// on. Ranges under 256 KiB are left alone: the hand-off would cost more than the faults.
/// Where the kernel lacks the call (`EINVAL`), nothing happens.
///
/// Before the hand-off, the whole huge pages inside the range are marked for transparent huge
/// pages (`madvise(MADV_HUGEPAGE)`, `HugePages`), on the calling thread: a
/// 2 MiB page then costs one fault instead of 512, whoever touches it first. Only whole huge
/// pages inside the range are marked, so no page outside the room to be filled becomes
/// resident. On a kernel whose transparent huge pages are off (`never`), or that has none,
/// the mark does nothing.
enum PageWarmer {
    static let minimumBytes = 256 << 10
    /// `MADV_POPULATE_WRITE` (linux/mman.h), not in every C library's headers.
    static let populateWrite: Int32 = 23
    /// The bytes one call warms.
    static let piece = 1 << 20

    /// Warms the capacity of `array` that `elements` names, clipped to the array's capacity.
    static func warm<Element>(_ array: [Element], _ elements: Range<Int>) {
        let stride = MemoryLayout<Element>.stride
        let end = min(elements.upperBound, array.capacity)
        guard end > elements.lowerBound else { return }
        array.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            warm(UnsafeRawPointer(base) + elements.lowerBound * stride, bytes: (end - elements.lowerBound) * stride)
        }
    }

    /// Warms the whole pages of `bytes` bytes from `start`, on a Dispatch worker; first marks
    /// its huge pages, unless `hugePages` is false: for memory grown with `realloc`, which
    /// glibc moves with one `mremap` only while the block is one mapping, and marking part of
    /// it splits the mapping (`realloc` would then copy instead).
    static func warm(_ start: UnsafeRawPointer, bytes: Int, hugePages: Bool = true) {
        guard bytes >= minimumBytes else { return }
        let address = Int(bitPattern: start)
        if hugePages { HugePages.advise(start, bytes: bytes) }
        DispatchQueue.global(qos: .userInitiated).async { _ = populate(address, bytes: bytes) }
    }

    /// Faults in the whole pages of `bytes` bytes from the address `start`, on this thread:
    /// from the end back, a piece at a time, because the owner fills the range from its start,
    /// so the two meet once instead of faulting the same pages side by side. False when the
    /// kernel refused (no such call, or memory no longer mapped); then the rest is skipped.
    @discardableResult
    static func populate(_ start: Int, bytes: Int) -> Bool {
        #if os(Linux)
            let page = 4096
            let first = (start + page - 1) & ~(page - 1)
            var upper = (start + bytes) & ~(page - 1)
            while upper > first {
                let lower = max(first, upper - piece)
                guard madvise(UnsafeMutableRawPointer(bitPattern: lower), upper - lower, populateWrite) == 0 else {
                    return false
                }
                upper = lower
            }
            return true
        #else
            return false
        #endif
    }
}
