// Fault injection for the package's own tests: compiled only when OBJECTGRAPH_FAULT_INJECTION
// is defined (Package.swift defines it in debug builds, which is what `swift test` builds), so
// a release build of the library or the tool carries none of it, and it is `package`, never
// part of the package API.
#if OBJECTGRAPH_FAULT_INJECTION
    internal import Glibc
    internal import Synchronization

    extension JournalIO {
        /// A fault to inject at a chosen call.
        package enum Fault: Sendable, Hashable {
            /// The call fails with this `errno` (for example `ENOSPC`, `EIO`) and does nothing;
            /// except `close`, which releases the descriptor anyway, as Linux's does.
            case error(Int32)
            /// A `pwrite` writes only half its bytes and reports that; the next call to `pwrite`
            /// fails with `ENOSPC`, as when a disk fills mid-write. On other calls, like `.error(EIO)`.
            case shortWrite
            /// The call and every later one (except `close`) fail with `EIO`, as if the process had
            /// died there: nothing after it reaches the disk.
            case crash
        }

        /// When and how a fault-injecting ``JournalIO`` fails. Thread-safe.
        ///
        /// Calls are counted from the last ``arm(_:atCall:of:)``; only the operations in `of`
        /// count (all of them when it is nil).
        package final class FaultPlan: Sendable {
            struct State {
                var fault: Fault?
                var atCall = 0
                var operations: Set<Operation>?
                var counted = 0
                var crashed = false
                var failNextWrite = false
                var injected: [String] = []
            }
            let state = Mutex(State())

            /// Creates a plan that injects nothing until armed.
            package init() {}

            /// Injects `fault` at the `call`-th counted call from now (1 is the next one).
            ///
            /// - Parameter fault: what to inject.
            /// - Parameter call: which counted call fails, 1-based.
            /// - Parameter operations: the operations that count; nil counts every call.
            package func arm(_ fault: Fault, atCall call: Int, of operations: Set<Operation>? = nil) {
                state.withLock {
                    $0 = State()
                    $0.fault = fault
                    $0.atCall = call
                    $0.operations = operations
                }
            }

            /// Stops injecting and forgets a simulated crash.
            package func disarm() {
                state.withLock { $0 = State() }
            }

            /// The number of counted calls since the last ``arm(_:atCall:of:)``.
            package var callCount: Int { state.withLock { $0.counted } }

            /// Whether a fault has been injected since the last arm.
            package var hasFired: Bool { state.withLock { !$0.injected.isEmpty } }

            /// The faults injected so far, as `"operation#call"` strings.
            package var injected: [String] { state.withLock { $0.injected } }

            enum Decision {
                case pass
                case fail(Int32)
                case shortWrite
            }

            func decide(_ operation: Operation) -> Decision {
                state.withLock { s in
                    if s.crashed { return operation == .close ? .pass : .fail(EIO) }
                    if s.failNextWrite && operation == .pwrite {
                        s.failNextWrite = false
                        s.injected.append("\(operation.rawValue)#ENOSPC")
                        return .fail(ENOSPC)
                    }
                    guard let fault = s.fault else { return .pass }
                    if let operations = s.operations, !operations.contains(operation) { return .pass }
                    s.counted += 1
                    guard s.counted == s.atCall else { return .pass }
                    s.injected.append("\(operation.rawValue)#\(s.counted)")
                    switch fault {
                    case .error(let code): return .fail(code)
                    case .crash:
                        s.crashed = true
                        return operation == .close ? .pass : .fail(EIO)
                    case .shortWrite:
                        guard operation == .pwrite else { return .fail(EIO) }
                        s.failNextWrite = true
                        return .shortWrite
                    }
                }
            }
        }

        /// Wraps `base` so that `plan` can make chosen calls fail.
        ///
        /// - Parameter plan: decides which call fails and how.
        /// - Parameter base: the layer that does the real work, ``system`` by default.
        package static func faulty(_ plan: FaultPlan, base: JournalIO = .system) -> JournalIO {
            @Sendable func check(_ operation: Operation) throws(Failure) {
                if case .fail(let code) = plan.decide(operation) {
                    throw Failure(errno: code, operation: operation.rawValue + " (injected)")
                }
            }
            return JournalIO(
                open: { (path, mode) throws(Failure) in
                    try check(.open); return try base.open(path, mode)
                },
                close: { (fd) throws(Failure) in
                    // Linux releases the descriptor whatever close(2) reports (an EIO
                    // included): a failed close still closes, or the injected failure would
                    // leak the descriptor, and with it the journal's lock, in a way no real
                    // failure can.
                    switch plan.decide(.close) {
                    case .pass: try base.close(fd)
                    case .fail(let code):
                        try? base.close(fd)
                        throw Failure(errno: code, operation: "close (injected)")
                    case .shortWrite:  // decided for pwrite only
                        try? base.close(fd)
                        throw Failure(errno: EIO, operation: "close (injected)")
                    }
                },
                pread: { (fd, buffer, offset) throws(Failure) in
                    try check(.pread); return try base.pread(fd, buffer, offset)
                },
                pwrite: { (fd, buffer, offset) throws(Failure) in
                    switch plan.decide(.pwrite) {
                    case .pass: return try base.pwrite(fd, buffer, offset)
                    case .fail(let code): throw Failure(errno: code, operation: "pwrite (injected)")
                    case .shortWrite:
                        let half = UnsafeRawBufferPointer(rebasing: buffer[..<(buffer.count / 2)])
                        return half.isEmpty ? 0 : try base.pwrite(fd, half, offset)
                    }
                },
                fsync: { (fd) throws(Failure) in
                    try check(.fsync); try base.fsync(fd)
                },
                fdatasync: { (fd) throws(Failure) in
                    try check(.fdatasync); try base.fdatasync(fd)
                },
                ftruncate: { (fd, length) throws(Failure) in
                    try check(.ftruncate); try base.ftruncate(fd, length)
                },
                fileSize: { (fd) throws(Failure) in
                    try check(.fileSize); return try base.fileSize(fd)
                },
                rename: { (from, to) throws(Failure) in
                    try check(.rename); try base.rename(from, to)
                },
                unlink: { (path) throws(Failure) in
                    try check(.unlink); try base.unlink(path)
                },
                makeDirectory: { (path) throws(Failure) in
                    try check(.makeDirectory); return try base.makeDirectory(path)
                },
                listDirectory: { (path) throws(Failure) in
                    try check(.listDirectory); return try base.listDirectory(path)
                },
                syncDirectory: { (path) throws(Failure) in
                    try check(.syncDirectory); try base.syncDirectory(path)
                },
                lock: { (fd) throws(Failure) in
                    try check(.lock); return try base.lock(fd)
                }
            )
        }
    }
#endif
