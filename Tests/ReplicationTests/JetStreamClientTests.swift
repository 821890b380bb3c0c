import Foundation
import NATSJetStream
import ObjectGraphTestSupport
import Testing

/// JetStreamClient against real nats-server processes on loopback: each test starts its own
/// server (a fraction of a second) so that no test sees another's streams or kills.
@Suite(
    .serialized,
    .disabled(if: NATSServer.executable == nil, "nats-server is not installed; Tools/install-deps.sh installs Debian's")
)
struct JetStreamClientTests {
    /// A server with JetStream, a client connected to it and a stream on `subjects`.
    private func withStream(
        name: String = "JOURNAL", subjects: [String] = ["journal.>"],
        _ body: (JetStreamClient, NATSServer) throws -> Void
    ) throws {
        let server = try NATSServer.start()
        let client = try JetStreamClient(servers: [server.url], timeout: .seconds(2))
        defer { client.close() }
        try client.ensureStream(StreamConfiguration(name: name, subjects: subjects))
        try body(client, server)
    }

    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func publishAcksCountUpFromOneAndEnsureStreamIsIdempotent() throws {
        try withStream { client, _ in
            for expected in UInt64(1)...3 {
                let ack = try client.publish(subject: "journal.records", payload: bytes("r\(expected)"))
                #expect(ack == PublishAck(stream: "JOURNAL", sequence: expected, duplicate: false))
            }
            let state = try client.ensureStream(StreamConfiguration(name: "JOURNAL", subjects: ["journal.>"]))
            #expect(state.messages == 3 && state.firstSequence == 1 && state.lastSequence == 3)
            #expect(state.lastTime != nil)
            // Another configuration under the same name returns the existing stream's state.
            let other = try client.ensureStream(
                StreamConfiguration(name: "JOURNAL", subjects: ["journal.>", "other.>"]))
            #expect(other == state)
            #expect(try client.streamState("JOURNAL") == state)
            #expect(client.maxPayload == 1_048_576)
            // No stream listens on the subject: nobody answers.
            let unheard = #expect(throws: JetStreamError.self) {
                try client.publish(subject: "elsewhere.records", payload: [1])
            }
            #expect(unheard?.code == .timeout)
        }
    }

    @Test func aRepeatedMessageIDIsStoredOnceAndAcknowledgedWithTheFirstSequence() throws {
        try withStream { client, _ in
            let first = try client.publish(subject: "journal.records", payload: bytes("a"), messageID: "commit-1")
            let second = try client.publish(subject: "journal.records", payload: bytes("a"), messageID: "commit-1")
            let third = try client.publish(subject: "journal.records", payload: bytes("b"), messageID: "commit-2")
            #expect(first == PublishAck(stream: "JOURNAL", sequence: 1, duplicate: false))
            #expect(second == PublishAck(stream: "JOURNAL", sequence: 1, duplicate: true))
            #expect(third.sequence == 2 && !third.duplicate)
            #expect(try client.streamState("JOURNAL").messages == 2)
        }
    }

    @Test func expectedLastSequenceMismatchThrowsAndStoresNothingIncludingZeroOnANonEmptyStream() throws {
        try withStream { client, _ in
            // 0 means "the stream never stored a message": accepted once, on the empty stream.
            let first = try client.publish(subject: "journal.records", payload: bytes("a"), expectedLastSequence: 0)
            #expect(first.sequence == 1)
            for wrong: UInt64 in [0, 2, 7] {
                let error = #expect(throws: JetStreamError.self) {
                    try client.publish(subject: "journal.records", payload: bytes("x"), expectedLastSequence: wrong)
                }
                #expect(error?.code == .wrongLastSequence, "\(String(describing: error))")
                #expect(error?.message.contains("10071") == true, "\(String(describing: error))")
            }
            #expect(try client.streamState("JOURNAL").messages == 1)
            let second = try client.publish(subject: "journal.records", payload: bytes("b"), expectedLastSequence: 1)
            #expect(second.sequence == 2)
            #expect(try client.message(stream: "JOURNAL", sequence: 3) == nil)
        }
    }

    @Test func headersAndPayloadRoundTripThroughDirectGetAndReader() throws {
        try withStream { client, _ in
            let headers = ["Og-Kind": "commit", "Og-Records": "3", "Og-Value": "a: b, c"]
            let payload: [UInt8] = [0, 1, 2, 255, 10, 13]
            let before = Date()
            let ack = try client.publish(
                subject: "journal.records", payload: payload, headers: headers, messageID: "m-1")
            _ = try client.publish(subject: "journal.records", payload: [], headers: [:])

            let stored = try #require(try client.message(stream: "JOURNAL", sequence: ack.sequence))
            #expect(stored.subject == "journal.records" && stored.sequence == 1 && stored.payload == payload)
            for (name, value) in headers { #expect(stored.headers[name] == value, "\(name) in \(stored.headers)") }
            #expect(stored.headers["Nats-Msg-Id"] == "m-1")
            #expect(abs(stored.time.timeIntervalSince(before)) < 60)

            let reader = try client.reader(stream: "JOURNAL", from: 1)
            defer { reader.close() }
            let read = try reader.next(max: 10, timeout: eventBound)
            #expect(read.map(\.sequence) == [1, 2])
            #expect(read.first?.payload == payload && read.last?.payload == [])
            for (name, value) in headers { #expect(read.first?.headers[name] == value) }
            #expect(read.first.map { abs($0.time.timeIntervalSince(stored.time)) < 0.001 } == true)

            #expect(try client.message(stream: "JOURNAL", sequence: 99) == nil)
            // Headers libnats would not read back as given are refused before anything is sent.
            for bad in [["Og-Empty": ""], ["Og Space": "x"], ["Og-Padded": " x"], ["Og-Line": "a\r\nb"]] {
                let refused = #expect(throws: JetStreamError.self) {
                    try client.publish(subject: "journal.records", payload: [1], headers: bad)
                }
                #expect(refused?.code == .invalidArgument)
            }
            #expect(try client.streamState("JOURNAL").messages == 2)
            let missing = #expect(throws: JetStreamError.self) { try client.message(stream: "NOPE", sequence: 1) }
            #expect(missing?.code == .notFound)
        }
    }

    @Test func lastMessageBySubjectAndNilWhenTheSubjectHasNone() throws {
        try withStream { client, _ in
            _ = try client.publish(subject: "journal.a", payload: bytes("a1"))
            _ = try client.publish(subject: "journal.a", payload: bytes("a2"))
            _ = try client.publish(subject: "journal.b", payload: bytes("b1"))
            let lastA = try #require(try client.lastMessage(stream: "JOURNAL", subject: "journal.a"))
            #expect(lastA.sequence == 2 && lastA.payload == bytes("a2") && lastA.subject == "journal.a")
            #expect(try client.lastMessage(stream: "JOURNAL", subject: "journal.b")?.sequence == 3)
            #expect(try client.lastMessage(stream: "JOURNAL", subject: "journal.c") == nil)
        }
    }

    @Test func purgeBelowASequenceRemovesExactlyThoseOptionallyOnOneSubject() throws {
        try withStream { client, _ in
            for index in 1...10 {
                _ = try client.publish(
                    subject: index % 2 == 0 ? "journal.even" : "journal.odd", payload: bytes("\(index)"))
            }
            try client.purge(stream: "JOURNAL", subject: "journal.even", below: 5)  // removes 2 and 4
            #expect(try client.message(stream: "JOURNAL", sequence: 2) == nil)
            #expect(try client.message(stream: "JOURNAL", sequence: 3) != nil)
            try client.purge(stream: "JOURNAL", below: 7)  // removes 1, 3, 5 and 6
            let state = try client.streamState("JOURNAL")
            #expect(state.messages == 4 && state.firstSequence == 7 && state.lastSequence == 10)
            for sequence in UInt64(1)...10 {
                #expect(try (client.message(stream: "JOURNAL", sequence: sequence) != nil) == (sequence >= 7))
            }
            try client.purge(stream: "JOURNAL", below: 1)  // nothing below 1
            #expect(try client.streamState("JOURNAL").messages == 4)
            // A reader from before the first sequence starts at the first one held.
            let reader = try client.reader(stream: "JOURNAL", from: 1)
            defer { reader.close() }
            #expect(try reader.next(max: 100, timeout: eventBound).map(\.sequence) == [7, 8, 9, 10])
        }
    }

    @Test func readerDeliversInOrderFromAStartSequenceThenNewMessagesAndEmptyOnTimeout() throws {
        try withStream { client, _ in
            for index in 1...5 { _ = try client.publish(subject: "journal.records", payload: bytes("\(index)")) }
            let reader = try client.reader(stream: "JOURNAL", from: 3)
            defer { reader.close() }
            #expect(try reader.next(max: 2, timeout: eventBound).map(\.sequence) == [3, 4])
            #expect(try reader.next(max: 10, timeout: eventBound).map(\.sequence) == [5])

            let clock = ContinuousClock()
            var empty: [StoredMessage] = [
                StoredMessage(subject: "", sequence: 0, time: Date(), headers: [:], payload: [])
            ]
            let waited = try clock.measure { empty = try reader.next(max: 10, timeout: .milliseconds(300)) }
            #expect(empty.isEmpty)
            #expect(waited >= .milliseconds(250) && waited < atOnceBound, "waited \(waited)")

            for index in 6...7 { _ = try client.publish(subject: "journal.records", payload: bytes("\(index)")) }
            #expect(try reader.next(max: 10, timeout: eventBound).map(\.sequence) == [6, 7])

            // A reader waiting for the next message returns as soon as one is stored.
            let publisher = Thread {
                Thread.sleep(forTimeInterval: 0.2)
                _ = try? client.publish(subject: "journal.records", payload: [8])
            }
            publisher.start()
            var tail: [StoredMessage] = []
            let tailWait = try clock.measure { tail = try reader.next(max: 10, timeout: eventBound) }
            #expect(tail.map(\.sequence) == [8])
            #expect(
                tailWait < atOnceBound,
                "waited \(tailWait) for a message published after 0.2 s: the reader waited for its timeout")
        }
    }

    @Test func readerWithASubjectFilterSkipsOtherSubjects() throws {
        try withStream { client, _ in
            for index in 1...6 {
                _ = try client.publish(
                    subject: index % 3 == 0 ? "journal.meta" : "journal.records", payload: bytes("\(index)"))
            }
            let reader = try client.reader(stream: "JOURNAL", subject: "journal.records", from: 2)
            defer { reader.close() }
            #expect(try reader.next(max: 100, timeout: eventBound).map(\.sequence) == [2, 4, 5])
        }
    }

    @Test func readerThroughputAndPublishRoundTripOnLoopback() throws {
        try withStream { client, _ in
            let count = 20_000
            let payload = [UInt8](repeating: 7, count: 100)
            let clock = ContinuousClock()
            let publishTime = try clock.measure {
                for _ in 0..<count { _ = try client.publish(subject: "journal.records", payload: payload) }
            }
            let reader = try client.reader(stream: "JOURNAL", from: 1)
            defer { reader.close() }
            var received = 0
            var last: UInt64 = 0
            let readTime = try clock.measure {
                while received < count {
                    let batch = try reader.next(max: 256, timeout: eventBound)
                    guard !batch.isEmpty else { break }
                    for message in batch {
                        #expect(message.sequence == last + 1)
                        last = message.sequence
                    }
                    received += batch.count
                }
            }
            #expect(received == count)
            let publishMicroseconds =
                Double(
                    publishTime.components.attoseconds / 1_000_000_000_000 + publishTime.components.seconds * 1_000_000)
                / Double(count)
            let readSeconds = Double(readTime.components.seconds) + Double(readTime.components.attoseconds) / 1e18
            let rate = Double(received) / readSeconds
            print(
                "JetStream on loopback: publish round trip \(Int(publishMicroseconds)) µs; reader \(Int(rate)) messages/s (100-byte payloads, batches of 256)"
            )
            #expect(rate > 20_000)
        }
    }

    @Test func callsFailWithinTheTimeoutWhileTheServerIsDownAndWorkAgainAfterItsRestart() throws {
        try withStream { client, server in
            for index in 1...3 { _ = try client.publish(subject: "journal.records", payload: bytes("\(index)")) }
            let reader = try client.reader(stream: "JOURNAL", from: 1)
            #expect(try reader.next(max: 10, timeout: eventBound).count == 3)

            server.kill()
            let clock = ContinuousClock()
            for _ in 0..<3 {
                var caught: JetStreamError?
                let elapsed = clock.measure {
                    do throws(JetStreamError) {
                        _ = try client.publish(subject: "journal.records", payload: [1], timeout: .seconds(1))
                    } catch { caught = error }
                }
                #expect(caught?.code == .connectionFailed || caught?.code == .timeout, "\(String(describing: caught))")
                #expect(elapsed < atOnceBound, "failed after \(elapsed)")
            }
            #expect(!client.isConnected)
            #expect(throws: JetStreamError.self) { try client.streamState("JOURNAL") }
            #expect(throws: JetStreamError.self) { try reader.next(max: 10, timeout: .milliseconds(200)) }

            try server.restart()
            let deadline = ContinuousClock.now + eventBound
            while !client.isConnected && ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.05) }
            #expect(client.isConnected)
            let state = try client.streamState("JOURNAL")
            #expect(state.messages == 3 && state.lastSequence == 3)
            #expect(try client.publish(subject: "journal.records", payload: [4], expectedLastSequence: 3).sequence == 4)
            // The reader's consumer lived in the server's memory and is gone: the reader throws,
            // and the caller makes a new reader from its last sequence + 1.
            let gone = #expect(throws: JetStreamError.self) { try reader.next(max: 10, timeout: .seconds(1)) }
            print("JetStream reader after a server restart: \(String(describing: gone))")
            reader.close()
            let again = try client.reader(stream: "JOURNAL", from: 4)
            defer { again.close() }
            #expect(try again.next(max: 10, timeout: eventBound).map(\.sequence) == [4])
        }
    }

    @Test func aThreeNodeClusterKeepsAcknowledgingWithOneMemberKilledAndTakesItBack() throws {
        let cluster = try NATSCluster.start(size: 3)
        let client = try JetStreamClient(servers: cluster.urls, timeout: .seconds(2))
        defer { client.close() }
        var configuration = StreamConfiguration(name: "REPLICATED", subjects: ["replicated.>"], replicas: 3)
        configuration.maxMessageSize = 64 * 1024
        try client.ensureStream(configuration)
        // Expected last sequence 0 goes through the clustered path of the server too.
        #expect(try client.publish(subject: "replicated.records", payload: [1], expectedLastSequence: 0).sequence == 1)
        let zeroAgain = #expect(throws: JetStreamError.self) {
            try client.publish(subject: "replicated.records", payload: [1], expectedLastSequence: 0)
        }
        #expect(zeroAgain?.code == .wrongLastSequence)
        let wrong = #expect(throws: JetStreamError.self) {
            try client.publish(subject: "replicated.records", payload: [1], expectedLastSequence: 5)
        }
        #expect(wrong?.code == .wrongLastSequence)

        cluster.kill(0)
        // Until a new stream leader is elected (when the killed member led), publishes time out.
        let ack = try retry(for: eventBound) { () throws(JetStreamError) in
            try client.publish(
                subject: "replicated.records", payload: [2], messageID: "after-kill", expectedLastSequence: 1)
        }
        #expect(ack.sequence == 2)
        #expect(try client.streamState("REPLICATED").messages == 2)

        try cluster.restart(0)
        let third = try retry(for: eventBound) { () throws(JetStreamError) in
            try client.publish(subject: "replicated.records", payload: [3], messageID: "after-restart")
        }
        #expect(third.sequence == 3)
        // The restarted member serves the stream again: a client of it alone reads everything.
        let memberClient = try JetStreamClient(servers: [cluster[0].url], timeout: .seconds(2))
        defer { memberClient.close() }
        let reader = try memberClient.reader(stream: "REPLICATED", from: 1)
        defer { reader.close() }
        var sequences: [UInt64] = []
        let deadline = ContinuousClock.now + eventBound
        while sequences.count < 3 && ContinuousClock.now < deadline {
            sequences += try reader.next(max: 10, timeout: .seconds(1)).map(\.sequence)
        }
        #expect(sequences == [1, 2, 3])

        // Without a quorum (two of three members down) the stream has no leader: a publish fails
        // with `timeout` within its timeout (at once: the server answers "no responders").
        cluster.kill(1)
        cluster.kill(2)
        let clock = ContinuousClock()
        var noQuorum: JetStreamError?
        let waited = clock.measure {
            do throws(JetStreamError) {
                _ = try memberClient.publish(
                    subject: "replicated.records", payload: [4], expectedLastSequence: 3, timeout: .seconds(1))
            } catch { noQuorum = error }
        }
        #expect(noQuorum?.code == .timeout, "\(String(describing: noQuorum))")
        #expect(waited < atOnceBound, "failed after \(waited)")
        print("JetStream cluster without quorum: \(String(describing: noQuorum)) after \(waited)")
    }

    /// Calls `body` until it returns or `duration` has passed, then rethrows its last error.
    private func retry<T>(for duration: Duration, _ body: () throws(JetStreamError) -> T) throws -> T {
        let deadline = ContinuousClock.now + duration
        while true {
            do throws(JetStreamError) {
                return try body()
            } catch {
                if ContinuousClock.now > deadline { throw error }
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
    }
}
