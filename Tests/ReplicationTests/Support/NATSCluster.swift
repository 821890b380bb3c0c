import Foundation
import NATSJetStream
import ObjectGraphTestSupport

/// A JetStream cluster of nats-server processes on 127.0.0.1: each member has its own client
/// port, route port, name, configuration and store directory, and routes to all the others.
/// Ready once a stream with one replica per member can be created.
final class NATSCluster: @unchecked Sendable {
    let servers: [NATSServer]
    /// The members' client URLs, in member order.
    var urls: [String] { servers.map(\.url) }

    private init(servers: [NATSServer]) { self.servers = servers }

    /// The member at `index`.
    subscript(index: Int) -> NATSServer { servers[index] }

    /// Starts `size` members and waits until a stream of `size` replicas can be created.
    static func start(size: Int = 3) throws -> NATSCluster {
        var lastError: (any Error)?
        for _ in 0..<3 {
            let ports = try NATSServer.freePorts(2 * size)
            let clientPorts = Array(ports[0..<size])
            let routePorts = Array(ports[size...])
            let clusterName = "og-\(UUID().uuidString.prefix(6))"
            do {
                let servers = try (0..<size).map { index in
                    try NATSServer(
                        name: "\(clusterName)-n\(index + 1)", port: clientPorts[index],
                        cluster: (
                            name: clusterName, port: routePorts[index],
                            routes: routePorts.enumerated().filter { $0.offset != index }.map(\.element)
                        ),
                        probeReplicas: size)
                }
                let cluster = NATSCluster(servers: servers)
                do {
                    for server in servers { try server.launch() }
                    try NATSServer.waitForJetStream(
                        urls: cluster.urls, replicas: size, deadline: .now + eventBound, what: "cluster \(clusterName)"
                    ) { servers.map { $0.logTail(lines: 10) }.joined(separator: "\n") }
                    return cluster
                } catch {
                    lastError = error
                }
            } catch {
                lastError = error
            }
        }
        throw lastError ?? NATSServerError(description: "the cluster did not start")
    }

    /// SIGKILLs the member at `index`.
    func kill(_ index: Int) { servers[index].kill() }

    /// Restarts the member at `index` (same ports and store) and waits until a stream of all
    /// members' replicas can be created through it.
    func restart(_ index: Int) throws { try servers[index].restart() }
}
