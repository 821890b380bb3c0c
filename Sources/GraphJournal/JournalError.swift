/// An error from the journal, with the file and byte offset it concerns.
///
/// Catch a specific ``Code`` to react to it:
///
/// ```swift
/// do {
///     let journal = try Journal.open(directory: path)
/// } catch where error.code == .locked {
///     print("another process has the store open: \(error)")
/// }
/// ```
public struct JournalError: Error, CustomStringConvertible, Sendable, Hashable {
    /// What went wrong.
    public enum Code: Sendable, Hashable {
        /// Another journal (in this or another process) holds the directory's `LOCK`.
        case locked
        /// A damaged record with valid data after it, or a file that contradicts its neighbours.
        case corrupt
        /// The last record of the last segment is incomplete: the writer died mid-append.
        /// Open treats this as a normal end; only ``Journal/inspect(directory:)`` reports it.
        case tornTail
        /// A system call failed; `errno` is the C error number, `operation` the call.
        case io(errno: Int32, operation: String)
        /// A segment header or MANIFEST is malformed (bad magic or checksum).
        case badHeader
        /// A file declares a format version or checksum algorithm this code does not read.
        case unsupportedVersion
        /// A payload is larger than the format allows (1 GiB).
        case payloadTooLarge
        /// A file in the store directory is not a regular file (a named pipe, socket, device,
        /// directory or symbolic link): refused without being opened for reading, so that
        /// nothing blocks on it or follows it out of the store.
        case notRegularFile
        /// The journal was closed.
        case closed
        /// An earlier failure left the on-disk state uncertain (for example a failed fsync in
        /// `.batched` mode, or a failed truncation); close and reopen the journal.
        case needsReopen
        /// A sealed record names a key the journal's key provider does not give (or the journal
        /// was opened without encryption): `open` changes nothing.
        case keyUnavailable(keyID: String)
        /// The key the provider gives for `keyID` is not the one the records were sealed with:
        /// `open` changes nothing.
        case wrongKey(keyID: String)
        /// A key or key file is malformed (length, identifier, hex digits).
        case badKey
        /// The journal holds records written without encryption, and its encryption
        /// refuses them (``JournalEncryption/PlaintextRecords/refuse``): `open` changes nothing.
        case notEncrypted
    }

    /// What went wrong.
    public var code: Code
    /// The file concerned, as a path, when there is one.
    public var file: String?
    /// The byte offset in ``file`` of the problem, when known.
    public var offset: Int64?
    /// The sequence number of the record concerned, when known.
    public var sequence: UInt64?
    /// A sentence for people, without the file and offset (``description`` adds them).
    public var message: String

    /// Creates an error.
    ///
    /// - Parameter code: what went wrong.
    /// - Parameter message: a sentence for people.
    /// - Parameter file: the file concerned.
    /// - Parameter offset: the byte offset in `file`.
    /// - Parameter sequence: the sequence number of the record concerned.
    public init(_ code: Code, _ message: String, file: String? = nil, offset: Int64? = nil, sequence: UInt64? = nil) {
        self.code = code
        self.message = message
        self.file = file
        self.offset = offset
        self.sequence = sequence
    }

    /// For example `journal corrupt: /data/store/0000000001.log at byte 4120: checksum mismatch`.
    public var description: String {
        let label: String
        switch code {
        case .locked: label = "locked"
        case .corrupt: label = "corrupt"
        case .tornTail: label = "torn tail"
        case .io(let errno, let operation):
            label = "I/O error in \(operation) (errno \(errno): \(Self.errnoName(errno)))"
        case .badHeader: label = "bad header"
        case .unsupportedVersion: label = "unsupported version"
        case .payloadTooLarge: label = "payload too large"
        case .notRegularFile: label = "not a regular file"
        case .closed: label = "closed"
        case .needsReopen: label = "needs reopen"
        case .keyUnavailable(let id): label = "key \(id) unavailable"
        case .wrongKey(let id): label = "wrong key \(id)"
        case .badKey: label = "bad key"
        case .notEncrypted: label = "not encrypted"
        }
        var text = "journal \(label)"
        if let file {
            text += ": \(file)"
            if let offset { text += " at byte \(offset)" }
        }
        return text + ": " + message
    }

    static func errnoName(_ code: Int32) -> String {
        switch code {
        case 1: return "EPERM"
        case 2: return "ENOENT"
        case 4: return "EINTR"
        case 5: return "EIO"
        case 9: return "EBADF"
        case 11: return "EAGAIN"
        case 13: return "EACCES"
        case 17: return "EEXIST"
        case 20: return "ENOTDIR"
        case 21: return "EISDIR"
        case 22: return "EINVAL"
        case 24: return "EMFILE"
        case 27: return "EFBIG"
        case 19: return "ENODEV"
        case 28: return "ENOSPC"
        case 30: return "EROFS"
        case 40: return "ELOOP"
        case 122: return "EDQUOT"
        default: return "errno \(code)"
        }
    }
}

extension JournalError.Code {
    /// Whether `error` is a ``JournalError`` with this code, so that callers can write
    /// `catch JournalError.Code.locked`.
    public static func ~= (code: Self, error: any Error) -> Bool {
        (error as? JournalError)?.code == code
    }
}
