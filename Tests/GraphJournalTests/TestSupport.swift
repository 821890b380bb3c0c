import Foundation
import Glibc
import ObjectGraphTestSupport

@testable import GraphJournal

/// A fresh, empty directory path (not created) under the system temporary directory.
func temporaryJournalPath(_ label: String = #function) -> String {
    let base = FileManager.default.temporaryDirectory.path
    let clean = label.filter { $0.isLetter || $0.isNumber }
    return "\(base)/graphjournal-\(clean)-\(UInt64.random(in: 0 ... .max))"
}

/// Removes a test directory.
func removeDirectory(_ path: String) {
    try? FileManager.default.removeItem(atPath: path)
}

/// A payload of `count` bytes that compresses (`compressible`) or not.
func payload(_ index: Int, count: Int, compressible: Bool = true) -> [UInt8] {
    if compressible {
        let text = Array(
            "record \(index) name=Person \(index) email=p\(index)@example.com city=City \(index % 7); ".utf8)
        return (0..<count).map { text[$0 % text.count] }
    }
    var generator = SeededGenerator(seed: UInt64(index) &+ 17)
    return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
}

func readBytes(_ path: String) -> [UInt8] {
    (try? [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))) ?? []
}

func writeBytes(_ path: String, _ bytes: [UInt8]) {
    try! Data(bytes).write(to: URL(fileURLWithPath: path))
}

/// Truncates a file to `length` bytes.
func truncateFile(_ path: String, to length: Int) {
    precondition(Glibc.truncate(path, off_t(length)) == 0)
}

/// Flips one bit of a file (LevelDB's `IncrementByte` in spirit).
func flipBit(_ path: String, bit: Int) {
    var bytes = readBytes(path)
    bytes[bit / 8] ^= UInt8(1 << (bit % 8))
    writeBytes(path, bytes)
}

/// The live segment paths of a journal, from its MANIFEST.
func liveSegments(_ directory: String) throws -> [String] {
    try Journal.inspect(directory: directory).files.map { directory + "/" + $0 }
}

/// Every record, closing the journal afterwards.
func recordsAfterReopen(
    _ directory: String, options: JournalOptions = JournalOptions(durability: .none)
) throws -> [JournalRecord] {
    let journal = try Journal.open(directory: directory, options: options)
    defer { try? journal.close() }
    return try journal.records()
}

/// File mode bits (`st_mode & 0o777`).
func permissions(_ path: String) -> Int {
    var info = stat()
    precondition(stat(path, &info) == 0)
    return Int(info.st_mode & 0o777)
}

/// A small journal: `count` transactions of assorted sizes with one schema; returns payloads.
@discardableResult
func writeSmallJournal(
    _ directory: String, count: Int, options: JournalOptions = JournalOptions(durability: .none)
) throws -> [[UInt8]] {
    let journal = try Journal.open(directory: directory, options: options)
    var written: [[UInt8]] = []
    for index in 0..<count {
        let bytes = payload(index, count: [0, 1, 13, 80, 200][index % 5])
        try journal.append(bytes, schema: Array("schema v1".utf8))
        written.append(bytes)
    }
    try journal.close()
    return written
}

extension Array where Element == JournalRecord {
    var transactions: [[UInt8]] { filter { $0.kind == .transaction }.map(\.payload) }
}
