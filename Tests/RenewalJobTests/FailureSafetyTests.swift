import AppStoreSimulator
import Foundation
import InMemoryLogging
import Logging
import RenewalCore
import RenewalJob
import RenewalStorage
import Testing

@Suite("Apple failures never change an entitlement")
struct FailureSafetyTests {
    /// The columns that make up an entitlement.
    struct Entitlement: Equatable {
        var state: SubscriptionState
        var entitled: Bool
        var expiresAt: Date?
        var autoRenew: Bool?
        var environment: AppStoreEnvironment?
        var productID: String?

        init(_ row: StatusRow) {
            state = row.state
            entitled = row.entitled
            expiresAt = row.expiresAt
            autoRenew = row.autoRenew
            environment = row.environment
            productID = row.productID
        }
    }

    @Test(
        "An outage or garbage answer for a known active subscription leaves it exactly as it was",
        arguments: [SimulatorState.Fault.outage, .html200, .status21005])
    func faultKeepsState(fault: SimulatorState.Fault) async throws {
        try await JobHarness.with { h in
            try await h.importReceipts([("paying", h.receipt("paying", .renewal, daysAgo: 25))])
            _ = try await h.run()
            let before = try await h.status().map(Entitlement.init)
            #expect(before.first?.state == .active)

            // Apple fails while the paid period ends: the job must not expire the customer
            h.state.advance(by: 10 * 86_400)
            h.state.fault = fault
            let outcome = try await h.run { $0.reportPath = h.directory + "/r.json" }

            #expect(outcome.status == .completedWithFailures)
            #expect(outcome.counts.failed == 1)
            #expect(outcome.counts.changed == 0)
            #expect(try await h.status().map(Entitlement.init) == before)
            let stored = try #require(try await h.receipts().first)
            #expect(stored.consecutiveFailures == 1)
            #expect(stored.nextCheckAt > h.state.now)

            // and it is retried later: once Apple is back, the renewal shows up
            h.state.fault = .none
            h.state.advance(by: 6 * 3600)
            let recovered = try await h.run()
            #expect(recovered.counts.checked == 1)
            #expect(try await h.status().first?.expiresAt ?? .distantPast > before.first?.expiresAt ?? .distantFuture)
        }
    }

    @Test("A wrong shared secret (21004) stops the run with nothing changed")
    func wrongSharedSecret() async throws {
        try await JobHarness.with(clientSecret: "not-the-secret") { h in
            try await h.importReceipts((0..<20).map { ("u\($0)", h.receipt("a\($0)", .renewal)) })
            let before = try await h.receipts()

            let outcome = try await h.run { $0.concurrency = 8 }

            #expect(outcome.status == .sharedSecretRejected)
            #expect(outcome.status.exitCode == 78)
            #expect(outcome.counts.checked == 0)
            #expect(try await h.receipts() == before)
            #expect(h.state.stats.requests == 1, "only the first receipt is sent before the window opens")
            #expect(!h.logs.entries.contains { "\($0.message)\($0.metadata)".contains("not-the-secret") })
        }
    }

    @Test("When Apple keeps failing the circuit breaker stops the run and unverified rows stay exactly as they were")
    func circuitBreaker() async throws {
        try await JobHarness.with { h in
            try await h.importReceipts((0..<60).map { ("u\($0)", h.receipt("a\($0)", .renewal)) })
            h.state.fault = .outage
            let before = try await h.receipts()

            let outcome = try await h.run {
                $0.circuitBreaker = CircuitBreaker.Configuration(threshold: 5)
                $0.reportPath = h.directory + "/r.json"
            }

            #expect(outcome.status == .abortedAppleUnavailable)
            #expect(outcome.status.exitCode == 4)
            #expect(outcome.counts.changed == 0)
            #expect(h.state.stats.requests < 60 * 2, "stopped claiming work")
            #expect(try await h.receipts() == before, "no failure counters, schedules or leases were written")
            #expect(h.logs.entries.contains { $0.level == .error && "\($0.message)".contains("circuit breaker") })
        }
    }

    @Test("Logs never carry the shared secret or a receipt")
    func logsCarryNoSecrets() async throws {
        try await JobHarness.with { h in
            let receipts = [
                ("a", h.receipt("a", .renewal)), ("b", h.receipt("b", .truncatedJSON)),
                ("c", h.receipt("c", .malformed)),
            ]
            try await h.importReceipts(receipts)
            _ = try await h.run { $0.reportPath = h.directory + "/r.json" }
            let logText = h.logs.entries.map { "\($0.message) \($0.metadata)" }.joined(separator: "\n")
            #expect(!logText.isEmpty)
            let report = String(
                decoding: FileManager.default.contents(atPath: h.directory + "/r.json") ?? Data(), as: UTF8.self)
            for text in [logText, report] {
                #expect(!text.contains(JobHarness.secret))
                for (_, receipt) in receipts { #expect(!text.contains(receipt.encoded)) }
            }
        }
    }

    @Test("21002 on every check marks a never-verified receipt invalid only after it persists across checks and days")
    func persistentMalformedBecomesInvalid() async throws {
        try await JobHarness.with { h in
            try await h.importReceipts([("junk", h.receipt("junk", .malformed))])
            // Checks 30 h apart: the third is past the check count but inside the 3-day span.
            for check in 1...4 {
                let outcome = try await h.run()
                #expect(outcome.counts.checked == 1, "check \(check)")
                let row = try #require(try await h.status().first)
                #expect(row.state == (check < 4 ? .unverified : .invalid), "check \(check)")
                h.state.advance(by: 30 * 3600)
            }
        }
    }

    @Test("Backfill re-checks the selected receipts whatever their schedule")
    func backfillSelectors() async throws {
        try await JobHarness.with { h in
            try await h.importReceipts([
                ("a", h.receipt("a", .renewal)), ("b", h.receipt("b", .voluntaryExpiry)),
                ("c", h.receipt("c", .sandbox)),
            ])
            _ = try await h.run()
            #expect(try await h.run().counts.checked == 0)

            #expect(try await h.run(.backfill(BackfillSelector(userIDs: ["b"]))).counts.checked == 1)
            #expect(try await h.run(.backfill(BackfillSelector(environment: .sandbox))).counts.checked == 1)
            #expect(try await h.run(.backfill(BackfillSelector(all: true))).counts.checked == 3)
            #expect(
                try await h.run(.backfill(BackfillSelector(all: true)), configure: { $0.limit = 2 }).counts.checked == 2
            )
        }
    }
}
