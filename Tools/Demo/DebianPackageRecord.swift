public import Foundation
import GraphJournal

/// One Debian package from the bundled fixture `Fixtures/debian-packages.jsonl.lz4`.
///
/// The fixture is a dependency-closed slice of Debian bookworm's `main` amd64 `Packages` index,
/// written by the `debian-fixture` tool as JSON Lines inside one LZ4 frame; each line decodes
/// to one record. See `Fixtures/README.md` for where the data comes from and how it was picked.
///
/// ```swift
/// let packages = try DebianPackageRecord.loadFixture(at: URL(fileURLWithPath: "Fixtures/debian-packages.jsonl.lz4"))
/// let byName = Dictionary(uniqueKeysWithValues: packages.map { ($0.name, $0) })
/// let libc = byName["libc6"]?.depends  // ["libgcc-s1"]
/// ```
public struct DebianPackageRecord: Codable, Sendable, Hashable {
    /// The package name (`Package`), unique within the fixture.
    public var name: String
    /// The Debian version string (`Version`), for example `1:2.0.33-2+b1`.
    public var version: String
    /// `amd64` or `all` (`Architecture`).
    public var architecture: String
    /// The archive section (`Section`), for example `libs` or `python`.
    public var section: String
    /// `required`, `important`, `standard`, `optional` or `extra` (`Priority`); optional in deb822.
    public var priority: String?
    /// The unpacked size in KiB (`Installed-Size`), when the index gives one.
    public var installedSize: Int64?
    /// The size of the `.deb` file in bytes (`Size`).
    public var size: Int64
    /// The maintainer as `Name <email>` (`Maintainer`).
    public var maintainer: String
    /// The upstream home page (`Homepage`), when the index gives one.
    public var homepage: String?
    /// The description; the first line is the one-line synopsis, further lines (if any) are
    /// the long description with "\n" between lines. Bookworm's `Packages` index carries only
    /// the synopsis, so in this fixture it is always one line.
    public var description: String
    /// The package names this one depends on (`Depends`): the first alternative of each item,
    /// without version constraints or `:any` qualifiers, each name once. Names of virtual
    /// packages (such as `default-dbus-system-bus`) have no record of their own.
    public var depends: [String]
    /// The SHA-256 of the `.deb` file, in hex (`SHA256`).
    public var sha256: String

    /// Creates a record.
    ///
    /// - Parameter name: the package name.
    /// - Parameter version: the Debian version string.
    /// - Parameter architecture: `amd64` or `all`.
    /// - Parameter section: the archive section.
    /// - Parameter priority: the package priority, if known.
    /// - Parameter installedSize: the unpacked size in KiB, if known.
    /// - Parameter size: the `.deb` size in bytes.
    /// - Parameter maintainer: the maintainer as `Name <email>`.
    /// - Parameter homepage: the upstream home page, if any.
    /// - Parameter description: the synopsis, optionally followed by more lines.
    /// - Parameter depends: the names of the packages depended on.
    /// - Parameter sha256: the hex SHA-256 of the `.deb`.
    public init(
        name: String, version: String, architecture: String, section: String, priority: String?,
        installedSize: Int64?, size: Int64, maintainer: String, homepage: String?,
        description: String, depends: [String], sha256: String
    ) {
        self.name = name
        self.version = version
        self.architecture = architecture
        self.section = section
        self.priority = priority
        self.installedSize = installedSize
        self.size = size
        self.maintainer = maintainer
        self.homepage = homepage
        self.description = description
        self.depends = depends
        self.sha256 = sha256
    }

    /// The first line of ``description``.
    public var synopsis: Substring {
        description.prefix { $0 != "\n" }
    }

    /// Loads every record of a fixture file.
    ///
    /// A file whose name ends in `.lz4` is decompressed as an LZ4 frame first; any other file is
    /// read as plain JSON Lines. Blank lines are skipped.
    ///
    /// ```swift
    /// let records = try DebianPackageRecord.loadFixture(at: fixtureURL)
    /// ```
    ///
    /// - Parameter url: the fixture, normally `Fixtures/debian-packages.jsonl.lz4`.
    /// - Returns: the records in file order (sorted by name in the shipped fixture).
    /// - Throws: ``DebianFixtureError`` naming the file, and for a malformed record its line
    ///   number and what is wrong with it (bad JSON, a missing key, a value of the wrong type).
    public static func loadFixture(at url: URL) throws(DebianFixtureError) -> [DebianPackageRecord] {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw DebianFixtureError(url: url, line: nil, message: "cannot read: \(error.localizedDescription)")
        }
        var bytes = [UInt8](data)
        if url.pathExtension == "lz4" {
            do {
                bytes = try LZ4.decompressFrame(bytes)
            } catch {
                throw DebianFixtureError(url: url, line: nil, message: "not a valid LZ4 frame: \(error)")
            }
        }

        let decoder = JSONDecoder()
        var records: [DebianPackageRecord] = []
        var lineNumber = 0
        for line in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
            lineNumber += 1
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
            do {
                records.append(try decoder.decode(DebianPackageRecord.self, from: Data(line)))
            } catch let error as DecodingError {
                throw DebianFixtureError(url: url, line: lineNumber, message: Self.explain(error))
            } catch {
                throw DebianFixtureError(url: url, line: lineNumber, message: "\(error)")
            }
        }
        return records
    }

    /// A one-sentence account of a decoding failure.
    private static func explain(_ error: DecodingError) -> String {
        func path(_ codingPath: [any CodingKey]) -> String {
            codingPath.isEmpty ? "the record" : "\"" + codingPath.map(\.stringValue).joined(separator: ".") + "\""
        }
        switch error {
        case .keyNotFound(let key, _):
            return "missing key \"\(key.stringValue)\""
        case .valueNotFound(let type, let context):
            return "\(path(context.codingPath)) is null, expected \(type)"
        case .typeMismatch(let type, let context):
            return "\(path(context.codingPath)) is not \(type)"
        case .dataCorrupted(let context):
            if let underlying = context.underlyingError {
                return "malformed JSON: \((underlying as NSError).localizedDescription)"
            }
            return "malformed JSON at \(path(context.codingPath)): \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}

/// A fixture file that cannot be loaded: names the file, and the line of a malformed record.
public struct DebianFixtureError: Error, CustomStringConvertible, Sendable {
    /// The fixture file.
    public var url: URL
    /// The 1-based line of the malformed record, or nil when the whole file is unreadable.
    public var line: Int?
    /// What is wrong.
    public var message: String

    /// `path:line: message`, or `path: message` when no line applies.
    public var description: String {
        if let line { return "\(url.path):\(line): \(message)" }
        return "\(url.path): \(message)"
    }
}
