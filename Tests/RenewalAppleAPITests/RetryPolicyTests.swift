import Logging
import RenewalCore
import Synchronization
import Testing

@testable import RenewalAppleAPI

/// The one retry loop every Apple client uses, driven by scripted steps: no sockets, no Apple.
@Suite("RetryPolicy: attempts, free redirects and waits, backoff, shutdown")
struct RetryPolicyTests {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    /// No backoff worth waiting for, so the loop's decisions are all a test sees.
    static let instant = RetryPolicy(maxAttempts: 3, baseDelay: .zero, maxDelay: .zero)

    final class Counter: AppStoreObserver {
        let retries = Mutex(0)
        func exchanged(status: String, environment: AppStoreEnvironment, seconds: Double) {}
        func retrying() { retries.withLock { $0 += 1 } }
    }

    @Test(
        """
        a temporary failure is asked again up to maxAttempts, then its answer stands; each retry is told to the \
        observer
        """
    )
    func retriesUpToMaxAttempts() async {
        let observer = Counter()
        var attempts: [Int] = []
        let answer = await Self.instant.run(
            observer: observer, logger: Self.quiet, reason: { FailureReason(rawValue: $0) }
        ) {
            attempt -> RetryPolicy.Step<String> in
            attempts.append(attempt)
            return .retry("failed \(attempt)")
        }
        #expect(attempts == [1, 2, 3])
        #expect(answer == "failed 3")
        #expect(observer.retries.withLock { $0 } == 2)
    }

    @Test("a finished step ends the loop at once, whatever attempts remain")
    func finishEnds() async {
        var calls = 0
        let answer = await Self.instant.run(observer: nil, logger: Self.quiet, reason: { FailureReason(rawValue: $0) })
        {
            attempt -> RetryPolicy.Step<String> in
            calls += 1
            return attempt == 2 ? .finish("done") : .retry("again")
        }
        #expect(answer == "done" && calls == 2)
    }

    @Test("switching environment and waiting out Retry-After cost no attempt")
    func redirectsAndWaitsAreFree() async {
        var calls: [Int] = []
        let answer = await Self.instant.run(observer: nil, logger: Self.quiet, reason: { FailureReason(rawValue: $0) })
        {
            attempt -> RetryPolicy.Step<String> in
            calls.append(attempt)
            switch calls.count {
            case 1: return .redirect
            case 2: return .wait(until: .now, "limited")
            case 3: return .redirect
            default: return .retry("failed")
            }
        }
        // Three free steps, then three attempts.
        #expect(calls == [1, 1, 1, 1, 2, 3])
        #expect(answer == "failed")
    }

    @Test("maxAttempts below 1 acts as 1")
    func atLeastOneAttempt() async {
        var calls = 0
        let policy = RetryPolicy(maxAttempts: 0, baseDelay: .zero, maxDelay: .zero)
        _ = await policy.run(observer: nil, logger: Self.quiet, reason: { FailureReason(rawValue: $0) }) {
            _ -> RetryPolicy.Step<String> in
            calls += 1
            return .retry("failed")
        }
        #expect(calls == 1)
    }

    @Test("a cancelled task sends no further request: the last answer stands")
    func cancellationStopsRetries() async {
        let calls = Mutex(0)
        let policy = RetryPolicy(maxAttempts: 5, baseDelay: .seconds(30), maxDelay: .seconds(30))
        let task = Task {
            await policy.run(observer: nil, logger: Self.quiet, reason: { FailureReason(rawValue: $0) }) {
                attempt -> RetryPolicy.Step<String> in
                calls.withLock { $0 += 1 }
                return .retry("failed \(attempt)")
            }
        }
        // The first request happens, then the loop sleeps out a backoff of up to 30 s until cancelled.
        while calls.withLock({ $0 }) == 0 { await Task.yield() }
        task.cancel()
        let answer = await task.value
        #expect(answer == "failed 1")
        #expect(calls.withLock { $0 } == 1)
    }

    @Test("backoff is full jitter within the doubling ceiling and the cap", arguments: 1...8)
    func backoffBounds(attempt: Int) {
        let policy = RetryPolicy(maxAttempts: 4, baseDelay: .milliseconds(500), maxDelay: .seconds(8))
        let ceiling = min(8_000, 500 * (1 << (attempt - 1)))
        var seen: Set<Int64> = []
        for _ in 0..<200 {
            let delay = policy.backoff(afterAttempt: attempt)
            #expect(delay >= .zero && delay <= .milliseconds(ceiling))
            seen.insert(delay.milliseconds)
        }
        #expect(seen.count > 20, "jitter should spread the delays, saw \(seen.count) values")
    }
}

/// The one classification of Apple failures: every case's reason, whether it is an outage (feeds the
/// breaker) and whether it is asked again.
@Suite("AppleAPIError: one reason and one outage classification for every Apple API")
struct AppleAPIErrorTests {
    static let cases: [(AppleAPIError, reason: String, outage: Bool)] = [
        (.timeout, "timeout", true),
        (.connection("refused"), "connection_failed", true),
        (.httpStatus(503), "http_503", true),
        (.httpStatus(500, apiCode: 5_000_000), "http_500", true),
        (.httpStatus(429), "http_429", true),
        (.httpStatus(404), "http_404", false),
        (.httpStatus(400, apiCode: 4_000_006), "http_400", false),
        (.notJSON(contentType: "text/html", bytes: 10), "invalid_answer", true),
        (.unreadableField(path: "status", detail: "x"), "unreadable_answer", false),
        (.responseTooLarge(limit: 10), "response_too_large", false),
        (.temporaryStatus(AppStoreStatus(21005)), "apple_status_21005", true),
        (.unexpectedStatus(AppStoreStatus(21000)), "apple_status_21000", false),
        (.environmentLoop, "environment_loop", false),
        (.unauthorized, "server_api_unauthorized", false),
        (.notFound, "transaction_not_found", false),
        (.rateLimited(until: .now), "rate_limited", true),
        (.retryableCode(4_040_002, httpStatus: 404), "server_api_4040002", true),
        (.noTransactionID, "no_transaction_id", false),
    ]

    @Test("reason, outage and retry for every case", arguments: 0..<cases.count)
    func classification(index: Int) {
        let (error, reason, outage) = Self.cases[index]
        #expect(error.reason.rawValue == reason)
        #expect(error.isOutage == outage)
        #expect(error.isRetryable == outage)
        for api in [CheckSource.verifyReceipt, .serverAPI] {
            let answer = error.answer(api)
            guard case .transient(let failure, let isOutage) = answer else {
                Issue.record("\(error) is not a transient answer")
                continue
            }
            #expect(failure.reason.rawValue == reason && isOutage == outage)
            #expect(!failure.message.isEmpty)
        }
    }

    @Test("messages name the API that failed and say the state stays")
    func messagesNameTheAPI() {
        #expect(
            AppleAPIError.httpStatus(503).message(.verifyReceipt)
                == "Apple answered HTTP 503; the receipt keeps its state and is retried later.")
        #expect(
            AppleAPIError.httpStatus(500, apiCode: 5_000_000).message(.serverAPI)
                == """
                The App Store Server API answered HTTP 500 with error 5000000; the subscription keeps its state \
                and is retried later.
                """
        )
        #expect(AppleAPIError.timeout.message(.serverAPI).hasPrefix("The App Store Server API did not answer"))
        #expect(
            AppleAPIError.connection("refused").message(.verifyReceipt).hasPrefix("Could not reach Apple (refused)"))
    }
}
