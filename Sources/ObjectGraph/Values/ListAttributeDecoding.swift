import Foundation

/// Decodes the JSON of the most common `Codable` attribute types, `[String]` and `[Int]`, with
/// simdjson instead of `JSONDecoder`.
///
/// A list attribute (a package's dependency names, an object's tags) is decoded on every read,
/// checked on every mapping that stores it and every open that replays it; `JSONDecoder` spent
/// about 5 µs on a list of four names, a third of mapping a package. Any JSON this decoder does
/// not take as it is (malformed, another shape, a number that is not an integer in `Int`'s
/// range) gives `nil`, and the caller decodes it with `JSONDecoder`, whose verdict and error
/// stand: both decoders agree on every input this one accepts
/// (`CodableCollectionTests.listAttributesDecodeAsJSONDecoderDecodesThem`).
enum ListAttributeDecoding {
    /// The largest JSON decoded with the thread's kept parser, whose buffers grow to the largest
    /// input they parsed; a larger one gets a parser of its own, freed afterwards.
    static let keptParserLimit = 64 << 10

    /// The key of each thread's kept parser (nil if the system had no key left: every decode
    /// then gets a parser of its own).
    private static let parserKey: pthread_key_t? = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { pointer in
            guard let pointer else { return }
            Unmanaged<JSONParser>.fromOpaque(pointer).release()
        }
        return status == 0 ? key : nil
    }()

    /// A parser for `byteCount` bytes: the thread's kept one when it is free and the input small.
    private static func parser(for byteCount: Int) -> JSONParser? {
        guard byteCount <= keptParserLimit, let key = parserKey else { return JSONParser() }
        if let pointer = pthread_getspecific(key) {
            let kept = Unmanaged<JSONParser>.fromOpaque(pointer).takeUnretainedValue()
            return kept.inUse ? JSONParser() : kept
        }
        guard let parser = JSONParser() else { return nil }
        guard pthread_setspecific(key, Unmanaged.passRetained(parser).toOpaque()) == 0 else {
            Unmanaged.passUnretained(parser).release()
            return parser
        }
        return parser
    }

    /// Calls `element` with the document and each element of its top-level array; `nil` when
    /// the bytes are not a JSON array or `element` refuses one (returns false).
    private static func forEachElement(
        of bytes: UnsafeRawBufferPointer, reserving reserve: (Int) -> Void, _ element: (JSONDocument, Int) -> Bool
    ) -> Bool {
        guard let parser = parser(for: bytes.count),
            let document = try? JSONDocument(parsing: bytes, reusing: parser)
        else { return false }
        let root = document.root
        guard document.kind(root) == .array else { return false }
        reserve(document.count(root))
        var accepted = true
        document.forEachElement(root) { node in
            if accepted { accepted = element(document, node) }
        }
        return accepted
    }

    /// The strings of a JSON array of strings, escapes decoded; nil for anything else.
    static func strings(_ bytes: UnsafeRawBufferPointer) -> [String]? {
        var list: [String] = []
        let accepted = forEachElement(of: bytes, reserving: { list.reserveCapacity($0) }) { document, node in
            guard document.kind(node) == .string else { return false }
            list.append(document.string(node))
            return true
        }
        return accepted ? list : nil
    }

    /// The integers of a JSON array of integer literals that fit `Int`; nil for anything else
    /// (a fraction, an exponent, a larger number: `JSONDecoder` decides those).
    static func integers(_ bytes: UnsafeRawBufferPointer) -> [Int]? {
        var list: [Int] = []
        let accepted = forEachElement(of: bytes, reserving: { list.reserveCapacity($0) }) { document, node in
            guard document.kind(node) == .number, case .int(let value) = document.number(node),
                let integer = Int(exactly: value)
            else { return false }
            list.append(integer)
            return true
        }
        return accepted ? list : nil
    }

    /// `T` decoded from `bytes` when `T` is `[String]` or `[Int]` and the bytes are what this
    /// decoder takes; nil otherwise (decode with `JSONDecoder` then).
    static func decode<T>(_ type: T.Type, from bytes: UnsafeRawBufferPointer) -> T? {
        if T.self == [String].self {
            return strings(bytes).map { unsafeBitCast($0, to: T.self) }
        }
        if T.self == [Int].self {
            return integers(bytes).map { unsafeBitCast($0, to: T.self) }
        }
        return nil
    }
}
