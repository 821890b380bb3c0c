import Foundation

/// A source value transformed for its attribute: a cell to store, or `null`.
enum Transformed {
    case null
    /// A fixed 64-bit cell (numbers, booleans, dates).
    case fixed(UInt64)
    /// Bytes valid for the run (a JSON string stored as a string attribute, unchanged).
    case bytes(UnsafeRawBufferPointer)
    /// Any other value.
    case value(AttributeValue)

    /// Calls `body` with the cell, or `nil` for null.
    @inline(__always)
    func withCell<R>(_ body: (RawCell?) throws -> R) rethrows -> R {
        switch self {
        case .null: try body(nil)
        case .fixed(let bits): try body(.fixed(bits))
        case .bytes(let b): try body(.bytes(b))
        case .value(let v): try v.withCell { try body($0) }
        }
    }

    /// The value as an ``AttributeValue`` of `type` (for comparisons and messages).
    func attributeValue(as type: AttributeType) -> AttributeValue? {
        switch self {
        case .null: nil
        case .fixed(let bits): AttributeValue.decode(.fixed(bits), as: type)
        case .bytes(let b): AttributeValue.decode(.bytes(b), as: type)
        case .value(let v): v
        }
    }
}

/// Turns source scalars into attribute values, RestKit's way (see `Docs/Mapping.md`,
/// "Value transformation"): strings and numbers convert both ways, numbers become booleans and
/// dates (seconds since 1970), strings become dates (ISO 8601, then the mapping's formats),
/// URLs and UUIDs. A conversion that would lose information is refused (`nil`).
struct ValueTransformer {
    let dateFormatters: [DateFormatter]
    private let iso = ISO8601DateFormatter()
    private let isoFractional: ISO8601DateFormatter

    init(dateFormats: [String]) {
        dateFormatters = dateFormats.map { format in
            let f = DateFormatter()
            f.locale = Locale(identifier: "en_US_POSIX")
            f.timeZone = TimeZone(secondsFromGMT: 0)
            f.dateFormat = format
            return f
        }
        isoFractional = ISO8601DateFormatter()
        isoFractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    }

    /// The value `scalar` becomes in an attribute of `type`, or `nil` when it cannot.
    @inline(__always)
    func transform(_ scalar: SourceScalar, to type: AttributeType) -> Transformed? {
        switch (scalar, type) {
        case (.null, _): return .null
        case (.utf8(let b), .string): return .bytes(b)
        case (.string(let s), .string): return .value(.string(s))
        case (.int(let v), .int64): return .fixed(UInt64(bitPattern: v))
        case (.double(let v), .double): return .fixed(v.bitPattern)
        default: return transformSlow(scalar, to: type)
        }
    }

    private func transformSlow(_ scalar: SourceScalar, to type: AttributeType) -> Transformed? {
        switch type {
        case .bool:
            switch scalar {
            case .bool(let b): return .fixed(b ? 1 : 0)
            case .int(let v): return .fixed(v != 0 ? 1 : 0)
            case .uint(let v): return .fixed(v != 0 ? 1 : 0)
            case .double(let v): return v.isNaN ? nil : .fixed(v != 0 ? 1 : 0)
            case .utf8, .string:
                switch text(scalar)?.lowercased() {
                case "true", "yes", "1": return .fixed(1)
                case "false", "no", "0": return .fixed(0)
                default: return nil
                }
            default: return nil
            }
        case .int8, .int16, .int32, .int64:
            guard let v = integer(scalar), type.signedRange.contains(v) else { return nil }
            return .fixed(UInt64(bitPattern: v))
        case .uint8, .uint16, .uint32, .uint64:
            guard let v = unsigned(scalar), v <= type.unsignedMax else { return nil }
            return .fixed(v)
        case .double:
            guard let d = double(scalar) else { return nil }
            return .fixed(d.bitPattern)
        case .float:
            guard let d = double(scalar) else { return nil }
            let f = Float(d)
            guard f.isFinite || !d.isFinite else { return nil }
            return .fixed(UInt64(f.bitPattern))
        case .string:
            switch scalar {
            case .int(let v): return .value(.string(String(v)))
            case .uint(let v): return .value(.string(String(v)))
            case .double(let v):
                return .value(.string(v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : String(v)))
            case .bool(let b): return .value(.string(b ? "true" : "false"))
            case .native(.uuid(let u)): return .value(.string(u.uuidString))
            case .native(.url(let u)): return .value(.string(u.absoluteString))
            case .native(.date(let d)): return .value(.string(iso.string(from: d)))
            case .native(.string(let s)): return .value(.string(s))
            default: return nil
            }
        case .date:
            switch scalar {
            case .int(let v): return .value(.date(Date(timeIntervalSince1970: Double(v))))
            case .uint(let v): return .value(.date(Date(timeIntervalSince1970: Double(v))))
            case .double(let v): return v.isFinite ? .value(.date(Date(timeIntervalSince1970: v))) : nil
            case .utf8(let b): return date(fromUTF8: b).map { .value(.date($0)) }
            case .string(let s): return date(from: s).map { .value(.date($0)) }
            case .native(.date(let d)): return .value(.date(d))
            default: return nil
            }
        case .uuid:
            switch scalar {
            case .utf8, .string: return text(scalar).flatMap { UUID(uuidString: $0) }.map { .value(.uuid($0)) }
            case .native(.uuid(let u)): return .value(.uuid(u))
            default: return nil
            }
        case .url:
            switch scalar {
            case .utf8, .string:
                guard let s = text(scalar), !s.isEmpty, let u = URL(string: s) else { return nil }
                return .value(.url(u))
            case .native(.url(let u)): return .value(.url(u))
            default: return nil
            }
        case .data:
            switch scalar {
            case .utf8, .string: return text(scalar).flatMap { Data(base64Encoded: $0) }.map { .value(.data($0)) }
            case .native(.data(let d)): return .value(.data(d))
            default: return nil
            }
        case .stringList, .intList:
            // A JSON array is mapped by the run (`MappingRun.transform`); a native value here
            // comes from a dynamic source.
            guard case .native(let v) = scalar else { return nil }
            return AttributeValue.coerce(attributeValue: v, to: type).map(Transformed.value)
        }
    }

    private func text(_ scalar: SourceScalar) -> String? {
        switch scalar {
        case .utf8(let b): String(decoding: b, as: UTF8.self)
        case .string(let s): s
        default: nil
        }
    }

    private func integer(_ scalar: SourceScalar) -> Int64? {
        switch scalar {
        case .int(let v): v
        case .uint(let v): Int64(exactly: v)
        case .double(let v): Int64(exactly: v)
        case .bool(let b): b ? 1 : 0
        case .utf8, .string: text(scalar).flatMap { Int64($0) }
        default: nil
        }
    }

    private func unsigned(_ scalar: SourceScalar) -> UInt64? {
        switch scalar {
        case .int(let v): UInt64(exactly: v)
        case .uint(let v): v
        case .double(let v): UInt64(exactly: v)
        case .bool(let b): b ? 1 : 0
        case .utf8, .string: text(scalar).flatMap { UInt64($0) }
        default: nil
        }
    }

    private func double(_ scalar: SourceScalar) -> Double? {
        switch scalar {
        case .int(let v): Double(v)
        case .uint(let v): Double(v)
        case .double(let v): v
        case .bool(let b): b ? 1 : 0
        case .utf8, .string: text(scalar).flatMap { Double($0) }.flatMap { $0.isFinite ? $0 : nil }
        default: nil
        }
    }

    /// A date from ISO 8601 text: the common `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)` form is read
    /// directly (a formatter costs microseconds per value); others go through the formatters.
    func date(fromUTF8 bytes: UnsafeRawBufferPointer) -> Date? {
        if let d = FastISO8601.parse(bytes) { return d }
        return date(from: String(decoding: bytes, as: UTF8.self))
    }

    func date(from string: String) -> Date? {
        var s = string
        if let d = s.withUTF8({ FastISO8601.parse(UnsafeRawBufferPointer($0)) }) { return d }
        if let d = iso.date(from: string) ?? isoFractional.date(from: string) { return d }
        for f in dateFormatters {
            if let d = f.date(from: string) { return d }
        }
        return nil
    }
}

/// RFC 3339 timestamps (`2024-05-01T12:30:00Z`, `2024-05-01T12:30:00.250+02:00`) without a
/// formatter. Anything else returns `nil` and is left to `ISO8601DateFormatter`.
enum FastISO8601 {
    static func parse(_ b: UnsafeRawBufferPointer) -> Date? {
        let n = b.count
        guard n >= 20 else { return nil }
        func digits(_ at: Int, _ count: Int) -> Int? {
            var v = 0
            for i in at..<at + count {
                let c = Int(b[i]) - 48
                guard c >= 0 && c <= 9 else { return nil }
                v = v * 10 + c
            }
            return v
        }
        guard b[4] == 0x2D, b[7] == 0x2D, b[10] == 0x54 || b[10] == 0x74, b[13] == 0x3A, b[16] == 0x3A,
            let year = digits(0, 4), let month = digits(5, 2), let day = digits(8, 2),
            let hour = digits(11, 2), let minute = digits(14, 2), let second = digits(17, 2),
            (1...12).contains(month), day >= 1, day <= daysIn(month, year), hour < 24, minute < 60, second < 60
        else { return nil }
        var i = 19
        var fraction = 0.0
        if b[i] == 0x2E {
            i += 1
            var scale = 0.1
            let start = i
            while i < n, let d = digits(i, 1) {
                fraction += Double(d) * scale
                scale /= 10
                i += 1
            }
            guard i > start else { return nil }
        }
        guard i < n else { return nil }
        var offset = 0
        if b[i] == 0x5A || b[i] == 0x7A {
            i += 1
        } else if b[i] == 0x2B || b[i] == 0x2D {
            guard i + 6 == n, b[i + 3] == 0x3A, let oh = digits(i + 1, 2), let om = digits(i + 4, 2), oh < 24, om < 60
            else { return nil }
            offset = (oh * 3600 + om * 60) * (b[i] == 0x2D ? -1 : 1)
            i += 6
        } else {
            return nil
        }
        guard i == n else { return nil }
        let days = daysFromCivil(year, month, day)
        let seconds = Double(days * 86400 + hour * 3600 + minute * 60 + second - offset) + fraction
        return Date(timeIntervalSince1970: seconds)
    }

    private static func daysIn(_ month: Int, _ year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    private static func daysFromCivil(_ y0: Int, _ m: Int, _ d: Int) -> Int {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }
}
