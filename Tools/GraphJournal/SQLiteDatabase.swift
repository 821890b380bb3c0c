import CSQLite
import Foundation

/// A connection to one SQLite database file, for writing it (`export --format sqlite`); every
/// failure is a ``ToolFailure`` with the file's name and SQLite's message.
final class SQLiteDatabase {
    private var handle: OpaquePointer?
    /// The database file, for messages.
    let path: String

    /// Opens (creating it if needed) the database at `path`.
    init(path: String) throws {
        self.path = path
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(db)
            throw ToolFailure(.failure, "cannot create the database \(path): \(message)")
        }
        sqlite3_extended_result_codes(db, 1)
        handle = db
    }

    deinit {
        if let handle { sqlite3_close_v2(handle) }
    }

    /// Runs one or more SQL statements that return no rows.
    func execute(_ sql: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &error)
        guard rc == SQLITE_OK else {
            let message = error.map { String(cString: $0) } ?? lastError
            sqlite3_free(error)
            throw failure(message)
        }
    }

    /// Compiles one statement.
    func prepare(_ sql: String) throws -> SQLiteStatement {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw failure(lastError) }
        return SQLiteStatement(statement, database: self)
    }

    /// Closes the connection; statements must be finalized (released) first.
    func close() throws {
        guard let db = handle else { return }
        let rc = sqlite3_close(db)
        guard rc == SQLITE_OK else { throw failure(lastError) }
        handle = nil
    }

    /// SQLite's message for the last failed call.
    var lastError: String { handle.map { String(cString: sqlite3_errmsg($0)) } ?? "the database is closed" }

    /// The failure for `message`, naming the file.
    func failure(_ message: String) -> ToolFailure {
        ToolFailure(.failure, "cannot write the database \(path): \(message)")
    }
}

/// A compiled statement: bind its parameters (1-based), then ``run()``.
final class SQLiteStatement {
    private let statement: OpaquePointer
    private let database: SQLiteDatabase

    fileprivate init(_ statement: OpaquePointer, database: SQLiteDatabase) {
        self.statement = statement
        self.database = database
    }

    deinit { sqlite3_finalize(statement) }

    /// SQLite copies the bytes it is given before the bind call returns (`SQLITE_TRANSIENT`).
    private static var transient: sqlite3_destructor_type { unsafeBitCast(-1, to: sqlite3_destructor_type.self) }

    private func check(_ rc: Int32) throws {
        guard rc == SQLITE_OK else { throw database.failure(database.lastError) }
    }

    func bindNull(_ index: Int32) throws { try check(sqlite3_bind_null(statement, index)) }

    func bind(_ value: Int64, _ index: Int32) throws { try check(sqlite3_bind_int64(statement, index, value)) }

    func bind(_ value: Double, _ index: Int32) throws { try check(sqlite3_bind_double(statement, index, value)) }

    func bind(text: String, _ index: Int32) throws {
        var text = text
        let rc = text.withUTF8 { utf8 in
            utf8.withMemoryRebound(to: CChar.self) { chars in
                guard let base = chars.baseAddress, !chars.isEmpty else {
                    return sqlite3_bind_text(statement, index, "", 0, Self.transient)
                }
                return sqlite3_bind_text64(
                    statement, index, base, UInt64(chars.count), Self.transient, UInt8(SQLITE_UTF8))
            }
        }
        try check(rc)
    }

    func bind(blob: Data, _ index: Int32) throws {
        let rc = blob.withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress, !bytes.isEmpty else {
                return sqlite3_bind_zeroblob(statement, index, 0)
            }
            return sqlite3_bind_blob64(statement, index, base, UInt64(bytes.count), Self.transient)
        }
        try check(rc)
    }

    /// Runs the statement (one that returns no rows), then resets it and clears its bindings.
    func run() throws {
        let rc = sqlite3_step(statement)
        let message = rc == SQLITE_DONE ? "" : database.lastError
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
        guard rc == SQLITE_DONE else { throw database.failure(message) }
    }
}
