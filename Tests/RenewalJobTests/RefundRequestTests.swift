import AppStoreSimulator
import Foundation
import InMemoryLogging
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalStorage
import Testing

/// Apple's refund requests (`CONSUMPTION_REQUEST`) answered with Send Consumption Information, on SQLite and
/// PostgreSQL against the simulator.
@Suite("Refund requests: answered once, within 12 hours, only with the customer's recorded consent")
struct RefundRequestTests {
    static let hour: TimeInterval = 3_600
    static let day: TimeInterval = 86_400

    struct Customer {
        var user: String
        var receipt: SimulatedReceipt
        /// The import lines' `consumption_consent`, in order.
        var consents: [Bool]

        var consented: Bool { consents.last == true }
    }

    static func customers(_ h: JobHarness) -> [Customer] {
        // Ten customers whose requests fall on days 1, 4, … 28 of the month, and two whose request is
        // followed by a refund; every other one consented, one consented and then withdrew it.
        var customers = (0..<10).map { i in
            Customer(
                user: "rr-\(i)", receipt: h.receipt("rr-account-\(i)", .refundRequest, daysAgo: 35 - 3 * Double(i)),
                consents: i == 3 ? [true, false] : (i.isMultiple(of: 2) ? [true] : []))
        }
        for (i, consents) in [[true], [Bool]()].enumerated() {
            var receipt = h.receipt("rr-refund-\(i)", .refund, daysAgo: 40)
            receipt.refundRequested = true
            customers.append(Customer(user: "rr-refunded-\(i)", receipt: receipt, consents: consents))
        }
        return customers
    }

    @Test(
        """
        Over a simulated month with a run every four hours, every refund request of a customer with recorded \
        consent is answered once, within 12 hours of Apple's request, with delivery and consumption from the \
        job's data and the operator's preference; none is answered without consent (nor after consent was \
        withdrawn); Apple's decision is recorded as the outcome
        """,
        arguments: Backend.available)
    func simulatedMonth(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let customers = Self.customers(h)
            h.state.register(customers.map(\.receipt))
            // Consent comes with the import lines, in order; a later line's false withdraws it.
            for round in 0..<2 {
                let lines = customers.compactMap { customer -> ReceiptImport? in
                    guard round == 0 || customer.consents.count > round else { return nil }
                    var line = ReceiptImport(
                        userID: customer.user, latestReceipt: customer.receipt.encoded,
                        productID: customer.receipt.productID)
                    line.consumptionConsent = customer.consents.count > round ? customer.consents[round] : nil
                    if customer.user == "rr-2" {
                        // This app supplies its own figure for rr-2: it is sent instead of the job's.
                        line.consumptionPercentage = 55_000
                    }
                    return line
                }
                _ = try await h.store.importReceipts(lines, now: h.state.now)
            }
            let start = h.state.now
            var totals = RenewalCounts()
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                for _ in 0..<(31 * 6) {
                    let outcome = try await h.run(.run, verifier: router) {
                        $0.feed = client
                        $0.operatorActions = client
                        $0.refundPreference = .decline
                    }
                    totals.refundRequests += outcome.counts.refundRequests
                    totals.refundRequestsAnswered += outcome.counts.refundRequestsAnswered
                    totals.refundRequestsUnanswered += outcome.counts.refundRequestsUnanswered
                    totals.refundRequestsMissed += outcome.counts.refundRequestsMissed
                    h.state.advance(by: 4 * Self.hour)
                }
            }

            let answers = h.state.consumptionAnswers
            let requested = customers.filter { ($0.receipt.refundRequest?.at ?? .distantFuture) > start }
            #expect(requested.count == customers.count, "every request falls in the month")
            let expected = requested.filter(\.consented)
            #expect(expected.count == 6)
            #expect(totals.refundRequests == customers.count, "\(totals)")
            #expect(totals.refundRequestsAnswered == expected.count, "\(totals)")
            #expect(totals.refundRequestsUnanswered == customers.count - expected.count, "\(totals)")
            #expect(totals.refundRequestsMissed == 0)
            #expect(answers.count == expected.count, "each consented request answered once: \(answers.count)")
            for customer in customers {
                let request = try #require(customer.receipt.refundRequest)
                let rows = try await DashboardViewsTests.query(
                    h,
                    """
                    SELECT transaction_id, state, outcome, answered_at, answer_by, sent, reason, revocation_type
                    FROM refund_requests WHERE user_id = '\(customer.user)'
                    """)
                let row = try #require(rows.first, "\(customer.user) has its request recorded")
                #expect(rows.count == 1)
                let transaction = try #require(DashboardViewsTests.text(row, "transaction_id"))
                let sent = answers.filter { $0.transactionID == transaction }
                #expect(DashboardViewsTests.text(row, "reason") == request.reason)
                if customer.consented {
                    #expect(DashboardViewsTests.text(row, "state") == "answered", "\(customer.user)")
                    let answer = try #require(sent.first, "\(customer.user) answered")
                    #expect(sent.count == 1)
                    #expect(answer.receivedAt.timeIntervalSince(request.at) <= 12 * Self.hour)
                    #expect(answer.customerConsented == true && answer.deliveryStatus == "DELIVERED")
                    #expect(answer.sampleContentProvided == false && answer.refundPreference == "DECLINE")
                    // Asked a fifth of the way into a period, or a day before the refund at mid-period.
                    let share =
                        customer.user == "rr-2" ? 55_000 : customer.receipt.scenario == .refundRequest ? 20_000 : 46_667
                    #expect(answer.consumptionPercentage == share, "\(customer.user): \(answer)")
                    let answeredBy = try #require(DashboardViewsTests.int(row, "answered_at"))
                    #expect(answeredBy <= DashboardViewsTests.int(row, "answer_by") ?? 0)
                } else {
                    #expect(DashboardViewsTests.text(row, "state") == "no_consent", "\(customer.user)")
                    #expect(sent.isEmpty, "\(customer.user) never answered without consent")
                    #expect(DashboardViewsTests.text(row, "sent") == nil)
                }
                let outcome = customer.receipt.scenario == .refund ? "refunded" : "refund_declined"
                #expect(DashboardViewsTests.text(row, "outcome") == outcome, "\(customer.user)")
                if customer.receipt.scenario == .refund {
                    #expect(DashboardViewsTests.text(row, "revocation_type") == "REFUND_FULL")
                }
            }
            // The dashboards' view counts them.
            let view = try await DashboardViewsTests.query(
                h,
                "SELECT state, SUM(requests) AS n, SUM(answered_in_time) AS on_time FROM refund_request_outcomes GROUP BY state"
            )
            let answered = view.first { DashboardViewsTests.text($0, "state") == "answered" }
            #expect(answered.flatMap { DashboardViewsTests.int($0, "n") } == expected.count)
            #expect(answered.flatMap { DashboardViewsTests.int($0, "on_time") } == expected.count)
        }
    }

    @Test(
        """
        An outage of Apple's API leaves a request to a later run, which answers it within the 12 hours; a request \
        still unanswered when its 12 hours are up is recorded as missed, counted and logged as an error, and never \
        answered late
        """,
        arguments: Backend.available)
    func outageRetriesThenMisses(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            // Requests an hour and ten hours from now (a fifth into the second period of 30 days).
            let early = h.receipt("rr-early", .refundRequest, daysAgo: 36 - 1.0 / 24)
            let late = h.receipt("rr-late", .refundRequest, daysAgo: 36 - 10.0 / 24)
            h.state.register([early, late])
            _ = try await h.store.importReceipts(
                [("early", early), ("late", late)].map { user, receipt in
                    var line = ReceiptImport(userID: user, latestReceipt: receipt.encoded, productID: receipt.productID)
                    line.consumptionConsent = true
                    return line
                }, now: h.state.now)
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                func run(at hours: Double, fault: SimulatorState.Fault) async throws -> RenewalCounts {
                    h.state.advance(by: hours * Self.hour - h.state.now.timeIntervalSince(start))
                    h.state.fault = fault
                    return try await h.run(.run, verifier: router) {
                        $0.feed = client
                        $0.operatorActions = client
                    }.counts
                }
                let start = h.state.now
                _ = try await run(at: 0, fault: .none)
                var counts = try await run(at: 2, fault: .outage)
                #expect(counts.refundRequests == 1 && counts.refundRequestsAnswered == 0, "\(counts)")
                counts = try await run(at: 11, fault: .outage)
                #expect(counts.refundRequests == 1 && counts.refundRequestsAnswered == 0, "\(counts)")
                counts = try await run(at: 14, fault: .outage)
                #expect(counts.refundRequestsMissed == 1, "the first request's 12 hours are up: \(counts)")
                counts = try await run(at: 15, fault: .none)
                #expect(counts.refundRequestsAnswered == 1 && counts.refundRequestsMissed == 0, "\(counts)")
                counts = try await run(at: 20, fault: .none)
                #expect(counts.refundRequestsAnswered == 0, "nothing is answered twice, nor late: \(counts)")
            }
            let answers = h.state.consumptionAnswers
            #expect(answers.count == 1, "\(answers)")
            let states = try await DashboardViewsTests.query(
                h, "SELECT user_id, state, attempts, last_error FROM refund_requests ORDER BY user_id")
            // "early" missed its 12 hours, "late" was answered once Apple was back.
            #expect(states.map { DashboardViewsTests.text($0, "state") } == ["missed", "answered"])
            #expect((DashboardViewsTests.int(states[0], "attempts") ?? 0) >= 2, "tried on each run before its end")
            #expect(
                h.logs.entries.contains {
                    $0.level == .error && "\($0.message)".contains("Refund request missed")
                })
        }
    }
}
