/// Group-commit bookkeeping, protected by `gate`.
struct SyncGate: Sendable {
    struct Truncation: Sendable { var epoch: UInt64; var segment: UInt64; var end: Int64 }
    /// The segment `synced` describes.
    var segment: UInt64
    /// The tail as of the last successful fdatasync of `segment`.
    var synced: Tail
    /// Failed syncs that cut records off (rare; kept so late waiters learn their fate).
    var truncations: [Truncation] = []
}
