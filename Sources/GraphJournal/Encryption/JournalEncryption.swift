internal import Crypto
internal import Foundation

/// A 256-bit key of the journal's encryption at rest, and the identifier records name it by.
///
/// The identifier is written in the clear in every sealed record, so that a reader knows which
/// key to ask its key provider for: use a name, never anything derived from the key. It is 1 to
/// 64 bytes of ASCII letters, digits, `.`, `_`, `-` and `:`.
///
/// ```swift
/// let key = try JournalKey(id: "2026-11", hex: ProcessInfo.processInfo.environment["STORE_KEY"] ?? "")
/// ```
public struct JournalKey: Sendable {
    /// The identifier sealed records name the key by.
    public let id: String
    /// The key itself.
    let material: SymmetricKey

    /// The bytes a key has.
    public static let byteCount = 32

    /// A key from its 32 bytes.
    ///
    /// - Parameter id: the key's identifier (see ``JournalKey``).
    /// - Parameter bytes: exactly 32 bytes, from a secrets manager or a key file; never a
    ///   password (derive one first).
    /// - Throws: ``JournalError`` with code `badKey` for another length or a malformed identifier.
    public init(id: String, bytes: some Collection<UInt8>) throws(JournalError) {
        try Self.checkIdentifier(id)
        guard bytes.count == Self.byteCount else {
            throw JournalError(
                .badKey, "key \(id) has \(bytes.count) bytes; a journal key has \(Self.byteCount) (256 bits)")
        }
        self.id = id
        self.material = SymmetricKey(data: Array(bytes))
    }

    /// A key from its 32 bytes written as 64 hexadecimal digits (surrounding white space is
    /// ignored).
    ///
    /// - Throws: ``JournalError`` with code `badKey` when `hex` is not 64 hexadecimal digits.
    public init(id: String, hex: String) throws(JournalError) {
        let digits = Array(hex.trimmingCharacters(in: .whitespacesAndNewlines).utf8)
        guard digits.count == 2 * Self.byteCount else {
            throw JournalError(
                .badKey, "key \(id) is \(digits.count) characters; write a key as \(2 * Self.byteCount) hex digits")
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.byteCount)
        var i = 0
        while i < digits.count {
            guard let high = Self.hexValue(digits[i]), let low = Self.hexValue(digits[i + 1]) else {
                throw JournalError(.badKey, "key \(id) holds a character that is not a hex digit")
            }
            bytes.append(high << 4 | low)
            i += 2
        }
        try self.init(id: id, bytes: bytes)
    }

    /// A new random key, from the system's secure random source.
    ///
    /// - Throws: ``JournalError`` with code `badKey` for a malformed identifier.
    public static func generate(id: String) throws(JournalError) -> JournalKey {
        var generator = SystemRandomNumberGenerator()
        return try JournalKey(id: id, bytes: (0..<byteCount).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// The key as 64 lowercase hexadecimal digits, the form ``init(id:hex:)`` and key files take.
    public var hex: String {
        material.withUnsafeBytes { bytes in bytes.map { String(format: "%02x", $0) }.joined() }
    }

    /// Refuses an identifier that is empty, longer than 64 bytes, or holds other characters.
    static func checkIdentifier(_ id: String) throws(JournalError) {
        let bytes = Array(id.utf8)
        guard (1...SealFormat.maxKeyIDLength).contains(bytes.count),
            bytes.allSatisfy({ isIdentifierByte($0) })
        else {
            throw JournalError(
                .badKey,
                "key identifier \"\(id)\" is not 1 to \(SealFormat.maxKeyIDLength) ASCII letters, digits, '.', '_', '-' or ':'"
            )
        }
    }

    static func isIdentifierByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"),
            UInt8(ascii: ":"):
            true
        default: false
        }
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// Encryption at rest: how a journal seals the records it writes and finds the keys of the
/// records it reads.
///
/// Every payload is sealed after compression with AES-256-GCM, under a key derived for each
/// writer run from the key named ``currentKeyID``; record headers stay in the clear, so that a
/// reader without the key still frames, counts and cuts records (`graph-journal verify`
/// without a key). `Docs/Encryption.md` has the threat model and `Docs/JournalFormat.md` the
/// bytes.
///
/// ```swift
/// let key = try JournalKey(id: "2026-11", hex: secrets.storeKey)
/// var options = JournalOptions()
/// options.encryption = JournalEncryption(key: key)
/// let journal = try Journal.open(directory: "/var/lib/app/store", options: options)
/// ```
///
/// To rotate, give the provider the new key and the old one, make the new one current, and
/// compact: the base is sealed with the new key, and once the old key's records are all
/// compacted away (``Journal/keyIdentifiers`` no longer lists it) the old key is needed no more.
public struct JournalEncryption: Sendable {
    /// What a journal opened with encryption does with records written without it.
    public enum PlaintextRecords: Sendable, Hashable {
        /// A record that is not sealed fails `open` with code `notEncrypted`, and nothing is
        /// changed: a store is either encrypted or not, and a record an attacker wrote without
        /// the key is not taken for data.
        case refuse
        /// Records written before the journal was first opened with encryption are read; a
        /// compaction then seals them all. An unsealed record after a sealed one is still damage.
        /// For encrypting an existing store once.
        case accept
    }

    /// The identifier of the key new records are sealed with.
    public var currentKeyID: String
    /// Whether records written without encryption are read. Default ``PlaintextRecords/refuse``.
    public var plaintextRecords: PlaintextRecords
    /// Returns the key of an identifier, or nil when it has none. Called once per identifier
    /// and writer run found in the journal (the derived keys are cached), from any thread.
    public var keys: @Sendable (_ id: String) throws -> JournalKey?

    /// Encryption whose keys come from `keys`.
    ///
    /// - Parameter currentKeyID: the identifier of the key new records are sealed with.
    /// - Parameter plaintextRecords: whether records written without encryption are read.
    /// - Parameter keys: returns the key of an identifier, or nil; what it throws fails the
    ///   open or the read with code `keyUnavailable`.
    public init(
        currentKeyID: String, plaintextRecords: PlaintextRecords = .refuse,
        keys: @escaping @Sendable (_ id: String) throws -> JournalKey?
    ) {
        self.currentKeyID = currentKeyID
        self.plaintextRecords = plaintextRecords
        self.keys = keys
    }

    /// Encryption with one key, current and the only one known.
    public init(key: JournalKey, plaintextRecords: PlaintextRecords = .refuse) {
        self.init(currentKeyID: key.id, plaintextRecords: plaintextRecords) { id in id == key.id ? key : nil }
    }

    /// Encryption with a fixed set of keys, the first of them current.
    ///
    /// - Throws: ``JournalError`` with code `badKey` when `keys` is empty or names an
    ///   identifier twice.
    public init(keys: [JournalKey], plaintextRecords: PlaintextRecords = .refuse) throws(JournalError) {
        guard let first = keys.first else { throw JournalError(.badKey, "no key given") }
        var byID: [String: JournalKey] = [:]
        for key in keys {
            guard byID.updateValue(key, forKey: key.id) == nil else {
                throw JournalError(.badKey, "key \(key.id) is given twice")
            }
        }
        let table = byID
        self.init(currentKeyID: first.id, plaintextRecords: plaintextRecords) { id in table[id] }
    }

    /// Encryption from the text of a key file: one key per line, its identifier, white space,
    /// then its 64 hex digits; blank lines and lines starting with `#` are skipped; the first
    /// key is the current one. The `graph-journal` tool reads its `--key-file` and `--key-env`
    /// this way.
    ///
    /// ```text
    /// # current key first
    /// 2026-11 5f1c…(64 hex digits)
    /// 2026-05 09ab…
    /// ```
    ///
    /// - Throws: ``JournalError`` with code `badKey`, naming the line, for a malformed one.
    public init(keyFile text: String, plaintextRecords: PlaintextRecords = .refuse) throws(JournalError) {
        var keys: [JournalKey] = []
        for (index, line) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            let fields = trimmed.split(whereSeparator: \.isWhitespace)
            guard fields.count == 2 else {
                throw JournalError(.badKey, "key file line \(index + 1) is not an identifier and 64 hex digits")
            }
            do throws(JournalError) {
                keys.append(try JournalKey(id: String(fields[0]), hex: String(fields[1])))
            } catch {
                throw JournalError(.badKey, "key file line \(index + 1): \(error.message)")
            }
        }
        try self.init(keys: keys, plaintextRecords: plaintextRecords)
    }
}
