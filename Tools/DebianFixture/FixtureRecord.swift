/// One package as written to the fixture: a JSON object on one line.
///
/// Mirrors `DebianPackageRecord` in the demo target (the two executables cannot share a
/// module). Optional fields are written as `null`, so every line has every key.
struct FixtureRecord: Encodable {
    var name: String
    var version: String
    var architecture: String
    var section: String
    var priority: String?
    var installedSize: Int64?
    var size: Int64
    var maintainer: String
    var homepage: String?
    var description: String
    var depends: [String]
    var sha256: String

    enum CodingKeys: String, CodingKey {
        case name, version, architecture, section, priority, installedSize, size, maintainer
        case homepage, description, depends, sha256
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(version, forKey: .version)
        try container.encode(architecture, forKey: .architecture)
        try container.encode(section, forKey: .section)
        try container.encode(priority, forKey: .priority)
        try container.encode(installedSize, forKey: .installedSize)
        try container.encode(size, forKey: .size)
        try container.encode(maintainer, forKey: .maintainer)
        try container.encode(homepage, forKey: .homepage)
        try container.encode(description, forKey: .description)
        try container.encode(depends, forKey: .depends)
        try container.encode(sha256, forKey: .sha256)
    }
}

extension FixtureRecord {
    /// Builds a record from a parsed stanza.
    ///
    /// - Throws: ``IndexError`` naming the line when a required field is missing or a size is
    ///   not a whole number.
    init(_ stanza: IndexStanza, path: String) throws(IndexError) {
        func required(_ field: String) throws(IndexError) -> String {
            guard let value = stanza.fields[field], !value.isEmpty else {
                throw IndexError(
                    path: path, line: stanza.firstLine,
                    message: "package \(stanza.fields["Package"] ?? "?") has no \(field) field")
            }
            return value
        }
        func integer(_ field: String) throws(IndexError) -> Int64? {
            guard let text = stanza.fields[field] else { return nil }
            guard let value = Int64(text), value >= 0 else {
                throw IndexError(
                    path: path, line: stanza.fieldLines[field] ?? stanza.firstLine,
                    message: "\(field) \"\(text)\" is not a non-negative integer")
            }
            return value
        }
        let size = try integer("Size")
        guard let size else {
            throw IndexError(
                path: path, line: stanza.firstLine,
                message: "package \(stanza.fields["Package"] ?? "?") has no Size field")
        }
        self.init(
            name: try required("Package"),
            version: try required("Version"),
            architecture: try required("Architecture"),
            section: try required("Section"),
            priority: stanza.fields["Priority"],
            installedSize: try integer("Installed-Size"),
            size: size,
            maintainer: try required("Maintainer"),
            homepage: stanza.fields["Homepage"],
            description: try required("Description"),
            depends: Self.dependencyNames(stanza.fields["Depends"] ?? ""),
            sha256: try required("SHA256"))
    }

    /// The package names of a `Depends` value: for each comma-separated item, the first
    /// alternative of `a | b`, without its version constraint `(>= 1.0)`, architecture list
    /// `[amd64]`, build profile `<!nocheck>` or architecture qualifier `:any`. Repeated names
    /// (`foo (>= 1), foo (<< 2)`) appear once, in first-seen order.
    static func dependencyNames(_ value: String) -> [String] {
        var names: [String] = []
        var seen: Set<String> = []
        for item in value.split(separator: ",") {
            let first = item.split(separator: "|", maxSplits: 1).first ?? ""
            var name = first.prefix { !"([<".contains($0) }.trimmingBlanks()
            if let colon = name.firstIndex(of: ":") { name = String(name[..<colon]) }
            // A multi-line Depends may carry a newline: keep only the name token.
            name = name.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" }).first.map(String.init) ?? ""
            if !name.isEmpty, seen.insert(name).inserted { names.append(name) }
        }
        return names
    }
}
