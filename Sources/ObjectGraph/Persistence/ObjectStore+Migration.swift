public import Foundation
internal import GraphJournal

// Opening a store written at another version of the model: the plan's stages, in order, then
// one new base written atomically (Docs/Migrations.md).

extension ObjectStore {
    /// Opens (or creates) the store in `directory` with the last version of `plan`, migrating
    /// a store written at an earlier version of the plan first.
    ///
    /// ```swift
    /// let store = try ObjectStore.open(at: url, migrationPlan: PackagesMigrationPlan.self)
    /// ```
    ///
    /// A store already at the last version opens as ``open(at:schema:options:)`` does, in one
    /// pass. A store at an earlier version goes through the plan's stages from its version on:
    /// lightweight stages alone cost nothing (the journal is replayed onto the new model, as
    /// any compatible change is); with a custom stage, the stages run in memory and the result
    /// is written as a new base of the journal (a compaction), which replaces the old history
    /// atomically. A kill at any moment leaves the store wholly at its old version or wholly at
    /// the new one; a stage that throws, a failed validation or a cancelled task leaves it
    /// untouched.
    ///
    /// ``StoreOptions/progress`` receives ``WorkProgress`` reports of operation `migration`
    /// (unit `stages`: each stage, then the writing of the base) before those of the open.
    ///
    /// - Throws: ``StoreError``: `migration` naming both versions (``StoreError/storedVersion``,
    ///   ``StoreError/modelVersion``) when the store's version is not in the plan (a store
    ///   newer than the code), the plan is malformed, or a stage failed (its error in the
    ///   message); otherwise what ``open(at:schema:options:)`` throws.
    public static func open(
        at directory: URL, migrationPlan plan: any SchemaMigrationPlan.Type, options: StoreOptions = StoreOptions()
    ) throws(StoreError) -> ObjectStore {
        guard let last = plan.schemas.last else {
            throw StoreError(.migration, "the migration plan \(plan) lists no schema")
        }
        let schema: Schema
        do { schema = try Schema(versioned: last) } catch {
            throw StoreError(.incompatibleSchema, "\(last): \(error)")
        }
        var options = options
        options.migrationPlan = plan
        return try open(at: directory, schema: schema, options: options)
    }

    /// The open of a store whose journal holds a schema record of another version than
    /// `schema`'s: reads the journal's last schema, then opens at once (the store is at
    /// `schema`'s version, or reaches it through lightweight stages), migrates (custom stages,
    /// then a new base, then the open proper), or refuses naming both versions.
    static func openMigrating(
        at directory: URL, schema: Schema, options: StoreOptions, journalOptions: JournalOptions
    ) throws(StoreError) -> ObjectStore {
        let journal: Journal
        do {
            journal = try Journal.open(directory: directory.path, options: journalOptions)
        } catch {
            throw StoreError(journal: error)
        }
        var handedOver = false
        defer { if !handedOver { try? journal.close() } }
        guard let bytes = journal.schema else {
            throw StoreError(.journal, "the journal of \(directory.path) lost its schema record while it was reopened")
        }
        let stored = try StoredSchema.decode(bytes)
        let model = schema.versionIdentifier
        var progress = _WorkReporter(options.progress, .open, unit: .bytes, total: nil)
        func openAsIs() throws(StoreError) -> ObjectStore {
            handedOver = true
            return try make(
                journal: journal, directory: directory, schema: schema, options: options, earlierReports: [],
                progress: &progress)
        }
        if stored.versionIdentifier == model { return try openAsIs() }
        guard let plan = options.migrationPlan else {
            throw StoreError(
                .migration,
                "\(directory.path) holds version \(stored.versionIdentifier ?? "(unversioned)") of the model and this code uses version \(model ?? "(unversioned)"): "
                    + "open it with a SchemaMigrationPlan that lists both (StoreOptions.migrationPlan); nothing was changed",
                storedVersion: stored.versionIdentifier, modelVersion: model)
        }
        let path = try MigrationPath(plan: plan, stored: stored, model: model, directory: directory)
        if path.steps.isEmpty || !path.steps.contains(where: \.stage.isCustom) {
            // At the model's version already (an unversioned store of its shape), or lightweight
            // stages only: replayed onto the model, nothing rewritten.
            let store = try openAsIs()
            if !path.steps.isEmpty { store.migratedFrom = stored.versionIdentifier ?? "(unversioned)" }
            return store
        }
        try path.migrate(journal: journal, stored: stored, options: options, directory: directory)
        try? journal.close()
        handedOver = true
        let store = try open(at: directory, schema: schema, options: options)
        store.migratedFrom = stored.versionIdentifier ?? "(unversioned)"
        store.migrationWroteBase = true
        return store
    }
}

extension StoredSchema {
    /// The schema record a store opened with `schema` writes, given the journal's last one:
    /// the versions the store went through, ending with `schema`'s (an unversioned schema keeps
    /// the stored list as it is).
    static func recorded(_ schema: Schema, after storedBytes: [UInt8]?) -> [UInt8] {
        var mine = StoredSchema(schema)
        let history = storedBytes.flatMap { try? StoredSchema.decode($0) }?.versions ?? []
        if let version = schema.versionIdentifier {
            mine.versions = history.last == version ? history : history + [version]
        } else {
            mine.versions = history
        }
        return mine.encoded()
    }
}

/// The stages from a store's version to the model's, as a plan lists them.
struct MigrationPath {
    struct Step {
        var from: any VersionedSchema.Type
        var to: any VersionedSchema.Type
        var stage: MigrationStage
    }

    /// The plan's version the store is at.
    var start: any VersionedSchema.Type
    var steps: [Step]

    /// Finds the store's version in `plan` and the stages from there to `model`.
    ///
    /// An unversioned store is at the newest version of the plan whose entities and attributes
    /// it records exactly (names, types, optionality), or else at the plan's first version.
    ///
    /// - Throws: ``StoreError`` with code `migration` for a malformed plan, a stored version
    ///   the plan does not list (a store newer than the code, or from another application), or
    ///   a model version after the store's that the plan does not list.
    init(
        plan: any SchemaMigrationPlan.Type, stored: StoredSchema, model: String?, directory: URL
    ) throws(StoreError) {
        let schemas = plan.schemas
        let ids = schemas.map { $0.versionIdentifier }
        func refuse(_ why: String) -> StoreError {
            StoreError(
                .migration,
                "\(directory.path) holds version \(stored.versionIdentifier ?? "(unversioned)") of the model and this code uses version \(model ?? "(unversioned)"): \(why); nothing was changed",
                storedVersion: stored.versionIdentifier, modelVersion: model)
        }
        if let duplicate = Dictionary(grouping: ids, by: { $0 }).first(where: { $0.value.count > 1 })?.key {
            throw refuse("the plan \(plan) lists version \(duplicate) twice")
        }
        guard let target = ids.firstIndex(where: { $0 == model }) else {
            throw refuse("the plan \(plan) does not list the model's version")
        }
        let from: Int
        if let version = stored.versionIdentifier {
            guard let index = ids.firstIndex(of: version) else {
                throw refuse(
                    "the plan \(plan) does not list version \(version) (versions \(ids.joined(separator: ", "))): the store is newer than this code, or from another application"
                )
            }
            from = index
        } else {
            var shaped: Int?
            for index in schemas.indices.reversed() {
                if let s = try? Schema(versioned: schemas[index]), StoredSchema(s).hasSameShape(as: stored) {
                    shaped = index
                    break
                }
            }
            from = shaped ?? 0
        }
        guard from <= target else {
            throw refuse(
                "the store is newer than this code (version \(ids[from]) comes after \(ids[target]) in the plan)")
        }
        var steps: [Step] = []
        for k in stride(from: from, to: target, by: 1) {
            let matching = plan.stages.filter {
                $0.fromVersion.versionIdentifier == ids[k] && $0.toVersion.versionIdentifier == ids[k + 1]
            }
            guard matching.count <= 1 else {
                throw refuse("the plan lists \(matching.count) stages from version \(ids[k]) to \(ids[k + 1])")
            }
            steps.append(
                Step(
                    from: schemas[k], to: schemas[k + 1],
                    stage: matching.first ?? .lightweight(fromVersion: schemas[k], toVersion: schemas[k + 1])))
        }
        for stage in plan.stages {
            guard let a = ids.firstIndex(of: stage.fromVersion.versionIdentifier),
                let b = ids.firstIndex(of: stage.toVersion.versionIdentifier), b == a + 1
            else {
                throw refuse(
                    "the plan's stage from \(stage.fromVersion.versionIdentifier) to \(stage.toVersion.versionIdentifier) does not join two consecutive versions of its schemas"
                )
            }
        }
        self.start = schemas[from]
        self.steps = steps
    }

    /// Runs the stages in memory, then writes the result as the journal's new base.
    ///
    /// Nothing is written before the base: a stage's error, a failed validation, a duplicate
    /// the stage left behind, or a cancellation throws with the journal as it was. The base
    /// switch itself is the journal's compaction, atomic at the MANIFEST rename.
    func migrate(journal: Journal, stored: StoredSchema, options: StoreOptions, directory: URL) throws(StoreError) {
        var progress = _WorkReporter(options.progress, .migration, unit: .stages, total: steps.count + 1)
        let cancelled = StoreError(
            .cancelled,
            "the migration of \(directory.path) was cancelled: its task was cancelled; nothing was written")
        do throws(CancellationError) { try progress.begin() } catch { throw cancelled }
        /// The store's objects replayed from the journal into a new context of `version`.
        func replayed(_ version: any VersionedSchema.Type, permissive: Bool) throws(StoreError) -> ModelContext {
            let context = ModelContext(schema: try Self.schema(version))
            var quiet = _WorkReporter(nil, .open, unit: .bytes, total: nil)
            var begins = false
            try JournalDoor.replay(
                into: context, directory: directory, progress: &quiet, begins: &begins, permissive: permissive
            ) { walkProgress, body in
                try journal.forEachPayload(progress: walkProgress, body)
            }
            for t in context.tables { _ = t.rebuildIndexes() }
            return context
        }
        var context = try replayed(start, permissive: false)
        var history = stored.versions.isEmpty ? [start.versionIdentifier] : stored.versions
        for (done, step) in steps.enumerated() {
            let from = step.from.versionIdentifier
            let to = step.to.versionIdentifier
            func failed(_ why: String) -> StoreError {
                StoreError(
                    .migration,
                    "the migration of \(directory.path) from version \(from) to \(to) failed: \(why); nothing was written",
                    storedVersion: from, modelVersion: to)
            }
            // The first stage's copy comes straight from the journal, as its old context did;
            // later ones from the previous stage's result.
            let next =
                done == 0
                ? try replayed(step.to, permissive: step.stage.isCustom)
                : try Self.copy(context, to: try Self.schema(step.to), permissive: step.stage.isCustom, failed)
            if case .custom(let body) = step.stage.kind {
                do {
                    try body(Migration(old: context, new: next, fromVersion: from, toVersion: to))
                    // The old objects are not needed by the save: their memory goes first.
                    context = next
                    try next.save()
                } catch let error as StoreError {
                    throw failed("\(error.code): \(error.message)")
                } catch {
                    throw failed("\(error)")
                }
                try Self.checkUnique(next, failed)
            }
            context = next
            history.append(to)
            do throws(CancellationError) { try progress.advance(to: done + 1) } catch { throw cancelled }
        }
        // A Codable value the last version cannot decode (a type of the same name whose shape
        // changed, which no stage converted) is refused here, before it is written: after the
        // switch, the store would open with neither version.
        var codable = CodableValueCheck(context.tables)
        if !codable.isEmpty {
            do throws(StoreError) { try codable.checkLiveObjects() } catch {
                throw StoreError(
                    .migration,
                    "the migration of \(directory.path) to version \(history.last ?? "?") left a value its model cannot read: \(error.message); convert it in a custom stage; nothing was written",
                    storedVersion: history.first, modelVersion: history.last)
            }
        }
        var schema = StoredSchema(context.schema)
        schema.versions = history
        let base = TransactionCodec.encodeSnapshot(context) { _, _, _ in }
        let switched: Bool
        do {
            switched = try journal.compact(base: [base], schema: schema.encoded(), proceed: { !Task.isCancelled })
        } catch {
            throw StoreError(journal: error)
        }
        guard switched else { throw cancelled }
        progress.finish(steps.count + 1)
    }

    static func schema(_ version: any VersionedSchema.Type) throws(StoreError) -> Schema {
        do { return try Schema(versioned: version) } catch {
            throw StoreError(.incompatibleSchema, "version \(version.versionIdentifier) (\(version)): \(error)")
        }
    }

    /// A new context of `schema` holding `context`'s committed objects, mapped by names as a
    /// replay maps a journal written with an older model: the same records, the same rules.
    static func copy(
        _ context: ModelContext, to schema: Schema, permissive: Bool, _ failed: (String) -> StoreError
    ) throws(StoreError) -> ModelContext {
        let stored = StoredSchema(context.schema)
        let base = TransactionCodec.encodeSnapshot(context) { _, _, _ in }
        let next = ModelContext(schema: schema)
        let mapping = try SchemaMapping(stored: stored, current: schema, permissive: permissive)
        var orphans: [Int: Set<UInt64>] = [:]
        let result: Result<Void, StoreError> = base.withUnsafeBytes { bytes in
            do throws(StoreError) {
                try TransactionCodec.replay(bytes, stored: stored, mapping: mapping, into: next, orphans: &orphans)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
        if !permissive {
            let removed = orphans.filter { !$0.value.isEmpty }.map {
                "\(stored.entities[$0.key].name) (\($0.value.count) objects)"
            }
            guard removed.isEmpty else {
                throw failed(
                    "a lightweight stage cannot remove an entity that still has objects: \(removed.sorted().joined(separator: ", ")); delete them in a custom stage"
                )
            }
        }
        JournalDoor.finishReplay(next)
        for t in next.tables { _ = t.rebuildIndexes() }
        return next
    }

    /// Throws naming the objects that share a key of a unique constraint, at most ten per
    /// constraint: a constraint the new model added, whose duplicates the stage left.
    static func checkUnique(_ context: ModelContext, _ failed: (String) -> StoreError) throws(StoreError) {
        var problems: [String] = []
        for t in context.tables {
            _ = t.rebuildIndexes()
            for index in t.indexes.uniqueIndexes where !index.duplicates.isEmpty {
                let ids = index.duplicates.sorted().prefix(10).map {
                    ObjectID(entityName: t.entity.name, serial: t.identity.serialOfRow[Int($0)]).description
                }
                problems.append(
                    "\(index.duplicates.count) objects of \(t.entity.name) repeat a key of its unique constraint \(index.constraint): \(ids.joined(separator: ", "))\(index.duplicates.count > 10 ? ", …" : "")"
                )
            }
        }
        guard problems.isEmpty else {
            throw failed(problems.joined(separator: "; ") + " (resolve them in the stage: delete or merge them)")
        }
    }
}
