/// A segment file read front to back through one bounded, reused buffer.
///
/// Reading a whole segment into memory makes the kernel zero a fresh page for every 4 KiB (or
/// 2 MiB) of the file before `pread` copies into it; a window of a few MiB is zeroed once and
/// then stays in the CPU cache, so each read costs only the copy from the page cache. The
/// window grows only when one record is larger than it. The file is not mapped: a writer
/// truncating a torn tail while a reader has it mapped would kill the reader with `SIGBUS`.
///
/// Only `size` bytes are ever read (the file's size when opened), as a whole-file read does.
struct SegmentWindow {
    private let fs: FileSystem
    private let fd: Int32
    private let path: String
    /// The file's size when it was opened: nothing past it is read.
    let size: Int
    private let buffer: ReadBuffer
    /// The most bytes the window holds: the size asked for, or the largest record seen.
    private var limit: Int
    private var memory = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    /// The file offset of the window's first byte.
    private(set) var start = 0
    /// How many bytes the window holds.
    private(set) var count = 0

    /// - Parameter window: the bytes read at a time (at least 1).
    init(fs: FileSystem, fd: Int32, path: String, size: Int, buffer: ReadBuffer, window: Int) {
        self.fs = fs
        self.fd = fd
        self.path = path
        self.size = size
        self.buffer = buffer
        self.limit = max(window, 1)
    }

    /// The bytes in the window: file bytes `start..<start + count`. Valid until the next
    /// ``ensure(_:count:)``.
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: memory[..<count]) }

    /// Makes file bytes `offset..<offset + length` available in ``bytes``, sliding the window
    /// forward (dropping the bytes before `offset`) and growing it if `length` needs it.
    ///
    /// - Returns: false when the file (its first ``size`` bytes) ends before, or when `offset`
    ///   lies before the window (the window only moves forward).
    /// - Throws: ``JournalError`` when a read fails.
    mutating func ensure(_ offset: Int, count length: Int) throws(JournalError) -> Bool {
        let needed = offset + length
        guard offset >= start, length >= 0 else { return false }
        if needed <= start + count { return true }
        guard needed <= size else { return false }
        // Keep the bytes from `offset` on (the start of a record), moved to the front.
        let kept = max(start + count - offset, 0)
        if kept > 0, offset > start, let base = memory.baseAddress {
            base.copyMemory(from: base + (offset - start), byteCount: kept)  // overlapping is allowed
        }
        start = offset
        count = kept
        limit = max(limit, length)
        if memory.count < limit { memory = buffer.reserve(limit, keeping: kept) }
        let target = min(limit, size - start)
        if count < target {
            count += try fs.fill(
                fd, path, UnsafeMutableRawBufferPointer(rebasing: memory[count..<target]), at: start + count)
        }
        return needed <= start + count
    }
}
