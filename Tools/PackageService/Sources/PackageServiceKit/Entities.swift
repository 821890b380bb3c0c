import Foundation
import ObjectGraph

/// One binary package of Debian's archive index, as the service stores it: the demo's entity
/// (Tools/Demo/DebianPackageEntity.swift) without the fields only the demo uses.
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
    /// The description (one line in the fixture).
    var summary: String
    /// Names of the packages it depends on (first alternative of each clause).
    var depends: [String] = []
    var sha256: String
    /// The maintainer (team) as an object; `maintainer` keeps the field as the index spells it.
    @Relationship(inverse: "packages") var maintainedBy: DebianMaintainer?
}

/// A maintainer or team, one per distinct `maintainer` field. It cannot be deleted while it
/// still maintains packages (delete rule deny).
@Entity final class DebianMaintainer {
    @Attribute(.unique) var name: String = ""
    @Relationship(deleteRule: .deny, inverse: "maintainedBy") var packages: [DebianPackage]
}
