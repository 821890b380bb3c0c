internal import Crypto
internal import Dispatch
internal import Foundation
internal import Synchronization

/// The sealed form of a record's payload (record flag bit 3, ``JournalFormat/flagSealed``):
/// the payload as it would be stored without encryption (raw, one LZ4 block, or chunks),
/// encrypted and authenticated with AES-256-GCM behind a header in the clear.
///
/// ```
/// 0       u8        seal version, 1 = AES-256-GCM under an HKDF-SHA256 derived key
/// 1       u8        k, the length of the key identifier (1...64)
/// 2       k bytes   the key identifier (ASCII)
/// 2+k     16 bytes  the journal's identity: random when its first sealed record was written
/// 18+k    16 bytes  the writer run's salt: random for each writer (an open, a compaction)
/// 34+k    u64       check: bytes 32..<40 of the derived key material
/// 42+k    u64       counter: 1, 2, 3… for the records one writer run seals
/// 50+k    units     the stored bytes cut in units of 64 KiB (at least one unit, the last shorter):
///                   each unit's ciphertext followed by its 16-byte tag
/// ```
///
/// The key of a writer run is HKDF-SHA256 (the named key; salt: journal identity ++ run salt;
/// info: "objectgraph-journal-seal-1", a zero byte, the key identifier), 40 bytes: the AES key,
/// then the check. Unit `i` of `n` uses the nonce counter (8 bytes LE) ++ `i` (4 bytes LE)
/// and authenticates the header bytes 0..<50+k, the record's type, its flags without bit 3,
/// its raw length (u32), `n` and `i` (u32 each).
///
/// **Why a nonce never repeats under one key.** A key is used by one writer run only: its salt
/// comes from the system's secure random source when the run starts (128 bits, so two runs
/// share a key with probability below 2^-64 even after 2^32 runs), and the run's counter only
/// grows, in memory. Nothing a crash, a truncation or a repair does to the files can make a run
/// seal twice with one counter: a run that restarts is a new run with a new salt.
enum SealFormat {
    static let version: UInt8 = 1
    static let maxKeyIDLength = 64
    /// The stored bytes each unit seals (the last one fewer): units are opened in parallel, and
    /// the buffers the cipher allocates for each unit stay below the allocator's mmap threshold
    /// (128 KiB), so that they are reused: with 1 MiB units each was fresh pages, and the cold
    /// open of a 1M-object store took 3,500 page faults more than without encryption (1,700
    /// with 64 KiB units).
    static let unitSize = 1 << 16
    static let tagSize = 16
    /// The header's bytes besides the key identifier.
    static let fixedHeaderSize = 50
    /// The shortest sealed payload: a one-byte key identifier and an empty unit.
    static let smallestSealed = fixedHeaderSize + 1 + tagSize
    /// HKDF's info before the zero byte and the key identifier.
    static let derivationInfo = Array("objectgraph-journal-seal-1".utf8)

    static func headerSize(keyIDLength: Int) -> Int { fixedHeaderSize + keyIDLength }
    static func unitCount(inner count: Int) -> Int { max(1, (count + unitSize - 1) / unitSize) }
    /// The most bytes sealing adds to `count` stored bytes.
    static func overhead(inner count: Int) -> Int {
        headerSize(keyIDLength: maxKeyIDLength) + tagSize * unitCount(inner: count)
    }
}

/// 16 random bytes: a journal's identity or a writer run's salt.
struct SealBytes16: Hashable, Sendable, CustomStringConvertible {
    var low: UInt64
    var high: UInt64

    static func random() -> SealBytes16 {
        var generator = SystemRandomNumberGenerator()
        return SealBytes16(low: generator.next(), high: generator.next())
    }

    func append(to out: inout [UInt8]) {
        out.appendLittleEndian(low)
        out.appendLittleEndian(high)
    }

    var description: String {
        var bytes: [UInt8] = []
        append(to: &bytes)
        return bytes.map { String(format: "%02x", $0) }.joined()
    }
}

/// The clear header of a sealed payload.
struct SealHeader: Sendable, Hashable {
    var keyID: String
    var journalID: SealBytes16
    var salt: SealBytes16
    var check: UInt64
    var counter: UInt64
    /// The header's bytes.
    var size: Int

    /// Parses the header at the start of a sealed payload, or says what is wrong.
    static func parse(_ stored: UnsafeRawBufferPointer) -> Result<SealHeader, UnsealFailure> {
        guard stored.count >= SealFormat.smallestSealed else {
            return .failure(.damage("sealed payload of \(stored.count) bytes is shorter than a seal"))
        }
        guard stored[0] == SealFormat.version else {
            return .failure(.damage("seal version \(stored[0]) is unknown (this code reads 1)"))
        }
        let k = Int(stored[1])
        let size = SealFormat.headerSize(keyIDLength: k)
        guard (1...SealFormat.maxKeyIDLength).contains(k), size + SealFormat.tagSize <= stored.count else {
            return .failure(.damage("seal names a key identifier of \(k) bytes"))
        }
        let idBytes = UnsafeRawBufferPointer(rebasing: stored[2..<(2 + k)])
        guard idBytes.allSatisfy(JournalKey.isIdentifierByte) else {
            return .failure(.damage("seal's key identifier holds bytes an identifier cannot"))
        }
        return .success(
            SealHeader(
                keyID: String(decoding: idBytes, as: UTF8.self),
                journalID: SealBytes16(low: stored.littleEndian(at: 2 + k), high: stored.littleEndian(at: 10 + k)),
                salt: SealBytes16(low: stored.littleEndian(at: 18 + k), high: stored.littleEndian(at: 26 + k)),
                check: stored.littleEndian(at: 34 + k), counter: stored.littleEndian(at: 42 + k), size: size))
    }

    /// The header's bytes.
    func encoded() -> [UInt8] {
        var out: [UInt8] = [SealFormat.version, UInt8(keyID.utf8.count)]
        out.append(contentsOf: keyID.utf8)
        journalID.append(to: &out)
        salt.append(to: &out)
        out.appendLittleEndian(check)
        out.appendLittleEndian(counter)
        return out
    }
}

/// Why a sealed payload does not open.
enum UnsealFailure: Error, Sendable {
    /// No key for this identifier; the second value says why.
    case keyUnavailable(String, String)
    /// The key given for this identifier is not the one the record was sealed with.
    case wrongKey(String)
    /// The payload is not what a writer sealed: the message says how.
    case damage(String)

    /// The error of record `record` of `file`.
    func error(of record: ScannedRecord, file: String) -> JournalError {
        error(sequence: record.sequence, file: file, offset: Int64(record.offset))
    }

    /// The error of the record numbered `sequence`, at `offset` of `file` when it is in one.
    func error(sequence: UInt64, file: String? = nil, offset: Int64? = nil) -> JournalError {
        switch self {
        case .keyUnavailable(let id, let why):
            JournalError(
                .keyUnavailable(keyID: id), "record \(sequence) is sealed with key \(id): \(why)", file: file,
                offset: offset, sequence: sequence)
        case .wrongKey(let id):
            JournalError(
                .wrongKey(keyID: id), "record \(sequence) is sealed with another key than the one given as \(id)",
                file: file, offset: offset, sequence: sequence)
        case .damage(let what):
            JournalError(
                .corrupt, "record \(sequence) passes its checksum but its seal does not open: \(what)", file: file,
                offset: offset, sequence: sequence)
        }
    }
}

/// The key of one writer run, derived from a named key.
struct SealKey: Sendable {
    let key: SymmetricKey
    let check: UInt64

    init(master: SymmetricKey, keyID: String, journalID: SealBytes16, salt: SealBytes16) {
        var derivationSalt: [UInt8] = []
        journalID.append(to: &derivationSalt)
        salt.append(to: &derivationSalt)
        let info = SealFormat.derivationInfo + [0] + Array(keyID.utf8)
        let material = SealPrimitives.hkdfSHA256(key: master, salt: derivationSalt, info: info, count: 40)
        (key, check) = material.withUnsafeBytes { bytes in
            (SymmetricKey(data: UnsafeRawBufferPointer(rebasing: bytes[..<32])), bytes.littleEndian(at: 32))
        }
    }
}

/// The two primitives the seal uses, as it calls them, for the known-answer tests against the
/// published vectors (RFC 5869 for HKDF, the GCM specification's test cases for AES-GCM).
enum SealPrimitives {
    /// HKDF-SHA256 (RFC 5869): `count` bytes of key material.
    static func hkdfSHA256(key: SymmetricKey, salt: [UInt8], info: [UInt8], count: Int) -> [UInt8] {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: key, salt: salt, info: info, outputByteCount: count)
            .withUnsafeBytes { Array($0) }
    }

    /// HKDF-SHA256 of raw key bytes.
    static func hkdfSHA256(key: [UInt8], salt: [UInt8], info: [UInt8], count: Int) -> [UInt8] {
        hkdfSHA256(key: SymmetricKey(data: key), salt: salt, info: info, count: count)
    }

    /// AES-GCM with a 12-byte nonce: the ciphertext and the 16-byte tag, appended to `out`;
    /// false when the cipher refuses.
    static func seal(
        _ plaintext: UnsafeRawBufferPointer, key: SymmetricKey, nonce: [UInt8], aad: [UInt8], to out: inout [UInt8]
    ) -> Bool {
        guard let nonce = try? AES.GCM.Nonce(data: nonce),
            let box = try? AES.GCM.seal(plaintext, using: key, nonce: nonce, authenticating: aad)
        else { return false }
        out.append(contentsOf: box.ciphertext)
        out.append(contentsOf: box.tag)
        return true
    }

    /// AES-GCM of raw key bytes; see ``seal(_:key:nonce:aad:to:)-(UnsafeRawBufferPointer,SymmetricKey,_,_,_)``.
    static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8]) -> [UInt8]? {
        var out: [UInt8] = []
        let sealed = plaintext.withUnsafeBytes {
            seal($0, key: SymmetricKey(data: key), nonce: nonce, aad: aad, to: &out)
        }
        return sealed ? out : nil
    }

    /// Opens AES-GCM `ciphertext` with its 16-byte `tag`: the plaintext, or nil when it does not
    /// authenticate.
    static func open(
        _ ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer, key: SymmetricKey, nonce: [UInt8],
        aad: [UInt8]
    ) -> Data? {
        guard let nonce = try? AES.GCM.Nonce(data: nonce),
            let box = try? AES.GCM.SealedBox(nonce: nonce, ciphertext: ciphertext, tag: tag)
        else { return nil }
        return try? AES.GCM.open(box, using: key, authenticating: aad)
    }

    /// Opens AES-GCM of raw key bytes; see the other `open`.
    static func open(_ ciphertext: [UInt8], tag: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8]) -> [UInt8]? {
        ciphertext.withUnsafeBytes { c in
            tag.withUnsafeBytes { t in
                open(c, tag: t, key: SymmetricKey(data: key), nonce: nonce, aad: aad).map { Array($0) }
            }
        }
    }
}

/// Seals the records of one writer run (an open journal's appends, or one compaction).
///
/// A value kept under the journal's lock: its counter grows with each record, in the order the
/// records are written.
struct Sealer: Sendable {
    /// The named key the run's key derives from.
    let master: JournalKey
    let keyID: String
    let journalID: SealBytes16
    let salt: SealBytes16
    let key: SealKey
    private(set) var counter: UInt64 = 0

    /// A run sealing with `key` for the journal `journalID`, under a new random salt (or
    /// `salt`, for the known-answer tests).
    init(key: JournalKey, journalID: SealBytes16, salt: SealBytes16 = .random()) {
        self.master = key
        self.keyID = key.id
        self.journalID = journalID
        self.salt = salt
        self.key = SealKey(master: key.material, keyID: key.id, journalID: journalID, salt: salt)
    }

    /// Appends the sealed form of `inner`, the stored bytes of a record of type `type` whose
    /// flags (without bit 3) are `innerFlags` and whose raw payload has `rawLength` bytes.
    mutating func seal(
        _ inner: UnsafeRawBufferPointer, type: UInt8, innerFlags: UInt8, rawLength: Int, to out: inout [UInt8]
    ) throws(JournalError) {
        counter += 1
        let header = SealHeader(
            keyID: keyID, journalID: journalID, salt: salt, check: key.check, counter: counter,
            size: SealFormat.headerSize(keyIDLength: keyID.utf8.count)
        ).encoded()
        let n = SealFormat.unitCount(inner: inner.count)
        out.append(contentsOf: header)
        let context = UnitContext(
            header: header, type: type, innerFlags: innerFlags, rawLength: rawLength, units: n, counter: counter)
        if n == 1 {
            guard Self.sealUnit(0, inner, context, key.key, into: &out) else { throw Self.failure }
            return
        }
        var units = [[UInt8]](repeating: [], count: n)
        var failed = false
        let key = self.key.key
        units.withUnsafeMutableBufferPointer { slots in
            let shared = Unchecked((slots, inner))
            let outcomes = Mutex(true)
            DispatchQueue.concurrentPerform(iterations: n) { i in
                let (slots, inner) = shared.value
                let lower = i * SealFormat.unitSize
                let piece = UnsafeRawBufferPointer(
                    rebasing: inner[lower..<min(inner.count, lower + SealFormat.unitSize)])
                var unit: [UInt8] = []
                unit.reserveCapacity(piece.count + SealFormat.tagSize)
                if !Self.sealUnit(i, piece, context, key, into: &unit) { outcomes.withLock { $0 = false } }
                slots[i] = unit
            }
            failed = !outcomes.withLock { $0 }
        }
        guard !failed else { throw Self.failure }
        for unit in units { out.append(contentsOf: unit) }
    }

    private static var failure: JournalError {
        JournalError(
            .io(errno: 0, operation: "AES-GCM seal"), "the cipher refused to seal a record; nothing was written")
    }

    /// Seals unit `i` of a payload (`piece`, its bytes) and appends its ciphertext and tag.
    private static func sealUnit(
        _ i: Int, _ piece: UnsafeRawBufferPointer, _ context: UnitContext, _ key: SymmetricKey, into out: inout [UInt8]
    ) -> Bool {
        SealPrimitives.seal(piece, key: key, nonce: context.nonce(i), aad: context.aad(i), to: &out)
    }

    /// Opens a sealed payload (`stored`, whose clear header is `header`) with its run's key:
    /// the stored bytes it seals after `prefix` zero bytes, or why it does not open.
    static func open(
        _ stored: UnsafeRawBufferPointer, header: SealHeader, key: SealKey, type: UInt8, innerFlags: UInt8,
        rawLength: Int, prefix: Int = 0
    ) -> Result<[UInt8], UnsealFailure> {
        let body = stored.count - header.size
        let n = (body + SealFormat.unitSize + SealFormat.tagSize - 1) / (SealFormat.unitSize + SealFormat.tagSize)
        let count = body - n * SealFormat.tagSize
        guard n >= 1, count >= 0, SealFormat.unitCount(inner: count) == n else {
            return .failure(.damage("\(body) sealed bytes are not whole units"))
        }
        let consistent =
            innerFlags == 0
            ? count == rawLength
            : count > 0 && count < rawLength && rawLength <= JournalFormat.maxPayloadSize
        guard consistent else {
            return .failure(.damage("it seals \(count) stored bytes for a raw length of \(rawLength)"))
        }
        let context = UnitContext(
            header: Array(UnsafeRawBufferPointer(rebasing: stored[..<header.size])), type: type,
            innerFlags: innerFlags, rawLength: rawLength, units: n, counter: header.counter)
        var problem: String?
        let inner = [UInt8](unsafeUninitializedCapacity: prefix + count) { whole, initialized in
            // Written once, whole: the fresh memory of a large payload on huge pages, as the
            // open's other write-once buffers.
            HugePages.advise(whole, count: prefix + count)
            let buffer = UnsafeMutableBufferPointer(rebasing: whole[prefix...])
            if n == 1 {
                problem = openUnit(0, stored, header: header, count: count, context: context, key: key, into: buffer)
            } else {
                let shared = Unchecked((buffer, stored))
                let problems = Mutex<String?>(nil)
                DispatchQueue.concurrentPerform(iterations: n) { i in
                    let (buffer, stored) = shared.value
                    if let found = openUnit(
                        i, stored, header: header, count: count, context: context, key: key, into: buffer)
                    {
                        problems.withLock { p in if p == nil { p = found } }
                    }
                }
                problem = problems.withLock { $0 }
            }
            // The bytes are initialized only when every unit opened; else nothing is kept.
            if problem == nil {
                UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(whole)[..<prefix])
                    .initializeMemory(
                        as: UInt8.self, repeating: 0)
            }
            initialized = problem == nil ? prefix + count : 0
        }
        if let problem { return .failure(.damage(problem)) }
        return .success(inner)
    }
}

extension Sealer {
    /// Opens unit `i` of a sealed payload of `count` stored bytes into its place in `buffer`:
    /// nil, or why it does not authenticate.
    fileprivate static func openUnit(
        _ i: Int, _ stored: UnsafeRawBufferPointer, header: SealHeader, count: Int, context: UnitContext, key: SealKey,
        into buffer: UnsafeMutableBufferPointer<UInt8>
    ) -> String? {
        let lower = i * SealFormat.unitSize
        let length = min(SealFormat.unitSize, count - lower)
        let start = header.size + i * (SealFormat.unitSize + SealFormat.tagSize)
        let ciphertext = UnsafeRawBufferPointer(rebasing: stored[start..<(start + length)])
        let tag = UnsafeRawBufferPointer(rebasing: stored[(start + length)..<(start + length + SealFormat.tagSize)])
        guard
            let opened = SealPrimitives.open(
                ciphertext, tag: tag, key: key.key, nonce: context.nonce(i), aad: context.aad(i)),
            opened.count == length
        else { return "unit \(i) of \(context.units) does not authenticate" }
        opened.withUnsafeBytes { bytes in
            UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[lower..<(lower + length)])
                .copyMemory(from: bytes)
        }
        return nil
    }
}

/// What every unit of one sealed payload authenticates, and its nonces.
private struct UnitContext: Sendable {
    var header: [UInt8]
    var type: UInt8
    var innerFlags: UInt8
    var rawLength: Int
    var units: Int
    var counter: UInt64

    func nonce(_ i: Int) -> [UInt8] {
        var nonce: [UInt8] = []
        nonce.reserveCapacity(12)
        nonce.appendLittleEndian(counter)
        nonce.appendLittleEndian(UInt32(i))
        return nonce
    }

    func aad(_ i: Int) -> [UInt8] {
        var aad = header
        aad.append(type)
        aad.append(innerFlags)
        aad.appendLittleEndian(UInt32(truncatingIfNeeded: rawLength))
        aad.appendLittleEndian(UInt32(units))
        aad.appendLittleEndian(UInt32(i))
        return aad
    }
}

/// The keys of an encrypted journal's readers and writers: asks the key provider for each
/// named key once, and keeps the key of each writer run it derived.
///
/// One keyring serves a journal and every reader of it, from any thread. Tools and followers
/// that read records outside a journal make one from the same ``JournalEncryption``.
///
/// ```swift
/// let keyring = JournalKeyring(JournalEncryption(key: key))
/// let payload = try shipped.payload(keyring: keyring)
/// ```
public final class JournalKeyring: Sendable {
    /// The encryption the keys come from.
    public let encryption: JournalEncryption
    private let derived = Mutex<[DerivedKey: SealKey]>([:])
    private let named = Mutex<[String: JournalKey]>([:])
    /// The derived keys kept at most; past it, the cache starts over.
    private static let cacheLimit = 4096

    private struct DerivedKey: Hashable {
        var keyID: String
        var journalID: SealBytes16
        var salt: SealBytes16
    }

    /// A keyring over `encryption`'s key provider.
    public init(_ encryption: JournalEncryption) {
        self.encryption = encryption
    }

    /// The named key `id`, or why there is none.
    func key(_ id: String) -> Result<JournalKey, UnsealFailure> {
        if let known = named.withLock({ $0[id] }) { return .success(known) }
        let provided: JournalKey?
        do {
            provided = try encryption.keys(id)
        } catch {
            return .failure(.keyUnavailable(id, "the key provider failed: \(error)"))
        }
        guard let provided else { return .failure(.keyUnavailable(id, "the key provider has no such key")) }
        guard provided.id == id else {
            return .failure(.keyUnavailable(id, "the key provider gave key \(provided.id) for it"))
        }
        named.withLock { $0[id] = provided }
        return .success(provided)
    }

    /// The current key, for a writer run.
    func currentKey() throws(JournalError) -> JournalKey {
        switch key(encryption.currentKeyID) {
        case .success(let key): return key
        case .failure(let failure):
            let why = if case .keyUnavailable(_, let why) = failure { why } else { "\(failure)" }
            throw JournalError(
                .keyUnavailable(keyID: encryption.currentKeyID),
                "the current key \(encryption.currentKeyID) is unavailable: \(why)")
        }
    }

    /// The key of the writer run that sealed a record with `header`, checked against the
    /// header's check value: a wrong key is told apart from a damaged record.
    func sealKey(for header: SealHeader) -> Result<SealKey, UnsealFailure> {
        let slot = DerivedKey(keyID: header.keyID, journalID: header.journalID, salt: header.salt)
        if let known = derived.withLock({ $0[slot] }) {
            // The key opened records of this run already: a check that differs is this record's.
            return known.check == header.check
                ? .success(known) : .failure(.damage("its check differs from its writer run's other records"))
        }
        let master: JournalKey
        switch key(header.keyID) {
        case .success(let found): master = found
        case .failure(let failure): return .failure(failure)
        }
        let sealKey = SealKey(
            master: master.material, keyID: header.keyID, journalID: header.journalID, salt: header.salt)
        guard sealKey.check == header.check else { return .failure(.wrongKey(header.keyID)) }
        derived.withLock { cache in
            if cache.count >= Self.cacheLimit { cache.removeAll(keepingCapacity: true) }
            cache[slot] = sealKey
        }
        return .success(sealKey)
    }

    /// Opens the sealed payload of `record` (its stored bytes, `stored`): the stored bytes it
    /// seals after `prefix` zero bytes, or why it does not open.
    func unseal(
        _ record: ScannedRecord, stored: UnsafeRawBufferPointer, prefix: Int = 0
    ) -> Result<[UInt8], UnsealFailure> {
        let header: SealHeader
        switch SealHeader.parse(stored) {
        case .success(let parsed): header = parsed
        case .failure(let failure): return .failure(failure)
        }
        switch sealKey(for: header) {
        case .success(let key):
            return Sealer.open(
                stored, header: header, key: key, type: record.type, innerFlags: record.sealedFlags,
                rawLength: record.rawLength, prefix: prefix)
        case .failure(let failure):
            return .failure(failure)
        }
    }
}

extension ScannedRecord {
    /// The record a seal holds: this one, its stored bytes the `storedLength` bytes inside.
    func unsealed(storedLength: Int) -> ScannedRecord {
        ScannedRecord(
            offset: offset, sequence: sequence, type: type, compressed: sealedFlags == JournalFormat.flagCompressed,
            chunked: sealedFlags == JournalFormat.flagChunked, storedLength: storedLength, rawLength: rawLength)
    }
}

extension RecordCodec {
    /// Opens a sealed record with `keyring` and calls `body` with the record inside it, bytes
    /// that hold it, and the file offset of their first byte (the record keeps its offset, so
    /// that errors name where it is in its file).
    static func withUnsealed<R>(
        _ record: ScannedRecord, in bytes: UnsafeRawBufferPointer, at base: Int, keyring: JournalKeyring?, file: String,
        _ body: (ScannedRecord, UnsafeRawBufferPointer, Int) -> Result<R, JournalError>
    ) -> Result<R, JournalError> {
        let range = record.payloadRange
        let stored = UnsafeRawBufferPointer(rebasing: bytes[(range.lowerBound - base)..<(range.upperBound - base)])
        guard let keyring else {
            let id = (try? SealHeader.parse(stored).get())?.keyID ?? "?"
            return .failure(
                UnsealFailure.keyUnavailable(id, "the journal was opened without encryption").error(
                    of: record, file: file))
        }
        let prefix = JournalFormat.recordHeaderSize
        switch keyring.unseal(record, stored: stored, prefix: prefix) {
        case .failure(let failure):
            return .failure(failure.error(of: record, file: file))
        case .success(let framed):
            let inner = record.unsealed(storedLength: framed.count - prefix)
            return framed.withUnsafeBytes { body(inner, $0, record.offset) }
        }
    }

    /// Seals the record that starts at `start` in `out` and runs to its end: its stored bytes
    /// become their sealed form (flag bit 3), its length and checksum follow.
    static func seal(_ out: inout [UInt8], at start: Int, seed: UInt32, sealer: inout Sealer) throws(JournalError) {
        typealias F = JournalFormat.RecordHeaderField
        let flags = out[start + F.flags]
        let type = out[start + F.type]
        let rawLength = Int(out.withUnsafeBytes { $0.littleEndian(at: start + F.rawLength, as: UInt32.self) })
        let inner = Array(out[(start + JournalFormat.recordHeaderSize)...])
        out.removeSubrange((start + JournalFormat.recordHeaderSize)...)
        var failure: JournalError?
        inner.withUnsafeBytes { inner in
            do throws(JournalError) {
                try sealer.seal(inner, type: type, innerFlags: flags, rawLength: rawLength, to: &out)
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        out[start + F.flags] = flags | JournalFormat.flagSealed
        out.storeLittleEndian(UInt32(out.count - start - JournalFormat.recordHeaderSize), at: start + F.storedLength)
        reseal(&out, at: start, seed: seed)
    }
}
