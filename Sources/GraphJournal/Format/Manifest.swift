internal import Foundation

/// The MANIFEST: which segment files are live, in order.
struct Manifest: Sendable, Hashable {
    /// File names: at most one `.base` first, then one or more `.log`; the last is active.
    var files: [String]

    func encoded() -> [UInt8] {
        var text = JournalFormat.manifestHeaderLine + "\n"
        for name in files {
            text += (name.hasSuffix("." + JournalFormat.baseExtension) ? "base " : "log ") + name + "\n"
        }
        var bytes = Array(text.utf8)
        let crc = CRC32C.checksum(bytes)
        bytes += Array("crc32c \(hex8(crc))\n".utf8)
        return bytes
    }

    static func parse(_ bytes: [UInt8], file: String) throws(JournalError) -> Manifest {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw JournalError(.badHeader, "MANIFEST is not UTF-8", file: file, offset: 0)
        }
        guard let crcLine = text.range(of: "crc32c ", options: .backwards) else {
            throw JournalError(
                .badHeader, "MANIFEST has no crc32c line (truncated?)", file: file, offset: Int64(bytes.count))
        }
        let bodyLength = text.utf8.distance(from: text.startIndex, to: crcLine.lowerBound)
        let stored = text[crcLine.upperBound...].trimmingCharacters(in: .whitespacesAndNewlines)
        guard UInt32(stored, radix: 16) == CRC32C.checksum(Array(bytes[..<bodyLength])) else {
            throw JournalError(.badHeader, "MANIFEST checksum mismatch", file: file, offset: Int64(bodyLength))
        }
        let lines = text[..<crcLine.lowerBound].split(separator: "\n", omittingEmptySubsequences: true)
        guard lines.first == Substring(JournalFormat.manifestHeaderLine) else {
            throw JournalError(
                .unsupportedVersion, "MANIFEST starts with \"\(lines.first ?? "")\"", file: file, offset: 0)
        }
        var files: [String] = []
        for (index, line) in lines.dropFirst().enumerated() {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let number = fileNumber(String(parts[1])),
                (parts[0] == "log" && String(parts[1]) == fileName(number, .log))
                    || (parts[0] == "base" && String(parts[1]) == fileName(number, .base) && index == 0)
            else {
                throw JournalError(.badHeader, "MANIFEST line \"\(line)\" is not understood", file: file)
            }
            files.append(String(parts[1]))
        }
        guard let last = files.last, last.hasSuffix("." + JournalFormat.logExtension) else {
            throw JournalError(.badHeader, "MANIFEST lists no log segment", file: file)
        }
        return Manifest(files: files)
    }
}

/// `0000000042.log` for 42.
func fileName(_ number: UInt64, _ kind: JournalFormat.SegmentKind) -> String {
    let digits = String(number)
    let padded = String(repeating: "0", count: max(0, JournalFormat.fileNumberDigits - digits.count)) + digits
    return padded + "." + (kind == .log ? JournalFormat.logExtension : JournalFormat.baseExtension)
}

/// The number of a segment file name (`.log`, `.base`, optionally `.tmp`), or nil for others.
func fileNumber(_ name: String) -> UInt64? {
    var stem = Substring(name)
    if stem.hasSuffix(JournalFormat.temporarySuffix) { stem = stem.dropLast(JournalFormat.temporarySuffix.count) }
    guard let dot = stem.firstIndex(of: ".") else { return nil }
    let ext = stem[stem.index(after: dot)...]
    guard ext == JournalFormat.logExtension || ext == JournalFormat.baseExtension else { return nil }
    let digits = stem[..<dot]
    guard digits.count == JournalFormat.fileNumberDigits, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else {
        return nil
    }
    return UInt64(digits)
}

func hex8(_ value: UInt32) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: 8 - digits.count) + digits
}
