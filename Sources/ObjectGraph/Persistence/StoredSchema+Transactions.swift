// Decoding and checking a transaction payload against the schema it was written with, for
// tools that read a journal without the application's model.

extension StoredSchema {
    /// Decodes a transaction or base record's payload written with this schema.
    ///
    /// - Throws: ``StoreError`` with code `corruptPayload`, naming the byte offset.
    public func decodeTransaction(_ payload: [UInt8]) throws(StoreError) -> ChangeSet {
        let result: Result<ChangeSet, StoreError> = payload.withUnsafeBytes { buffer in
            do throws(StoreError) { return .success(try TransactionCodec.decodeChangeSet(buffer, stored: self)) } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Checks a transaction or base record's payload written with this schema without
    /// building its values, and lists the serials it inserts, updates and deletes in
    /// `outline`: what `graph-journal verify` needs, several times faster than
    /// ``decodeTransaction(_:)``.
    ///
    /// It throws exactly when ``decodeTransaction(_:)`` would, with the same message: every
    /// entity and attribute index must exist in this schema, every value must be well-formed
    /// for its attribute's type, and every length must stay inside the payload.
    ///
    /// ```swift
    /// var outline = TransactionOutline()
    /// try schema.validateTransaction(payload, into: &outline)
    /// let inserted = outline.blocks.reduce(0) { $0 + $1.inserted.count }
    /// ```
    ///
    /// - Parameter payload: the decompressed payload.
    /// - Parameter outline: emptied (its storage kept), then filled with the payload's serials.
    /// - Throws: ``StoreError`` with code `corruptPayload`, naming the byte offset.
    public func validateTransaction(_ payload: UnsafeRawBufferPointer, into outline: inout TransactionOutline) throws(StoreError) {
        try TransactionCodec.validate(payload, stored: self, into: &outline)
    }
}
