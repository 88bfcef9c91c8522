/// Stops a run from claiming more work when Apple keeps failing.
///
/// It opens after `threshold` consecutive outage results (timeouts, connection errors, HTTP 5xx,
/// non-JSON bodies, temporary statuses after retries). Any usable answer from Apple resets the count.
public struct CircuitBreaker: Sendable, Hashable {
    public struct Configuration: Sendable, Hashable {
        /// Consecutive outage results that open the breaker. Default 10.
        public var threshold: Int

        public init(threshold: Int = 10) {
            self.threshold = max(1, threshold)
        }
    }

    public let configuration: Configuration
    public private(set) var consecutiveOutages = 0

    public init(configuration: Configuration = .init()) {
        self.configuration = configuration
    }

    public var isOpen: Bool { consecutiveOutages >= configuration.threshold }

    /// Records one result; returns whether the breaker is now open.
    @discardableResult
    public mutating func record(outage: Bool) -> Bool {
        consecutiveOutages = outage ? consecutiveOutages + 1 : 0
        return isOpen
    }
}
