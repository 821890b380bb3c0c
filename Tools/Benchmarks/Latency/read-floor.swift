// The floor of "open and read every attribute" past the open, for this object model: 1M class
// instances that hold an owner and a row (what an `ObjectBacking` is), made into an array, then
// for each, three strings decoded from bytes in one buffer (the people workload's name, email
// and city) and three numbers read from a row-major array of cells. No store, no checks.
//
//     swiftc -O -o /tmp/read-floor Tools/Benchmarks/Latency/read-floor.swift && /tmp/read-floor
//
// Used for the cold-start figures in Tools/Benchmarks/README.md.

import Foundation

final class Owner {}

final class Instance {
    let owner: Owner
    let row: Int32
    init(_ owner: Owner, _ row: Int32) {
        self.owner = owner
        self.row = row
    }
}

@inline(never)
func run(
    _ n: Int, _ bytes: [UInt8], _ spans: [(Int, Int)], _ cells: [UInt64]
) -> (instances: Double, reads: Double, checksum: Int) {
    let owner = Owner()
    let start = ContinuousClock.now
    var objects: [Instance] = []
    objects.reserveCapacity(n)
    for row in 0..<n { objects.append(Instance(owner, Int32(row))) }
    let made = ContinuousClock.now
    var checksum = 0
    bytes.withUnsafeBufferPointer { buffer in
        for object in objects {
            let row = Int(object.row)
            for k in 0..<3 {
                let (offset, length) = spans[row * 3 + k]
                let string = String(
                    decoding: UnsafeBufferPointer(rebasing: buffer[offset..<offset + length]), as: UTF8.self)
                checksum &+= string.utf8.count
            }
            checksum &+= Int(truncatingIfNeeded: cells[row * 6] &+ cells[row * 6 + 3] &+ cells[row * 6 + 5])
        }
    }
    let read = ContinuousClock.now
    func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) * 1e-18 }
    return (seconds(made - start), seconds(read - made), checksum)
}

let n = 1_000_000
var bytes: [UInt8] = []
var spans: [(Int, Int)] = []
for i in 0..<n {
    for text in ["Person \(i)", "p\(i)@example.com", "City \(i % 1000)"] {
        spans.append((bytes.count, text.utf8.count))
        bytes.append(contentsOf: text.utf8)
    }
}
let cells = (0..<(n * 6)).map { UInt64($0) }
for _ in 0..<5 {
    let (instances, reads, checksum) = run(n, bytes, spans, cells)
    print(
        String(
            format: "instances %.1f ms, reads %.1f ms, together %.1f ms (checksum %d)", instances * 1e3, reads * 1e3,
            (instances + reads) * 1e3, checksum))
}
