import Foundation
import RenewalStorage

extension SubscriptionStoreConformance {
    /// Lets each store (one per simulated worker, each on its own connection) claim due receipts in
    /// small leased pages at the same time until nothing is left, and returns every id claimed.
    /// Callers check that no id was claimed twice.
    public static func claimConcurrently(_ stores: [any SubscriptionStore], now: Date, pageSize: Int = 7) async throws
        -> [Int64]
    {
        try await withThrowingTaskGroup(of: [Int64].self) { group in
            for (index, store) in stores.enumerated() {
                group.addTask {
                    var ids: [Int64] = []
                    let lease = Lease(owner: "worker-\(index)", until: now.addingTimeInterval(600), now: now)
                    while true {
                        let page = try await store.nextBatch(.due(asOf: now), after: nil, limit: pageSize, lease: lease)
                        if page.isEmpty { return ids }
                        ids += page.map(\.id)
                    }
                }
            }
            return try await group.reduce(into: [Int64]()) { $0 += $1 }
        }
    }
}
