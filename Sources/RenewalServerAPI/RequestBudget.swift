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
/// are per second, and bursts are what trip them. A request that wakes more than
/// `RequestRates.lateness` of the spacing after its slot takes a new one rather than leave in the
/// bunch a stalled process releases, so the bound holds where Apple counts: when requests leave.
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

    /// How late, as a share of the spacing, a request may wake after its slot and still go. Later
    /// than that the process stalled and every request that slept through the stall woke with it
    /// (16 lookups at once after 2 s); each takes a new slot instead. Each request then leaves
    /// within `lateness × spacing` of a slot of its own, so any one second of requests leaving holds
    /// at most ⌊(1 s + lateness × spacing) / spacing⌋ + 1: 9 lookups at Apple's 10/s (spacing 125
    /// ms), 17 token bindings at 20/s, 37 status requests at 45/s.
    public static let lateness = 0.5

    /// How many slots one request takes at most. A request late for its third slot goes (the
    /// machine is stalling again and again, and waiting for a fourth would only lose throughput).
    public static let slotTakes = 3

    /// The spacing between two requests at `environment`'s budget.
    public func interval(for environment: AppStoreEnvironment) -> Duration {
        let rate = rate(for: environment) * Self.headroom
        guard rate > 0, rate.isFinite else { return .zero }
        return .nanoseconds(Int64((1e9 / rate).rounded(.up)))
    }
}

/// A budget for this process alone: each bucket keeps the time its next request may go.
public final class LocalRequestBudget: RequestBudget {
    private let rates: RequestRates
    private let clock: RequestBudgetClock
    private let next = Mutex<[RequestBucket: Duration]>([:])

    /// `clock` is the continuous clock but in tests that stall the process by hand.
    public init(rates: RequestRates, clock: RequestBudgetClock = .continuous) {
        self.rates = rates
        self.clock = clock
    }

    public func admit(_ bucket: RequestBucket) async throws {
        let interval = rates.interval(for: bucket.environment)
        guard interval > .zero else { return }
        for take in 1...RequestRates.slotTakes {
            let now = clock.now()
            let slot = next.withLock { next -> Duration in
                let slot = max(now, next[bucket] ?? now)
                next[bucket] = slot + interval
                return slot
            }
            let onTime = try await clock.sleep(untilSlot: slot, interval: interval)
            if onTime || take == RequestRates.slotTakes { return }
        }
    }
}
