import GraphJournal
import ObjectGraph

/// The keys a follower, a standby or a restore opens the records of an encrypted writer with:
/// the stream carries them sealed, as they are on the writer's disk, so that the servers never
/// see plaintext; whoever reads them needs the writer's keys.
///
/// A key that is missing or does not match is the local store's failure: ``StoreError`` with
/// code `journal`, whose journal error's code is `keyUnavailable` or `wrongKey` and names the
/// key, so that it reads the same whether the stream's record or the replica's own journal
/// met it first.
struct ReplicaKeys: Sendable {
    /// The keys; nil for a replica without encryption (which refuses sealed records).
    let keyring: JournalKeyring?

    /// The keys of `encryption` (a replica's or a restore's `journal.encryption`).
    init(_ encryption: JournalEncryption?) {
        keyring = encryption.map { JournalKeyring($0) }
    }

    /// The journal options a replica's own journal is written with outside its store (a base
    /// installed, a restore): `options`, encrypted as the replica is.
    func journalOptions(_ options: JournalOptions = JournalOptions()) -> JournalOptions {
        var options = options
        options.encryption = keyring?.encryption
        return options
    }

    /// Refuses a base (its shipped `records`) that an encrypted replica could not keep sealed:
    /// a record its writer did not seal (code `notEncrypted`), before anything of it is
    /// written. The journal refuses such a record on the log itself; a base is checked here,
    /// since the journal would write its records as they came.
    ///
    /// - Throws: ``StoreError`` (code `journal`, journal code `notEncrypted`).
    func checkSealed(base records: [ShippedRecord], what: String) throws {
        guard keyring != nil, let plain = records.first(where: { !$0.isSealed }) else { return }
        throw StoreError(
            journal: JournalError(
                .notEncrypted,
                "record \(plain.sequence) of \(what) is not sealed, and this replica is encrypted: its writer must seal its records",
                sequence: plain.sequence))
    }

    /// The payload of `record`, its seal opened with these keys.
    ///
    /// - Throws: ``StoreError`` (code `journal`) for a key that is missing or wrong; the
    ///   journal's error otherwise (`corrupt`: the payload does not open or decompress).
    func payload(of record: ShippedRecord) throws -> [UInt8] {
        do { return try record.payload(keyring: keyring) } catch { throw Self.keyFailure(error) ?? error }
    }

    /// `error` as the local store's ``StoreError`` when it is a key failure (`keyUnavailable`,
    /// `wrongKey`, `notEncrypted`); nil for any other journal error.
    static func keyFailure(_ error: JournalError) -> StoreError? {
        switch error.code {
        case .keyUnavailable, .wrongKey, .notEncrypted: StoreError(journal: error)
        default: nil
        }
    }

    /// Runs `body`, which writes the replica's journal, turning a key failure it throws into
    /// the local store's ``StoreError``.
    static func writing<R>(_ body: () throws -> R) throws -> R {
        do { return try body() } catch let error as JournalError { throw keyFailure(error) ?? error }
    }
}
