import Logging
import RenewalCore
import ServiceLifecycle

/// How every Apple API client repeats a request within one check: up to `maxAttempts` requests for
/// temporary failures with full-jitter backoff between them, waits Apple asks for (a 429's
/// `Retry-After`) and switches to the other environment at no attempt's cost, and no new request
/// once the task is cancelled or the service shuts down gracefully (the run then releases the row
/// untouched).
public struct RetryPolicy: Sendable, Hashable {
    /// Requests per check for temporary failures; at least 1.
    public var maxAttempts: Int
    /// The backoff ceiling before the second attempt, doubling per attempt.
    public var baseDelay: Duration
    /// The cap on one backoff ceiling.
    public var maxDelay: Duration

    public init(maxAttempts: Int, baseDelay: Duration, maxDelay: Duration) {
        self.maxAttempts = maxAttempts
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
    }

    /// What one request's outcome asks of the loop.
    package enum Step<Answer> {
        /// The check is over with this answer.
        case finish(Answer)
        /// A temporary failure: back off and ask again while attempts remain; else `Answer` stands.
        case retry(Answer)
        /// Ask again at once, at no attempt's cost (the other environment).
        case redirect
        /// Apple asked to wait: ask again at `until`, at no attempt's cost; `Answer` stands if the
        /// wait is cut short by a shutdown.
        case wait(until: ContinuousClock.Instant, Answer)
    }

    /// Runs `request` (given the attempt number, from 1) until a step finishes the check.
    ///
    /// - Parameter reason: the failure reason of an answer, for the retry's log line.
    package func run<Answer>(
        observer: (any AppStoreObserver)?, logger: Logger, reason: (Answer) -> FailureReason?,
        _ request: (_ attempt: Int) async -> Step<Answer>
    ) async -> Answer {
        var attempt = 1
        while true {
            switch await request(attempt) {
            case .finish(let answer):
                return answer
            case .redirect:
                continue
            case .wait(let until, let answer):
                do {
                    try await cancelWhenGracefulShutdown { try await Task.sleep(until: until, clock: .continuous) }
                } catch {
                    return answer
                }
            case .retry(let answer):
                guard attempt < max(1, maxAttempts), !Task.isCancelled, !Task.isShuttingDownGracefully else {
                    return answer
                }
                observer?.retrying()
                let delay = backoff(afterAttempt: attempt)
                logger.debug(
                    "Retrying an Apple request",
                    metadata: [
                        LogKey.appStoreFailure: "\(reason(answer) ?? .unknown)",
                        LogKey.retryDelayMS: "\(delay.milliseconds)",
                    ])
                do {
                    try await cancelWhenGracefulShutdown { try await Task.sleep(for: delay) }
                } catch {
                    return answer
                }
                attempt += 1
            }
        }
    }

    /// Full jitter: a uniform delay in `[0, min(maxDelay, baseDelay * 2^(attempt-1))]`.
    package func backoff(afterAttempt attempt: Int) -> Duration {
        let backoff = Backoff(base: baseDelay.seconds, maximum: maxDelay.seconds, jitter: .full)
        let delay = backoff.delay(afterRetries: attempt - 1, random: Double.random(in: 0...1))
        guard delay > 0, delay.isFinite else { return .zero }
        return .milliseconds(Int64((delay * 1000).rounded()))
    }
}
