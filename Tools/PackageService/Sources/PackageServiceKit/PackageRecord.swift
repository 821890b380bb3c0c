public import Foundation
import GraphJournal

/// One Debian package as the fixture `Fixtures/debian-packages.jsonl.lz4` and `POST /sync`
/// carry it: the demo's `DebianPackageRecord` (Tools/Demo/DebianPackageRecord.swift), whose
/// keys `Fixtures/README.md` documents.
public struct PackageRecord: Codable, Sendable, Hashable {
    public var name: String
    public var version: String
    /// `amd64` or `all`.
    public var architecture: String
    public var section: String
    public var priority: String?
    /// The unpacked size in KiB.
    public var installedSize: Int64?
    /// The size of the `.deb` file in bytes.
    public var size: Int64
    /// `Name <email>`.
    public var maintainer: String
    public var homepage: String?
    public var description: String
    public var depends: [String]
    /// The SHA-256 of the `.deb` file, in hex.
    public var sha256: String

    /// Every record of a fixture file: an LZ4 frame of JSON Lines when the name ends in `.lz4`,
    /// plain JSON Lines otherwise. Blank lines are skipped.
    ///
    /// - Throws: ``FixtureError`` naming the file, and the line of a malformed record.
    public static func loadFixture(at url: URL) throws(FixtureError) -> [PackageRecord] {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw FixtureError(url: url, line: nil, message: "cannot read: \(error.localizedDescription)")
        }
        var bytes = [UInt8](data)
        if url.pathExtension == "lz4" {
            do {
                bytes = try LZ4.decompressFrame(bytes)
            } catch {
                throw FixtureError(url: url, line: nil, message: "not a valid LZ4 frame: \(error)")
            }
        }
        let decoder = JSONDecoder()
        var records: [PackageRecord] = []
        var lineNumber = 0
        for line in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
            lineNumber += 1
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
            do {
                records.append(try decoder.decode(PackageRecord.self, from: Data(line)))
            } catch {
                throw FixtureError(url: url, line: lineNumber, message: "\(error)")
            }
        }
        return records
    }

    /// `records` as one JSON array, the document `POST /sync` takes.
    public static func jsonArray(_ records: [PackageRecord]) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(records)
    }
}

/// A fixture file that cannot be loaded.
public struct FixtureError: Error, CustomStringConvertible, Sendable {
    public var url: URL
    /// The 1-based line of the malformed record, or nil when the whole file is unreadable.
    public var line: Int?
    public var message: String

    public var description: String {
        if let line { return "\(url.path):\(line): \(message)" }
        return "\(url.path): \(message)"
    }
}

/// The fixture bundled with this checkout: `Fixtures/debian-packages.jsonl.lz4`, found from
/// this source file's location (the package sits at `Tools/PackageService` of the repository).
public let bundledFixture: URL = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent()  // PackageServiceKit
    .deletingLastPathComponent()  // Sources
    .deletingLastPathComponent()  // PackageService
    .deletingLastPathComponent()  // Tools
    .deletingLastPathComponent()  // repository
    .appendingPathComponent("Fixtures/debian-packages.jsonl.lz4")
