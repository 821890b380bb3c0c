import Foundation

/// The check that every stored `Codable` value decodes as its attribute's current Swift type
/// (``AttributeDescription/codableCheck``).
///
/// A `Codable` struct can change shape between versions of an app (a property added without a
/// default, renamed or retyped); the JSON an older version stored then no longer decodes. The
/// getters cannot report that (they are not throwing), so such a value is found before any
/// read: when a store opens (over the objects its journal leaves live, after replay) and when a
/// replica applies a shipped record or a context applies a ``ChangeSet`` (over the values the
/// change stores). A value that a later record overwrites or deletes is not checked at open:
/// only what the graph holds is the model's concern.
struct CodableValueCheck {
    /// Per table, the slots with a check, and the check.
    private let checked: [(table: EntityTable, slots: [(Int, AttributeValidator)])]
    /// Per table and slot, the stored values already found to decode: `Codable` values often
    /// repeat (a settings struct, an empty list), so each distinct value is decoded once, up to
    /// ``rememberedValues`` of them per slot.
    private var decoded: [[Set<Data>]]

    /// How many distinct values per slot are remembered as decoding (bounds the check's memory:
    /// at most this many values of each attribute are kept, however many objects there are).
    static let rememberedValues = 4096

    /// The `Codable` types whose JSON shape is fixed by the standard library: arrays, sets and
    /// string-keyed dictionaries of primitives. A stored value of one of these decodes as long
    /// as the attribute kept its declared type, which the schema records say
    /// (`ModelContext.codableSlotsWrittenAsOtherTypes`); only a type the application declares
    /// can change shape under the same name.
    static let shapeStable: Set<ObjectIdentifier> = [
        ObjectIdentifier([String].self), ObjectIdentifier([Int].self), ObjectIdentifier([Int64].self),
        ObjectIdentifier([Int32].self), ObjectIdentifier([Double].self), ObjectIdentifier([Float].self),
        ObjectIdentifier([Bool].self), ObjectIdentifier(Set<String>.self), ObjectIdentifier(Set<Int>.self),
        ObjectIdentifier(Set<Int64>.self), ObjectIdentifier([String: String].self),
        ObjectIdentifier([String: Int].self), ObjectIdentifier([String: Double].self),
        ObjectIdentifier([String: Bool].self),
    ]

    /// The checks of `tables`' `Codable` attributes, but for those of a shape-stable type that
    /// every schema record wrote with that same type (`retyped` lists the others, as
    /// `ModelContext.codableSlotKey(table:slot:)` keys).
    init(_ tables: [EntityTable], retyped: Set<Int> = []) {
        checked = tables.compactMap { t in
            let slots = t.codableChecks.enumerated().compactMap { slot, check in
                check.flatMap { check in
                    let stable = check.decodedType.map { Self.shapeStable.contains($0) } ?? false
                    let key = ModelContext.codableSlotKey(table: t.entityIndex, slot: slot)
                    return stable && !retyped.contains(key) ? nil : (slot, check)
                }
            }
            return slots.isEmpty ? nil : (t, slots)
        }
        decoded = checked.map { Array(repeating: [], count: $0.slots.count) }
    }

    /// Whether no entity has a `Codable` attribute with a check (nothing to do).
    var isEmpty: Bool { checked.isEmpty }

    /// Checks the value of every live object of every table with a `Codable` attribute.
    ///
    /// - Throws: ``StoreError`` with code `incompatibleSchema` naming the first object, and
    ///   attribute, whose stored JSON does not decode.
    mutating func checkLiveObjects() throws(StoreError) {
        for (i, entry) in checked.enumerated() {
            let t = entry.table
            for row in 0..<t.rowCount where t.flags[row] & EntityTable.Flags.live != 0 {
                for (j, (slot, check)) in entry.slots.enumerated() {
                    guard case .data(let data)? = t.value(row: row, slot: slot) else { continue }
                    if let problem = Self.problem(data, check, remembering: &decoded[i][j]) {
                        throw Self.error(t, row: row, slot: slot, problem)
                    }
                }
            }
        }
    }

    /// The reason `data` does not decode, or nil; remembers a value that does.
    private static func problem(
        _ data: Data, _ check: AttributeValidator, remembering seen: inout Set<Data>
    ) -> String? {
        if seen.contains(data) { return nil }
        if let problem = check.check(.data(data)) { return problem }
        if seen.count < Self.rememberedValues { seen.insert(data) }
        return nil
    }

    /// The error of an open that found the object at `row` whose value of `slot` does not decode.
    static func error(_ t: EntityTable, row: Int, slot: Int, _ problem: String) -> StoreError {
        let a = t.entity.attributes[slot]
        let object = ObjectID(entityName: t.entity.name, serial: t.identity.serialOfRow[row])
        return StoreError(
            .incompatibleSchema,
            message(entity: t.entity.name, attribute: a, object: object, problem)
                + "; the store was not opened, and its journal, unchanged, still opens with the model that wrote it")
    }

    /// The words of the refusal: the entity, attribute, object and decoding error, and the way out.
    static func message(
        entity: String, attribute a: AttributeDescription, object: ObjectID, _ problem: String
    ) -> String {
        "\(entity).\(a.name) of \(object) holds JSON that does not decode as \(a.swiftTypeName) (\(problem)): "
            + "the type changed shape since the value was written, and a custom migration stage must convert the "
            + "stored values to the new shape"
    }
}

extension ModelContext {
    /// The key of a table's slot in ``codableSlotsWrittenAsOtherTypes``.
    static func codableSlotKey(table: Int, slot: Int) -> Int { table << 32 | slot }
}
