import Foundation
import ObjectGraph

/// Builds JSON text straight into a byte buffer (no `Encodable` round trip: `dump` writes
/// hundreds of megabytes and this is its inner loop). Callers write the punctuation; this type
/// writes scalars and escapes strings.
struct JSONWriter {
    /// The JSON text written so far.
    var bytes: [UInt8] = []

    init(capacity: Int = 1 << 16) { bytes.reserveCapacity(capacity) }

    /// Appends ASCII punctuation or a key already known to need no escaping.
    @inline(__always)
    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// Appends `"key":`, escaping the key.
    mutating func key(_ name: String) {
        string(name)
        bytes.append(UInt8(ascii: ":"))
    }

    /// Appends a JSON string, escaping quotes, backslashes and control characters.
    mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            bytes.append(UInt8(ascii: "\""))
            var runStart = 0
            for i in 0..<utf8.count {
                let b = utf8[i]
                guard b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") else { continue }
                if runStart < i { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<i])) }
                runStart = i + 1
                bytes.append(UInt8(ascii: "\\"))
                switch b {
                case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\"))
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                default:
                    bytes.append(contentsOf: [
                        UInt8(ascii: "u"), 0x30, 0x30, Self.hex[Int(b >> 4)], Self.hex[Int(b & 0xF)],
                    ])
                }
            }
            if runStart < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...])) }
            bytes.append(UInt8(ascii: "\""))
        }
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends an unsigned integer in decimal.
    mutating func uint(_ value: UInt64) {
        if value < 10 {
            bytes.append(UInt8(truncatingIfNeeded: value) + 0x30)
            return
        }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for 20 digits
        var count = 0
        var v = value
        withUnsafeMutableBytes(of: &digits) { buffer in
            while v > 0 {
                count += 1
                buffer[24 - count] = UInt8(truncatingIfNeeded: v % 10) + 0x30
                v /= 10
            }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[(24 - count)...]))
        }
    }

    /// Appends a signed integer in decimal.
    mutating func int(_ value: Int64) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        uint(value.magnitude)
    }

    /// Appends a boolean.
    mutating func bool(_ value: Bool) {
        if value { raw("true") } else { raw("false") }
    }

    /// Appends a number in Swift's shortest round-trip form; NaN and infinities, which JSON
    /// cannot express, as the strings `"NaN"`, `"Infinity"`, `"-Infinity"`.
    mutating func double(_ value: Double) {
        if value.isNaN {
            raw("\"NaN\"")
        } else if value.isInfinite {
            if value < 0 { raw("\"-Infinity\"") } else { raw("\"Infinity\"") }
        } else {
            bytes.append(contentsOf: value.description.utf8)
        }
    }

    /// Appends a `Float` in its own shortest round-trip form (so `0.1` stays `0.1`).
    mutating func float(_ value: Float) {
        if value.isNaN || value.isInfinite {
            double(Double(value))
        } else {
            bytes.append(contentsOf: value.description.utf8)
        }
    }

    /// Appends an attribute value as a JSON native: strings, numbers, booleans, `null`;
    /// data as base64, dates as ISO 8601 (UTC), UUIDs and URLs as strings, a native list as an
    /// array of strings or integers.
    mutating func value(_ value: AttributeValue?) {
        guard let value else { raw("null"); return }
        switch value {
        case .bool(let v): bool(v)
        case .int(let v): int(v)
        case .uint(let v): uint(v)
        case .double(let v): double(v)
        case .float(let v): float(v)
        case .string(let v): string(v)
        case .data(let v): string(v.base64EncodedString())
        case .date(let v): date(v)
        case .uuid(let v): string(v.uuidString)
        case .url(let v): string(v.absoluteString)
        case .stringList(let list):
            raw("[")
            for (i, s) in list.enumerated() {
                if i > 0 { raw(",") }
                string(s)
            }
            raw("]")
        case .intList(let list):
            raw("[")
            for (i, v) in list.enumerated() {
                if i > 0 { raw(",") }
                int(v)
            }
            raw("]")
        case .object(let id): object(id)
        case .objects(let ids):
            raw("[")
            for (i, id) in ids.enumerated() {
                if i > 0 { raw(",") }
                object(id)
            }
            raw("]")
        }
    }

    /// Appends an object reference: `{"entity":"Folder","serial":3}`.
    mutating func object(_ id: ObjectID) {
        raw("{\"entity\":"); string(id.entityName); raw(",\"serial\":"); uint(id.serial); raw("}")
    }

    /// Appends a date as an ISO 8601 string in UTC: `2027-01-15T08:00:00Z`, with a fraction of
    /// up to six digits (trailing zeros dropped) when the date has one.
    mutating func date(_ date: Date) {
        let t = date.timeIntervalSince1970
        guard t.isFinite, abs(t) < 1e14 else { double(t); return }
        var seconds = t.rounded(.down)
        var micros = Int64(((t - seconds) * 1_000_000).rounded())
        if micros == 1_000_000 { seconds += 1; micros = 0 }
        let total = Int64(seconds)
        var days = total / 86_400
        var secondOfDay = total % 86_400
        if secondOfDay < 0 { secondOfDay += 86_400; days -= 1 }
        // Civil from days (Howard Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        bytes.append(UInt8(ascii: "\""))
        if year < 0 { bytes.append(UInt8(ascii: "-")) }
        padded(year.magnitude, 4)
        bytes.append(UInt8(ascii: "-")); padded(UInt64(month), 2)
        bytes.append(UInt8(ascii: "-")); padded(UInt64(day), 2)
        bytes.append(UInt8(ascii: "T")); padded(UInt64(secondOfDay / 3600), 2)
        bytes.append(UInt8(ascii: ":")); padded(UInt64(secondOfDay / 60 % 60), 2)
        bytes.append(UInt8(ascii: ":")); padded(UInt64(secondOfDay % 60), 2)
        if micros > 0 {
            var fraction = micros
            var width = 6
            while fraction % 10 == 0 { fraction /= 10; width -= 1 }
            bytes.append(UInt8(ascii: "."))
            padded(UInt64(fraction), width)
        }
        bytes.append(contentsOf: [UInt8(ascii: "Z"), UInt8(ascii: "\"")])
    }

    private mutating func padded(_ value: UInt64, _ width: Int) {
        var digits = 1
        var v = value
        while v >= 10 { v /= 10; digits += 1 }
        for _ in digits..<max(digits, width) { bytes.append(0x30) }
        uint(value)
    }
}

/// Standard output (or another file descriptor), written in large chunks with `write(2)`.
struct StandardOutput {
    /// The pending text.
    var json = JSONWriter(capacity: 1 << 20)
    /// Bytes written so far.
    private(set) var written: Int64 = 0
    /// The descriptor written to.
    let fd: Int32
    /// What it is, for messages: "standard output", or a file's path.
    let name: String

    /// Output to `fd` (standard output by default), named `name` in messages.
    init(fd: Int32 = 1, name: String = "standard output") {
        self.fd = fd
        self.name = name
    }

    /// Writes the pending text once it passes 1 MiB.
    mutating func flushIfFull() throws {
        if json.bytes.count >= 1 << 20 { try flush() }
    }

    /// Writes the pending text.
    mutating func flush() throws {
        var failure: Int32 = 0
        json.bytes.withUnsafeBytes { buffer in
            var done = 0
            while done < buffer.count {
                let n = Glibc.write(fd, buffer.baseAddress! + done, buffer.count - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                done += n
            }
        }
        if failure != 0 {
            throw ToolFailure(.failure, "cannot write to \(name): \(String(cString: strerror(failure)))")
        }
        written += Int64(json.bytes.count)
        json.bytes.removeAll(keepingCapacity: true)
    }

    /// Appends text (and nothing else; add the newline).
    mutating func text(_ line: String) {
        json.bytes.append(contentsOf: line.utf8)
    }
}
