/// What the sealed records of a journal must show when read in order, which a seal alone
/// cannot: that each belongs to this journal and is where its writer put it.
///
/// - Every sealed record carries the journal's identity (the first sealed record's): a segment
///   swapped in from another store under the same key is refused at its first record.
/// - The records one writer run sealed (one salt) come in the order it sealed them, their
///   counters rising: a record copied from elsewhere in the journal repeats a counter its run
///   already passed, and is refused where it was put. Runs may interleave: a replica writes
///   its own schema records between the records its source sealed.
/// - Once a record is sealed, every data record after it is sealed too.
///
/// The open applies it to every live record before it changes anything; `graph-journal verify`
/// applies it without the key, since it reads only the clear headers.
struct SealOrder: Sendable {
    /// The journal's identity, once a sealed record was seen.
    private(set) var journalID: SealBytes16?
    /// The last counter of each writer run seen, by its salt.
    private var runs: [SealBytes16: UInt64] = [:]
    /// The sealed records seen.
    private(set) var sealedRecords = 0
    /// The identifiers of the keys the sealed records name.
    private(set) var keyIDs: Set<String> = []

    /// What to make of the next record.
    enum Verdict {
        case accept
        /// Damage at this record, which passes its checksum: the reason.
        case damage(String)
        /// The journal cannot be read as it is opened (no key, wrong key, plaintext refused):
        /// the open fails and changes nothing.
        case fatal(JournalError)
    }

    /// Admits the next record in journal order (`bytes` holds it at `base`), checking its
    /// seal's header and key with `keyring` (nil: the journal is opened without encryption,
    /// or by a reader without the key, `requireKeys` false).
    mutating func admit(
        _ record: ScannedRecord, in bytes: UnsafeRawBufferPointer, at base: Int = 0, keyring: JournalKeyring?,
        requireKeys: Bool = true, file: String
    ) -> Verdict {
        guard record.sealed else { return admitPlain(record, keyring: keyring, requireKeys: requireKeys) }
        let range = record.payloadRange
        let stored = UnsafeRawBufferPointer(rebasing: bytes[(range.lowerBound - base)..<(range.upperBound - base)])
        let header: SealHeader
        switch SealHeader.parse(stored) {
        case .success(let parsed): header = parsed
        case .failure(let failure):
            if case .damage(let what) = failure { return .damage("record \(record.sequence)'s seal: \(what)") }
            return .fatal(failure.error(of: record, file: file))
        }
        if let reason = admit(header, sequence: record.sequence) { return .damage(reason) }
        if let keyring {
            if case .failure(let failure) = keyring.sealKey(for: header) {
                return .fatal(failure.error(of: record, file: file))
            }
        } else if requireKeys {
            return .fatal(
                UnsealFailure.keyUnavailable(header.keyID, "the journal was opened without encryption")
                    .error(of: record, file: file))
        }
        return .accept
    }

    /// Admits a sealed record's header: its reason to be refused, or nil.
    mutating func admit(_ header: SealHeader, sequence: UInt64) -> String? {
        if let journalID, header.journalID != journalID {
            return
                "record \(sequence) belongs to another journal (identity \(header.journalID), where this journal's records carry \(journalID))"
        }
        if let last = runs[header.salt], header.counter <= last {
            return
                "record \(sequence) repeats or goes back in its writer's order (seal counter \(header.counter) after \(last)): it was copied or moved"
        }
        journalID = header.journalID
        runs[header.salt] = header.counter
        sealedRecords += 1
        keyIDs.insert(header.keyID)
        return nil
    }

    /// Admits a record that is not sealed.
    private func admitPlain(_ record: ScannedRecord, keyring: JournalKeyring?, requireKeys: Bool) -> Verdict {
        // Origin records (a replica's position in its stream) are never sealed.
        guard record.type != JournalFormat.RecordType.origin.rawValue else { return .accept }
        if sealedRecords > 0 {
            return .damage("record \(record.sequence) is not sealed, but records before it are")
        }
        if let keyring, keyring.encryption.plaintextRecords == .refuse, requireKeys {
            return .fatal(
                JournalError(
                    .notEncrypted,
                    "record \(record.sequence) was written without encryption; to encrypt this store, open it once with plaintextRecords: .accept and compact it",
                    sequence: record.sequence))
        }
        return .accept
    }
}
