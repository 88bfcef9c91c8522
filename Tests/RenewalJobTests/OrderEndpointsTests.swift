import AppStoreSimulator
import Foundation
import Logging
import RenewalCore
import RenewalServerAPI
import RenewalStorage
import Testing

/// Look Up Order ID and Set App Account Token keep to Apple's own limits for those endpoints (10 and 20
/// requests per second), which are far below the status budget every request also draws on: the
/// simulator enforces each over its own one-second window and answers 429 past it.
@Suite("Support endpoints: Look Up Order ID and Set App Account Token keep to their own limits")
struct OrderEndpointsTests {
    /// The budget a command builds for an endpoint: `rates`, reserved in the database (PostgreSQL: for
    /// every worker together; SQLite: this process's own).
    static func budget(_ rates: RequestRates, store: any SubscriptionStore) throws -> FleetRequestBudget {
        let slots = try #require(store as? any RequestSlotStore)
        return FleetRequestBudget(rates: rates, logger: .init(label: "test")) { bucket, interval in
            try await slots.reserveRequestSlot(bucket: bucket, interval: interval)
        }
    }

    @Test(
        """
        A burst of 30 order lookups (from two support agents' budgets on PostgreSQL, one process on SQLite) and \
        30 token bindings meet no 429 from endpoints limited to Apple's 10 and 20 per second, and each answer \
        is right; the same lookups spaced only by the status budget are refused
        """,
        arguments: Backend.available)
    func burstsStayUnderTheEndpointLimits(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let purchases = h.state.makeLostPurchases(
                count: 30, prefix: "limits-\(backend)", start: h.state.now - 3_600)
            h.state.setEndpointRateLimit(SimulatorState.Endpoint.lookup, perSecond: 10)
            h.state.setEndpointRateLimit(SimulatorState.Endpoint.appAccountToken, perSecond: 20)
            let agents = backend == .postgres ? 2 : 1
            let lookUpBudgets = try (0..<agents).map { _ in
                try Self.budget(OrderEndpoints.lookUp.rates, store: h.store)
            }
            let tokenBudget = try Self.budget(OrderEndpoints.setAppAccountToken.rates, store: h.store)
            let token = try #require(UUID(uuidString: "7e3fb20b-4cdb-47cc-936d-99d65f608138"))
            try await h.withServerAPIClient(maxAttempts: 1) { client in
                let found = await withTaskGroup(of: Bool.self) { group in
                    for (index, purchase) in purchases.enumerated() {
                        group.addTask {
                            let answer = await client.lookUpOrder(
                                orderID: purchase.orderID, endpointBudget: lookUpBudgets[index % agents],
                                logger: h.logger)
                            guard case .success(.found(.production, let transactions, [])) = answer else {
                                return false
                            }
                            return transactions.map(\.originalTransactionId) == [purchase.originalTransactionID]
                        }
                    }
                    return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
                }
                #expect(found == purchases.count)
                let bound = await withTaskGroup(of: Bool.self) { group in
                    for purchase in purchases {
                        group.addTask {
                            let answer = await client.setAppAccountToken(
                                originalTransactionID: purchase.originalTransactionID, token: token,
                                environment: .production, endpointBudget: tokenBudget, logger: h.logger)
                            if case .success = answer { return true }
                            return false
                        }
                    }
                    return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
                }
                #expect(bound == purchases.count)
                #expect(h.state.serverAPIStats.rateLimited == 0, "\(h.state.serverAPIStats)")
                #expect(
                    purchases.allSatisfy {
                        h.state.appAccountTokenChanges(of: $0.originalTransactionID).last?.token
                            == token.uuidString.lowercased()
                    })

                // The same burst with only the status budget's spacing: Apple's lookup limit refuses some.
                let unspaced = LocalRequestBudget(rates: RequestRates(production: 1_000, sandbox: 1_000))
                await withTaskGroup(of: Void.self) { group in
                    for purchase in purchases {
                        group.addTask {
                            _ = await client.lookUpOrder(
                                orderID: purchase.orderID, endpointBudget: unspaced, logger: h.logger)
                        }
                    }
                }
                #expect(h.state.serverAPIStats.rateLimited > 0, "the simulator's limit is real")
            }
        }
    }

    @Test(
        """
        lookUpOrder asks production only (Apple does not serve Look Up Order ID in the sandbox): an unknown \
        order and a sandbox purchase's order are invalid, one request each, none to the sandbox
        """)
    func environments() async throws {
        try await JobHarness.with { h in
            let sandbox = h.state.makeLostPurchases(count: 1, prefix: "env-sandbox", scenario: .sandbox)[0]
            try await h.withServerAPIClient { client in
                let unknown = await client.lookUpOrder(orderID: "MZZZZZZZZZ", logger: h.logger)
                #expect(unknown == .success(.invalidOrder))
                let found = await client.lookUpOrder(orderID: sandbox.orderID, logger: h.logger)
                #expect(found == .success(.invalidOrder))
            }
            #expect(h.state.serverAPIStats.orderLookups == 2)
            #expect(h.state.serverAPIStats.sandbox == 0)
        }
    }
}
