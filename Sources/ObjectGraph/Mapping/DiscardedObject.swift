/// A new object a run removed because it failed insert validation.
public struct DiscardedObject: Sendable, Hashable, CustomStringConvertible {
    /// The top-level source that created it.
    public let sourceIndex: Int
    /// Its entity.
    public let entity: String
    /// Every validation failure, each naming the attribute when there is one.
    public let reasons: [String]

    public var description: String { "source \(sourceIndex) (\(entity)): " + reasons.joined(separator: "; ") }
}
