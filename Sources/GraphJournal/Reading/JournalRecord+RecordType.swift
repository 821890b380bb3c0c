extension JournalRecord.Kind {
    /// The public kind of a record type; nil for skippable types.
    init?(recordType: UInt8) {
        switch JournalFormat.RecordType(rawValue: recordType) {
        case .transaction: self = .transaction
        case .base: self = .base
        case .schema: self = .schema
        case .origin, nil: return nil
        }
    }
}
