import Foundation

/// Exponential backoff with jitter, the one rule every retry in the job follows: Apple requests
/// within a check (`RetryPolicy`), the next check of a receipt that failed
/// (`SchedulePolicy.nextCheckAfterFailure`) and webhook deliveries.
///
/// The ceiling starts at `base` and doubles with each earlier retry, up to `maximum`; the jitter
/// spreads retries so that receipts or deliveries that failed together are not retried together.
public struct Backoff: Sendable, Hashable {
    public enum Jitter: Sendable, Hashable {
        /// A uniform delay between zero and the ceiling ("full jitter").
        case full
        /// The ceiling, give or take this fraction of it (0.2: 80% to 120%).
        case proportional(Double)
    }

    public var base: TimeInterval
    public var maximum: TimeInterval
    public var jitter: Jitter

    public init(base: TimeInterval, maximum: TimeInterval, jitter: Jitter) {
        self.base = base
        self.maximum = maximum
        self.jitter = jitter
    }

    /// `base × 2^retries`, at most `maximum` (`retries` counts from 0 and stops doubling at 30).
    public func ceiling(afterRetries retries: Int) -> TimeInterval {
        min(base * pow(2, Double(min(max(retries, 0), 30))), maximum)
    }

    /// The delay before the next attempt after `retries` earlier retries, for `random` in 0...1.
    public func delay(afterRetries retries: Int, random: Double) -> TimeInterval {
        let ceiling = ceiling(afterRetries: retries)
        switch jitter {
        case .full: return ceiling * random
        case .proportional(let fraction): return ceiling * (1 + fraction * (2 * random - 1))
        }
    }
}
