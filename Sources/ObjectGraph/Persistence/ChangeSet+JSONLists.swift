import Foundation

extension ChangeSet {
    /// This change set, decoded from a record written under `stored`, with each value of an
    /// attribute `stored` holds as the JSON of a `Codable` value and `schema` declares as a
    /// native list (`[String]`, `[Int]`: ``ListCoding/conversion(from:to:)``) converted to that
    /// list, as open's replay converts it (``ListCoding/cell(convertingJSON:to:)``): a record
    /// of a writer that still stores such lists as JSON applies to a model that stores them
    /// natively.
    ///
    /// Attributes are matched by name, as ``ModelContext/applyCommitted(_:)`` matches them;
    /// everything else is left as it is, for it to judge.
    ///
    /// - Throws: ``RecordViolation`` (`codableNotDecodable`) naming the entity, attribute and
    ///   object of the first value whose JSON is not such a list.
    func convertingJSONLists(stored: StoredSchema, to schema: Schema) throws(RecordViolation) -> ChangeSet {
        var result = self
        for (k, c) in entities.enumerated() {
            guard let storedEntity = stored.entities.first(where: { $0.name == c.entityName }),
                storedEntity.attributes.count == c.attributeNames.count,
                let current = schema.entity(named: c.entityName)
            else { continue }
            var lists: [Int: (list: AttributeType, attribute: AttributeDescription)] = [:]
            for (j, name) in c.attributeNames.enumerated() {
                guard let slot = current.slot(forKey: name),
                    let list = ListCoding.conversion(from: storedEntity.attributes[j], to: current.attributes[slot])
                else { continue }
                lists[j] = (list, current.attributes[slot])
            }
            guard !lists.isEmpty else { continue }
            let width = c.attributeNames.count
            for (i, serial) in c.insertedSerials.enumerated() {
                for (j, conversion) in lists where c.insertedValues.indices.contains(i * width + j) {
                    result.entities[k].insertedValues[i * width + j] = try Self.converted(
                        c.insertedValues[i * width + j], c.entityName, conversion.attribute, serial, to: conversion.list
                    )
                }
            }
            for (u, update) in c.updates.enumerated() {
                guard let conversion = lists[update.attribute] else { continue }
                result.entities[k].updates[u].value = try Self.converted(
                    update.value, c.entityName, conversion.attribute, update.serial, to: conversion.list)
            }
        }
        return result
    }

    /// `value` (the stored JSON, or nil) as the native list `list`; a value of another case is
    /// left as it is.
    private static func converted(
        _ value: AttributeValue?, _ entity: String, _ attribute: AttributeDescription, _ serial: UInt64,
        to list: AttributeType
    ) throws(RecordViolation) -> AttributeValue? {
        guard case .data(let json) = value else { return value }
        let outcome: Result<AttributeValue, RecordViolation> = json.withUnsafeBytes { bytes in
            do {
                let cell = try ListCoding.cell(convertingJSON: bytes, to: list)
                return .success(cell.withUnsafeBytes { AttributeValue.decode(.bytes($0), as: list) })
            } catch {
                return .failure(
                    RecordRules.listNotConvertible(
                        entity, attribute: attribute, serial: serial, json: bytes, to: list, error))
            }
        }
        return try outcome.get()
    }
}
