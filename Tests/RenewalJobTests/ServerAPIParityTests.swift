import AppStoreSimulator
import Foundation
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalServerAPI
import RenewalSQL
import RenewalSQLite
import RenewalStorage
import Testing

/// The same customers, the same simulated history, read by verifyReceipt into one database and by the
/// App Store Server API (through `--source auto`) into another: every subscription must end in the
/// same state with the same facts, and the same change events must be recorded, at every step.
@Suite("Server API and verifyReceipt: one meaning for both sources")
struct ServerAPIParityTests {
    /// Every scenario of the verifyReceipt suite that Apple answers with a subscription.
    static let subscriptionScenarios: [Scenario] = [
        .renewal, .voluntaryExpiry, .billingRetry, .gracePeriod, .billingRecovery, .refund, .upgrade, .sandbox,
        .familyShared, .trial, .legacyIOS6, .multipleSubscriptions, .transient21005,
    ]
    /// Scenarios the Server API does not know (404 in both environments): `auto` asks verifyReceipt.
    static let fallbackScenarios: [Scenario] = [.accountNotFound, .notAuthentic, .malformed]

    struct Facts: Equatable, CustomStringConvertible {
        var state: SubscriptionState
        var productID: String?
        var expiresAt: Date?
        var autoRenew: Bool?
        var cancelledAt: Date?
        var isInBillingRetry: Bool
        var gracePeriodExpiresAt: Date?
        var ownershipType: String?
        var environment: String?
        var isTrial: Bool

        init(_ snapshot: SubscriptionSnapshot) {
            state = snapshot.state
            productID = snapshot.productID
            expiresAt = snapshot.expiresAt
            autoRenew = snapshot.autoRenew
            cancelledAt = snapshot.cancelledAt
            isInBillingRetry = snapshot.isInBillingRetry
            gracePeriodExpiresAt = snapshot.gracePeriodExpiresAt
            // iOS 6 answers predate Family Sharing and name no ownership; the Server API always does.
            ownershipType = snapshot.ownershipType ?? "PURCHASED"
            environment = snapshot.environment?.rawValue
            isTrial = snapshot.isTrialPeriod
        }

        var description: String {
            """
            \(state) \(productID ?? "-") exp=\(expiresAt.map { "\($0)" } ?? "-") \
            renew=\(autoRenew.map { "\($0)" } ?? "-") cancelled=\(cancelledAt.map { "\($0)" } ?? "-") \
            retry=\(isInBillingRetry) grace=\(gracePeriodExpiresAt.map { "\($0)" } ?? "-") \
            \(ownershipType ?? "-") \(environment ?? "-") trial=\(isTrial)
            """
        }
    }

    /// Per user: the receipt's status, and each subscription's facts by original transaction id.
    static func facts(in store: any SubscriptionStore) async throws -> [String: [String: String]] {
        var result: [String: [String: String]] = [:]
        var cursor: ReceiptCursor?
        while true {
            let page = try await store.nextBatch(
                .backfill(BackfillSelector(all: true)), after: cursor, limit: 100, lease: nil)
            for receipt in page {
                var facts = Dictionary(
                    receipt.subscriptions.map { ($0.snapshot.originalTransactionID, Facts($0.snapshot).description) },
                    uniquingKeysWith: { a, _ in a })
                facts["receipt status"] = receipt.status.rawValue
                result[receipt.userID] = facts
            }
            guard let last = page.last else { return result }
            cursor = last.cursor
        }
    }

    static func sources(in store: any SubscriptionStore) async throws -> [String: CheckSource?] {
        var result: [String: CheckSource?] = [:]
        var cursor: ReceiptCursor?
        while true {
            let page = try await store.nextBatch(
                .backfill(BackfillSelector(all: true)), after: cursor, limit: 100, lease: nil)
            for receipt in page { result[receipt.userID] = receipt.source }
            guard let last = page.last else { return result }
            cursor = last.cursor
        }
    }

    static func changeKinds(_ outcome: RenewalOutcome, _ h: JobHarness) throws -> [String] {
        let report = try h.report(outcome)
        let changes = report["changes"] as? [[String: Any]] ?? []
        return changes.map {
            "\($0["user_id"] ?? "")/\($0["original_transaction_id"] ?? "")/\($0["kind"] ?? ""):\($0["from_state"] ?? "")→\($0["to_state"] ?? "")"
        }.sorted()
    }

    @Test(
        """
        Every scenario, at every step of its history, gives the same subscriptions and the same changes whichever \
        API read it
        """
    )
    func sameStatesWhicheverSource() async throws {
        try await JobHarness.with { h in
            let serverStore = try SQLiteSubscriptionStore.open(path: h.directory + "/server-api.sqlite", create: true)
            _ = try await serverStore.migrate()
            var receipts: [(String, SimulatedReceipt)] = []
            for (index, scenario) in (Self.subscriptionScenarios + Self.fallbackScenarios).enumerated() {
                for daysAgo in [5.0, 25, 44] {
                    receipts.append(
                        (
                            "u-\(scenario.rawValue)-\(Int(daysAgo))",
                            h.receipt("acct-\(index)-\(Int(daysAgo))", scenario, daysAgo: daysAgo)
                        ))
                }
            }
            try await h.importReceipts(receipts)
            _ = try await serverStore.importReceipts(
                receipts.map { ReceiptImport(userID: $0.0, latestReceipt: $0.1.encoded, productID: $0.1.productID) },
                now: h.state.now)

            try await h.withServerAPIClient { serverAPI in
                let auto = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: serverAPI)
                var migratedTotal = 0
                for step in 0..<4 {
                    let reportA = h.directory + "/verify-\(step).json", reportB = h.directory + "/server-\(step).json"
                    let backfill = RenewalRun.Command.backfill(BackfillSelector(all: true))
                    let viaVerifyReceipt = try await h.run(backfill, verifier: h.client) { $0.reportPath = reportA }
                    let viaServerAPI = try await h.run(backfill, store: serverStore, verifier: auto) {
                        $0.reportPath = reportB
                    }
                    migratedTotal += viaServerAPI.counts.migrated

                    let expected = try await Self.facts(in: h.store)
                    let found = try await Self.facts(in: serverStore)
                    for (user, subscriptions) in expected.sorted(by: { $0.key < $1.key }) {
                        #expect(
                            found[user] == subscriptions,
                            "step \(step), \(user): verifyReceipt \(subscriptions) ≠ Server API \(found[user] ?? [:])")
                    }
                    #expect(
                        try Self.changeKinds(viaServerAPI, h) == Self.changeKinds(viaVerifyReceipt, h),
                        "step \(step): different changes")
                    #expect(viaServerAPI.counts.failed == viaVerifyReceipt.counts.failed, "step \(step)")
                    h.state.advance(by: 9 * 86_400)
                }
                // Every subscription scenario moved to the Server API, on its first check, once.
                let sources = try await Self.sources(in: serverStore)
                for (user, receipt) in receipts {
                    let expected: CheckSource? =
                        Self.fallbackScenarios.contains(receipt.scenario) ? .verifyReceipt : .serverAPI
                    // 21002 every time ends `invalid` after days: verifyReceipt's word too.
                    #expect(sources[user] == expected, "\(user): \(String(describing: sources[user]))")
                }
                let subscriptionRows = receipts.filter { Self.subscriptionScenarios.contains($0.1.scenario) }.count
                #expect(migratedTotal == subscriptionRows)
                let stats = h.state.serverAPIStats
                print(
                    """
                    figures[server api parity]: \(receipts.count) receipts × 4 steps; server api requests \
                    \(stats.requests) (production \(stats.production), sandbox \(stats.sandbox), not found \
                    \(stats.notFound)); migrated \(migratedTotal); chain cache hits \
                    \(serverAPI.verifier.cacheStatistics.hits), misses \
                    \(serverAPI.verifier.cacheStatistics.misses)
                    """
                )
            }
        }
    }
}

@Suite("Server API answers that do not verify change nothing")
struct ServerAPISignedDataJobTests {
    @Test(
        """
        Signed data chaining to a root the job does not trust fails every check with jws_untrusted_chain and \
        keeps every state; the trusted root then records the change
        """
    )
    func untrustedChainChangesNothing() async throws {
        try await JobHarness.with { h in
            let receipts = [
                ("refunded", h.receipt("sig-refund", .refund, daysAgo: 40)),
                ("renewing", h.receipt("sig-renew", .renewal, daysAgo: 25)),
            ]
            try await h.importReceipts(receipts)
            _ = try await h.run(verifier: h.client)
            let before = try await ServerAPIParityTests.facts(in: h.store)
            // The refund happens at 1.5 periods (45 days) and the renewal at 30 days: both would change.
            h.state.advance(by: 8 * 86_400)

            let foreignRoot = try SigningChain.generate(name: "not apple").root
            var configuration = ServerAPIClient.Configuration(
                keyID: h.serverAPI.keyID, issuerID: h.serverAPI.issuerID, bundleID: SimulatedReceipt.bundleID,
                privateKey: h.serverAPI.apiKey,
                productionURL: h.endpoints.serverAPIURL, sandboxURL: h.endpoints.sandboxServerAPIURL,
                rootCertificates: [foreignRoot],
                requestTimeout: .seconds(30), maxAttempts: 1)
            let rejected = try await ServerAPIClient.withServerAPIClient(configuration: configuration) { client in
                try await h.run(
                    .backfill(BackfillSelector(all: true)),
                    verifier: SourceRouter(mode: .serverAPI, verifyReceipt: h.client, serverAPI: client))
            }
            #expect(rejected.counts.failed == 2 && rejected.counts.changed == 0)
            let reasons = try await EvidenceRulesTests.failures(h, run: rejected).map(\.failure.reason)
            #expect(reasons == ["jws_untrusted_chain", "jws_untrusted_chain"])
            #expect(try await ServerAPIParityTests.facts(in: h.store) == before)
            #expect(h.state.stats.requests == 2, "verifyReceipt was not asked instead")

            configuration.rootCertificates = [h.serverAPI.chain.root]
            let accepted = try await ServerAPIClient.withServerAPIClient(configuration: configuration) { client in
                try await h.run(
                    .backfill(BackfillSelector(all: true)),
                    verifier: SourceRouter(mode: .serverAPI, verifyReceipt: h.client, serverAPI: client))
            }
            #expect(accepted.counts.failed == 0 && accepted.counts.migrated == 2)
            let after = try await ServerAPIParityTests.facts(in: h.store)
            #expect(after["refunded"]?.values.contains { $0.hasPrefix("revoked") } == true, "\(after)")
        }
    }
}

@Suite("Server API rate limiting from Apple's side")
struct ServerAPIRetryAfterTests {
    @Test("HTTP 429 pauses the environment until Retry-After (UNIX ms), then the checks go through")
    func retryAfterIsHonoured() async throws {
        try await JobHarness.with { h in
            let receipts = (0..<6).map { ("ra-\($0)", h.receipt("ra-\($0)", .renewal)) }
            try await h.importReceipts(receipts)
            h.state.serverAPIRateLimit = 2
            let started = ContinuousClock.now
            let outcome = try await h.withServerAPIClient(maxAttempts: 4) { client in
                try await h.run(verifier: SourceRouter(mode: .serverAPI, verifyReceipt: h.client, serverAPI: client))
            }
            let elapsed = ContinuousClock.now - started
            #expect(outcome.counts.failed == 0 && outcome.counts.migrated == 6, "\(outcome.counts)")
            #expect(h.state.serverAPIStats.rateLimited > 0, "the simulated limit was reached")
            // Six requests at two per second: the last ones waited out at least one Retry-After.
            #expect(elapsed >= .seconds(1), "\(elapsed)")
            #expect(h.state.stats.requests == 0, "verifyReceipt was never asked")
        }
    }
}
