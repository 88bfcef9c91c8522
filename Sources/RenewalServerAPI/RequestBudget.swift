import Foundation
import RenewalCore
import Synchronization

/// One rate-limited stream of requests: an endpoint in an environment (`subscriptions/production`).
public struct RequestBucket: Sendable, Hashable, CustomStringConvertible {
    public var endpoint: String
    public var environment: AppStoreEnvironment
    /// The app whose budget it is, when several apps share the database (Apple's limits are per
    /// app); nil for one app, whose key stays as it always was.
    public var app: String?

    public init(endpoint: String, environment: AppStoreEnvironment, app: String? = nil) {
        self.endpoint = endpoint
        self.environment = environment
        self.app = app
    }

    /// The key budgets are stored under: `subscriptions/production`, or with several apps
    /// `com.example.app/subscriptions/production`.
    public var description: String {
        let key = "\(endpoint)/\(environment.rawValue.lowercased())"
        return app.map { "\($0)/\(key)" } ?? key
    }
}

/// Admits requests at a budgeted rate. Implementations space requests evenly (a token bucket
/// holding one token) at `RequestRates.headroom` of the rate, so no second ever holds more than the
/// budget even when the network delays some requests more than others: Apple's published limits
/// are per second, and bursts are what trip them.
public protocol RequestBudget: Sendable {
    /// Waits until one request to `bucket` may be sent. Throws `CancellationError` when cancelled.
    func admit(_ bucket: RequestBucket) async throws
}

/// Requests per second per environment, with defaults under Apple's published 50 per second for
/// the status and history endpoints in production; sandbox is kept lower.
public struct RequestRates: Sendable, Hashable {
    public var production: Double
    public var sandbox: Double

    public init(production: Double = 45, sandbox: Double = 10) {
        self.production = production
        self.sandbox = sandbox
    }

    /// The rate of `environment` (production's for anything unknown).
    public func rate(for environment: AppStoreEnvironment) -> Double {
        environment == .sandbox ? sandbox : production
    }

    /// The share of the budget requests are scheduled at: the rest absorbs the jitter between
    /// sending a request and Apple receiving it: at 0.8, one request must be held up 250 ms longer
    /// than one sent a second later before any second holds more than the budget.
    public static let headroom = 0.8

    /// The spacing between two requests at `environment`'s budget.
    public func interval(for environment: AppStoreEnvironment) -> Duration {
        let rate = rate(for: environment) * Self.headroom
        guard rate > 0, rate.isFinite else { return .zero }
        return .nanoseconds(Int64((1e9 / rate).rounded(.up)))
    }
}

/// A budget for this process alone: each bucket keeps the instant its next request may go.
public final class LocalRequestBudget: RequestBudget {
    private let rates: RequestRates
    private let next = Mutex<[RequestBucket: ContinuousClock.Instant]>([:])

    public init(rates: RequestRates) {
        self.rates = rates
    }

    public func admit(_ bucket: RequestBucket) async throws {
        let interval = rates.interval(for: bucket.environment)
        guard interval > .zero else { return }
        let now = ContinuousClock.now
        let slot = next.withLock { next -> ContinuousClock.Instant in
            let slot = max(now, next[bucket] ?? now)
            next[bucket] = slot + interval
            return slot
        }
        if slot > now { try await Task.sleep(until: slot, clock: .continuous) }
    }
}
