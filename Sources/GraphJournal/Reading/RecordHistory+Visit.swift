extension RecordHistory {
    /// Takes in the next record of the segment (`bytes`, the whole file) while `visit` looks
    /// at it: `visit` gets a function that returns the record's payload, decompressed through
    /// the history on its first call only; a record whose payload `visit` does not ask for is
    /// decompressed all the same when later records may copy from it (``note(_:in:at:file:)``).
    func visit(
        _ record: ScannedRecord, in bytes: UnsafeRawBufferPointer, file: String,
        _ visit: (_ payload: @escaping () -> Result<[UInt8], JournalError>) throws -> Void
    ) rethrows {
        // Escaping only so that `visit` may hand it on; it is called during `visit` alone.
        var decoded: Result<[UInt8], JournalError>?
        defer { if decoded == nil { note(record, in: bytes, file: file) } }
        try visit { [self] in
            if let decoded { return decoded }
            let result = payload(of: record, in: bytes, file: file)
            decoded = result
            return result
        }
    }
}
