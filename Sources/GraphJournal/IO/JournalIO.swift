internal import Glibc

/// The journal's only door to the operating system: one closure per system call.
///
/// ``system`` calls the real functions and retries `EINTR`. A wrapper can change any call;
/// the package's own tests use one (compiled in debug builds only) that injects `ENOSPC`,
/// `EIO`, short writes and failed `fsync`s at the N-th call, or simulates a crash (every call
/// after the N-th fails). The reads and writes, which lend raw memory, and the initializer
/// that takes them are the package's own: outside it, a layer is ``system`` with some of its
/// other calls changed.
///
/// ```swift
/// var io = JournalIO.system
/// let fsync = io.fsync
/// io.fsync = { fd throws(JournalIO.Failure) in try fsync(fd); print("synced", fd) }
/// let journal = try Journal.open(directory: path, options: JournalOptions(io: io))
/// ```
public struct JournalIO: Sendable {
    /// A failed system call: the C `errno` and the call's name.
    public struct Failure: Error, Sendable, Hashable {
        /// The C error number.
        public var errno: Int32
        /// The call that failed, for example `"pwrite"`.
        public var operation: String
        /// Creates a failure.
        public init(errno: Int32, operation: String) {
            self.errno = errno
            self.operation = operation
        }
    }

    /// How ``open`` opens a file. Every mode adds `O_CLOEXEC`, `O_NOFOLLOW` and `O_NONBLOCK`,
    /// and the file must turn out to be a regular file; created files get mode 0600.
    public enum OpenMode: Sendable, Hashable {
        /// `O_RDONLY`.
        case readOnly
        /// `O_RDWR`; the file must exist.
        case readWrite
        /// `O_RDWR | O_CREAT`: opens or creates.
        case createOrOpen
        /// `O_RDWR | O_CREAT | O_TRUNC`: creates or empties.
        case createTruncating
    }

    /// The names of the operations (the package's fault injection arms a fault at one of them).
    public enum Operation: String, Sendable, Hashable, CaseIterable {
        case open, close, pread, pwrite, fsync, fdatasync, ftruncate, fileSize
        case rename, unlink, makeDirectory, listDirectory, syncDirectory, lock
    }

    /// Opens `path`; returns the file descriptor.
    ///
    /// The real call (``system``) refuses what is not a regular file without blocking: a
    /// symbolic link fails with `ELOOP`, a directory with `EISDIR`, and a named pipe, socket
    /// or device with `ENODEV` after `fstat` (a FIFO would otherwise block `open` or `read`
    /// forever).
    public var open: @Sendable (_ path: String, _ mode: OpenMode) throws(Failure) -> Int32
    /// Closes a descriptor.
    public var close: @Sendable (_ fd: Int32) throws(Failure) -> Void
    /// Reads up to `buffer.count` bytes at `offset`; returns the count read (0 at end of file).
    package var pread:
        @Sendable (_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, _ offset: Int64) throws(Failure) -> Int
    /// Writes up to `buffer.count` bytes at `offset`; returns the count written.
    package var pwrite:
        @Sendable (_ fd: Int32, _ buffer: UnsafeRawBufferPointer, _ offset: Int64) throws(Failure) -> Int
    /// `fsync`: data and all metadata.
    public var fsync: @Sendable (_ fd: Int32) throws(Failure) -> Void
    /// `fdatasync`: data and the metadata needed to read it back (the size).
    public var fdatasync: @Sendable (_ fd: Int32) throws(Failure) -> Void
    /// `ftruncate`.
    public var ftruncate: @Sendable (_ fd: Int32, _ length: Int64) throws(Failure) -> Void
    /// The file's size (`fstat`).
    public var fileSize: @Sendable (_ fd: Int32) throws(Failure) -> Int64
    /// `rename`, atomic replacement within one directory.
    public var rename: @Sendable (_ from: String, _ to: String) throws(Failure) -> Void
    /// `unlink`.
    public var unlink: @Sendable (_ path: String) throws(Failure) -> Void
    /// `mkdir` with mode 0700; returns false if it already existed.
    public var makeDirectory: @Sendable (_ path: String) throws(Failure) -> Bool
    /// The names in a directory, without `.` and `..`.
    public var listDirectory: @Sendable (_ path: String) throws(Failure) -> [String]
    /// Opens the directory and `fsync`s it, making renames and unlinks in it durable.
    public var syncDirectory: @Sendable (_ path: String) throws(Failure) -> Void
    /// `flock(fd, LOCK_EX | LOCK_NB)`; false when another descriptor holds the lock.
    public var lock: @Sendable (_ fd: Int32) throws(Failure) -> Bool

    /// Creates an I/O layer from closures.
    package init(
        open: @escaping @Sendable (String, OpenMode) throws(Failure) -> Int32,
        close: @escaping @Sendable (Int32) throws(Failure) -> Void,
        pread: @escaping @Sendable (Int32, UnsafeMutableRawBufferPointer, Int64) throws(Failure) -> Int,
        pwrite: @escaping @Sendable (Int32, UnsafeRawBufferPointer, Int64) throws(Failure) -> Int,
        fsync: @escaping @Sendable (Int32) throws(Failure) -> Void,
        fdatasync: @escaping @Sendable (Int32) throws(Failure) -> Void,
        ftruncate: @escaping @Sendable (Int32, Int64) throws(Failure) -> Void,
        fileSize: @escaping @Sendable (Int32) throws(Failure) -> Int64,
        rename: @escaping @Sendable (String, String) throws(Failure) -> Void,
        unlink: @escaping @Sendable (String) throws(Failure) -> Void,
        makeDirectory: @escaping @Sendable (String) throws(Failure) -> Bool,
        listDirectory: @escaping @Sendable (String) throws(Failure) -> [String],
        syncDirectory: @escaping @Sendable (String) throws(Failure) -> Void,
        lock: @escaping @Sendable (Int32) throws(Failure) -> Bool
    ) {
        self.open = open
        self.close = close
        self.pread = pread
        self.pwrite = pwrite
        self.fsync = fsync
        self.fdatasync = fdatasync
        self.ftruncate = ftruncate
        self.fileSize = fileSize
        self.rename = rename
        self.unlink = unlink
        self.makeDirectory = makeDirectory
        self.listDirectory = listDirectory
        self.syncDirectory = syncDirectory
        self.lock = lock
    }

    /// The real system calls, `EINTR` retried.
    public static let system = JournalIO(
        open: { (path, mode) throws(Failure) -> Int32 in
            // O_NONBLOCK: opening a FIFO must not wait for a writer (it has no effect on the
            // reads and writes of a regular file). O_NOFOLLOW: a symbolic link in place of a
            // store file is refused, not followed out of the store.
            var flags = O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK
            switch mode {
            case .readOnly: flags |= O_RDONLY
            case .readWrite: flags |= O_RDWR
            case .createOrOpen: flags |= O_RDWR | O_CREAT
            case .createTruncating: flags |= O_RDWR | O_CREAT | O_TRUNC
            }
            let fd = try retrying("open") { Glibc.open(path, flags, mode_t(JournalFormat.fileMode)) }
            var info = stat()
            if Glibc.fstat(fd, &info) != 0 {
                let code = errno
                Glibc.close(fd)
                throw Failure(errno: code, operation: "fstat")
            }
            guard info.st_mode & S_IFMT == S_IFREG else {
                Glibc.close(fd)
                throw Failure(errno: info.st_mode & S_IFMT == S_IFDIR ? EISDIR : ENODEV, operation: "open")
            }
            return fd
        },
        close: { (fd) throws(Failure) in
            // close is not retried on EINTR: on Linux the descriptor is released anyway.
            if Glibc.close(fd) != 0 && errno != EINTR { throw Failure(errno: errno, operation: "close") }
        },
        pread: { (fd, buffer, offset) throws(Failure) -> Int in
            try retrying("pread") { Glibc.pread(fd, buffer.baseAddress, buffer.count, off_t(offset)) }
        },
        pwrite: { (fd, buffer, offset) throws(Failure) -> Int in
            try retrying("pwrite") { Glibc.pwrite(fd, buffer.baseAddress, buffer.count, off_t(offset)) }
        },
        fsync: { (fd) throws(Failure) in _ = try retrying("fsync") { Glibc.fsync(fd) } },
        fdatasync: { (fd) throws(Failure) in _ = try retrying("fdatasync") { Glibc.fdatasync(fd) } },
        ftruncate: { (fd, length) throws(Failure) in
            _ = try retrying("ftruncate") { Glibc.ftruncate(fd, off_t(length)) }
        },
        fileSize: { (fd) throws(Failure) -> Int64 in
            var info = stat()
            _ = try retrying("fstat") { Glibc.fstat(fd, &info) }
            return Int64(info.st_size)
        },
        rename: { (from, to) throws(Failure) in _ = try retrying("rename") { Glibc.rename(from, to) } },
        unlink: { (path) throws(Failure) in _ = try retrying("unlink") { Glibc.unlink(path) } },
        makeDirectory: { (path) throws(Failure) -> Bool in
            if Glibc.mkdir(path, mode_t(JournalFormat.directoryMode)) == 0 { return true }
            if errno == EEXIST { return false }
            throw Failure(errno: errno, operation: "mkdir")
        },
        listDirectory: { (path) throws(Failure) -> [String] in
            guard let stream = Glibc.opendir(path) else { throw Failure(errno: errno, operation: "opendir") }
            defer { Glibc.closedir(stream) }
            var names: [String] = []
            while let entry = Glibc.readdir(stream) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
                }
                if name != "." && name != ".." { names.append(name) }
            }
            return names
        },
        syncDirectory: { (path) throws(Failure) in
            let fd = try retrying("open") { Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
            defer { Glibc.close(fd) }
            _ = try retrying("fsync") { Glibc.fsync(fd) }
        },
        lock: { (fd) throws(Failure) -> Bool in
            while flock(fd, LOCK_EX | LOCK_NB) != 0 {
                if errno == EINTR { continue }
                if errno == EWOULDBLOCK { return false }
                throw Failure(errno: errno, operation: "flock")
            }
            return true
        }
    )
}

/// Calls `body` until it does not fail with `EINTR`; a negative result throws `errno`.
private func retrying<T: BinaryInteger>(_ operation: String, _ body: () -> T) throws(JournalIO.Failure) -> T {
    while true {
        let result = body()
        if result >= 0 { return result }
        if errno == EINTR { continue }
        throw JournalIO.Failure(errno: errno, operation: operation)
    }
}
