import Foundation

/// A value behind an `NSLock`, for state that tests share across threads. Shared by the test
/// targets. `@unchecked Sendable`: every access goes through `withLock`.
///
/// An `NSLock` rather than a `Mutex`: ThreadSanitizer does not see the hand-over of a
/// contended `Mutex` on Linux (its slow path is a kernel futex inside the uninstrumented
/// standard library), and reported state guarded by one as a race under `make tsan`.
public final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    /// Creates the box holding `value`.
    public init(_ value: Value) { self.value = value }

    /// Runs `body` on the value, holding the lock.
    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
