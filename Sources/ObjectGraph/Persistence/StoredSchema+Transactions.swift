public import GraphJournal

// Decoding and checking a transaction payload against the schema it was written with, for
// tools that read a journal without the application's model.

extension StoredSchema {
    /// Decodes a transaction or base record's payload written with this schema.
    ///
    /// - Throws: ``StoreError`` with code `corruptPayload`, naming the byte offset.
    public func decodeTransaction(_ payload: [UInt8]) throws(StoreError) -> ChangeSet {
        var visitor = ChangeSetVisitor(stored: self)
        do {
            try PayloadReader.read(payload) { r throws(PayloadReader.Failure) in
                try PayloadDecoder.decode(&r, stored: self, into: &visitor)
            }
        } catch {
            throw StoreError(payload: error)
        }
        return visitor.result
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
    public func validateTransaction(_ payload: [UInt8], into outline: inout TransactionOutline) throws(StoreError) {
        let result: Result<Void, StoreError> = payload.withUnsafeBytes { buffer in
            do throws(StoreError) { return .success(try validateTransaction(buffer, into: &outline)) } catch {
                return .failure(error)
            }
        }
        try result.get()
    }

    /// ``validateTransaction(_:into:)-([UInt8],_)`` on a payload in memory the caller holds (the package's
    /// tools and tests), without copying it into an array.
    package func validateTransaction(
        _ payload: UnsafeRawBufferPointer, into outline: inout TransactionOutline
    ) throws(StoreError) {
        var visitor = OutlineVisitor(reusing: &outline)
        defer { swap(&visitor.outline, &outline) }
        try PayloadDecoder.decode(payload, stored: self, into: &visitor)
    }

    /// Checks a transaction or base record's payload as ``validateTransaction(_:into:)-([UInt8],_)`` does,
    /// with the same outline and the same error, reading the payload piece by piece as
    /// GraphJournal's `Journal.streamPayloads(directory:io:keyring:_:)` lends it: a chunked payload of tens of MB is
    /// checked one decompressed chunk at a time, never held whole.
    ///
    /// When the pieces end before the payload does (a chunk that does not decompress), it
    /// returns false with `outline` incomplete; `JournalPayload.finish()` then returns false
    /// and the journal reports the record, so the caller should ignore it.
    ///
    /// ```swift
    /// var outline = TransactionOutline()
    /// _ = try Journal.streamPayloads(directory: path) { entry, payload in
    ///     guard entry.kind == .transaction else { return }
    ///     let checked = try schema.validateTransaction(payload, into: &outline)
    ///     if checked && payload.finish() { print(outline.blocks.count, "entities changed") }
    /// }
    /// ```
    ///
    /// - Parameter payload: the payload, from its first piece on.
    /// - Parameter outline: emptied (its storage kept), then filled with the payload's serials.
    /// - Returns: true when the whole payload was read; false when its pieces ended early.
    /// - Throws: ``StoreError`` with code `corruptPayload`, naming the byte offset.
    public func validateTransaction(
        _ payload: JournalPayload, into outline: inout TransactionOutline
    ) throws(StoreError) -> Bool {
        var visitor = OutlineVisitor(reusing: &outline)
        defer { swap(&visitor.outline, &outline) }
        var r = PayloadReader(payload)
        do throws(PayloadReader.Failure) {
            try PayloadDecoder.decode(&r, stored: self, into: &visitor)
            return true
        } catch {
            if case .piecesEnded = error { return false }
            throw StoreError(payload: error)
        }
    }
}
