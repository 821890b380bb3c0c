import CNATS
import Testing

@testable import NATSJetStream

/// How libnats's statuses and JetStream's error codes become `JetStreamError` codes and
/// messages; no server needed.
struct JetStreamErrorTests {
    private func error(
        _ status: natsStatus, jsCode: Int = 0, call: JetStreamError.Call = .other, action: String = "do it",
        libnats: String = "Some Text", detail: String? = nil
    ) -> JetStreamError {
        JetStreamError(status: status, jsCode: jsCode, call: call, action: action, libnatsText: libnats, detail: detail)
    }

    @Test func aPublishRefusedWhileReconnectingSaysTheConnectionIsDownWithLibnatsTextLast() {
        let refused = error(
            NATS_INSUFFICIENT_BUFFER, call: .publish, action: "publish 10 bytes to pkgd.log",
            libnats: "Insufficient Buffer", detail: "(pub.c:143)")
        #expect(refused.code == .connectionFailed)
        #expect(
            refused.message
                == "publish 10 bytes to pkgd.log: the connection is down and being re-established; the message was not sent (libnats: Insufficient Buffer, pub.c:143)"
        )
    }

    @Test func noRespondersToTheAPIMeansJetStreamIsNotEnabledButToAPublishItIsWaitedOut() {
        let api = error(NATS_NO_RESPONDERS, call: .api, libnats: "No responders available for request")
        #expect(api.code == .jetStreamNotEnabled)
        #expect(api.message.contains("JetStream is not enabled on the server"))
        #expect(api.message.hasSuffix("(libnats: No responders available for request)"))
        let publish = error(NATS_NO_RESPONDERS, call: .publish)
        #expect(publish.code == .timeout)
        #expect(publish.message.contains("no stream stores it, or its stream has no leader"))
        // libnats adds a "JetStream not enabled" code of its own to any request nobody answered.
        let leaderless = error(
            NATS_NO_RESPONDERS, jsCode: Int(JSNotEnabledErr.rawValue), call: .publish,
            libnats: "No responders available for request")
        #expect(leaderless.code == .timeout)
        #expect(!leaderless.message.contains("jsErrCode"), "\(leaderless.message)")
        let disabled = error(NATS_NO_RESPONDERS, jsCode: Int(JSNotEnabledErr.rawValue), call: .api)
        #expect(disabled.code == .jetStreamNotEnabled)
        #expect(disabled.message.contains("Debian's default /etc/nats-server.conf has none"))
    }

    @Test func everyStatusHasACodeAndASentenceOfItsOwn() {
        var statuses: [natsStatus] = []
        var raw: UInt32 = 1
        while raw <= NATS_MISSED_HEARTBEAT.rawValue {
            statuses.append(natsStatus(rawValue: raw))
            raw += 1
        }
        for status in statuses {
            let sentence = JetStreamError.explain(status: status, jsCode: 0)
            #expect(sentence != "the call failed", "status \(status.rawValue) has no sentence")
        }
        let expected: [(natsStatus, JetStreamError.Code)] = [
            (NATS_TIMEOUT, .timeout), (NATS_NO_SERVER, .connectionFailed), (NATS_CONNECTION_CLOSED, .connectionFailed),
            (NATS_STALE_CONNECTION, .connectionFailed), (NATS_SSL_ERROR, .connectionFailed),
            (NATS_SECURE_CONNECTION_REQUIRED, .connectionFailed), (NATS_CONNECTION_AUTH_FAILED, .notPermitted),
            (NATS_NOT_PERMITTED, .notPermitted), (NATS_MAX_PAYLOAD, .messageTooLarge),
            (NATS_INVALID_ARG, .invalidArgument), (NATS_INVALID_SUBJECT, .invalidArgument),
            (NATS_NO_MEMORY, .clientFailure), (NATS_NOT_INITIALIZED, .clientFailure), (NATS_NOT_FOUND, .notFound),
        ]
        for (status, code) in expected {
            #expect(JetStreamError.classify(status: status, jsCode: 0) == code, "status \(status.rawValue)")
        }
    }

    @Test func jetStreamErrorCodesWinOverTheStatusAndNameTheirCode() {
        let cases: [(Int, JetStreamError.Code, String)] = [
            (Int(JSStreamWrongLastSequenceErr.rawValue), .wrongLastSequence, "last sequence is not the expected one"),
            (Int(JSStreamNotFoundErr.rawValue), .notFound, "no such stream"),
            (Int(JSNotEnabledErr.rawValue), .jetStreamNotEnabled, "JetStream is not enabled on the server"),
            (Int(JSNotEnabledForAccountErr.rawValue), .jetStreamNotEnabled, "not enabled for this account"),
            (Int(JSStreamReplicasNotSupportedErr.rawValue), .tooFewReplicas, "needs a JetStream cluster"),
            (Int(JSStreamMessageExceedsMaximumErr.rawValue), .messageTooLarge, "larger than the stream accepts"),
            (Int(JSStorageResourcesExceededErr.rawValue), .insufficientResources, "out of JetStream storage"),
            (Int(JSClusterNotAvailErr.rawValue), .server, "has no leader at the moment"),
            (10_999, .server, "the JetStream API refused the request"),
        ]
        for (jsCode, code, sentence) in cases {
            let failed = error(NATS_ERR, jsCode: jsCode, call: .api, libnats: "Error", detail: "stream not found")
            #expect(failed.code == code, "jsErrCode \(jsCode)")
            #expect(failed.message.contains(sentence), "\(failed.message)")
            #expect(failed.message.hasSuffix("(libnats: Error, stream not found) [jsErrCode \(jsCode)]"))
        }
    }
}
