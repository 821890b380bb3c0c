// The shape an API mirror maps: Debian-like packages whose maintainer is an entity of its own,
// connected by e-mail (a to-one connected by an attribute), and whose `depends` is a
// many-to-many connected by a list of package names; the records in a shuffled order (neither
// by name nor as stored), the fields of the sizes the bundled Debian fixture has (about 500
// bytes a record, 4 dependencies on average, one maintainer for about 8 packages).
//
// Shared by mapping-comparison (a first run) and realjob-comparison (first sync, a second sync
// of the document with an overlay applied, a no-op resync, reopen and read).

public import Foundation
public import ObjectGraph
import PeopleWorkload

@Entity public final class RealPackage {
    @Attribute(.unique) public var name: String = ""
    public var version: String = ""
    public var architecture: String = ""
    public var section: String = ""
    public var priority: String?
    public var installedSize: Int64?
    public var size: Int64 = 0
    public var maintainerEmail: String = ""
    public var homepage: String?
    public var summary: String = ""
    public var dependsNames: [String] = []
    public var sha256: String = ""
    @Relationship(inverse: "packages") public var maintainedBy: RealMaintainer?
    @Relationship(inverse: "dependents") public var depends: [RealPackage]
    @Relationship(inverse: "depends") public var dependents: [RealPackage]
}

@Entity public final class RealMaintainer {
    @Attribute(.unique) public var email: String = ""
    public var name: String = ""
    @Relationship(inverse: "maintainedBy") public var packages: [RealPackage]
}

/// One record as the API sends it, and as the peer decodes it.
public struct PackageJSON: Codable, Sendable {
    public var name: String
    public var version: String
    public var architecture: String
    public var section: String
    public var priority: String?
    public var installedSize: Int64?
    public var size: Int64
    public var maintainerName: String
    public var maintainerEmail: String
    public var homepage: String?
    public var description: String
    public var depends: [String]
    public var sha256: String
}

/// A document of package records, and what mapping it must produce.
public struct RealDocument: Sendable {
    public var json: Data
    /// The records of the document.
    public var packages: Int
    /// Distinct maintainers, and (package, dependency) pairs whose dependency is in the document.
    public var maintainers: Int
    public var links: Int
    /// With an overlay: the packages of the base document given a new version, size and sha256,
    /// the base's packages the document lacks, and the packages it adds.
    public var changed = 0, gone = 0, added = 0
}

private let prefixes = ["lib", "python3-", "golang-", "node-", "r-cran-", "", "fonts-", "librust-"]
private let words = [
    "accounts", "service", "zlib", "glib", "crypt", "mesa", "xml", "yaml", "ssl", "curl", "tiff", "png", "gtk",
    "qt", "perl", "ruby", "sound", "video", "print", "net", "tools", "utils", "dev", "data", "common", "core",
    "kernel", "audio", "image", "font", "shell", "text",
]
private let sections = ["libs", "utils", "net", "devel", "python", "admin", "web", "doc", "x11", "sound"]

/// A package name: a prefix and a word chosen by a hash of `i`, then `i` in base 36 (unique).
public func packageName(_ i: Int) -> String {
    var g = SplitMix(seed: UInt64(i) &* 0x9E37_79B9_7F4A_7C15 &+ 7)
    let h = g.next()
    return "\(prefixes[Int(h % 8)])\(words[Int((h >> 8) % 32)])\(words[Int((h >> 16) % 32)])-\(String(i, radix: 36))"
}

/// The document of `n` packages in a shuffled order.
public func realDocument(_ n: Int) -> RealDocument { debianDocument(n, overlay: false) }

/// The document of `n` packages with an overlay applied, as bookworm-security and
/// bookworm-updates apply to bookworm: one package in 67 (about 1.5 %) with a new version
/// (`+deb12u2` appended), a new size and a new sha256; one in 1,511 gone (a few dozen at the
/// default size); `n / 200` new packages (a few hundred), appended after the others. The other
/// records are those of `realDocument(n)`, byte for byte, in its order.
public func overlaidDocument(_ n: Int) -> RealDocument { debianDocument(n, overlay: true) }

/// Whether package `i` of the base document is changed, or gone, in the overlaid document.
private func isChanged(_ i: Int) -> Bool { i % 67 == 5 }
private func isGone(_ i: Int) -> Bool { i % 1511 == 17 }

private func debianDocument(_ n: Int, overlay: Bool) -> RealDocument {
    let maintainerCount = max(n / 8, 1)
    var order = Array(0..<n)
    var shuffler = SplitMix(seed: 4242)
    order.shuffle(using: &shuffler)
    let added = overlay ? n / 200 : 0
    if overlay {
        order.removeAll(where: isGone)
        order += n..<(n + added)
    }
    var text = "["
    text.reserveCapacity((n + added) * 520)
    var usedMaintainers = Set<Int>()
    var links = 0, changed = 0
    for (k, i) in order.enumerated() {
        var g = SplitMix(seed: UInt64(i) &+ 0x5151)
        let h = g.next()
        let name = packageName(i)
        let m = Int(g.next() % UInt64(maintainerCount))
        usedMaintainers.insert(m)
        var depends: [String] = []
        var targets = Set<Int>()
        // An eighth of the packages depend on nothing, the others on 1 to 8; one name in twenty
        // is a virtual package the document does not list. Dependencies are packages of the base
        // document; with the overlay, a dependency on a gone package names nothing.
        if h % 8 != 0 {
            for _ in 0..<Int(g.next() % 8) + 1 {
                if g.next() % 20 == 0 {
                    depends.append("virtual-\(words[Int(g.next() % 32)])-\(g.next() % 500)")
                } else {
                    var j = Int(g.next() % UInt64(n))
                    if j == i { j = (j + 1) % n }
                    if j != i && !(overlay && isGone(j)) { targets.insert(j) }
                    depends.append(packageName(j))
                }
            }
        }
        links += targets.count
        let word = words[Int((h >> 24) % 32)], other = words[Int((h >> 32) % 32)]
        var version =
            "\(1 + h % 40).\((h >> 8) % 17).\((h >> 12) % 9)-\(1 + (h >> 16) % 5)\(h % 3 == 0 ? "+deb12u1" : "")"
        let priority = h % 11 == 0 ? "null" : (h % 5 == 0 ? "\"important\"" : "\"optional\"")
        let homepage = h % 6 == 0 ? "null" : "\"https://www.\(word)\(other).org/projects/\(name)/\""
        var size = (h >> 28) % 5_000_000
        var sha = ""
        sha.reserveCapacity(64)
        for _ in 0..<4 {
            let hex = String(g.next(), radix: 16)
            sha += String(repeating: "0", count: 16 - hex.count) + hex
        }
        if overlay && i < n && isChanged(i) {
            // A security or stable update: a new version, size and sha256 (the hash reversed).
            changed += 1
            version += "+deb12u2"
            size += 4096 + UInt64(i % 4096)
            sha = String(sha.reversed())
        }
        let dependsJSON = depends.map { "\"\($0)\"" }.joined(separator: ",")
        if k > 0 { text += "," }
        text +=
            #"{"name":"\#(name)","version":"\#(version)","architecture":"\#(h % 4 == 0 ? "all" : "amd64")","#
            + #""section":"\#(sections[Int((h >> 40) % 10)])","priority":\#(priority),"#
            + #""installedSize":\#((h >> 20) % 90_000),"size":\#(size),"#
            + #""maintainerName":"Debian \#(words[m % 32]) \#(words[(m / 32) % 32]) Team \#(m)","#
            + #""maintainerEmail":"pkg-\#(words[m % 32])-\#(m)@lists.alioth.debian.org","#
            + #""homepage":\#(homepage),"description":"\#(word) \#(other) library for \#(name) - runtime files","#
            + #""depends":[\#(dependsJSON)],"sha256":"\#(sha)"}"#
    }
    text += "]"
    return RealDocument(
        json: Data(text.utf8), packages: order.count, maintainers: usedMaintainers.count, links: links,
        changed: changed, gone: overlay ? n - (order.count - added) : 0, added: added)
}

/// The mapping of one run over the document, as Docs/Mapping.md declares it: packages identified
/// by name, their maintainer mapped from the package's own fields (`maintainerName`,
/// `maintainerEmail`) and identified by e-mail, their dependencies connected by the list of names.
public func realMapping() throws -> EntityMapping<RealPackage> {
    var maintainers = EntityMapping(RealMaintainer.self)
    try maintainers.map(["maintainerEmail": "email", "maintainerName": "name"])
    try maintainers.identify(by: "email")
    var packages = EntityMapping(RealPackage.self)
    try packages.map(
        "name", "version", "architecture", "section", "priority", "installedSize", "size", "maintainerEmail",
        "homepage", "sha256")
    try packages.map("description", to: "summary")
    try packages.map(["depends": "dependsNames"])
    try packages.identify(by: "name")
    try packages.map(to: "maintainedBy", with: maintainers)
    try packages.connect("depends", by: ["dependsNames": "name"])
    return packages
}
