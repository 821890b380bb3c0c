public import ObjectGraph

/// The parent of the cascade benchmark: deleting it deletes its residents.
@Entity
public final class Household {
    public var name: String = ""
    @Relationship(deleteRule: .cascade, inverse: "household") public var residents: [Resident]
}

/// A child of the cascade benchmark.
@Entity
public final class Resident {
    public var name: String = ""
    public var age: Int = 0
    @Relationship(inverse: "residents") public var household: Household?
}

/// The relationship workload: one household with `children` residents, saved.
public enum Households {
    public static func schema() -> Schema {
        do { return try Schema(Household.self, Resident.self) } catch { preconditionFailure("\(error)") }
    }

    /// A context holding one saved household with `children` residents.
    public static func savedContext(children: Int) throws -> (ModelContext, Household) {
        let context = ModelContext(schema: schema())
        let home = try context.insert(Household.self)
        home.name = "home"
        for i in 0..<children {
            let r = try context.insert(Resident.self)
            r.name = "Resident \(i)"
            r.age = i % 90
            r.household = home
        }
        try context.save()
        return (context, home)
    }
}
