import Logging
import RenewalCore

/// Spaces Server API requests for every worker on one database: `reserve` takes the next slot of a
/// bucket for all of them (PostgreSQL, one atomic statement) and says how long to wait for it, or nil
/// where the process's own budget is the fleet's (SQLite: one run at a time). When the database cannot
/// reserve a slot, the request waits and tries again rather than go out unbudgeted; after three
/// failures the check fails (the row keeps its state).
public struct FleetRequestBudget: RequestBudget {
    /// Reserves the next slot of the bucket named, `interval` after the last one reserved.
    public typealias Reserve = @Sendable (_ bucket: String, _ interval: Duration) async throws -> Duration?

    let reserve: Reserve
    let rates: RequestRates
    let local: LocalRequestBudget
    let logger: Logger

    public init(rates: RequestRates, logger: Logger, reserve: @escaping Reserve) {
        self.reserve = reserve
        self.rates = rates
        self.local = LocalRequestBudget(rates: rates)
        self.logger = logger
    }

    public func admit(_ bucket: RequestBucket) async throws {
        let interval = rates.interval(for: bucket.environment)
        for attempt in 1...3 {
            do {
                guard let wait = try await reserve(bucket.description, interval) else {
                    return try await local.admit(bucket)
                }
                if wait > .zero { try await Task.sleep(for: wait) }
                return
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
