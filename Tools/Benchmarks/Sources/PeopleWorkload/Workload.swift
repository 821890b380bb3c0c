public import ObjectGraph

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The "people" workload of the benchmarks and the peer comparison: record `i` has id `i`,
/// name "Person i", email "p<i>@example.com", age 20 + i % 60, city "City <i % 1000>" and
/// score i × 0.5.
public enum People {
    /// The number of records of the standard workload.
    public static let count = 1_000_000

    /// A schema holding only ``Person``.
    public static func schema() -> Schema {
        do {
            return try Schema(Person.self)
        } catch {
            fatalError("Person schema: \(error)")
        }
    }

    /// Sets record `i`'s six attributes on `p`, building the strings: the one definition of the
    /// workload's values (inlinable, so the benchmarks measure the sets, not a call).
    @inlinable
    public static func fill(_ p: Person, _ i: Int) {
        p.id = Int64(i)
        p.name = "Person \(i)"
        p.email = "p\(i)@example.com"
        p.age = 20 + i % 60
        p.city = "City \(i % 1000)"
        p.score = Double(i) * 0.5
    }

    /// Inserts records `range` into `context`, building the strings on the way.
    @discardableResult
    public static func insert(_ range: Range<Int>, into context: ModelContext) throws -> [Person] {
        var people: [Person] = []
        people.reserveCapacity(range.count)
        for i in range {
            let p = try context.insert(Person.self)
            fill(p, i)
            people.append(p)
        }
        return people
    }

    /// A context holding `count` saved records, and their instances in insertion order.
    public static func savedContext(count: Int = People.count) throws -> (ModelContext, [Person]) {
        let context = ModelContext(schema: schema())
        let people = try insert(0..<count, into: context)
        try context.save()
        return (context, people)
    }

    /// The three strings of each record, built ahead of the measurement.
    public struct Strings {
        public var names: [String] = []
        public var emails: [String] = []
        public var cities: [String] = []

        public init(count: Int) {
            names.reserveCapacity(count)
            emails.reserveCapacity(count)
            cities.reserveCapacity(count)
            for i in 0..<count {
                names.append("Person \(i)")
                emails.append("p\(i)@example.com")
                cities.append("City \(i % 1000)")
            }
        }
    }
}

/// The process's current resident set size in bytes (`VmRSS` of /proc/self/status), or 0 where
/// that file does not exist.
public func residentSetSize() -> Int {
    guard let file = fopen("/proc/self/status", "r") else { return 0 }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if text.hasPrefix("VmRSS:") {
            let kB = text.dropFirst(6).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { Int($0) } ?? 0
            return kB * 1024
        }
    }
    return 0
}
