import RenewalCore

/// Told about every HTTP exchange with Apple and every retry, for metrics. Implementations must be
/// cheap and thread-safe: they are called from concurrent checks.
public protocol AppStoreObserver: Sendable {
    /// One request ended after `seconds`. `status` is Apple's status code for an answer (`"0"`,
    /// `"21007"`), or the failure reason otherwise (`"http_503"`, `"timeout"`, `"invalid_answer"`).
    func exchanged(status: String, environment: AppStoreEnvironment, seconds: Double)
    /// A temporary failure is about to be retried.
    func retrying()
}
