/// A unit of work on a context, passed to ``ModelContext/transaction(_:)``.
public struct Transaction {
    /// The context the transaction works on.
    public let context: ModelContext

    /// Abandons the transaction: everything it changed is undone and
    /// ``ModelContext/transaction(_:)`` throws an ``ObjectGraphError`` with code `cancelled`.
    public func cancel() throws -> Never {
        throw ObjectGraphError(.cancelled, "the transaction was cancelled")
    }
}

extension ModelContext {
    /// Runs `body` as one transaction: when it returns, the context is saved (the whole
    /// transaction in one journal record); when it throws (or calls ``Transaction/cancel()``),
    /// every change it made is rolled back and the error is rethrown.
    ///
    /// Changes pending before the transaction began are kept if it rolls back, and saved with it
    /// if it commits. Transactions nest: an inner one commits into the outer one (no save of its
    /// own) or rolls back alone.
    ///
    /// ```swift
    /// let count = try context.transaction { tx in
    ///     let people = try tx.context.importUniqueObjects(Person.self, sourceArray: batch)
    ///     if people.isEmpty { try tx.cancel() }
    ///     return people.count
    /// }
    /// ```
    ///
    /// Concurrency: like the context, a transaction runs synchronously in the context's
    /// isolation domain; nothing else can touch the context while it runs.
    ///
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws, or what the save throws (then the context keeps the
    ///   transaction's changes pending, as any failed save does).
    public func transaction<R>(_ body: (Transaction) throws -> R) throws -> R {
        let outer = savepointDepth > 0
        let depth = savepointDepth
        beginSavepoint()
        let result: R
        do {
            result = try body(Transaction(context: self))
        } catch {
            if savepointDepth > depth {
                rollbackToSavepoint()
            } else {
                rollback()  // the body saved: undo what came after that save
            }
            throw error
        }
        if savepointDepth > depth { releaseSavepoint() }
        if !outer { try save() }
        return result
    }
}
