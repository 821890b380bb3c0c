public import ObjectGraph

/// The six-attribute "people" record of the benchmark workload, ``People`` (slots 0–5).
@Entity
public final class Person {
    public var id: Int64
    public var name: String
    public var email: String
    public var age: Int
    public var city: String
    public var score: Double

    public init(id: Int64, name: String, email: String, age: Int, city: String, score: Double) {
        self.id = id
        self.name = name
        self.email = email
        self.age = age
        self.city = city
        self.score = score
    }
}
