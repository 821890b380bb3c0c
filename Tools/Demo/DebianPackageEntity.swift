import Foundation
import ObjectGraph

/// One binary package of Debian's archive index, as the demo stores it.
@Entity final class DebianPackage {
    @Attribute(.unique) var name: String
    var version: String
    var architecture: String
    var section: String
    var priority: String?
    var installedSize: Int64?
    var size: Int64
    var maintainer: String
    var homepage: URL?
    /// The first line of the description.
    var summary: String
    /// The rest of the description.
    var details: String = ""
    /// Set by a sync's tombstone: the API says the package was removed.
    var isRemoved: Bool = false
    /// Names of the packages it depends on, as the index lists them (first alternative of each
    /// clause). Virtual packages and packages outside the slice have no object of their own.
    var dependsNames: [String] = []
    var sha256: String
    /// The maintainer (team) as an object; `maintainer` keeps the field as the index spells it.
    @Relationship(inverse: "packages") var maintainedBy: DebianMaintainer?
    /// The packages of the slice it depends on: a many-to-many of packages with themselves,
    /// whose inverse is `dependents`. Deleting a package removes it from its dependents' lists
    /// (delete rule nullify, the default, both ways).
    @Relationship(inverse: "dependents") var depends: [DebianPackage]
    /// The packages of the slice that depend on it.
    @Relationship(inverse: "depends") var dependents: [DebianPackage]
}

/// A maintainer or team, one per distinct `Maintainer:` field. It cannot be deleted while it
/// still maintains packages (delete rule deny).
@Entity final class DebianMaintainer {
    @Attribute(.unique) var name: String = ""
    @Relationship(deleteRule: .deny, inverse: "maintainedBy") var packages: [DebianPackage]
}

/// Imported by package name, CoreStore-style: a second import of the same index updates the
/// existing objects instead of duplicating them.
extension DebianPackage: ImportableUniqueObject {
    typealias ImportSource = DebianPackageRecord

    static var uniqueIDKeyPath: ReferenceWritableKeyPath<DebianPackage, String> { \.name }

    static func uniqueID(from source: DebianPackageRecord, in context: ModelContext) throws -> String? { source.name }

    func update(from source: DebianPackageRecord, in context: ModelContext) throws {
        update(from: source)
    }
}

extension DebianPackage {
    /// Copies a fixture record's fields into this object.
    func update(from record: DebianPackageRecord) {
        name = record.name
        version = record.version
        architecture = record.architecture
        section = record.section
        priority = record.priority
        installedSize = record.installedSize
        size = record.size
        maintainer = record.maintainer
        homepage = record.homepage.flatMap(URL.init(string:))
        let lines = record.description.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
        summary = lines.first.map(String.init) ?? ""
        details = lines.count > 1 ? String(lines[1]) : ""
        dependsNames = record.depends
        sha256 = record.sha256
    }

    /// Points `depends` at the packages `names` names (its `Depends` field, as `dependsNames`
    /// holds it), each found through the unique index on `name`, and returns how many names
    /// have no package. Assigning the same set again changes nothing. The names come from the
    /// caller: reading `dependsNames` back decodes its JSON text on every read.
    @discardableResult
    func linkDepends(to names: [String], in context: ModelContext) throws -> Int {
        var targets: [DebianPackage] = []
        targets.reserveCapacity(names.count)
        for name in names {
            if let p = try context.object(DebianPackage.self, where: \.name, equals: name) { targets.append(p) }
        }
        depends = targets
        return names.count - targets.count
    }
}
