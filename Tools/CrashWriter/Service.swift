import Foundation
import Logging
import ObjectGraph
import ObjectGraphLifecycle
import ServiceLifecycle

/// Four tasks writing transactions into the store until graceful shutdown: each transaction
/// inserts one `CrashRecord` with a number no other uses, and "ack N" is printed once it
/// returned, acknowledged.
struct LoadService: Service {
    let store: AsyncStore

    func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            for writer in 0..<4 {
                group.addTask {
                    var n = Int64(writer)
                    while !Task.isShuttingDownGracefully {
                        let seq = n
                        do {
                            try await store.perform { context in
                                let r = try context.insert(CrashRecord.self)
                                r.seq = seq
                                r.payload = "transaction \(seq) " + String(repeating: "x", count: Int(seq % 300))
                            }
                        } catch {
                            // Refused (the store closed): not acknowledged, and not retried.
                            FileHandle.standardError.write(Data("refused \(seq): \(error)\n".utf8))
                            return
                        }
                        FileHandle.standardOutput.write(Data("ack \(seq)\n".utf8))
                        n += 4
                    }
                }
            }
        }
    }
}

/// Runs the store and the load in a `ServiceGroup` until SIGTERM, then exits 0 after printing
/// "closed" (1 when the group failed).
func runService(directory: String, schema: Schema) async -> Never {
    do {
        let store = try AsyncStore(at: URL(fileURLWithPath: directory), schema: schema)
        let group = ServiceGroup(
            services: [store, LoadService(store: store)], gracefulShutdownSignals: [.sigterm],
            logger: Logger(label: "objectgraph-crash-writer"))
        try await group.run()
        FileHandle.standardOutput.write(Data("closed\n".utf8))
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("objectgraph-crash-writer: \(error)\n".utf8))
        exit(1)
    }
}
