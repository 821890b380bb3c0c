import CNATS
import Foundation

/// libnats's library-wide state, initialized once (the first client's init) and thread-safely,
/// as Swift initializes globals. The argument -1 keeps libnats's default spin count for its locks.
let natsLibraryStatus: natsStatus = nats_Open(-1)

extension Duration {
    /// The duration in whole milliseconds, at least `minimum`, saturating instead of overflowing.
    func milliseconds(minimum: Int64 = 1) -> Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        if overflow { return seconds < 0 ? minimum : Int64.max }
        let total = whole.addingReportingOverflow(attoseconds / 1_000_000_000_000_000)
        if total.overflow { return Int64.max }
        return max(minimum, total.partialValue)
    }

    /// The duration in nanoseconds, saturating instead of overflowing; negative durations give 0.
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        if seconds < 0 { return 0 }
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return Int64.max }
        let total = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        return total.overflow ? Int64.max : total.partialValue
    }
}

/// A time libnats gives as nanoseconds since 1970 (UTC).
func date(fromNanoseconds nanoseconds: Int64) -> Date {
    Date(timeIntervalSince1970: Double(nanoseconds) / 1_000_000_000)
}

/// Calls `body` with a C array of C strings copied from `strings` (valid during the call only);
/// nil when memory for a copy could not be had.
func withCStringArray<R>(
    _ strings: [String], _ body: (UnsafeMutablePointer<UnsafePointer<CChar>?>, Int32) -> R
) -> R? {
    var copies: [UnsafeMutablePointer<CChar>] = []
    copies.reserveCapacity(strings.count)
    defer { for copy in copies { free(copy) } }
    for string in strings {
        guard let copy = strdup(string) else { return nil }
        copies.append(copy)
    }
    let array = UnsafeMutablePointer<UnsafePointer<CChar>?>.allocate(capacity: max(1, copies.count))
    defer { array.deallocate() }
    for (index, copy) in copies.enumerated() { array[index] = UnsafePointer(copy) }
    return body(array, Int32(copies.count))
}

/// The headers of a libnats message, one value per name (the first when a name repeats).
func headers(of message: OpaquePointer) -> [String: String] {
    var keys: UnsafeMutablePointer<UnsafePointer<CChar>?>? = nil
    var count: Int32 = 0
    guard natsMsgHeader_Keys(message, &keys, &count) == NATS_OK, let keys else { return [:] }
    defer { free(UnsafeMutableRawPointer(keys)) }
    var result: [String: String] = [:]
    result.reserveCapacity(Int(count))
    for index in 0..<Int(count) {
        guard let key = keys[index] else { continue }
        var value: UnsafePointer<CChar>? = nil
        if natsMsgHeader_Get(message, key, &value) == NATS_OK, let value {
            result[String(cString: key)] = String(cString: value)
        }
    }
    return result
}

/// A stored message from a libnats message, with the stream sequence and time given separately
/// (they come from different places for direct gets and for consumer deliveries).
func storedMessage(from message: OpaquePointer, sequence: UInt64, timeNanoseconds: Int64) -> StoredMessage {
    let subject = natsMsg_GetSubject(message).map { String(cString: $0) } ?? ""
    let length = Int(natsMsg_GetDataLength(message))
    var payload: [UInt8] = []
    if length > 0, let data = natsMsg_GetData(message) {
        payload = [UInt8](UnsafeRawBufferPointer(start: UnsafeRawPointer(data), count: length))
    }
    return StoredMessage(
        subject: subject, sequence: sequence, time: date(fromNanoseconds: timeNanoseconds),
        headers: headers(of: message), payload: payload)
}

/// A stream state from libnats's.
func makeStreamState(_ state: jsStreamState) -> StreamState {
    StreamState(
        messages: state.Msgs, firstSequence: state.FirstSeq, lastSequence: state.LastSeq,
        lastTime: state.LastSeq == 0 || state.LastTime <= 0 ? nil : date(fromNanoseconds: state.LastTime))
}
