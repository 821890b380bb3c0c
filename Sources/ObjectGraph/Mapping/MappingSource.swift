import Foundation

/// A key in a mapping's source key path, with its UTF-8 bytes for documents that compare bytes.
final class MappingKey {
    let string: String
    let bytes: [UInt8]
    init(_ string: String) {
        self.string = string
        self.bytes = Array(string.utf8)
    }
}

/// One scalar read from a source, before transformation.
enum SourceScalar {
    case null
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case double(Double)
    /// A JSON string's UTF-8 bytes, valid for the whole run.
    case utf8(UnsafeRawBufferPointer)
    case string(String)
    /// A value the caller gave as a Swift value of a stored type (`Date`, `UUID`, `URL`, `Data`).
    case native(AttributeValue)
    /// An array or an object.
    case composite
    /// A Swift value of a type no attribute stores; its type's name.
    case unsupported(String)
}

/// What the mapping engine reads: a tree of objects, arrays and scalars.
protocol MappingSource {
    associatedtype Node
    /// The node's kind (`.null` for a missing optional value too).
    func kind(_ node: Node) -> JSONKind
    /// The node as a scalar; `.composite` for arrays and objects.
    func scalar(_ node: Node) -> SourceScalar
    /// The value of `key` in the object `node`, or `nil` when the key is missing. `hint` is
    /// where the same key was found last time, for sources that can use it.
    func field(_ node: Node, _ key: MappingKey, hint: inout Int) -> Node?
    /// Calls `body` with each element of the array `node`.
    func forEachElement(_ node: Node, _ body: (Node) throws -> Void) rethrows
    /// The number of elements of the array `node`.
    func count(_ node: Node) -> Int
    /// The node as JSON text (or a description), for error messages.
    func text(_ node: Node) -> String
    /// The node as JSON text with sorted keys, for a `Codable` attribute; `nil` when the node
    /// cannot be written as JSON.
    func json(_ node: Node) -> Data?
    /// Whether ``peekField(_:_:hint:)`` is cheap and may find a field: a run then looks at the
    /// sources ahead to prefetch what their identification will read.
    static var peeksFields: Bool { get }
    /// The value of `key` in the object `node` if it is where `hint` says the key was found
    /// last time, else nil; no search. A guess for prefetching only.
    func peekField(_ node: Node, _ key: MappingKey, hint: Int) -> Node?
    /// Prefetches what the sources after the object `node` are read from, for sources whose
    /// storage is larger than the caches; nothing for others.
    func prefetchPast(_ node: Node)
    /// Whether `node` nests arrays and objects deeper than ``mappingMaxDepth`` levels. Such a
    /// node is refused (``MappingError/Code/tooDeeplyNested``) before anything walks it
    /// recursively (its text, its JSON): a parsed document can never be (its parser bounds the
    /// depth); Foundation values built in code can.
    func nestsTooDeep(_ node: Node) -> Bool
}

/// The deepest nesting of arrays and objects a mapping accepts, in levels (the root container
/// is level 1): simdjson's default, which bounds JSON documents, and the bound of Foundation
/// values too.
let mappingMaxDepth = JSONSyntaxLocator.defaultMaxDepth

extension MappingSource {
    static var peeksFields: Bool { false }
    func peekField(_ node: Node, _ key: MappingKey, hint: Int) -> Node? { nil }
    func prefetchPast(_ node: Node) {}
    func nestsTooDeep(_ node: Node) -> Bool { false }
}

extension MappingSource {
    /// The node at the dotted key path `keys`, or `nil` when a key is missing or an
    /// intermediate value is not an object.
    @inline(__always)
    func node(_ start: Node, at keys: [MappingKey], hints: inout [Int], base: Int) -> Node? {
        var current = start
        for (i, key) in keys.enumerated() {
            guard kind(current) == .object, let next = field(current, key, hint: &hints[base + i]) else { return nil }
            current = next
        }
        return current
    }
}

// MARK: JSON documents

/// A parsed JSON document as a mapping source; nodes are tape indexes.
struct JSONSource: MappingSource {
    let document: JSONDocument

    @inline(__always) func kind(_ node: Int) -> JSONKind { document.kind(node) }

    @inline(__always) func scalar(_ node: Int) -> SourceScalar {
        switch document.kind(node) {
        case .null: .null
        case .bool: .bool(document.bool(node))
        case .number:
            switch document.number(node) {
            case .int(let v): .int(v)
            case .uint(let v): .uint(v)
            case .double(let v): .double(v)
            }
        case .string: .utf8(document.stringBytes(node))
        case .array, .object: .composite
        }
    }

    @inline(__always) func field(_ node: Int, _ key: MappingKey, hint: inout Int) -> Int? {
        key.bytes.withUnsafeBytes { document.field(node, named: $0, hint: &hint) }
    }

    func forEachElement(_ node: Int, _ body: (Int) throws -> Void) rethrows {
        try document.forEachElement(node, body)
    }

    static var peeksFields: Bool { true }

    @inline(__always) func prefetchPast(_ node: Int) {
        if document.kind(node) == .object { document.prefetchPast(node) }
    }

    @inline(__always) func peekField(_ node: Int, _ key: MappingKey, hint: Int) -> Int? {
        guard document.kind(node) == .object else { return nil }
        return key.bytes.withUnsafeBytes { document.field(node, named: $0, atPosition: hint) }
    }

    func count(_ node: Int) -> Int { document.count(node) }

    func text(_ node: Int) -> String { document.jsonText(node) }

    /// Written from the tape: through Foundation values and `JSONSerialization`, the demo's
    /// first sync of 4,000 packages (one `depends` array each) took 120 ms instead of 22 ms.
    func json(_ node: Int) -> Data? { document.jsonData(node) }
}

/// Writes Foundation values as JSON the way `Codable` attributes store theirs: sorted keys,
/// slashes unescaped.
enum JSONSerializationValue {
    static func data(_ value: Any) -> Data? {
        guard JSONSerialization.isValidJSONObject([value]) else { return nil }
        return try? JSONSerialization.data(
            withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes, .fragmentsAllowed])
    }
}

// MARK: Foundation values

/// `Optional` seen through `Any`, so that a `nil` inside a `[String: Any]` reads as null.
protocol _OptionalValue {
    var _wrappedValue: Any? { get }
}

extension Optional: _OptionalValue {
    var _wrappedValue: Any? {
        switch self {
        case .some(let v): v
        case .none: nil
        }
    }
}

/// Foundation and Swift values as a mapping source: `[String: Any]` objects, `[Any]` arrays,
/// `NSNull` or `nil`, numbers, strings, and values of stored types (`Date`, `UUID`, `URL`, `Data`).
struct FoundationSource: MappingSource {
    @inline(__always)
    private func unwrap(_ node: Any) -> Any? {
        if let o = node as? any _OptionalValue {
            guard let inner = o._wrappedValue else { return nil }
            return unwrap(inner)
        }
        return node
    }

    // Arrays and dictionaries are recognized before any cast to a class (`NSNull`,
    // `NSNumber`): such a cast bridges a Swift collection to its Foundation counterpart, element
    // by element and level by level, which costs a copy of the whole value and, thousands of
    // levels down, overflows the stack.

    func kind(_ node: Any) -> JSONKind {
        guard let v = unwrap(node) else { return .null }
        switch v {
        case is [String: Any]: return .object
        case is [Any]: return .array
        case is NSNull: return .null
        case is String: return .string
        case is Bool where type(of: v) == Bool.self: return .bool
        case is NSNumber, is any BinaryInteger, is any BinaryFloatingPoint: return .number
        default: return .string
        }
    }

    func scalar(_ node: Any) -> SourceScalar {
        guard let v = unwrap(node) else { return .null }
        switch v {
        case is [String: Any], is [Any]: return .composite
        case is NSNull: return .null
        case let b as Bool where type(of: v) == Bool.self: return .bool(b)
        case let s as String: return .string(s)
        case let i as Int: return .int(Int64(i))
        case let i as Int64: return .int(i)
        case let i as Int32: return .int(Int64(i))
        case let i as Int16: return .int(Int64(i))
        case let i as Int8: return .int(Int64(i))
        case let u as UInt64: return .uint(u)
        case let u as UInt: return .uint(UInt64(u))
        case let u as UInt32: return .uint(UInt64(u))
        case let u as UInt16: return .uint(UInt64(u))
        case let u as UInt8: return .uint(UInt64(u))
        case let d as Double: return .double(d)
        case let f as Float: return .double(Double(f))
        case let n as NSNumber:
            if let i = Int64(exactly: n.doubleValue), Double(n.int64Value) == n.doubleValue { return .int(i) }
            return .double(n.doubleValue)
        case let d as Date: return .native(.date(d))
        case let u as UUID: return .native(.uuid(u))
        case let u as URL: return .native(.url(u))
        case let d as Data: return .native(.data(d))
        default: return .unsupported("\(type(of: v))")
        }
    }

    func field(_ node: Any, _ key: MappingKey, hint: inout Int) -> Any? {
        guard let d = unwrap(node) as? [String: Any] else { return nil }
        return d[key.string]
    }

    func forEachElement(_ node: Any, _ body: (Any) throws -> Void) rethrows {
        guard let a = unwrap(node) as? [Any] else { return }
        for e in a { try body(e) }
    }

    func count(_ node: Any) -> Int { (unwrap(node) as? [Any])?.count ?? 0 }

    func text(_ node: Any) -> String {
        guard let v = unwrap(node) else { return "null" }
        if nestsTooDeep(v) { return "a value nested deeper than \(mappingMaxDepth) levels" }
        if let d = json(v), let s = String(data: d, encoding: .utf8) { return s }
        return "\(v)"
    }

    func json(_ node: Any) -> Data? {
        guard let v = unwrap(node) else { return Data("null".utf8) }
        if nestsTooDeep(v) { return nil }
        return JSONSerializationValue.data(v)
    }

    /// Walks the containers of `node` with a stack of its own, not the thread's: Foundation's
    /// serialization and `description` recurse, and overflow the stack some thousands of levels
    /// down.
    func nestsTooDeep(_ node: Any) -> Bool {
        var stack: [(value: Any, depth: Int)] = [(node, 1)]
        while let (value, depth) = stack.popLast() {
            guard let v = unwrap(value) else { continue }
            if let array = v as? [Any] {
                if depth > mappingMaxDepth { return true }
                for element in array { stack.append((element, depth + 1)) }
            } else if let object = v as? [String: Any] {
                if depth > mappingMaxDepth { return true }
                for element in object.values { stack.append((element, depth + 1)) }
            }
        }
        return false
    }
}
