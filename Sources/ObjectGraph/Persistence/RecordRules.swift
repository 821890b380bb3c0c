/// A rule of the journal that a record broke: which rule, and a sentence naming the entity,
/// object, attribute or pair concerned.
///
/// Made only by ``RecordRules``, whose sentences every applier of a record reports: open's
/// replay, a follower's ``ObjectStore/applyShipped(_:schema:origin:)`` (through
/// ``ModelContext/apply(_:)``), and `graph-journal`.
package struct RecordViolation: Error, Sendable, Hashable, CustomStringConvertible {
    /// The rules a record can break, each checked in ``RecordRules``.
    package enum Rule: String, Sendable, Hashable, CaseIterable {
        /// A serial outside `1...RecordRules.maximumSerial`, or a table's next serial past it.
        case serialOutOfBounds
        /// A count or size larger than the rest of the record can hold.
        case countOutOfBounds
        /// An insert of a serial that is live.
        case insertOfLiveSerial
        /// An update of a serial that is not live.
        case updateOfMissingSerial
        /// A delete of a serial that is not live.
        case deleteOfMissingSerial
        /// A value that is not of its attribute's type.
        case wrongValueType
        /// An enum attribute's raw value that is not one of the enum's cases.
        case rawValueNotACase
        /// A `Codable` attribute's JSON that does not decode as the model's type. Not a rule of
        /// the record alone: open checks the objects a replay leaves live
        /// (``CodableValueCheck``), a follower the values a shipped record stores.
        case codableNotDecodable
        /// A list cell (``AttributeType/stringList``, ``AttributeType/intList``) whose bytes do
        /// not decode (``ListCoding``): a record whose checksum is right but whose contents
        /// are not.
        case malformedList
        /// A link, unlink or order edit naming an object that is not live.
        case linkOfMissingObject
        /// An unlink of a pair that is not linked.
        case unlinkOfUnlinkedPair
        /// A link of a pair that is linked already.
        case linkOfLinkedPair
        /// A link that gives a to-one side a second object.
        case toOneHoldsLink
        /// An order edit naming a member its list does not have, one twice, or an index past
        /// the list's end.
        case orderNamesNonMember
        /// A change set naming an entity or attribute the model does not have, or values that
        /// do not match its objects (``ModelContext/apply(_:)`` only: a decoded record always
        /// matches its schema).
        case unknownName
    }

    /// The rule broken.
    package let rule: Rule
    /// What broke it, as a sentence without the record's location.
    package let reason: String
    /// The entity concerned, when one is.
    package let entity: String?
    /// The attribute or relationship concerned, when one is.
    package let key: String?

    package init(_ rule: Rule, _ reason: String, entity: String? = nil, key: String? = nil) {
        self.rule = rule
        self.reason = reason
        self.entity = entity
        self.key = key
    }

    package var description: String { reason }

    /// The code of the ``StoreError`` a store reports this violation with: a raw value that
    /// is not a case, or JSON that does not decode, is the model's problem (another model
    /// wrote it), `incompatibleSchema`; anything else is damage, `corruptPayload`.
    package var storeErrorCode: StoreError.Code {
        rule == .rawValueNotACase || rule == .codableNotDecodable ? .incompatibleSchema : .corruptPayload
    }
}

/// The rules every record of a journal must keep, each written once, and the verdict each
/// applier of a record reaches with them: open's replay (`ReplayVisitor`), a follower's
/// ``ModelContext/apply(_:)`` of a shipped record, and `graph-journal`'s replay.
///
/// An applier keeps the objects its own way (a store's tables, a tool's bitmap of live
/// serials); it finds the facts a rule needs (is this serial live, are these two linked) and
/// asks the rule, which decides and words the violation. So the three refuse the same records
/// with the same sentence.
///
/// The bounds (``maximumSerial``, ``maximumInsertedCount(remaining:attributes:)``) are
/// checked by the payload's one decoder before anything is allocated, so they hold for every
/// applier alike.
///
/// One rule is not the tool's: ``rawValue(_:attribute:serial:_:check:)`` needs the enum's
/// cases, which only the application's model knows (``AttributeDescription/rawValueCheck``). A
/// store and a follower refuse a record that stores a raw value that is not a case; the tool,
/// which reads a journal without the application's code, accepts it. Every other verdict is
/// the same in all three.
package enum RecordRules {
    /// The largest serial a record may name, and so the largest a table may hold: 2^31 − 1, the
    /// row numbers' range.
    ///
    /// A table maps each serial to its row in a dense array (4 bytes per serial up to the
    /// highest, `EntityTable.rowOfSerial`), so a serial costs memory even when most below it
    /// are gone. A serial past this bound would ask for more than 8 GiB for that map alone; a
    /// record claiming one is damage, refused before anything is allocated. Serials are issued
    /// one per insert (including inserts rolled back or deleted before a save), so a table
    /// reaches this only after two billion inserts.
    package static let maximumSerial: UInt64 = UInt64(Int32.max)

    /// The largest number of objects a block may insert when `remaining` bytes of the payload
    /// follow its count: each object takes at least one byte of serial, and each of the
    /// `attributes` columns at least its null flag and a null bit per object.
    package static func maximumInsertedCount(remaining: Int, attributes: Int) -> Int {
        // n + attributes × (1 + ⌈n/8⌉) ≤ remaining, solved for n (rounded down, then checked).
        let room = remaining - attributes
        guard room > 0 else { return 0 }
        var n = attributes == 0 ? room : room * 8 / (8 + attributes)
        while n > 0 && n + attributes * (1 + (n + 7) / 8) > remaining { n -= 1 }
        return n
    }

    /// A block's count of inserted objects: refused when it exceeds `most`
    /// (``maximumInsertedCount(remaining:attributes:)`` of the `remaining` bytes after it).
    package static func insertedCount(_ claimed: UInt64, most: Int, remaining: Int) -> RecordViolation? {
        claimed <= UInt64(most)
            ? nil
            : RecordViolation(
                .countOutOfBounds, "\(claimed) objects inserted, but the \(remaining) bytes left hold at most \(most)")
    }

    // MARK: Serials

    /// A serial a record names: within `1...maximumSerial`.
    @inline(__always)
    package static func isValidSerial(_ serial: UInt64) -> Bool { serial &- 1 < maximumSerial }

    /// The violation of a serial outside `1...maximumSerial`.
    package static func serialOutOfBounds(_ serial: Int64) -> RecordViolation {
        RecordViolation(.serialOutOfBounds, "serial \(serial) outside 1...\(maximumSerial)")
    }

    /// The violation of a serial outside `1...maximumSerial`, read unsigned.
    package static func serialOutOfBounds(_ serial: UInt64) -> RecordViolation {
        RecordViolation(.serialOutOfBounds, "serial \(serial) outside 1...\(maximumSerial)")
    }

    /// A block's claim of its table's next serial: at most one past ``maximumSerial``.
    package static func nextSerial(_ claim: UInt64) -> RecordViolation? {
        claim <= maximumSerial + 1
            ? nil : RecordViolation(.serialOutOfBounds, "next serial \(claim) past \(maximumSerial + 1)")
    }

    // MARK: Objects

    /// An insert of `entity`/`serial`: refused when the serial is live.
    package static func insert(_ entity: String, _ serial: UInt64, isLive: Bool) -> RecordViolation? {
        isLive ? insertOfLiveSerial(entity, serial) : nil
    }

    /// The violation of an insert of a live serial.
    package static func insertOfLiveSerial(_ entity: String, _ serial: UInt64) -> RecordViolation {
        RecordViolation(.insertOfLiveSerial, "inserts \(entity)/\(serial), which already exists", entity: entity)
    }

    /// An update of `entity`/`serial`: refused when the serial is not live.
    package static func update(_ entity: String, _ serial: UInt64, isLive: Bool) -> RecordViolation? {
        isLive ? nil : updateOfMissingSerial(entity, serial)
    }

    /// The violation of an update of a serial that is not live.
    package static func updateOfMissingSerial(_ entity: String, _ serial: UInt64) -> RecordViolation {
        RecordViolation(.updateOfMissingSerial, "updates \(entity)/\(serial), which does not exist", entity: entity)
    }

    /// A delete of `entity`/`serial`: refused when the serial is not live.
    package static func delete(_ entity: String, _ serial: UInt64, isLive: Bool) -> RecordViolation? {
        isLive ? nil : deleteOfMissingSerial(entity, serial)
    }

    /// The violation of a delete of a serial that is not live.
    package static func deleteOfMissingSerial(_ entity: String, _ serial: UInt64) -> RecordViolation {
        RecordViolation(.deleteOfMissingSerial, "deletes \(entity)/\(serial), which does not exist", entity: entity)
    }

    /// A value given to `entity`.`attribute` of type `type`: refused when it does not coerce
    /// to the type (`fits` false). A decoded record's values always fit the schema it was
    /// written with; a change set applied to another model may not.
    package static func value(
        _ entity: String, attribute: String, type: AttributeType, _ value: AttributeValue, fits: Bool
    ) -> RecordViolation? {
        fits
            ? nil
            : RecordViolation(
                .wrongValueType, "\(entity).\(attribute) holds \(type.rawValue); the record has \(value)",
                entity: entity, key: attribute)
    }

    /// An enum attribute's raw value stored in `entity`/`serial`: refused when `check` (the
    /// model's ``AttributeDescription/rawValueCheck``) says it is not a case. Without a check
    /// (not an enum, or a reader without the application's model: `graph-journal`) every raw
    /// value passes.
    package static func rawValue(
        _ entity: String, attribute: String, serial: UInt64, _ value: AttributeValue, check: AttributeValidator?
    ) -> RecordViolation? {
        guard let check, let problem = check.check(value) else { return nil }
        return RecordViolation(
            .rawValueNotACase,
            "\(entity).\(attribute) of object \(serial): \(problem); a model with cases this one lacks wrote it, add the case back to read it",
            entity: entity, key: attribute)
    }

    /// A `Codable` attribute's JSON stored in `entity`/`serial`: refused when `check` (the
    /// model's ``AttributeDescription/codableCheck``) says it does not decode. Without a check
    /// (not `Codable`, or a reader without the application's model) every value passes.
    package static func codableValue(
        _ entity: String, attribute: AttributeDescription, serial: UInt64, _ value: AttributeValue,
        check: AttributeValidator?
    ) -> RecordViolation? {
        guard let check, let problem = check.check(value) else { return nil }
        return RecordViolation(
            .codableNotDecodable,
            CodableValueCheck.message(
                entity: entity, attribute: attribute, object: ObjectID(entityName: entity, serial: serial), problem),
            entity: entity, key: attribute.name)
    }

    /// A stored `Codable` value's JSON that does not decode as the native list `list` the model
    /// now declares (``ListCoding/cell(convertingJSON:to:)`` threw `error`): it cannot be
    /// converted. Open's replay and an applied shipped record refuse it in these words.
    package static func listNotConvertible(
        _ entity: String, attribute: AttributeDescription, serial: UInt64, json: UnsafeRawBufferPointer,
        to list: AttributeType, _ error: any Error
    ) -> RecordViolation {
        let text = String(decoding: json.prefix(80), as: UTF8.self) + (json.count > 80 ? "…" : "")
        return RecordViolation(
            .codableNotDecodable,
            "\(entity).\(attribute.name) of object \(serial): the stored JSON \(text) does not decode as \(attribute.swiftTypeName), which the model now stores as \(list.rawValue); it cannot be converted: \(error)",
            entity: entity, key: attribute.name)
    }

    /// A list cell whose bytes do not decode, as the payload reader finds it (without the
    /// entity and attribute, which ``located(_:entity:attribute:serial:)`` adds).
    package static func malformedList(_ problem: ListCoding.Malformed) -> RecordViolation {
        RecordViolation(.malformedList, "list value does not decode: \(problem)")
    }

    /// `violation` of a list cell of `entity`.`attribute`, naming them (and the object, when
    /// known).
    package static func located(
        _ violation: RecordViolation, entity: String, attribute: String, serial: UInt64?
    ) -> RecordViolation {
        let object = serial.map { " of object \($0)" } ?? ""
        return RecordViolation(
            violation.rule, "\(entity).\(attribute)\(object): \(violation.reason)", entity: entity, key: attribute)
    }

    // MARK: Links

    /// An object named by a link, unlink or order edit: refused when it is not live.
    package static func linkedObject(_ entity: String, _ serial: UInt64, isLive: Bool) -> RecordViolation? {
        isLive ? nil : linkOfMissingObject(entity, serial)
    }

    /// The violation of a link, unlink or order edit naming an object that is not live.
    package static func linkOfMissingObject(_ entity: String, _ serial: UInt64) -> RecordViolation {
        RecordViolation(.linkOfMissingObject, "link of \(entity)/\(serial), which does not exist", entity: entity)
    }

    /// An unlink of `pair` (the two objects, named "A/1 and B/2"): refused when they are not
    /// linked.
    package static func unlink(_ pair: String, linked: Bool) -> RecordViolation? {
        linked ? nil : RecordViolation(.unlinkOfUnlinkedPair, "unlink of \(pair), which are not linked")
    }

    /// A link of `pair`: refused when they are linked already, or when a to-one side
    /// (`toOneHolding`: its entity and relationship names, when it holds a link) holds a link
    /// already. A record removes a to-one's link before it adds another.
    package static func link(
        _ pair: String, linked: Bool, toOneHolding: (entity: String, name: String)?
    ) -> RecordViolation? {
        if linked { return RecordViolation(.linkOfLinkedPair, "link of \(pair), which are linked already") }
        guard let (entity, name) = toOneHolding else { return nil }
        return RecordViolation(
            .toOneHoldsLink, "link of \(pair): \(entity).\(name) is a to-one that holds a link already", entity: entity,
            key: name)
    }

    /// An order edit of `entity`/`owner`'s list: refused when it names a member the list does
    /// not have, one twice, or an index past the list's end (`applies` false).
    package static func order(_ entity: String, _ owner: UInt64, applies: Bool) -> RecordViolation? {
        applies
            ? nil
            : RecordViolation(
                .orderNamesNonMember,
                "order of \(entity)/\(owner) names a member it does not have or an index past its end", entity: entity)
    }
}
