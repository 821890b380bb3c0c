internal import Glibc

/// ``JournalIO`` with the journal's error type and the loops every caller needs
/// (whole-buffer reads and writes).
struct FileSystem: Sendable {
    let io: JournalIO

    private func wrap(_ failure: JournalIO.Failure, _ path: String?, _ offset: Int64? = nil) -> JournalError {
        JournalError(
            .io(errno: failure.errno, operation: failure.operation),
            "\(failure.operation) failed", file: path, offset: offset)
    }

    func open(_ path: String, _ mode: JournalIO.OpenMode) throws(JournalError) -> Int32 {
        do { return try io.open(path, mode) } catch {
            if error.operation == "open", [ELOOP, EISDIR, ENODEV].contains(error.errno) {
                throw JournalError(
                    .notRegularFile,
                    "\(Self.describeType(path)), not a regular file; a store holds only regular files (move it away)",
                    file: path)
            }
            throw wrap(error, path)
        }
    }

    /// What `path` is, for an error message: "is a named pipe (FIFO)", "is a symbolic link to …".
    static func describeType(_ path: String) -> String {
        var info = stat()
        guard lstat(path, &info) == 0 else { return "cannot be examined" }
        switch info.st_mode & S_IFMT {
        case S_IFLNK:
            var target = [CChar](repeating: 0, count: 4097)
            let n = readlink(path, &target, 4096)
            let destination = n > 0 ? String(decoding: target[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
            return "is a symbolic link to \(destination)"
        case S_IFDIR: return "is a directory"
        case S_IFIFO: return "is a named pipe (FIFO)"
        case S_IFSOCK: return "is a socket"
        case S_IFCHR: return "is a character device"
        case S_IFBLK: return "is a block device"
        default: return "is not a regular file"
        }
    }

    func close(_ fd: Int32, _ path: String?) throws(JournalError) {
        do { try io.close(fd) } catch { throw wrap(error, path) }
    }

    /// Closes and ignores failure: for cleanup paths that already report another error.
    func closeQuietly(_ fd: Int32) {
        try? io.close(fd)
    }

    func fileSize(_ fd: Int32, _ path: String) throws(JournalError) -> Int64 {
        do { return try io.fileSize(fd) } catch { throw wrap(error, path) }
    }

    /// Reads `count` bytes at `offset`; fewer only if the file ends first.
    func read(_ fd: Int32, _ path: String, count: Int, at offset: Int64) throws(JournalError) -> [UInt8] {
        var failure: JournalIO.Failure?
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            HugePages.advise(buffer, count: count)  // a whole segment: fewer faults while it is read in
            var done = 0
            while done < count {
                do throws(JournalIO.Failure) {
                    let n = try io.pread(
                        fd, UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: buffer[done...])),
                        offset + Int64(done))
                    if n == 0 { break }
                    done += n
                } catch {
                    failure = error
                    break
                }
            }
            initialized = done
        }
        if let failure { throw wrap(failure, path, offset) }
        return bytes
    }

    /// Reads the first `size` bytes of an open file into `buffer` (grown as needed); returns
    /// them (fewer if the file ends first), valid until the buffer is reused.
    func readFile(
        _ fd: Int32, _ path: String, size: Int, into buffer: ReadBuffer
    ) throws(JournalError) -> UnsafeRawBufferPointer {
        let memory = buffer.reserve(size)
        let done = try fill(fd, path, UnsafeMutableRawBufferPointer(rebasing: memory[..<size]), at: 0)
        return UnsafeRawBufferPointer(rebasing: memory[..<done])
    }

    /// Reads into `memory` from byte `offset` of an open file; returns the bytes read, fewer
    /// than `memory.count` only if the file ends first.
    ///
    /// A failure is reported at offset 0, naming the file rather than the chunk: callers
    /// report it as the whole file being unreadable.
    func fill(
        _ fd: Int32, _ path: String, _ memory: UnsafeMutableRawBufferPointer, at offset: Int
    ) throws(JournalError) -> Int {
        var done = 0
        while done < memory.count {
            let n: Int
            do {
                n = try io.pread(fd, UnsafeMutableRawBufferPointer(rebasing: memory[done...]), Int64(offset + done))
            } catch {
                throw wrap(error, path, 0)
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Reads a whole file.
    func readFile(_ path: String) throws(JournalError) -> [UInt8] {
        let fd = try open(path, .readOnly)
        defer { closeQuietly(fd) }
        let size = try fileSize(fd, path)
        return try read(fd, path, count: Int(size), at: 0)
    }

    /// Writes all of `bytes` at `offset`; a write that makes no progress is `EIO`.
    func write(_ fd: Int32, _ path: String, _ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(JournalError) {
        var done = 0
        while done < bytes.count {
            let n: Int
            do { n = try io.pwrite(fd, UnsafeRawBufferPointer(rebasing: bytes[done...]), offset + Int64(done)) } catch {
                throw wrap(error, path, offset + Int64(done))
            }
            if n <= 0 {
                throw JournalError(
                    .io(errno: 5, operation: "pwrite"), "pwrite wrote nothing", file: path, offset: offset + Int64(done)
                )
            }
            done += n
        }
    }

    func write(_ fd: Int32, _ path: String, _ bytes: [UInt8], at offset: Int64) throws(JournalError) {
        let result: Result<Void, JournalError> = bytes.withUnsafeBytes { raw in
            do throws(JournalError) { try write(fd, path, raw, at: offset); return .success(()) } catch {
                return .failure(error)
            }
        }
        try result.get()
    }

    func fsync(_ fd: Int32, _ path: String) throws(JournalError) {
        do { try io.fsync(fd) } catch { throw wrap(error, path) }
    }

    func fdatasync(_ fd: Int32, _ path: String) throws(JournalError) {
        do { try io.fdatasync(fd) } catch { throw wrap(error, path) }
    }

    func truncate(_ fd: Int32, _ path: String, to length: Int64) throws(JournalError) {
        do { try io.ftruncate(fd, length) } catch { throw wrap(error, path, length) }
    }

    func rename(_ from: String, _ to: String) throws(JournalError) {
        do { try io.rename(from, to) } catch { throw wrap(error, from) }
    }

    func unlink(_ path: String) throws(JournalError) {
        do { try io.unlink(path) } catch { throw wrap(error, path) }
    }

    func makeDirectory(_ path: String) throws(JournalError) -> Bool {
        do { return try io.makeDirectory(path) } catch { throw wrap(error, path) }
    }

    func list(_ path: String) throws(JournalError) -> [String] {
        do { return try io.listDirectory(path) } catch { throw wrap(error, path) }
    }

    func syncDirectory(_ path: String) throws(JournalError) {
        do { try io.syncDirectory(path) } catch { throw wrap(error, path) }
    }

    func lock(_ fd: Int32, _ path: String) throws(JournalError) -> Bool {
        do { return try io.lock(fd) } catch { throw wrap(error, path) }
    }

    /// Writes `bytes` to `path` crash-safely: `path.tmp` is written, fsynced and renamed over
    /// `path`, then the directory is fsynced.
    ///
    /// - Parameter renamed: set to true once the rename has happened: from then on a failure
    ///   (of the directory fsync) leaves the new contents visible but perhaps not durable.
    func replaceFile(_ path: String, with bytes: [UInt8], directory: String, renamed: inout Bool) throws(JournalError) {
        let temporary = path + JournalFormat.temporarySuffix
        try writeNewFile(temporary, bytes)
        do { try rename(temporary, path) } catch {
            try? unlink(temporary)
            throw error
        }
        renamed = true
        try syncDirectory(directory)
    }

    /// Creates (or empties) `path`, writes `bytes`, fsyncs and closes it; on failure removes it.
    func writeNewFile(_ path: String, _ bytes: [UInt8]) throws(JournalError) {
        let fd = try open(path, .createTruncating)
        do {
            try write(fd, path, bytes, at: 0)
            try fsync(fd, path)
        } catch {
            closeQuietly(fd)
            try? unlink(path)
            throw error
        }
        do { try close(fd, path) } catch {
            try? unlink(path)
            throw error
        }
    }
}
