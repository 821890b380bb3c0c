internal import CSimdJSON

/// Where a byte sequence stops being JSON, and why.
struct JSONSyntaxError: Error, Equatable, Sendable {
    /// The offset of the first byte that cannot be read; the input's length when it ends early.
    let offset: Int
    /// What is wrong there, in a few words ("unexpected character 'x', expected ':'").
    let reason: String
}

/// A strict JSON (RFC 8259) validator that finds the first byte at which a document goes wrong.
///
/// simdjson says that a document is malformed but not where, so JSONDocument runs this on the
/// documents simdjson rejects (never on the ones it accepts). Besides RFC 8259, it applies
/// simdjson's own limits, so that both reject the same documents: nesting at most `maxDepth`
/// levels deep (see `validateDocument`), integers within `Int64.min ... UInt64.max`, numbers
/// within `Double`'s range, `\u` escapes that pair UTF-16 surrogates, and no byte order mark.
///
/// The offset it reports is that of the first byte such that no valid document starts with the
/// bytes up to and including it: everything before the offset can still be completed into
/// JSON. A document that ends early is located at its length. The one exception is a number out
/// of range, which is located at its first byte.
struct JSONSyntaxLocator {
    /// The nesting depth simdjson accepts by default (its DEFAULT_MAX_DEPTH), in levels.
    static let defaultMaxDepth = Int(og_json_max_depth())

    /// The first error in `bytes`, or nil when they are one valid JSON document.
    static func firstError(in bytes: UnsafeRawBufferPointer, maxDepth: Int = defaultMaxDepth) -> JSONSyntaxError? {
        var locator = JSONSyntaxLocator(bytes: bytes, maxDepth: maxDepth)
        do {
            try locator.validateDocument()
            return nil
        } catch {
            return error
        }
    }

    /// The document.
    private let bytes: UnsafeRawBufferPointer
    /// The deepest level a value may be at.
    private let maxDepth: Int
    /// The offset of the next byte to read.
    private var position = 0

    /// A locator at the start of `bytes`.
    private init(bytes: UnsafeRawBufferPointer, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    /// What may come next in the document.
    private enum Expectation {
        /// A value (at the start, after ':' or after ',' in an array).
        case value
        /// A value or ']' (just after '[').
        case valueOrEndOfArray
        /// A key or '}' (just after '{').
        case keyOrEndOfObject
        /// A key (after ',' in an object).
        case key
        /// The ':' after a key.
        case colon
        /// ',' or the end of the enclosing container, or the end of the input at the top level.
        case separator
    }

    // MARK: Structure

    /// Reads the whole input as one JSON text, throwing at the first byte that is not JSON.
    ///
    /// Depth is counted in levels: the top-level value is at level 1, and what an array or
    /// object holds is one level below it. simdjson accepts values down to level `maxDepth`,
    /// where only an empty array or object can be (its parser counts a container's depth only
    /// when it holds something), so the first byte of a value or key at level `maxDepth + 1`
    /// is the one in error.
    private mutating func validateDocument() throws(JSONSyntaxError) {
        var containers: [UInt8] = []  // the '[' and '{' still open, innermost last
        var expectation = Expectation.value
        while true {
            skipWhitespace()
            guard position < bytes.count else {
                if expectation == .separator && containers.isEmpty { return }
                throw JSONSyntaxError(offset: bytes.count, reason: "unexpected end of input")
            }
            let byte = bytes[position]
            switch expectation {
            case .value, .valueOrEndOfArray:
                if expectation == .valueOrEndOfArray && byte == UInt8(ascii: "]") {
                    containers.removeLast()
                    position += 1
                    expectation = .separator
                    continue
                }
                try checkDepth(containers.count)
                switch byte {
                case UInt8(ascii: "["), UInt8(ascii: "{"):
                    containers.append(byte)
                    position += 1
                    expectation = byte == UInt8(ascii: "[") ? .valueOrEndOfArray : .keyOrEndOfObject
                case UInt8(ascii: "\""):
                    try skipString()
                    expectation = .separator
                case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                    try skipNumber()
                    expectation = .separator
                case UInt8(ascii: "t"):
                    try skipLiteral("true")
                    expectation = .separator
                case UInt8(ascii: "f"):
                    try skipLiteral("false")
                    expectation = .separator
                case UInt8(ascii: "n"):
                    try skipLiteral("null")
                    expectation = .separator
                default:
                    throw unexpected(expecting: expectation == .value ? "a value" : "a value or ']'")
                }
            case .keyOrEndOfObject, .key:
                if expectation == .keyOrEndOfObject && byte == UInt8(ascii: "}") {
                    containers.removeLast()
                    position += 1
                    expectation = .separator
                    continue
                }
                try checkDepth(containers.count)
                guard byte == UInt8(ascii: "\"") else {
                    throw unexpected(expecting: expectation == .key ? "a key string" : "a key string or '}'")
                }
                try skipString()
                expectation = .colon
            case .colon:
                guard byte == UInt8(ascii: ":") else { throw unexpected(expecting: "':'") }
                position += 1
                expectation = .value
            case .separator:
                guard let container = containers.last else {
                    throw JSONSyntaxError(offset: position, reason: "trailing characters after the document")
                }
                let isArray = container == UInt8(ascii: "[")
                if byte == UInt8(ascii: ",") {
                    position += 1
                    expectation = isArray ? .value : .key
                } else if byte == UInt8(ascii: isArray ? "]" : "}") {
                    containers.removeLast()
                    position += 1
                } else {
                    throw unexpected(expecting: isArray ? "',' or ']'" : "',' or '}'")
                }
            }
        }
    }

    /// Throws at `position` when a value or key there, inside `openContainers` arrays and
    /// objects, is deeper than simdjson reads.
    private func checkDepth(_ openContainers: Int) throws(JSONSyntaxError) {
        if openContainers >= maxDepth {
            throw JSONSyntaxError(offset: position, reason: "nesting deeper than \(maxDepth) levels")
        }
    }

    /// Moves past spaces, tabs, line feeds and carriage returns.
    private mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    /// The error for the byte at `position`, which is not one of `expected`.
    private func unexpected(expecting expected: String) -> JSONSyntaxError {
        JSONSyntaxError(offset: position, reason: "unexpected \(describeByte(at: position)), expected \(expected)")
    }

    /// The byte at `offset` in words: a quoted character, a code point for control characters,
    /// a hexadecimal byte when it does not start valid UTF-8.
    private func describeByte(at offset: Int) -> String {
        let byte = bytes[offset]
        if byte < 0x20 || byte == 0x7F {
            return "control character U+00" + hex(byte)
        }
        if byte < 0x80 {
            return "character '\(Character(Unicode.Scalar(byte)))'"
        }
        var scalarEnd = offset
        if (try? validateUTF8Sequence(at: &scalarEnd)) != nil,
            let scalar = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[offset..<scalarEnd]), as: UTF8.self)
                .unicodeScalars.first
        {
            return "character '\(scalar)' (U+\(String(scalar.value, radix: 16, uppercase: true)))"
        }
        return "byte 0x\(hex(byte)) (not UTF-8)"
    }

    /// `byte` as two uppercase hexadecimal digits.
    private func hex(_ byte: UInt8) -> String {
        let digits = String(byte, radix: 16, uppercase: true)
        return byte < 0x10 ? "0" + digits : digits
    }

    // MARK: Literals

    /// Moves past `literal` (true, false or null), which starts at `position`.
    private mutating func skipLiteral(_ literal: StaticString) throws(JSONSyntaxError) {
        let expected = UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        for expectedByte in expected {
            guard position < bytes.count else {
                throw JSONSyntaxError(offset: bytes.count, reason: "unexpected end of input in '\(literal)'")
            }
            guard bytes[position] == expectedByte else {
                throw JSONSyntaxError(
                    offset: position, reason: "unexpected \(describeByte(at: position)) in '\(literal)'")
            }
            position += 1
        }
    }

    // MARK: Numbers

    /// Whether `byte` is an ASCII digit.
    private static func isDigit(_ byte: UInt8) -> Bool {
        byte &- UInt8(ascii: "0") < 10
    }

    /// Moves past the number that starts at `position`, checking its grammar and that simdjson
    /// can represent it.
    private mutating func skipNumber() throws(JSONSyntaxError) {
        let start = position
        if bytes[position] == UInt8(ascii: "-") { position += 1 }
        try requireDigit(in: "number")
        if bytes[position] == UInt8(ascii: "0") {
            position += 1
            if position < bytes.count && Self.isDigit(bytes[position]) {
                throw JSONSyntaxError(offset: position, reason: "number with leading zero")
            }
        } else {
            skipDigits()
        }
        var isInteger = true
        if position < bytes.count && bytes[position] == UInt8(ascii: ".") {
            isInteger = false
            position += 1
            try requireDigit(in: "fraction")
            skipDigits()
        }
        if position < bytes.count && (bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E")) {
            isInteger = false
            position += 1
            if position < bytes.count && (bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-"))
            {
                position += 1
            }
            try requireDigit(in: "exponent")
            skipDigits()
        }
        try checkRange(ofNumberFrom: start, isInteger: isInteger)
    }

    /// Throws unless a digit is at `position` (`part` names the part of the number).
    private func requireDigit(in part: String) throws(JSONSyntaxError) {
        guard position < bytes.count else {
            throw JSONSyntaxError(offset: bytes.count, reason: "unexpected end of input in a number")
        }
        guard Self.isDigit(bytes[position]) else {
            throw JSONSyntaxError(
                offset: position, reason: "unexpected \(describeByte(at: position)), expected a digit in the \(part)")
        }
    }

    /// Moves past the digits at `position`.
    private mutating func skipDigits() {
        while position < bytes.count && Self.isDigit(bytes[position]) { position += 1 }
    }

    /// Throws when the number from `start` to `position` is beyond what simdjson stores: an
    /// integer outside `Int64.min ... UInt64.max`, or a number that rounds to infinity.
    private func checkRange(ofNumberFrom start: Int, isInteger: Bool) throws(JSONSyntaxError) {
        let token = UnsafeRawBufferPointer(rebasing: bytes[start..<position])
        if isInteger {
            let isNegative = token[0] == UInt8(ascii: "-")
            var magnitude: UInt64 = 0
            var overflow = false
            for digit in token.dropFirst(isNegative ? 1 : 0) {
                let (times10, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times10.addingReportingOverflow(UInt64(digit - UInt8(ascii: "0")))
                magnitude = sum
                overflow = overflow || overflow1 || overflow2
            }
            if overflow || (isNegative && magnitude > UInt64(Int64.max) + 1) {
                throw JSONSyntaxError(offset: start, reason: "integer out of the 64-bit range")
            }
        } else if let value = Double(String(decoding: token, as: UTF8.self)), value.isInfinite {
            throw JSONSyntaxError(offset: start, reason: "number out of the range of a double")
        }
    }

    // MARK: Strings

    /// Moves past the string whose opening quote is at `position`.
    private mutating func skipString() throws(JSONSyntaxError) {
        position += 1
        while true {
            guard position < bytes.count else {
                throw JSONSyntaxError(offset: bytes.count, reason: "unterminated string")
            }
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                return
            case UInt8(ascii: "\\"):
                try skipEscape()
            case 0x00..<0x20:
                throw JSONSyntaxError(offset: position, reason: "control character U+00\(hex(byte)) in string")
            case 0x20..<0x80:
                position += 1
            default:
                try validateUTF8Sequence(at: &position)
            }
        }
    }

    /// Moves past the escape sequence whose backslash is at `position`. simdjson decodes `\u`
    /// escapes to UTF-8, so it rejects a high surrogate not followed by a `\u` low surrogate and
    /// a low surrogate on its own.
    private mutating func skipEscape() throws(JSONSyntaxError) {
        position += 1
        guard position < bytes.count else {
            throw JSONSyntaxError(offset: bytes.count, reason: "unterminated string")
        }
        switch bytes[position] {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
            UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            position += 1
        case UInt8(ascii: "u"):
            position += 1
            let unit = try readHexQuad(lowSurrogate: false)
            if (0xD800..<0xDC00).contains(unit) {
                for expected in [UInt8(ascii: "\\"), UInt8(ascii: "u")] {
                    guard position < bytes.count else {
                        throw JSONSyntaxError(offset: bytes.count, reason: "unterminated string")
                    }
                    guard bytes[position] == expected else {
                        throw JSONSyntaxError(
                            offset: position, reason: "high surrogate escape without a low surrogate escape after it")
                    }
                    position += 1
                }
                _ = try readHexQuad(lowSurrogate: true)
            }
        default:
            throw JSONSyntaxError(offset: position, reason: "invalid escape '\\\(describeEscapedByte(at: position))'")
        }
    }

    /// The byte after a backslash, for an error message.
    private func describeEscapedByte(at offset: Int) -> String {
        let byte = bytes[offset]
        return byte >= 0x20 && byte < 0x7F ? String(Character(Unicode.Scalar(byte))) : "x" + hex(byte)
    }

    /// Reads the four hexadecimal digits of a `\u` escape at `position`. When `lowSurrogate`,
    /// the value must be a low surrogate (DC00–DFFF); otherwise it must not be one.
    private mutating func readHexQuad(lowSurrogate: Bool) throws(JSONSyntaxError) -> UInt32 {
        var value: UInt32 = 0
        for digitIndex in 0..<4 {
            guard position < bytes.count else {
                throw JSONSyntaxError(offset: bytes.count, reason: "unterminated string")
            }
            let byte = bytes[position]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default:
                throw JSONSyntaxError(
                    offset: position,
                    reason: "invalid \\u escape: '\(describeEscapedByte(at: position))' is not a hexadecimal digit")
            }
            value = value << 4 | digit
            // The first two digits decide whether the unit is a low surrogate (DCxx–DFxx).
            if digitIndex == 1 {
                let isLow = (0xDC...0xDF).contains(value)
                if lowSurrogate && !isLow {
                    throw JSONSyntaxError(
                        offset: position, reason: "high surrogate escape without a low surrogate escape after it")
                }
                if !lowSurrogate && isLow {
                    throw JSONSyntaxError(
                        offset: position, reason: "low surrogate escape without a high surrogate escape before it")
                }
            } else if digitIndex == 0 && lowSurrogate && value != 0xD {
                throw JSONSyntaxError(
                    offset: position, reason: "high surrogate escape without a low surrogate escape after it")
            }
            position += 1
        }
        return value
    }

    // MARK: UTF-8

    /// Moves `offset` past the UTF-8 sequence that starts there (RFC 3629: shortest form, no
    /// surrogates, at most U+10FFFF), throwing at its first byte that cannot belong to one.
    private func validateUTF8Sequence(at offset: inout Int) throws(JSONSyntaxError) {
        let lead = bytes[offset]
        let continuations: Int
        var secondByteRange: ClosedRange<UInt8> = 0x80...0xBF
        switch lead {
        case 0xC2...0xDF: continuations = 1
        case 0xE0: continuations = 2; secondByteRange = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF: continuations = 2
        case 0xED: continuations = 2; secondByteRange = 0x80...0x9F
        case 0xF0: continuations = 3; secondByteRange = 0x90...0xBF
        case 0xF1...0xF3: continuations = 3
        case 0xF4: continuations = 3; secondByteRange = 0x80...0x8F
        default:
            throw JSONSyntaxError(offset: offset, reason: "invalid UTF-8 (byte 0x\(hex(lead)))")
        }
        offset += 1
        for index in 0..<continuations {
            guard offset < bytes.count else {
                throw JSONSyntaxError(offset: bytes.count, reason: "unexpected end of input in a UTF-8 sequence")
            }
            let byte = bytes[offset]
            guard (index == 0 ? secondByteRange : 0x80...0xBF).contains(byte) else {
                throw JSONSyntaxError(
                    offset: offset, reason: "invalid UTF-8 (byte 0x\(hex(byte)) after 0x\(hex(lead)))")
            }
            offset += 1
        }
    }
}
