public import GraphJournal

/// A store's journal as a shipper reads it, from any thread: the records above a sequence in
/// their wire form, the last sequence, the schema in force. Obtained from
/// ``ObjectStore/shippingSource`` or ``AsyncStore/shippingSource``; it reads the files, it
/// never writes.
public struct ShippingSource: Sendable {
    let journal: Journal
    /// The store's metrics and spans, which shipping reports through too.
    package let instruments: StoreInstruments

    init(journal: Journal, instruments: StoreInstruments) {
        self.journal = journal
        self.instruments = instruments
    }

    /// GraphJournal's `Journal.forEachShippedRecord(after:_:)`: every live schema, transaction and base
    /// record above `sequence`, in order.
    ///
    /// - Throws: what `body` throws, or GraphJournal's `JournalError`.
    public func forEachRecord(after sequence: UInt64, _ body: (ShippedRecord) throws -> Void) throws {
        try journal.forEachShippedRecord(after: sequence, body)
    }

    /// The sequence of the journal's last record (0 when empty).
    public var lastSequence: UInt64 { journal.stats.lastSequence }

    /// The journal's directory.
    package var directory: String { journal.directory }

    /// The payload of the schema record in force (the source's, for a replica).
    public var schema: [UInt8]? { journal.schema }

    /// GraphJournal's `Journal.origin`: for a replica, where it is in its source.
    public var origin: [UInt8]? { journal.origin }
}

extension ObjectStore {
    /// The journal as a shipper reads it (``ShippingSource``).
    public var shippingSource: ShippingSource { ShippingSource(journal: door.journal, instruments: door.instruments) }
}

extension AsyncStore {
    /// The journal as a shipper reads it (``ShippingSource``).
    public nonisolated var shippingSource: ShippingSource {
        ShippingSource(journal: journalForShipping, instruments: instruments)
    }
}
