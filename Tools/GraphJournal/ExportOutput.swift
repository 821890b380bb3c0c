import Foundation
import Glibc
import Synchronization

/// The file `export --output` writes: built as a temporary file beside it (same directory,
/// so the final rename is atomic), synced, then moved into place. Without `force`, an
/// existing file is refused, before the store is read and again at the end (the move fails
/// rather than replace a file that appeared meanwhile).
struct OutputFile {
    let path: String
    let force: Bool

    /// Refuses an output that exists (without `--force`) or is a directory.
    func checkCanWrite() throws {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        if info.st_mode & mode_t(S_IFMT) == mode_t(S_IFDIR) {
            throw ToolFailure(.failure, "\(path) is a directory; give the file to write; nothing was written")
        }
        if !force {
            throw ToolFailure(
                .failure, "\(path) exists; pass --force to replace it; nothing was written")
        }
    }

    /// The directory the output goes in, and its file name.
    private var parts: (directory: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let directory = String(path[..<slash])
        return (directory.isEmpty ? "/" : directory, String(path[path.index(after: slash)...]))
    }

    /// Creates the temporary file, lets `body` fill it (given its path), syncs it and moves
    /// it to ``path``. If `body` throws, or a signal ends the process meanwhile, the temporary
    /// file is removed and the output is not touched.
    func write(_ body: (String) throws -> Void) throws {
        let (directory, name) = parts
        let temporary = "\(directory)/.\(name).export-\(getpid()).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw ToolFailure(
                .failure, "cannot create \(temporary): \(String(cString: strerror(errno))); nothing was written")
        }
        close(fd)
        TemporaryFile.track(temporary)
        defer { TemporaryFile.untrack() }
        do {
            try body(temporary)
            try sync(temporary)
            try install(temporary)
        } catch {
            unlink(temporary)
            throw error
        }
        // The rename itself, on disk.
        let dirfd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirfd >= 0 {
            fsync(dirfd)
            close(dirfd)
        }
    }

    private func sync(_ file: String) throws {
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0, fsync(fd) == 0 else {
            let message = String(cString: strerror(errno))
            if fd >= 0 { close(fd) }
            throw ToolFailure(.failure, "cannot sync \(file): \(message); nothing was written")
        }
        close(fd)
    }

    /// Moves the complete temporary file to ``path``: with `force`, replacing what is there;
    /// without, only if nothing is (a hard link fails on an existing name; where hard links
    /// are not supported, a check then a rename).
    private func install(_ temporary: String) throws {
        if !force {
            if link(temporary, path) == 0 {
                unlink(temporary)
                return
            }
            let error = errno
            if error == EEXIST {
                throw ToolFailure(
                    .failure, "\(path) appeared while exporting; pass --force to replace it; nothing was written")
            }
            guard [EPERM, EOPNOTSUPP, EXDEV, EMLINK].contains(error) else {
                throw ToolFailure(
                    .failure, "cannot create \(path): \(String(cString: strerror(error))); nothing was written")
            }
            try checkCanWrite()
        }
        guard rename(temporary, path) == 0 else {
            throw ToolFailure(
                .failure, "cannot move the export to \(path): \(String(cString: strerror(errno))); nothing was written")
        }
    }
}

/// The temporary file an export is writing, removed if SIGINT, SIGTERM or SIGHUP ends the
/// process before it is moved into place.
private enum TemporaryFile {
    /// The path as a C string (the handler may call only async-signal-safe functions), or nil.
    /// Its address, 0 for none (a pointer is not `Sendable`; its bits are).
    private static let pending = Atomic<UInt>(0)

    static func track(_ path: String) {
        pending.store(UInt(bitPattern: strdup(path)), ordering: .sequentiallyConsistent)
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { number in
                let bits = TemporaryFile.pending.load(ordering: .sequentiallyConsistent)
                if let path = UnsafeMutablePointer<CChar>(bitPattern: bits) { unlink(path) }
                Glibc.signal(number, SIG_DFL)
                raise(number)
            }
            sigemptyset(&action.sa_mask)
            sigaction(signal, &action, nil)
        }
    }

    /// Resets the handlers, then frees the path.
    static func untrack() {
        for signal in [SIGINT, SIGTERM, SIGHUP] { Glibc.signal(signal, SIG_DFL) }
        let bits = pending.exchange(0, ordering: .sequentiallyConsistent)
        free(UnsafeMutablePointer<CChar>(bitPattern: bits))
    }
}
