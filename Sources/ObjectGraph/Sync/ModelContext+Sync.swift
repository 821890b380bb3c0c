internal import Tracing

extension ModelContext {
    /// Runs a sync over `entities`: `body` maps the API's documents through the operation
    /// (which marks every object they touch), then the operation deletes the invalid objects,
    /// forwards marks to related objects, sweeps the unmarked objects of `entities` in scope,
    /// and saves everything as one journal record.
    ///
    /// Safe where DKDBManager and RestKit were not:
    /// - a operation whose body throws (a mapping error, ``SyncOperation/cancel()``) sweeps nothing
    ///   and leaves the context exactly as before the operation;
    /// - an entity of which the operation marked no object is not wiped, unless
    ///   ``SyncOperation/allowEmptySync(of:)`` says so: the operation throws ``SyncError``
    ///   `emptySync` instead;
    /// - a sweep that would remove more than `sweepLimit` allows throws ``SyncError``
    ///   `sweepLimitExceeded`, naming how many it would have removed. With no `sweepLimit`,
    ///   ``SweepLimit/default`` applies: at most half of an entity's saved objects in scope
    ///   (a one-object payload where a list was expected must not wipe the mirror). Pass
    ///   ``SweepLimit/unlimited`` when a large sweep is meant; an empty sync allowed by
    ///   ``SyncOperation/allowEmptySync(of:)`` is consent enough for that entity;
    /// - a save that fails (a `deny` delete rule hit by the sweep: ``ValidationError``, a full
    ///   disk) undoes the whole operation too, and only it: changes pending before the sync
    ///   stay pending, exactly as they were;
    /// - a sync whose task is cancelled throws `CancellationError` and is undone like a sync
    ///   whose body throws: its mapping runs check every 4,096 records, the sweep every 4,096
    ///   objects it examines, and the sync once more just before it saves.
    ///
    /// Inside a transaction the operation commits into it (no save of its own) or rolls back alone.
    ///
    /// `progress` receives ``WorkProgress`` reports (operation `sync`, unit `records`): the
    /// first before `body` runs, without a total; then, from each mapping run of the sync, one
    /// when it starts and one every 4,096 top-level sources, counting the records of every run
    /// of the sync out of those of the runs so far and the one going on (the sync cannot know
    /// what `body` maps next); the final one, with the total of records mapped, once the sync
    /// is saved.
    ///
    /// ```swift
    /// let result = try context.sync([Package.self]) { operation in
    ///     try operation.map(json, with: packages)
    /// }
    /// ```
    ///
    /// - Returns: per entity, what the mappings and the sweep did.
    /// - Throws: what `body` throws, ``SyncError``, `CancellationError`, or what the save throws.
    @discardableResult
    public func sync(
        _ entities: [any Entity.Type], sweepLimit: SweepLimit? = nil, progress: ProgressHandler? = nil,
        _ body: (SyncOperation) throws -> Void
    ) throws -> SyncResult {
        var indexes: [Int] = []
        for type in entities {
            guard let i = schema.indexByType[ObjectIdentifier(type)] else {
                throw ObjectGraphError(
                    .unknownEntity, "\(type) is not an entity of this context's schema", entity: "\(type)")
            }
            indexes.append(i)
        }
        let instruments = door?.storeInstruments
        let span = instruments?.span("objectgraph.sync")
        defer { span?.end() }
        let outer = savepointDepth > 0
        let depth = savepointDepth
        let operation = SyncOperation(context: self, entities: indexes, progress: progress)
        let previous = activeSync
        activeSync = operation
        defer { activeSync = previous }
        beginSavepoint()
        let result: SyncResult
        do {
            try operation.progress.begin()
            try body(operation)
            // A body that caught a run's CancellationError does not make the sync go on.
            try operation.progress.checkCancellation()
            result = try finishSync(operation, limit: sweepLimit)
            try operation.progress.checkCancellation()
            if outer {
                if savepointDepth > depth { releaseSavepoint() }
            } else {
                // Saved inside the sync's own savepoint: a save that fails (a deny rule, a full
                // disk) undoes what it changed itself, and the catch below then undoes the sync,
                // leaving the changes pending before the sync as they were.
                try save()
            }
        } catch {
            if savepointDepth > depth { rollbackToSavepoint() } else if !outer { rollback() }
            span?.fail(error)
            instruments?.syncs.increment()
            throw error
        }
        operation.progress.finish(operation.recordsMapped)
        if let instruments {
            instruments.syncs.increment()
            var total = SyncCounts()
            for (entity, counts) in result.counts {
                instruments.synced(entity: entity, counts)
                total.inserted += counts.inserted
                total.updated += counts.updated
                total.unchanged += counts.unchanged
                total.swept += counts.swept
                total.discarded += counts.discarded
            }
            span?.attributes["objectgraph.records"] = operation.recordsMapped
            span?.attributes["objectgraph.inserted"] = total.inserted
            span?.attributes["objectgraph.updated"] = total.updated
            span?.attributes["objectgraph.unchanged"] = total.unchanged
            span?.attributes["objectgraph.swept"] = total.swept
            span?.attributes["objectgraph.discarded"] = total.discarded
        }
        return result
    }

    /// After the body: invalid objects, forwarded marks, the sweep, invalid objects again.
    private func finishSync(_ operation: SyncOperation, limit: SweepLimit?) throws -> SyncResult {
        var counts: [String: SyncCounts] = [:]
        for (name, m) in operation.mapping {
            var c = SyncCounts()
            c.inserted = m.inserted
            c.updated = m.updated
            c.unchanged = m.unchanged + m.skippedUnmodified
            c.tombstoned = m.tombstoned
            c.discarded = m.discarded
            c.unresolvedConnections = m.unresolvedConnections
            c.connections = m.connections
            counts[name] = c
        }
        var invalid = [Int](repeating: 0, count: tables.count)
        _ = try deleteInvalid(operation, &invalid)
        forwardMarks(operation)

        // What each entity's sweep would remove, checked against the safety rules before
        // anything is deleted.
        var doomed: [(EntityTable, [Int])] = []
        for t in tables where operation.isSwept[t.entityIndex] {
            let e = t.entityIndex
            // Objects in scope that were saved before the sync (those it inserted are never swept).
            var saved = 0
            var marked = 0
            var unmarked: [Int] = []
            for row in 0..<t.rowCount where t.isVisible(row: row) {
                try operation.examine()
                if let scope = operation.scopes[e], !(try scope(t.instance(row: row))) { continue }
                let inserted = t.isInserted(row: row)
                if !inserted { saved += 1 }
                if operation.isMarked(e, row: row) || inserted {
                    marked += 1
                } else {
                    unmarked.append(row)
                }
            }
            let empty = marked == 0 && !unmarked.isEmpty
            if empty && !operation.emptyAllowed[e] {
                throw SyncError(
                    code: .emptySync, entity: t.entity.name, wouldRemove: unmarked.count,
                    message:
                        "the sync marked no \(t.entity.name) object and would have swept all \(unmarked.count) in scope; "
                        + "nothing was changed (call allowEmptySync(of:) if an empty response is the truth)")
            }
            // With no limit given, the default one applies, except to an empty sync the caller
            // allowed: allowEmptySync(of:) is consent to sweep everything in scope.
            let effective = limit ?? (empty ? SweepLimit.unlimited : SweepLimit.default)
            if let allowed = effective.allowed(saved: saved), unmarked.count > allowed {
                let which =
                    limit == nil
                    ? "more than the default limit of half of them (\(allowed)); nothing was changed (pass a sweepLimit, "
                        + ".unlimited if the API really dropped them)"
                    : "more than its limit of \(allowed); nothing was changed"
                throw SyncError(
                    code: .sweepLimitExceeded, entity: t.entity.name, wouldRemove: unmarked.count,
                    message:
                        "the sync would have swept \(unmarked.count) of the \(saved) saved \(t.entity.name) objects in scope, "
                        + which)
            }
            doomed.append((t, unmarked))
        }
        for (t, rows) in doomed {
            var swept = 0
            for row in rows where t.isVisible(row: row) {
                try operation.examine()
                deleteApplyingRules(t, row: row)
                swept += 1
            }
            counts[t.entity.name, default: SyncCounts()].swept += swept
        }
        // Objects the sweep made invalid (a required parent swept), until nothing changes.
        while try deleteInvalid(operation, &invalid) {}
        for t in tables where invalid[t.entityIndex] > 0 {
            counts[t.entity.name, default: SyncCounts()].invalid += invalid[t.entityIndex]
        }
        for t in tables where operation.isSwept[t.entityIndex] && counts[t.entity.name] == nil {
            counts[t.entity.name] = SyncCounts()
        }
        return SyncResult(counts: counts, discarded: operation.discarded)
    }

    /// Deletes the invalid objects (``SyncValidated``) of the operation's entities in scope, and
    /// takes back their marks. Returns whether it deleted any.
    private func deleteInvalid(_ operation: SyncOperation, _ invalid: inout [Int]) throws -> Bool {
        var any = false
        for t in tables where operation.isSwept[t.entityIndex] && t.entity.type is any SyncValidated.Type {
            let e = t.entityIndex
            for row in 0..<t.rowCount where t.isVisible(row: row) {
                try operation.examine()
                let object = t.instance(row: row)
                if let scope = operation.scopes[e], !(try scope(object)) { continue }
                guard let v = object as? any SyncValidated, v.isInvalidForSync else { continue }
                operation.unmark(e, row: row)
                deleteApplyingRules(t, row: row)
                invalid[e] += 1
                any = true
            }
        }
        return any
    }

    /// Forwards marks from each marked object along its entity's forwarding relationships
    /// (``SyncMarkForwarding``, else those with a `cascade` delete rule), each object once.
    private func forwardMarks(_ operation: SyncOperation) {
        let forwarding: [[ResolvedRelationship]] = tables.map { t in
            if let f = t.entity.type as? any SyncMarkForwarding.Type {
                let names = Set(f.relationshipsForwardingSyncMarks)
                return t.relationships.filter { names.contains($0.name) }
            }
            return t.relationships.filter { $0.deleteRule == .cascade }
        }
        var work: [(Int, Int)] = []
        for t in tables where !forwarding[t.entityIndex].isEmpty {
            let e = t.entityIndex
            for row in 0..<t.rowCount where operation.isMarked(e, row: row) && t.isVisible(row: row) {
                work.append((e, row))
            }
        }
        while let (e, row) = work.popLast() {
            let t = tables[e]
            for r in forwarding[e] {
                let d = t.destinationTable(r)
                let targets =
                    r.isToMany
                    ? t.toManyDestinations(row: row, r)
                    : (t.toOneDestination(row: row, r, visibleOnly: true).map { [$0] } ?? [])
                for target in targets where !operation.isMarked(d.entityIndex, row: target) {
                    operation.mark(d.entityIndex, row: target)
                    if !forwarding[d.entityIndex].isEmpty { work.append((d.entityIndex, target)) }
                }
            }
        }
    }
}
