import Foundation

/// Network namespaces joined by veth pairs to a bridge, for partitions between the fault
/// checker's processes: each node (a nats-server, a client process) runs in a namespace of its
/// own with one address on a private /24 that exists only inside these namespaces, and its link
/// to the bridge can be set down (a partition: packets are dropped, connections are not reset)
/// and up again. The bridge lives in a namespace of its own; this process reaches the nodes
/// through one more veth pair whose host end carries the subnet's `.254`. Nothing is routed
/// beyond the subnet and no host setting changes. Everything is removed by ``tearDown()``.
///
/// Needs `ip netns add` (root, or CAP_SYS_ADMIN and CAP_NET_ADMIN); ``make()`` returns nil and
/// the reason where that is refused, and the checker then runs on loopback without partitions.
final class FaultNetwork: @unchecked Sendable {
    /// A namespace with its address.
    struct Node: Sendable, Hashable {
        let namespace: String
        let address: String
        /// The end of its veth pair on the bridge (set down to cut the node off).
        let bridgePort: String
    }

    let prefix: String
    let subnet: String
    private let hub: String
    private let hostEnd: String
    private let lock = NSLock()
    private var nodes: [Node] = []
    private var tornDown = false

    static let ip: String? = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    private init(prefix: String, subnet: String) {
        self.prefix = prefix
        self.subnet = subnet
        hub = "\(prefix)-hub"
        hostEnd = "\(prefix)h"
    }

    /// The network, or nil and why it cannot be made here.
    static func make() -> (network: FaultNetwork?, reason: String?) {
        guard ip != nil else { return (nil, "the ip command (iproute2) is not installed") }
        let prefix = "ogf" + String(UInt16.random(in: 0...UInt16.max), radix: 16)
        let subnet = "10.213.\(UInt8.random(in: 1...254))"
        let network = FaultNetwork(prefix: prefix, subnet: subnet)
        do {
            try network.setUp()
            return (network, nil)
        } catch {
            network.tearDown()
            return (nil, "\(error)")
        }
    }

    private func setUp() throws {
        try Self.run(["netns", "add", hub])
        try Self.run(["-n", hub, "link", "set", "lo", "up"])
        try Self.run(["-n", hub, "link", "add", "br0", "type", "bridge"])
        try Self.run(["-n", hub, "link", "set", "br0", "up"])
        try Self.run(["link", "add", hostEnd, "type", "veth", "peer", "name", "\(hostEnd)b"])
        try Self.run(["link", "set", "\(hostEnd)b", "netns", hub])
        try Self.run(["-n", hub, "link", "set", "\(hostEnd)b", "master", "br0", "up"])
        try Self.run(["addr", "add", "\(subnet).254/24", "dev", hostEnd])
        try Self.run(["link", "set", hostEnd, "up"])
    }

    /// A new namespace on the bridge, with the address `subnet.index` (1...250).
    func addNode(_ index: Int) throws -> Node {
        let namespace = "\(prefix)-n\(index)"
        let port = "\(prefix)p\(index)"
        let node = Node(namespace: namespace, address: "\(subnet).\(index)", bridgePort: port)
        lock.withLock { nodes.append(node) }
        try Self.run(["netns", "add", namespace])
        try Self.run(["-n", namespace, "link", "set", "lo", "up"])
        try Self.run(["link", "add", port, "type", "veth", "peer", "name", "\(port)n"])
        try Self.run(["link", "set", port, "netns", hub])
        try Self.run(["link", "set", "\(port)n", "netns", namespace])
        try Self.run(["-n", hub, "link", "set", port, "master", "br0", "up"])
        try Self.run(["-n", namespace, "link", "set", "\(port)n", "name", "eth0"])
        try Self.run(["-n", namespace, "addr", "add", "\(node.address)/24", "dev", "eth0"])
        try Self.run(["-n", namespace, "link", "set", "eth0", "up"])
        return node
    }

    /// Cuts `node` off from every other node and from this process.
    func cut(_ node: Node) throws { try Self.run(["-n", hub, "link", "set", node.bridgePort, "down"]) }

    /// Joins `node` again.
    func heal(_ node: Node) throws { try Self.run(["-n", hub, "link", "set", node.bridgePort, "up"]) }

    /// The command line that runs `executable` inside `node`'s namespace.
    func command(in node: Node, _ executable: String, _ arguments: [String]) -> (String, [String]) {
        (Self.ip ?? "ip", ["netns", "exec", node.namespace, executable] + arguments)
    }

    /// Removes every namespace (their veth pairs go with them) and the host's end. The
    /// processes inside must be stopped first: a namespace outlives its name while a process
    /// runs in it.
    func tearDown() {
        let (all, first) = lock.withLock { () -> ([Node], Bool) in
            defer { tornDown = true }
            return (nodes, !tornDown)
        }
        guard first else { return }
        for node in all { _ = try? Self.run(["netns", "del", node.namespace]) }
        _ = try? Self.run(["link", "del", hostEnd])
        _ = try? Self.run(["netns", "del", hub])
    }

    deinit { tearDown() }

    /// Runs `ip` with `arguments`; throws with its error output when it fails.
    @discardableResult
    static func run(_ arguments: [String]) throws -> String {
        guard let ip else { throw NATSServerError(description: "the ip command is not installed") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ip)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw NATSServerError(
                description: "ip \(arguments.joined(separator: " ")) failed (\(process.terminationStatus)): \(text)")
        }
        return text
    }
}
