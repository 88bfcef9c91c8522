import AppStoreSimulator
import Foundation
import InMemoryLogging
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalStorage
import Testing

/// Renewal-date extensions through `RenewalExtensions`, on SQLite and PostgreSQL against the simulator's
/// Extend a Subscription Renewal Date.
@Suite("Renewal-date extensions: eligible subscribers extended once per intent, the new date through the decision")
struct RenewalExtensionTests {
    static let day: TimeInterval = 86_400

    @Test(
        """
        A dry run names who would be extended and who cannot be, and why, and sends nothing; the real one extends \
        each eligible subscriber once, a second invocation of the same intent sends nothing, Apple's refusal \
        (over the yearly limit) is recorded with its code, and the extended renewal date enters the database \
        through a status check and the feed's RENEWAL_EXTENDED
        """,
        arguments: Backend.available)
    func extendOncePerIntent(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let receipts: [(String, SimulatedReceipt)] = [
                ("ana", h.receipt("ext-ana", .renewal, daysAgo: 10)),
                ("ben", h.receipt("ext-ben", .renewal, daysAgo: 20)),
                ("tia", h.receipt("ext-tia", .trial, daysAgo: 2)),
                ("fay", h.receipt("ext-fay", .familyShared, daysAgo: 10)),
                ("vic", h.receipt("ext-vic", .voluntaryExpiry, daysAgo: 40)),
                ("max", h.receipt("ext-max", .assignedSeat, daysAgo: 10)),
            ]
            try await h.importReceipts(receipts)
            // Ben's subscription was extended twice this year by someone else: Apple refuses a third.
            let ben = receipts[1].1
            for n in 0..<2 {
                let granted = h.state.extendRenewalDate(
                    originalTransactionID: ben.originalTransactionID, days: 1,
                    requestIdentifier: "elsewhere-\(n)")
                #expect(granted)
            }
            let requestsBefore = h.state.extensionRequests.count
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                _ = try await h.run(.run, verifier: router) { $0.feed = client }
                let extensions = RenewalExtensions(
                    store: h.store, extenders: [nil: client], logger: h.logger, now: { h.state.now })
                let users = receipts.map(\.0) + ["nobody"]
                let request = RenewalExtensions.Request(intent: "outage-1", days: 7, reason: 3, userIDs: users)

                let dry = try await extensions.run(request, dryRun: true)
                let judged = Dictionary(uniqueKeysWithValues: dry.map { ($0.userID, $0.outcome.name) })
                #expect(
                    judged == [
                        "ana": "would_extend", "ben": "would_extend", "tia": "ineligible:free_trial",
                        "fay": "ineligible:family_shared", "vic": "ineligible:not_active",
                        "max": "ineligible:assigned_seat", "nobody": "no_subscription",
                    ], "\(judged)")
                #expect(h.state.extensionRequests.count == requestsBefore, "a dry run sends nothing")

                let anaBefore = try #require(try await h.status(user: "ana").first?.expiresAt)
                let first = try await extensions.run(request, dryRun: false)
                let outcomes = Dictionary(uniqueKeysWithValues: first.map { ($0.userID, $0.outcome) })
                guard case .extended = outcomes["ana"] else {
                    Issue.record("ana: \(String(describing: outcomes["ana"]))")
                    return
                }
                #expect(outcomes["ben"] == .rejected(code: 4_030_005, reason: "http_403"), "\(first)")
                #expect(h.state.extensionRequests.count == requestsBefore + 2)

                // The same intent again: nothing is sent, each ends as before.
                let again = try await extensions.run(request, dryRun: false)
                #expect(h.state.extensionRequests.count == requestsBefore + 2)
                #expect(again.first { $0.userID == "ana" }?.outcome == .alreadyExtended)
                #expect(again.first { $0.userID == "ben" }?.outcome == .rejected(code: 4_030_005, reason: "http_403"))

                // The new date through the decision: a status check shows it, the feed confirms the request.
                _ = try await h.run(.backfill(BackfillSelector(userIDs: ["ana"])), verifier: router)
                let anaAfter = try #require(try await h.status(user: "ana").first?.expiresAt)
                #expect(anaAfter.timeIntervalSince(anaBefore) == 7 * Self.day, "\(anaBefore) -> \(anaAfter)")
                h.state.advance(by: 3_600)
                _ = try await h.run(.run, verifier: router) { $0.feed = client }
                let rows = try await DashboardViewsTests.query(
                    h, "SELECT user_id, state, confirmed_at, apple_error_code FROM renewal_extensions ORDER BY user_id")
                #expect(rows.map { DashboardViewsTests.text($0, "state") } == ["succeeded", "rejected"])
                #expect(DashboardViewsTests.int(rows[0], "confirmed_at") != nil, "RENEWAL_EXTENDED confirmed it")
                #expect(DashboardViewsTests.int(rows[1], "apple_error_code") == 4_030_005)

                // A second intent: Ana's second extension of the year goes; a third is refused before it is sent.
                let second = try await extensions.run(
                    RenewalExtensions.Request(intent: "outage-2", days: 3, reason: 3, userIDs: ["ana"]), dryRun: false)
                guard case .extended = second.first?.outcome else {
                    Issue.record("\(second)")
                    return
                }
                let third = try await extensions.run(
                    RenewalExtensions.Request(intent: "outage-3", days: 3, reason: 3, userIDs: ["ana"]), dryRun: false)
                #expect(third.first?.outcome == .ineligible(.yearlyLimit), "\(third)")
                #expect(h.state.extensionRequests.count == requestsBefore + 3)
            }
        }
    }

    @Test(
        """
        A mass extension of a product in one storefront: the dry run lists its subscribers and who Apple would not \
        extend; the request is sent once, a second invocation of the intent sends nothing, and later runs follow \
        it to completion with Apple's counts while the feed's RENEWAL_EXTENDED moves each subscriber's stored \
        renewal date; other storefronts and products are untouched
        """,
        arguments: Backend.available)
    func massExtensionFollowedToCompletion(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            var receipts: [(String, SimulatedReceipt)] = (0..<4).map { i in
                ("usa-\(i)", h.receipt("mass-usa-\(i)", .renewal, daysAgo: 5 + Double(i)))
            }
            receipts.append(("usa-trial", h.receipt("mass-trial", .trial, daysAgo: 2)))
            var french = h.receipt("mass-fra", .renewal, daysAgo: 6)
            french.storefront = "FRA"
            receipts.append(("fra", french))
            receipts.append(
                (
                    "yearly",
                    SimulatedReceipt(
                        account: "mass-yearly", scenario: .renewal,
                        start: h.state.now.addingTimeInterval(-9 * Self.day),
                        period: 365 * Self.day, productID: "com.example.pro.yearly")
                ))
            try await h.importReceipts(receipts)
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                func run() async throws -> RenewalCounts {
                    try await h.run(.run, verifier: router) {
                        $0.feed = client
                        $0.operatorActions = client
                    }.counts
                }
                _ = try await run()
                let before = Dictionary(
                    uniqueKeysWithValues: try await h.status().map { ($0.userID, $0.expiresAt ?? .distantPast) })
                let mass = RenewalExtensions(
                    store: h.store, extenders: [nil: client], logger: h.logger, now: { h.state.now })
                let request = RenewalExtensions.MassRequest(
                    intent: "outage-mass", days: 5, reason: 3, productID: "com.example.pro.monthly",
                    storefronts: ["USA"])
                var listed: [String: String] = [:]
                try await mass.forEachSubscriber(request) { line, _ in listed[line.userID] = line.outcome.name }
                #expect(
                    listed == [
                        "usa-0": "would_extend", "usa-1": "would_extend", "usa-2": "would_extend",
                        "usa-3": "would_extend", "usa-trial": "ineligible:free_trial",
                    ], "\(listed)")
                #expect(h.state.massExtensions.isEmpty, "the dry run sends nothing")

                #expect(try await mass.runMass(request) == .accepted)
                #expect(h.state.massExtensions.count == 1)
                guard case .inProgress = try await mass.runMass(request) else {
                    Issue.record("a second invocation of the intent is not in progress")
                    return
                }
                #expect(h.state.massExtensions.count == 1)

                // Apple works on it for two hours; runs every 40 minutes follow it.
                var states: [String] = []
                for _ in 0..<5 {
                    h.state.advance(by: 40 * 60)
                    _ = try await run()
                    let row = try #require(
                        try await DashboardViewsTests.query(
                            h, "SELECT state, succeeded_count, failed_count, status_checks FROM renewal_mass_extensions"
                        ).first)
                    states.append(DashboardViewsTests.text(row, "state") ?? "?")
                }
                #expect(states.first == "accepted" && states.last == "complete", "\(states)")
                let row = try #require(
                    try await DashboardViewsTests.query(
                        h, "SELECT succeeded_count, failed_count, status_checks FROM renewal_mass_extensions"
                    ).first)
                #expect(DashboardViewsTests.int(row, "succeeded_count") == 4)
                #expect(DashboardViewsTests.int(row, "failed_count") == 1)
                #expect(
                    (DashboardViewsTests.int(row, "status_checks") ?? 0) >= 1,
                    "runs asked Apple's status: \(h.logs.entries.filter { "\($0.message)".contains("Mass") })")
                for (user, expires) in try await h.status().map({ ($0.userID, $0.expiresAt ?? .distantPast) }) {
                    let moved = expires.timeIntervalSince(before[user] ?? .distantPast)
                    if user.hasPrefix("usa-"), user != "usa-trial" {
                        #expect(moved == 5 * Self.day, "\(user) extended by 5 days: \(moved / Self.day)")
                    } else if user != "usa-trial" {
                        #expect(moved == 0, "\(user) untouched: \(moved / Self.day)")
                    }
                }
            }
        }
    }

    @Test(
        """
        A mass extension is judged as it is sent: one environment (production, unless the product has only \
        sandbox subscriptions), and the dry run after Apple accepted the intent's request says it is in progress \
        instead of listing; a subscriber's dry run after its extension says already_extended
        """,
        arguments: Backend.available)
    func dryRunJudgesAsTheRealCall(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let receipts: [(String, SimulatedReceipt)] = [
                ("ana", h.receipt("judge-ana", .renewal, daysAgo: 5)),
                ("tester", h.receipt("judge-tester", .sandbox, daysAgo: 5)),
                (
                    "beta",
                    SimulatedReceipt(
                        account: "judge-beta", scenario: .sandbox, start: h.state.now.addingTimeInterval(-5 * Self.day),
                        productID: "com.example.pro.beta")
                ),
            ]
            try await h.importReceipts(receipts)
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                _ = try await h.run(.run, verifier: router) { $0.feed = client }
                let extensions = RenewalExtensions(
                    store: h.store, extenders: [nil: client], logger: h.logger, now: { h.state.now })
                let monthly = RenewalExtensions.MassRequest(
                    intent: "judge", days: 3, reason: 3, productID: "com.example.pro.monthly", storefronts: [])
                var listed: [String] = []
                #expect(try await extensions.dryRunMass(monthly) { line, _ in listed.append(line.userID) } == nil)
                #expect(listed == ["ana"], "production only: \(listed)")
                var beta: [String] = []
                let betaRequest = RenewalExtensions.MassRequest(
                    intent: "judge", days: 3, reason: 3, productID: "com.example.pro.beta", storefronts: [])
                try await extensions.forEachSubscriber(betaRequest) { line, _ in beta.append(line.userID) }
                #expect(beta == ["beta"], "a product with sandbox subscriptions only goes to the sandbox: \(beta)")

                #expect(try await extensions.runMass(monthly) == .accepted)
                listed = []
                let again = try await extensions.dryRunMass(monthly) { line, _ in listed.append(line.userID) }
                guard case .inProgress = again else {
                    Issue.record("the dry run after an accepted request: \(String(describing: again))")
                    return
                }
                #expect(listed.isEmpty, "\(listed)")

                let request = RenewalExtensions.Request(intent: "one", days: 2, reason: 3, userIDs: ["ana"])
                guard case .extended = try await extensions.run(request, dryRun: false).first?.outcome else {
                    Issue.record("ana was not extended")
                    return
                }
                let dry = try await extensions.run(request, dryRun: true)
                #expect(dry.first?.outcome == .alreadyExtended, "\(dry)")
            }
        }
    }
}
