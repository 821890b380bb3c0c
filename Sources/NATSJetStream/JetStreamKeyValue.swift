import CNATS
import Foundation

/// One entry of a key-value bucket: its value and its revision (the sequence of the message
/// that holds it in the bucket's stream, which only grows).
public struct KeyValueEntry: Sendable, Hashable {
    /// The value; empty for a deletion marker.
    public var value: [UInt8]
    /// The entry's revision.
    public var revision: UInt64
    /// Whether the entry is a deletion or purge marker (the key has no value).
    public var isDeleted: Bool
}

/// A JetStream key-value bucket (a stream of one message per key, kept for a time to live):
/// reads, and writes that succeed only against the revision the writer last saw, which is
/// what a lease needs. Made by ``JetStreamClient/keyValue(bucket:ttl:replicas:)``.
///
/// Thread safe; every call blocks until the server answers or the client's timeout passes.
public final class JetStreamKeyValue: @unchecked Sendable {
    // `@unchecked Sendable`: libnats's kvStore may be used from many threads; the pointer never
    // changes and is destroyed in deinit, when no call can be running.
    private let store: OpaquePointer
    private let handles: NATSHandles
    /// The bucket's name.
    public let bucket: String
    /// How long the server keeps an entry after it was written (the bucket's `max_age`).
    public let ttl: Duration

    init(store: OpaquePointer, handles: NATSHandles, bucket: String, ttl: Duration) {
        self.store = store
        self.handles = handles
        self.bucket = bucket
        self.ttl = ttl
    }

    deinit { kvStore_Destroy(store) }

    /// The key's current entry, or nil when the key has none (never written, or expired).
    public func get(_ key: String) throws(JetStreamError) -> KeyValueEntry? {
        try check("read \(bucket)/\(key)")
        var entryPointer: OpaquePointer? = nil
        let status = kvStore_Get(&entryPointer, store, key)
        if status == NATS_NOT_FOUND { return nil }
        guard status == NATS_OK, let entry = entryPointer else {
            throw JetStreamError(status: status, action: "read \(bucket)/\(key)")
        }
        defer { kvEntry_Destroy(entry) }
        let length = Int(kvEntry_ValueLen(entry))
        var value: [UInt8] = []
        if length > 0, let raw = kvEntry_Value(entry) {
            value = Array(UnsafeRawBufferPointer(start: raw, count: length))
        }
        let operation = kvEntry_Operation(entry)
        return KeyValueEntry(
            value: value, revision: kvEntry_Revision(entry), isDeleted: operation != kvOp_Put)
    }

    /// Writes `value` under `key` only if the key holds no value (never written, expired, or
    /// deleted); returns the new revision.
    ///
    /// - Throws: ``JetStreamError`` with code `wrongLastSequence` when the key holds a value.
    @discardableResult
    public func create(_ key: String, _ value: [UInt8]) throws(JetStreamError) -> UInt64 {
        let action = "create \(bucket)/\(key)"
        try check(action)
        var revision: UInt64 = 0
        let status = value.withUnsafeBytes { kvStore_Create(&revision, store, key, $0.baseAddress, Int32($0.count)) }
        guard status == NATS_OK else { throw Self.error(status, action) }
        return revision
    }

    /// Writes `value` under `key` only if the key's current revision is `last`; returns the new
    /// revision.
    ///
    /// - Throws: ``JetStreamError`` with code `wrongLastSequence` when the key was written since
    ///   (or expired).
    @discardableResult
    public func update(_ key: String, _ value: [UInt8], last: UInt64) throws(JetStreamError) -> UInt64 {
        let action = "update \(bucket)/\(key) at revision \(last)"
        try check(action)
        var revision: UInt64 = 0
        let status = value.withUnsafeBytes {
            kvStore_Update(&revision, store, key, $0.baseAddress, Int32($0.count), last)
        }
        guard status == NATS_OK else { throw Self.error(status, action) }
        return revision
    }

    private func check(_ action: @autoclosure () -> String) throws(JetStreamError) {
        if handles.closed.load(ordering: .acquiring) {
            throw JetStreamError(.connectionFailed, "\(action()): the client is closed")
        }
    }

    /// A failed write: libnats reports a refused expected revision as a plain error whose text
    /// names the wrong last sequence.
    private static func error(_ status: natsStatus, _ action: String) -> JetStreamError {
        let error = JetStreamError(status: status, action: action)
        if error.code == .server || error.code == .wrongLastSequence,
            error.message.lowercased().contains("wrong last sequence")
        {
            return JetStreamError(.wrongLastSequence, error.message)
        }
        return error
    }
}

extension JetStreamClient {
    /// Binds the key-value bucket `bucket`, creating it when it does not exist, with entries
    /// kept `ttl` after they were written, one revision per key, `replicas` copies.
    ///
    /// An existing bucket keeps its own time to live (``JetStreamKeyValue/ttl`` reports it).
    ///
    /// - Throws: ``JetStreamError``.
    public func keyValue(bucket: String, ttl: Duration, replicas: Int) throws(JetStreamError) -> JetStreamKeyValue {
        let action = "open key-value bucket \(bucket)"
        try requireConnection(action)
        var storePointer: OpaquePointer? = nil
        var status = js_KeyValue(&storePointer, handles.context, bucket)
        if status != NATS_OK {
            status = bucket.withCString { name in
                var config = kvConfig()
                kvConfig_Init(&config)
                config.Bucket = name
                config.History = 1
                // libnats takes the time to live in nanoseconds (the server's `max_age`).
                config.TTL = ttl.milliseconds() * 1_000_000
                config.Replicas = Int32(max(1, replicas))
                config.StorageType = js_FileStorage
                return js_CreateKeyValue(&storePointer, handles.context, &config)
            }
            if status != NATS_OK {
                let creation = JetStreamError(status: status, action: "create key-value bucket \(bucket)")
                // Another process may have created it meanwhile.
                status = js_KeyValue(&storePointer, handles.context, bucket)
                if status != NATS_OK { throw creation }
            }
        }
        guard status == NATS_OK, let store = storePointer else {
            throw JetStreamError(status: status, action: action)
        }
        var effective = ttl
        var statusPointer: OpaquePointer? = nil
        if kvStore_Status(&statusPointer, store) == NATS_OK, let kvStatus = statusPointer {
            let nanoseconds = kvStatus_TTL(kvStatus)
            if nanoseconds > 0 { effective = .nanoseconds(nanoseconds) }
            kvStatus_Destroy(kvStatus)
        }
        return JetStreamKeyValue(store: store, handles: handles, bucket: bucket, ttl: effective)
    }
}
