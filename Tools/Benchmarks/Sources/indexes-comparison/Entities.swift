import ObjectGraph

// The same people-like record three times, with 0, 1 and 2 secondary indexes. `section` takes
// 100 values ("Section 0" … "Section 99", 1% of the objects each); `rank` is a permutation of
// 0..<N (a 1% range of it is 1% of the objects, scattered over the table).

/// No index.
@Entity final class Member0 {
    var id: Int64 = 0
    var name: String = ""
    var email: String = ""
    var age: Int = 0
    var section: String = ""
    var rank: Int = 0
    var score: Double = 0
    init() {}
}

/// An index on `section`.
@Entity final class Member1 {
    #Index<Member1>([\.section])
    var id: Int64 = 0
    var name: String = ""
    var email: String = ""
    var age: Int = 0
    var section: String = ""
    var rank: Int = 0
    var score: Double = 0
    init() {}
}

/// Indexes on `section` and on `rank`.
@Entity final class Member2 {
    #Index<Member2>([\.section], [\.rank])
    var id: Int64 = 0
    var name: String = ""
    var email: String = ""
    var age: Int = 0
    var section: String = ""
    var rank: Int = 0
    var score: Double = 0
    init() {}
}
