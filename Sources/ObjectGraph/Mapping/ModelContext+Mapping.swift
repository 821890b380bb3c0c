public import Foundation
internal import Tracing

/// What a mapping run did: counts per entity, the objects discarded and why, and the top-level
/// objects in source order.
public struct MappingResult<T: Entity> {
    /// What the run did to the mapping's own entity.
    public let counts: MappingCounts
    /// What the run did per entity, nested mappings included, by entity name.
    public let countsByEntity: [String: MappingCounts]
    /// New objects removed because they failed insert validation
    /// (``EntityMapping/discardsInvalidObjectsOnInsert``), with the reasons.
    public let discarded: [DiscardedObject]
    /// The number of top-level sources the document held.
    public let sourceCount: Int
    /// Seconds spent parsing the JSON document (0 for other sources).
    public internal(set) var parseSeconds: Double = 0
    /// Seconds spent mapping, connections, tombstones and discarding included.
    public internal(set) var mapSeconds: Double = 0
    private let serials: [UInt64]
    private weak var table: EntityTable?

    init(
        counts: MappingCounts, countsByEntity: [String: MappingCounts], discarded: [DiscardedObject], sourceCount: Int,
        rows: [Int32], table: EntityTable
    ) {
        self.counts = counts
        self.countsByEntity = countsByEntity
        self.discarded = discarded
        self.sourceCount = sourceCount
        self.table = table
        serials = rows.map { $0 >= 0 ? table.serial(ofRow: Int($0)) : 0 }
    }

    /// The top-level objects in source order, one per source (an object named by several
    /// sources appears at each), without those deleted since: tombstoned or discarded ones.
    /// Created on first access, so a large run pays for instances only when asked.
    public var objects: [T] {
        guard let table else { return [] }
        return serials.compactMap { serial in
            guard serial != 0, let row = table.row(ofSerial: serial), table.isVisible(row: row) else { return nil }
            return table.instance(row: row) as? T
        }
    }

    /// The IDs of ``objects``.
    public var objectIDs: [ObjectID] {
        guard let table else { return [] }
        let name = table.entity.name
        return serials.compactMap { serial in
            guard serial != 0, let row = table.row(ofSerial: serial), table.isVisible(row: row) else { return nil }
            return ObjectID(entityName: name, serial: serial)
        }
    }
}

extension ModelContext {
    /// Maps a JSON document into objects with `mapping` (RestKit's entity mapping): the array at
    /// the mapping's root key path (or the document), or a single object there.
    ///
    /// Atomic: when anything throws (malformed JSON, a value that cannot be transformed, a hook),
    /// the context is left exactly as it was. The changes are pending until the caller saves,
    /// as one journal record.
    ///
    /// ```swift
    /// let result = try context.map(Data(contentsOf: url), with: people)
    /// print(result.counts)          // inserted 3, updated 1, …
    /// try context.save()
    /// ```
    ///
    /// `progress` receives ``WorkProgress`` reports (operation `mapping`, unit `records`: the
    /// top-level sources mapped, out of the number the document holds), the first once the
    /// document is parsed and then one every 4,096 sources, where the run also checks whether
    /// its task was cancelled; the final one once the connections, tombstones and discarded
    /// objects are done too.
    ///
    /// - Throws: ``MappingError`` (`malformedJSON` with the byte offset; `untransformableValue`
    ///   and `missingRequiredValue` with the source index, key path, value and attribute),
    ///   `CancellationError` when the task running the map is cancelled during the run (the
    ///   context is then left as it was, as for any other error), or an error a predicate or
    ///   hook threw.
    @discardableResult
    public func map<T: Entity>(
        _ json: Data, with mapping: EntityMapping<T>, progress: ProgressHandler? = nil
    ) throws -> MappingResult<T> {
        let start = ContinuousClock.now
        let document: JSONDocument
        if keepsJSONBuffers, let parser = jsonParser ?? JSONParser(), !parser.inUse {
            jsonParser = parser
            document = try JSONDocument(parsing: json, reusing: parser)
        } else {
            document = try JSONDocument(parsing: json)
        }
        let parsed = ContinuousClock.now
        let outcome = try runMapping(
            JSONSource(document: document), root: document.root, mapping.definition, progress: progress)
        var result: MappingResult<T> = self.result(outcome, since: parsed)
        result.parseSeconds = (parsed - start).seconds
        return result
    }

    /// Maps Foundation values (what `JSONSerialization` returns, or dictionaries built in code):
    /// `[String: Any]` objects, `[Any]` arrays, `NSNull` or `nil`, numbers, strings, and values
    /// of stored types (`Date`, `UUID`, `URL`, `Data`). The root key path applies as for JSON.
    /// Progress and cancellation as for ``map(_:with:progress:)-(Data,_,_)``.
    @discardableResult
    public func map<T: Entity>(
        jsonObject: Any, with mapping: EntityMapping<T>, progress: ProgressHandler? = nil
    ) throws -> MappingResult<T> {
        let start = ContinuousClock.now
        return result(
            try runMapping(FoundationSource(), root: jsonObject, mapping.definition, progress: progress), since: start)
    }

    /// Maps an array of dictionaries, one object each. Progress and cancellation as for
    /// ``map(_:with:progress:)-(Data,_,_)``.
    @discardableResult
    public func map<T: Entity>(
        _ sources: [[String: Any]], with mapping: EntityMapping<T>, progress: ProgressHandler? = nil
    ) throws -> MappingResult<T> {
        var definition = mapping.definition
        definition.rootKeyPath = nil
        let start = ContinuousClock.now
        return result(
            try runMapping(FoundationSource(), root: sources as [Any], definition, progress: progress), since: start)
    }

    private typealias RunOutcome = (
        rows: [Int32], byEntity: [String: MappingCounts], discarded: [DiscardedObject], table: EntityTable
    )

    private func result<T: Entity>(_ outcome: RunOutcome, since start: ContinuousClock.Instant) -> MappingResult<T> {
        var result = MappingResult<T>(
            counts: outcome.byEntity[outcome.table.entity.name] ?? MappingCounts(), countsByEntity: outcome.byEntity,
            discarded: outcome.discarded, sourceCount: outcome.rows.count, rows: outcome.rows, table: outcome.table)
        result.mapSeconds = (ContinuousClock.now - start).seconds
        return result
    }

    /// The run itself. Called with a concrete source type from the entry points, never from
    /// code generic over the entity type, so that the compiler specializes the whole run for
    /// the source: unspecialized, every node access went through generic metadata.
    private func runMapping<S: MappingSource>(
        _ source: S, root: S.Node, _ definition: MappingDefinition, progress: ProgressHandler?
    ) throws -> RunOutcome {
        let instruments = door?.storeInstruments
        let span = instruments?.span("objectgraph.mapping")
        defer { span?.end() }
        do {
            let outcome = try runMappingUntraced(source, root: root, definition, progress: progress)
            instruments?.mappingRuns.increment()
            if let span {
                let counts = outcome.byEntity[outcome.table.entity.name] ?? MappingCounts()
                span.attributes["objectgraph.entity"] = outcome.table.entity.name
                span.attributes["objectgraph.sources"] = outcome.rows.count
                span.attributes["objectgraph.inserted"] = counts.inserted
                span.attributes["objectgraph.updated"] = counts.updated
                span.attributes["objectgraph.discarded"] = counts.discarded
            }
            return outcome
        } catch {
            span?.fail(error)
            throw error
        }
    }

    private func runMappingUntraced<S: MappingSource>(
        _ source: S, root: S.Node, _ definition: MappingDefinition, progress: ProgressHandler?
    ) throws -> RunOutcome {
        var run = try MappingRun(source: source, definition: definition, context: self)
        let node = try run.sources(in: root)
        run.progress = RunProgress(progress, sync: activeSync, total: run.topLevelCount(node))
        return try _withImportSavepoint {
            try run.progress.begin()
            let rows = try node.map { try run.mapTopLevel($0) } ?? []
            // The connections, tombstones and discarding that follow touch every mapped object.
            try run.progress.checkCancellation()
            let discarded = try run.finish()
            activeSync?.noteMapped(run.plans)
            let byEntity = MappingPlan.countsByEntity(run.plans)
            run.progress.finish()
            return (rows, byEntity, discarded, run.top.table)
        }
    }
}

extension Duration {
    /// The duration in seconds.
    var seconds: Double {
        let (s, a) = components
        return Double(s) + Double(a) * 1e-18
    }
}
