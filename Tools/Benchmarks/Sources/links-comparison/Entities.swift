import ObjectGraph

// The entities of the links benchmark. Each pair holds the same objects (an `n` attribute, the
// object's index) and relates them through one relationship stored differently.

/// An owner whose to-many is the inverse of a to-one slot (not stored as links): the baseline.
@Entity final class OneOwner {
    var n: Int = 0
    @Relationship(inverse: "owner") var members: [OneMember]
}

/// A member with a to-one slot.
@Entity final class OneMember {
    var n: Int = 0
    @Relationship(inverse: "members") var owner: OneOwner?
}

/// A many-to-many, unordered on both sides.
@Entity final class SetOwner {
    var n: Int = 0
    @Relationship(inverse: "owners") var members: [SetMember]
}

@Entity final class SetMember {
    var n: Int = 0
    @Relationship(inverse: "members") var owners: [SetOwner]
}

/// An ordered one-to-many: the owner orders its members, each member has one owner (its to-one
/// is stored as links too).
@Entity final class ListOwner {
    var n: Int = 0
    @Relationship(inverse: "owner", ordered: true) var members: [ListMember]
}

@Entity final class ListMember {
    var n: Int = 0
    @Relationship(inverse: "members") var owner: ListOwner?
}

/// An ordered many-to-many: the owner orders its members, a member is in many owners.
@Entity final class SeqOwner {
    var n: Int = 0
    @Relationship(inverse: "owners", ordered: true) var members: [SeqMember]
}

@Entity final class SeqMember {
    var n: Int = 0
    @Relationship(inverse: "members") var owners: [SeqOwner]
}

/// A many-to-many of an entity with itself: each node depends on others.
@Entity final class Node {
    var n: Int = 0
    @Relationship(inverse: "dependents") var depends: [Node]
    @Relationship(inverse: "depends") var dependents: [Node]
}

/// An owner entity whose `members` is a to-many, whatever its storage.
protocol BenchOwner: Entity {
    associatedtype Member: BenchMember
    var n: Int { get set }
    var members: [Member] { get set }
}

/// A member entity.
protocol BenchMember: Entity {
    var n: Int { get set }
}

extension OneOwner: BenchOwner {}
extension OneMember: BenchMember {}
extension SetOwner: BenchOwner {}
extension SetMember: BenchMember {}
extension ListOwner: BenchOwner {}
extension ListMember: BenchMember {}
extension SeqOwner: BenchOwner {}
extension SeqMember: BenchMember {}
