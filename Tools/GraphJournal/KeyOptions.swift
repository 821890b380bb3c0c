import ArgumentParser
import Foundation
import GraphJournal

/// The key options of every subcommand that reads or writes an encrypted store: `--key-file`
/// and `--key-env`. The key itself is never an argument: command lines are visible to every
/// user of the machine (`ps`, `/proc/<pid>/cmdline`) and end up in shell histories.
///
/// Both take the text of a key file (``JournalEncryption/init(keyFile:plaintextRecords:)``):
/// one key per line, its identifier, white space, then its 64 hex digits; blank lines and
/// lines starting with `#` are skipped; the first key is the current one (the one `compact`
/// seals with). In an environment variable, entries may also be separated by `;`.
struct KeyOptions: ParsableArguments {
    @Option(
        name: .customLong("key-file"),
        help: ArgumentHelp(
            "Read the store's keys from this file: one '<id> <64 hex digits>' per line, '#' comments, the current key first.",
            valueName: "path"),
        completion: .file())
    var keyFile: String?

    @Option(
        name: .customLong("key-env"),
        help: ArgumentHelp(
            "Read the store's keys from this environment variable: '<id> <64 hex digits>', several separated by ';' or new lines, the current key first.",
            valueName: "name"))
    var keyEnvironment: String?

    func validate() throws {
        if keyFile != nil && keyEnvironment != nil {
            throw ValidationError("--key-file and --key-env both give the keys; choose one.")
        }
    }

    /// Whether a key was given.
    var given: Bool { keyFile != nil || keyEnvironment != nil }

    /// The encryption the options give, or nil when neither option is given.
    ///
    /// - Parameter plaintextRecords: what the journal does with records written without
    ///   encryption (``JournalEncryption/PlaintextRecords/accept`` to encrypt a plain store).
    /// - Throws: ``ToolFailure`` when the file or the variable cannot be read or does not hold
    ///   keys.
    func encryption(plaintextRecords: JournalEncryption.PlaintextRecords = .refuse) throws -> JournalEncryption? {
        let text: String
        let source: String
        if let keyFile {
            source = "key file \(keyFile)"
            guard let data = FileManager.default.contents(atPath: keyFile) else {
                throw ToolFailure(.failure, "cannot read the \(source); nothing was changed")
            }
            text = String(decoding: data, as: UTF8.self)
        } else if let keyEnvironment {
            source = "environment variable \(keyEnvironment)"
            guard let value = ProcessInfo.processInfo.environment[keyEnvironment] else {
                throw ToolFailure(.failure, "the \(source) is not set; nothing was changed")
            }
            text = value.replacingOccurrences(of: ";", with: "\n")
        } else {
            return nil
        }
        do throws(JournalError) {
            return try JournalEncryption(keyFile: text, plaintextRecords: plaintextRecords)
        } catch {
            throw ToolFailure(.failure, "the \(source) does not hold keys: \(error.message); nothing was changed")
        }
    }

    /// A keyring over the keys the options give, or nil when neither option is given.
    func keyring() throws -> JournalKeyring? {
        try encryption().map(JournalKeyring.init)
    }
}

extension JournalError {
    /// Whether the error says a sealed record's key is missing or wrong.
    var isKeyProblem: Bool {
        switch code {
        case .keyUnavailable, .wrongKey: true
        default: false
        }
    }
}

/// What `restore` and `follow` say when a sealed record of the stream could not be opened: the
/// key it names is missing from the keys given (or none were given), or does not match. Nil for
/// any other error.
func streamKeyProblem(_ error: JournalError, doing: String, stream: String, keysGiven: Bool) -> ToolFailure? {
    let nothing = doing == "restore" ? "; nothing was written" : ""
    switch error.code {
    case .keyUnavailable(let id):
        return ToolFailure(
            .failure,
            keysGiven
                ? "stream \(stream) holds records sealed with key \(id), which the keys given do not hold\(nothing)"
                : "stream \(stream) holds records sealed with key \(id): give the keys with --key-file or --key-env\(nothing)"
        )
    case .wrongKey(let id):
        return ToolFailure(
            .failure,
            "stream \(stream) holds records sealed with another key than the one given as \(id)\(nothing)")
    case .notEncrypted:
        return ToolFailure(
            .failure, "stream \(stream) holds records in the clear, and keys were given: \(error.message)\(nothing)")
    default:
        return nil
    }
}
