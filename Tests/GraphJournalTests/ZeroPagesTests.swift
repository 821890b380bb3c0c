import Glibc
import Testing

@testable import GraphJournal

/// `ZeroPages` makes memory that held other values read as zeros, writing only the partial
/// pages at its ends and giving the whole pages back.
@Suite struct ZeroPagesTests {
    @Test(arguments: [0, 1, 3, 4095, 8191, 70_000, 1 << 20])
    func memoryThatHeldValuesReadsAsZeros(count: Int) throws {
        for offset in [0, 1, 7] {  // starts that are not page-aligned
            let storage = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: count + offset)
            defer { storage.deallocate() }
            storage.initialize(repeating: .max)
            let buffer = UnsafeMutableBufferPointer(rebasing: storage[offset...])
            ZeroPages.zero(buffer)
            #expect(buffer.allSatisfy { $0 == 0 }, "\(count) words from word \(offset)")
            #expect(storage[..<offset].allSatisfy { $0 == .max }, "the words before are left alone")
        }
    }

    @Test func theWholePagesAreGivenBack() throws {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let count = 1 << 20
        let storage = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: count)
        defer { storage.deallocate() }
        storage.initialize(repeating: .max)
        ZeroPages.zero(storage)
        let base = try #require(storage.baseAddress)
        let start = (Int(bitPattern: base) + page - 1) / page * page
        let end = (Int(bitPattern: base) + count * 8) / page * page
        var vector = [UInt8](repeating: 0, count: (end - start) / page)
        try #require(mincore(UnsafeMutableRawPointer(bitPattern: start), end - start, &vector) == 0)
        #expect(vector.allSatisfy { $0 & 1 == 0 }, "\(vector.filter { $0 & 1 != 0 }.count) pages still resident")
    }

    @Test func anArrayOfZerosHasItsCapacity() {
        let zeros: [UInt64] = ZeroPages.zeros(count: 100_000, capacity: 150_000)
        #expect(zeros.count == 100_000 && zeros.capacity >= 150_000 && zeros.allSatisfy { $0 == 0 })
    }
}
