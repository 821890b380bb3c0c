import Foundation

/// Starts child processes from one thread that lives as long as the test process, through
/// `setpriv --pdeathsig KILL` when it exists: the kernel then kills a child as soon as the thread
/// that spawned it ends, that is, when the test process ends, however it ends (a crash or a
/// SIGKILL included), so no nats-server outlives the tests. The thread must be one that never
/// ends earlier: the pool threads that run tests come and go.
final class ChildProcessSpawner: @unchecked Sendable {
    static let shared = ChildProcessSpawner()

    /// `setpriv` (util-linux) when installed.
    let setpriv: String? = ["/usr/bin/setpriv", "/bin/setpriv"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    // Jobs handed to the thread and their results; guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [(id: Int, job: () -> Void)] = []
    private var finished: Set<Int> = []
    private var nextID = 0

    private init() {
        let thread = Thread { [self] in serve() }
        thread.name = "nats-server spawner"
        thread.start()
    }

    private func serve() {
        while true {
            condition.lock()
            while jobs.isEmpty { condition.wait() }
            let (id, job) = jobs.removeFirst()
            condition.unlock()
            job()
            condition.lock()
            finished.insert(id)
            condition.broadcast()
            condition.unlock()
        }
    }

    /// Runs `executable` with `arguments`, its output appended to `log`, and returns the process
    /// once started.
    func spawn(executable: String, arguments: [String], log: FileHandle) throws -> Process {
        let process = Process()
        if let setpriv {
            process.executableURL = URL(fileURLWithPath: setpriv)
            process.arguments = ["--pdeathsig", "KILL", "--", executable] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
        }
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        var failure: (any Error)?
        condition.lock()
        let id = nextID
        nextID += 1
        jobs.append(
            (
                id,
                {
                    do { try process.run() } catch { failure = error }
                }
            ))
        condition.broadcast()
        while !finished.contains(id) { condition.wait() }
        finished.remove(id)
        condition.unlock()
        if let failure { throw failure }
        return process
    }
}
