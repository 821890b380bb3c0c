import Foundation
import ObjectGraph

/// A package listing with a secondary index on every kind of key: strings (optional and not),
/// signed and unsigned integers, `Double`, `Float?`, `Date`, `Bool`, `Int8?`, and a compound
/// index. `note` and `downloads` are not indexed.
@Entity final class Listing {
    #Index<Listing>(
        [\.section], [\.maintainer, \.version], [\.price], [\.released], [\.stable], [\.rating], [\.size], [\.level])
    var section: String = ""
    var maintainer: String?
    @Attribute(.range(0...1000)) var version: Int = 0
    var price: Double = 0
    var released: Date = Date(timeIntervalSinceReferenceDate: 0)
    var stable: Bool = false
    var rating: Float?
    var size: UInt32 = 0
    var level: Int8?
    var note: String = ""
    var downloads: Int = 0

    init() {}
}

/// The same attributes as ``Listing``, without any index: a fetch on it always scans.
@Entity final class PlainListing {
    var section: String = ""
    var price: Double = 0
}
