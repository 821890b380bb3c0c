public import ObjectGraph

/// One people record as an import source: a plain struct, as decoded from an API (`Encodable`,
/// its keys the attributes of ``UniquePerson``, for `batchUpsert`).
public struct PersonSource: Sendable, Encodable {
    public var id: Int64
    public var name: String
    public var email: String
    public var age: Int
    public var city: String
    public var score: Double

    /// Record `i` of the workload; `generation` changes the values so an import updates them.
    public init(_ i: Int, generation: Int = 0) {
        id = Int64(i)
        name = "Person \(i)"
        email = "p\(i)@example.com"
        age = 20 + (i + generation) % 60
        city = "City \(i % 1000)"
        score = Double(i) * 0.5 + Double(generation)
    }
}

/// The people record with a unique `id`, importable CoreStore-style.
@Entity
public final class UniquePerson {
    @Attribute(.unique) public var id: Int64 = 0
    public var name: String = ""
    public var email: String = ""
    public var age: Int = 0
    public var city: String = ""
    public var score: Double = 0
    /// No lifecycle hook: said up front, so that a context lets go of the instances of the
    /// objects an import inserts before their first save (Docs/Semantics.md, rule 1).
    public static var implementedHooks: EntityHooks { [] }
}

extension UniquePerson: ImportableUniqueObject {
    public typealias ImportSource = PersonSource

    public static var uniqueIDKeyPath: ReferenceWritableKeyPath<UniquePerson, Int64> { \.id }

    public static func uniqueID(from source: PersonSource, in context: ModelContext) throws -> Int64? { source.id }

    public func update(from source: PersonSource, in context: ModelContext) throws {
        name = source.name
        email = source.email
        age = source.age
        city = source.city
        score = source.score
    }
}

/// Sums over every attribute of a set of people, so that no read can be dropped.
public struct AttributeSums {
    public var ids: Int64 = 0
    public var ages = 0
    public var score = 0.0
    public var stringBytes = 0

    /// All four sums as one number, to report.
    public var checksum: Double { Double(ids) + Double(ages) + score + Double(stringBytes) }

    /// Reads each of the six attributes of every person in `people`: what a reader that
    /// builds every object of the store does (the like-for-like row to SQLite's row cursor).
    @inline(never)
    public init(readingEveryAttributeOf people: [UniquePerson]) {
        for p in people {
            let id = p.id, name = p.name, email = p.email, age = p.age, city = p.city, s = p.score
            ids &+= id
            ages &+= age
            score += s
            stringBytes &+= name.utf8.count &+ email.utf8.count &+ city.utf8.count
        }
    }
}

public enum Importing {
    /// A schema of just the importable people.
    public static func schema() -> Schema {
        do { return try Schema(UniquePerson.self) } catch { preconditionFailure("\(error)") }
    }

    /// Sources `range`, each once.
    public static func sources(_ range: Range<Int>, generation: Int = 0) -> [PersonSource] {
        range.map { PersonSource($0, generation: generation) }
    }
}
