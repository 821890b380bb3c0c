import Glibc
import Testing

@testable import GraphJournal

/// Whether this kernel gives transparent huge pages to marked memory only.
private let hugePagesOnlyWhereAdvised: Bool = {
    guard HugePages.size != nil,
        let mode = try? String(contentsOfFile: "/sys/kernel/mm/transparent_hugepage/enabled", encoding: .utf8)
    else { return false }
    return mode.contains("[madvise]")
}()

/// `HugePages.advise` marks only the whole huge pages inside the range it is given: touching
/// memory outside them maps one small page, touching memory inside maps a whole huge page.
///
/// Runs where the kernel gives huge pages only to marked memory (`madvise` in
/// `/sys/kernel/mm/transparent_hugepage/enabled`); with `always`, unmarked memory gets them too.
@Suite(.enabled(if: hugePagesOnlyWhereAdvised, "transparent huge pages are not in `madvise` mode on this kernel"))
struct HugePagesTests {
    /// Resident small pages of `bytes` bytes from `start` (`mincore`).
    private func residentPages(_ start: UnsafeMutableRawPointer, bytes: Int) throws -> Int {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        var vector = [UInt8](repeating: 0, count: (bytes + page - 1) / page)
        let rc = mincore(start, bytes, &vector)
        try #require(rc == 0, "mincore failed: errno \(errno)")
        return vector.reduce(0) { $0 + Int($1 & 1) }
    }

    /// The kernel's count of huge-page faults that fell back to small pages.
    private func fallbacks() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/vmstat", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix("thp_fault_fallback ") {
            return Int(line.split(separator: " ")[1]) ?? 0
        }
        return 0
    }

    /// Runs `body` with fresh anonymous memory of `hugePages` huge pages of `size` bytes,
    /// starting at a huge-page boundary, unmapped afterwards.
    private func withAlignedMapping(hugePages: Int, size: Int, _ body: (UnsafeMutableRawPointer) throws -> Void) throws
    {
        let length = (hugePages + 1) * size  // one more, to start at a boundary
        let mapping = try #require(mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
        try #require(mapping != MAP_FAILED)
        defer { munmap(mapping, length) }
        let skip = (size - Int(bitPattern: UInt(bitPattern: mapping)) % size) % size
        try body(mapping + skip)
    }

    @Test func marksOnlyTheWholeHugePagesInsideTheRange() throws {
        let size = try #require(HugePages.size)
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        try withAlignedMapping(hugePages: 6, size: size) { base throws in
            // From half a huge page in, two huge pages' worth: huge page 1 is the only whole one.
            HugePages.advise(UnsafeRawPointer(base + size / 2), bytes: 2 * size)
            let before = fallbacks()
            base.storeBytes(of: 1, toByteOffset: size / 2 + page, as: UInt8.self)  // in the range, before huge page 1
            base.storeBytes(of: 1, toByteOffset: size + 100, as: UInt8.self)  // huge page 1
            // in the range, after huge page 1
            base.storeBytes(of: 1, toByteOffset: 2 * size + size / 4, as: UInt8.self)
            base.storeBytes(of: 1, toByteOffset: 3 * size + 100, as: UInt8.self)  // past the range

            #expect(try residentPages(base, bytes: size) == 1, "a touch before the whole huge page maps one small page")
            #expect(try residentPages(base + 2 * size, bytes: size) == 1, "a touch after it maps one small page")
            #expect(try residentPages(base + 3 * size, bytes: size) == 1, "no huge page past the range")
            if fallbacks() == before {  // the kernel had a huge page to give (it can fall back under memory pressure)
                #expect(
                    try residentPages(base + size, bytes: size) == size / page, "one touch maps the whole huge page")
            }
        }
    }

    @Test func leavesShortRangesAlone() throws {
        // Under the minimum: nothing is marked, so a touch maps one small page.
        let size = HugePages.size ?? (2 << 20)
        try withAlignedMapping(hugePages: 2, size: size) { base throws in
            HugePages.advise(UnsafeRawPointer(base), bytes: HugePages.minimumBytes - 1)
            base.storeBytes(of: 1, toByteOffset: 100, as: UInt8.self)
            #expect(try residentPages(base, bytes: size) == 1)
        }
    }
}
