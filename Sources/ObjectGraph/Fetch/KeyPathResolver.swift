import Foundation
import Synchronization

/// An attribute that a key path reads unchanged, found by ``KeyPathResolver``.
struct ResolvedAttribute: Sendable, Hashable {
    /// The attribute's slot.
    let slot: Int
    /// The attribute's storage type.
    let type: AttributeType
    /// Whether the key path's value is optional (`nil` stands for an unset attribute).
    let isOptional: Bool
}

/// Finds which attribute a key path such as `\Person.age` reads, so that predicates and sort
/// descriptors can be evaluated on the compact storage instead of on object instances.
///
/// Macro-generated attributes are computed properties, so a key path carries no name and
/// `MemoryLayout.offset(of:)` does not apply. The resolver *probes* instead: for each attribute
/// of the key path's value type it builds throw-away standalone instances from the values of
/// real rows, puts distinct real values of that attribute into it, reads the key path, and
/// accepts the attribute whose values come back unchanged in three probes over two different
/// background rows. A computed property that merely forwards an attribute resolves to it (which
/// is correct); one that transforms or combines values does not resolve and is evaluated by
/// Foundation instead.
///
/// Probes use values taken from the table (never synthetic extremes: a user's getter such as
/// `reading * 2` would trap on overflow), so a getter sees the same kind of data that
/// Foundation's evaluation would hand it. No lifecycle hook runs on probe instances.
/// Conclusive results are cached per entity type and key path for the life of the process;
/// when the data has too few distinct values to decide, nothing is cached and the predicate is
/// evaluated by Foundation.
enum KeyPathResolver {
    /// A cache key: the entity type and the key path.
    ///
    /// `@unchecked Sendable`: the key paths come from `Predicate` and `SortDescriptor`, whose
    /// APIs take `KeyPath & Sendable`; key path objects are immutable.
    struct Key: Hashable, @unchecked Sendable {
        let entity: ObjectIdentifier
        let keyPath: AnyKeyPath
    }

    private static let cache = Mutex<[Key: ResolvedAttribute?]>([:])

    /// How many rows a probe looks at to find distinct values.
    static let sampleRows = 4096

    /// The attribute `keyPath` reads unchanged, or `nil` when it reads anything else (or the
    /// data cannot tell).
    static func resolve<T: Entity>(_ keyPath: AnyKeyPath, in table: EntityTable, as _: T.Type) -> ResolvedAttribute? {
        resolve(keyPath, entity: table.entity, probing: table, as: T.self)
    }

    /// ``resolve(_:in:as:)`` for `entity`; a key path its description does not list is probed
    /// on `table`, and not resolved without one.
    static func resolve<T: Entity>(
        _ keyPath: AnyKeyPath, entity: EntityDescription, probing table: EntityTable?, as _: T.Type
    ) -> ResolvedAttribute? {
        // Models built by the macro (or hand-written ones that pass keyPaths:) name their key
        // paths in the entity description: no probing needed.
        if let slot = entity.slot(for: keyPath) {
            let attribute = entity.attributes[slot]
            let valueType = type(of: keyPath).valueType
            if attribute.valueKind == .primitive {
                if let p = valueType as? any PrimitiveAttribute.Type, p.attributeType == attribute.type {
                    return ResolvedAttribute(slot: slot, type: attribute.type, isOptional: false)
                }
                if let o = valueType as? any OptionalPrimitive.Type, o.wrappedAttributeType == attribute.type {
                    return ResolvedAttribute(slot: slot, type: attribute.type, isOptional: true)
                }
            }
        }
        guard let table else { return nil }
        let key = Key(entity: ObjectIdentifier(T.self), keyPath: keyPath)
        if let cached = cache.withLock({ $0[key] }) { return cached }
        let (result, conclusive) = probe(keyPath, in: table, as: T.self)
        if conclusive { cache.withLock { $0[key] = .some(result) } }
        return result
    }

    private static func probe<T: Entity>(
        _ keyPath: AnyKeyPath, in table: EntityTable, as _: T.Type
    ) -> (ResolvedAttribute?, conclusive: Bool) {
        guard type(of: keyPath).rootType == T.self else { return (nil, true) }
        let valueType = type(of: keyPath).valueType
        let attributeType: AttributeType
        let isOptional: Bool
        if let p = valueType as? any PrimitiveAttribute.Type {
            attributeType = p.attributeType
            isOptional = false
        } else if let o = valueType as? any OptionalPrimitive.Type {
            attributeType = o.wrappedAttributeType
            isOptional = true
        } else {
            return (nil, true)
        }
        switch attributeType {
        case .data, .uuid, .url: return (nil, true)
        default: break
        }
        let entity = table.entity
        var rows: [Int] = []
        for row in 0..<table.rowCount where table.flags[row] & EntityTable.Flags.live != 0 {
            rows.append(row)
            if rows.count >= sampleRows { break }
        }
        guard rows.count >= 2 else { return (nil, false) }
        var found: ResolvedAttribute?
        var conclusive = true
        for slot in entity.attributes.indices {
            let a = entity.attributes[slot]
            guard a.valueKind == .primitive, a.type == attributeType, a.isOptional == isOptional else { continue }
            // Three probe values: distinct where the data allows (a Bool has only two).
            var distinct: [AttributeValue] = []
            for row in rows {
                guard let v = table.value(row: row, slot: slot), !distinct.contains(v) else { continue }
                distinct.append(v)
                if distinct.count == 3 { break }
            }
            let needed = attributeType == .bool ? 2 : 3
            guard distinct.count >= needed else {
                conclusive = false
                continue
            }
            let probes = attributeType == .bool ? [distinct[0], distinct[1], distinct[0]] : distinct
            let backgrounds = [rows[0], rows[1], rows[1]]
            var matches = true
            for k in 0..<3 where matches {
                let values = StandaloneValues(entity: entity)
                for s in 0..<table.stride { values.values[s] = .some(table.value(row: backgrounds[k], slot: s)) }
                values.values[slot] = .some(probes[k])
                let object = T(_backing: ObjectBacking(standalone: values))
                let read = (object[keyPath: keyPath]).flatMap { ($0 as? any PrimitiveAttribute)?.attributeValue }
                matches = read.flatMap { AttributeValue.coerce(attributeValue: $0, to: attributeType) } == probes[k]
            }
            if matches {
                if found != nil { return (nil, true) }  // ambiguous: refuse
                found = ResolvedAttribute(slot: slot, type: attributeType, isOptional: isOptional)
            }
        }
        return found != nil ? (found, true) : (nil, conclusive)
    }
}

/// `Optional` of a primitive attribute type, recognised at run time.
protocol OptionalPrimitive {
    /// The storage type of the wrapped type.
    static var wrappedAttributeType: AttributeType { get }
}

extension Optional: OptionalPrimitive where Wrapped: PrimitiveAttribute {
    static var wrappedAttributeType: AttributeType { Wrapped.attributeType }
}

/// Any `Optional`, to recognise a `nil` boxed in `Any`.
protocol AnyOptional {
    /// Whether the value is `nil`.
    var isNil: Bool { get }
}

extension Optional: AnyOptional {
    var isNil: Bool { self == nil }
}
