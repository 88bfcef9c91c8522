import Logging
import RenewalCore

/// Spaces Server API requests for every worker on one database: `reserve` takes the next slot of a
/// bucket for all of them (PostgreSQL, one atomic statement) and says how long to wait for it, or nil
/// where the process's own budget is the fleet's (SQLite: one run at a time). When the database cannot
/// reserve a slot, the request waits and tries again rather than go out unbudgeted; after three
/// failures the check fails (the row keeps its state). A request that wakes late for its slot (this
/// process stalled) reserves another, like `LocalRequestBudget`'s, so a stall here does not put a
/// bunch of requests into the second the other workers' slots already fill.
public struct FleetRequestBudget: RequestBudget {
    /// Reserves the next slot of the bucket named, `interval` after the last one reserved.
    public typealias Reserve = @Sendable (_ bucket: String, _ interval: Duration) async throws -> Duration?

    let reserve: Reserve
    let rates: RequestRates
    let local: LocalRequestBudget
    let clock: RequestBudgetClock
    let logger: Logger

    /// `clock` is the continuous clock but in tests that stall the process by hand.
    public init(
        rates: RequestRates, logger: Logger, clock: RequestBudgetClock = .continuous,
        reserve: @escaping Reserve
    ) {
        self.reserve = reserve
        self.rates = rates
        self.clock = clock
        self.local = LocalRequestBudget(rates: rates, clock: clock)
        self.logger = logger
    }

    public func admit(_ bucket: RequestBucket) async throws {
        let interval = rates.interval(for: bucket.environment)
        var takes = 0
        for attempt in 1...3 {
            do {
                while true {
                    guard let wait = try await reserve(bucket.description, interval) else {
                        return try await local.admit(bucket)
                    }
                    takes += 1
                    let onTime = try await clock.sleep(untilSlot: clock.now() + wait, interval: interval)
                    if onTime || takes >= RequestRates.slotTakes { return }
                }
            } catch let error as CancellationError {
                throw error
            } catch {
                logger.warning(
                    "Could not reserve a Server API request slot in the database; waiting",
                    metadata: [
                        LogKey.bucket: "\(bucket)", LogKey.attempt: "\(attempt)", "error": "\(error)",
                    ])
                if attempt == 3 { throw error }
                try await Task.sleep(for: interval * 4)
            }
        }
    }
}
