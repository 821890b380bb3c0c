import Synchronization

/// The key paths an entity description resolved lately, with their slots, compared by
/// identity and readable from any thread without a lock.
///
/// A key path literal is one object per call site, so a lookup in a loop finds its own entry
/// in a load or two, instead of hashing the key path's components (about a thousand
/// instructions for a model's computed property, more than the rest of an upsert).
///
/// An entry is one atomic word: the key path's address in the low 48 bits, its slot in the
/// high 16, 0 when empty. Each entry holds a strong reference to its key path, so no other
/// object can take that address while the entry is there. A reader compares its own, live
/// key path's address with the word, and never dereferences the entry; an entry replaced while
/// a reader compares is released only after the replacement, when the reader's key path
/// (alive before it loaded the word) cannot have the released one's address. A new key path
/// replaces the entries round robin.
final class KeyPathSlotCache: Sendable {
    static let capacity = 8
    private static let addressMask: UInt64 = (1 << 48) - 1

    private let entries: InlineArray<8, Atomic<UInt64>> = InlineArray { _ in Atomic(0) }
    private let next = Atomic<Int>(0)

    /// The word of `keyPath` with `slot`, nil when it does not fit (it always does on 64-bit
    /// Linux, whose user addresses have 47 bits).
    private static func word(_ keyPath: AnyKeyPath, slot: Int) -> UInt64? {
        let address = UInt64(UInt(bitPattern: ObjectIdentifier(keyPath)))
        guard address != 0, address & ~addressMask == 0, slot >= 0, slot < 1 << 16 else { return nil }
        return address | UInt64(slot) << 48
    }

    /// The slot remembered for `keyPath`, if it is one of the entries.
    @inline(__always)
    func slot(for keyPath: AnyKeyPath) -> Int? {
        let address = UInt64(UInt(bitPattern: ObjectIdentifier(keyPath)))
        for i in 0..<Self.capacity {
            let e = entries[i].load(ordering: .relaxed)
            if e & Self.addressMask == address, e != 0 { return Int(e >> 48) }
        }
        return nil
    }

    /// Remembers `keyPath` at `slot`, in place of the oldest entry when all are taken.
    func remember(_ keyPath: AnyKeyPath, slot: Int) {
        guard let word = Self.word(keyPath, slot: slot) else { return }
        let i = next.wrappingAdd(1, ordering: .relaxed).oldValue & (Self.capacity - 1)
        // Unmanaged invariant: every nonzero entry owns exactly one retain of the key path at
        // its address. The retain is taken before the word is published, and the exchange
        // hands the replaced word, and so its retain, to this call alone, which gives it up.
        _ = Unmanaged.passRetained(keyPath)
        let old = entries[i].exchange(word, ordering: .relaxed)
        Self.release(old)
    }

    /// Gives up the retain a word taken out of `entries` owned (none for 0). Each word is
    /// taken out once: by the exchange that replaced it, or by `deinit`. The address came from
    /// a live key path (``word(_:slot:)``) and the word's own retain kept it alive since.
    private static func release(_ word: UInt64) {
        guard let pointer = UnsafeRawPointer(bitPattern: UInt(word & addressMask)) else { return }
        Unmanaged<AnyKeyPath>.fromOpaque(pointer).release()
    }

    deinit {
        for i in 0..<Self.capacity { Self.release(entries[i].load(ordering: .relaxed)) }
    }
}
