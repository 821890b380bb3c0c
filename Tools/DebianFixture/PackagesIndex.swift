/// One stanza of a Debian `Packages` index, reduced to the fields the fixture keeps.
struct IndexStanza {
    /// Field values by name. A multi-line value joins its lines with "\n"; a continuation line
    /// of " ." stands for an empty line.
    var fields: [String: String] = [:]
    /// The 1-based line of each kept field, for error messages.
    var fieldLines: [String: Int] = [:]
    /// The 1-based line where the stanza starts.
    var firstLine: Int
}

/// A malformed index: names the file and, where known, the line.
struct IndexError: Error, CustomStringConvertible {
    var path: String
    var line: Int?
    var message: String

    var description: String {
        if let line { return "\(path):\(line): \(message)" }
        return "\(path): \(message)"
    }
}

/// Parses deb822 `Packages` text: stanzas separated by blank lines, `Name: value` fields,
/// continuation lines starting with a space or tab.
enum PackagesIndex {
    /// The fields a fixture record is built from; others are skipped while parsing.
    static let keptFields: Set<String> = [
        "Package", "Version", "Architecture", "Section", "Priority", "Installed-Size", "Size",
        "Maintainer", "Homepage", "Description", "Depends", "SHA256",
    ]

    /// Splits `bytes` into stanzas.
    ///
    /// - Throws: ``IndexError`` for a continuation line with no field before it, a line that is
    ///   not `Name: value`, or a stanza without a `Package` field.
    static func parse(_ bytes: [UInt8], path: String) throws(IndexError) -> [IndexStanza] {
        var stanzas: [IndexStanza] = []
        var current: IndexStanza?
        var currentField: String?  // the kept field continuation lines extend, if any
        var inField = false  // whether any field (kept or not) is open
        var lineNumber = 0
        var start = 0

        func finish() throws(IndexError) {
            guard let stanza = current else { return }
            guard stanza.fields["Package"] != nil else {
                throw IndexError(
                    path: path, line: stanza.firstLine,
                    message: "stanza starting here has no Package field")
            }
            stanzas.append(stanza)
            current = nil
            currentField = nil
            inField = false
        }

        while start < bytes.count {
            var end = start
            while end < bytes.count && bytes[end] != 0x0A { end += 1 }
            lineNumber += 1
            var lineEnd = end
            if lineEnd > start && bytes[lineEnd - 1] == 0x0D { lineEnd -= 1 }  // CRLF
            let line = bytes[start..<lineEnd]
            start = end + 1

            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) {
                try finish()
                continue
            }
            if line.first == 0x23 { continue }  // "#" comment line (deb822)
            if line.first == 0x20 || line.first == 0x09 {
                guard inField else {
                    throw IndexError(
                        path: path, line: lineNumber,
                        message: "continuation line with no field before it")
                }
                if let field = currentField {
                    var text = String(decoding: line.dropFirst(), as: UTF8.self)
                    if text == "." { text = "" }
                    current?.fields[field, default: ""] += "\n" + text
                }
                continue
            }
            guard let colon = line.firstIndex(of: 0x3A), colon > line.startIndex else {
                throw IndexError(
                    path: path, line: lineNumber,
                    message: "expected \"Field: value\", found \"\(String(decoding: line.prefix(60), as: UTF8.self))\"")
            }
            if current == nil { current = IndexStanza(firstLine: lineNumber) }
            inField = true
            let name = String(decoding: line[line.startIndex..<colon], as: UTF8.self)
            guard keptFields.contains(name) else {
                currentField = nil
                continue
            }
            let value = String(decoding: line[(colon + 1)...], as: UTF8.self)
                .trimmingBlanks()
            currentField = name
            current?.fields[name] = value
            current?.fieldLines[name] = lineNumber
        }
        try finish()
        return stanzas
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs.
    func trimmingBlanks() -> String {
        var slice = Substring(self)
        while let first = slice.first, first == " " || first == "\t" { slice.removeFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice.removeLast() }
        return String(slice)
    }
}
