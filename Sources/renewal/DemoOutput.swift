import AppStoreSimulator
import Foundation
import RenewalCore
import RenewalJob
import RenewalReports
import RenewalStorage

/// The demo's human-readable output, built from the runs' JSON reports.
struct DemoOutput {
    func header(endpoints: SimulatorEndpoints, databasePath: String, customers: [DemoData.Customer]) {
        print("renewal demo: the real job, a real SQLite file, the App Store simulator on \(endpoints.productionURL)")
        print("")
        print("Imported \(customers.count) sample customers:")
        for customer in customers {
            print("  \(pad(customer.userID, 12)) \(pad(customer.receipt.scenario.rawValue, 24)) \(customer.story)")
        }
    }

    /// The migration run's summary: rows moved, and what stayed on verifyReceipt.
    func migration(outcome: RenewalOutcome, cacheHits: Int) {
        let c = outcome.counts
        print(
            "  migrated \(c.migrated) receipts to the App Store Server API (signed answers verified, "
                + "\(cacheHits) from the chain cache);"
        )
        print("  the rest stay on verifyReceipt: receipts with no transaction id Apple knows, or that failed this time")
    }

    func run(number: Int, title: String, outcome: RenewalOutcome) throws {
        let c = outcome.counts
        print("")
        print("Run \(number): \(title)")
        print("  " + Self.countsLine(outcome))
        if let lag = c.feedLagSeconds {
            let fallback = (c.feedFallback ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
            print(
                "  change feed: \(c.notifications) new notifications (\(c.notificationsApplied) applied from their "
                    + "signed data, \(c.notificationsUnmatched) about unknown subscriptions), \(lag.formatted()) s behind; "
                    + (fallback.isEmpty
                        ? "healthy, Server API rows polled on the feed's long schedule"
                        : "polling on the full schedule (\(fallback.joined(separator: ", ")))")
            )
        }
        guard let path = outcome.reportPath, let data = FileManager.default.contents(atPath: path),
            let report = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return }
        changes(report["changes"] as? [[String: Any]] ?? [])
        for failure in report["failures"] as? [[String: Any]] ?? [] {
            print(
                "  \(pad(failure["user_id"] as? String ?? "?", 12)) "
                    + "failed: \(pad(failure["reason"] as? String ?? "?", 16)) state kept, retried later"
            )
        }
        for conflict in report["conflicts"] as? [[String: Any]] ?? [] {
            print(
                "  \(pad(conflict["user_id"] as? String ?? "?", 12)) conflict: shared_apple_id, subscription stays "
                    + "with \(conflict["owner_user_id"] as? String ?? "?")"
            )
        }
    }

    /// One line per change of a report's `changes`, as the runs print them.
    func changes(_ changes: [[String: Any]]) {
        var lastMove: String?
        for change in changes {
            let user = change["user_id"] as? String ?? "?"
            let kind = change["kind"] as? String ?? "?"
            let from = change["from_state"] as? String ?? "?"
            let to = change["to_state"] as? String ?? "?"
            // One answer's events share the subscription's one state move: shown on the first only.
            let move = [user, change["original_transaction_id"] as? String ?? "", from, to].joined(separator: "\u{1F}")
            let shownMove = move == lastMove ? "" : from + " -> " + to
            lastMove = move
            let expires = (change["new_expires_at"] as? String).map { "expires \($0.prefix(10))" } ?? ""
            let environment = change["environment"] as? String ?? ""
            var product = change["product_id"] as? String ?? "-"
            if let from = change["from_product_id"] as? String { product = from + " -> " + product }
            print(
                "  \(pad(user, 12)) \(pad(kind, 22)) \(pad(shownMove, 30)) "
                    + "\(pad(product, 32)) \(pad(expires, 19)) \(environment)"
            )
        }
    }

    /// Receipts first (they add up to the receipts checked), then the entitlement changes they made
    /// (the report's `changed`): one receipt can make several (a refund and auto-renew turned off).
    static func countsLine(_ outcome: RenewalOutcome) -> String {
        let c = outcome.counts
        return "checked \(c.checked) receipts: \(c.receiptsChanged) with changes, \(c.unchanged) unchanged, "
            + "\(c.failed) failed; changed \(c.changed); \(c.conflicts) "
            + "\(c.conflicts == 1 ? "conflict" : "conflicts") -> exit code \(outcome.status.exitCode) "
            + "(\(outcome.status.rawValue))"
    }

    /// The second app's customers, imported before run 8.
    func secondApp(_ customers: [DemoData.Customer]) {
        print("")
        print("Imported \(customers.count) customers of a second app, \(DemoData.macApp), into the same database:")
        for customer in customers {
            print("  \(pad(customer.userID, 12)) \(pad(customer.receipt.scenario.rawValue, 24)) \(customer.story)")
        }
    }

    /// Run 8's changes by app (the report's `bundle_id`).
    func byApp(_ outcome: RenewalOutcome) throws {
        guard let path = outcome.reportPath, let data = FileManager.default.contents(atPath: path),
            let report = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return }
        let changes = report["changes"] as? [[String: Any]] ?? []
        let byApp = Dictionary(grouping: changes) { $0["bundle_id"] as? String ?? "unknown" }
        print(
            "  by app: "
                + byApp.keys.sorted().map { "\($0) \(byApp[$0]?.count ?? 0) changes" }.joined(separator: ", ")
                + " (report --app, backfill --app and the views' bundle_id column split the same way)")
    }

    /// Run 7's refund request and seat refund: what Apple received, and what the job kept.
    func operatorActions(_ outcome: RenewalOutcome, state: SimulatorState) {
        let c = outcome.counts
        print(
            "  refund requests: \(c.refundRequests) read from the feed, \(c.refundRequestsAnswered) answered, "
                + "\(c.refundRequestsUnanswered) without consent, \(c.refundRequestsMissed) missed")
        for answer in state.consumptionAnswers {
            print(
                "  rita         consumption information sent: \(answer.deliveryStatus ?? "-"), "
                    + "\((answer.consumptionPercentage ?? 0) / 1000)% of the period used, consent recorded")
        }
        print("  olga         2 of 5 seats refunded (REFUND, SEATS): no change, the purchaser stays entitled")
    }

    /// The extensions sent after run 8.
    func extensions(_ lines: [RenewalExtensions.Line], mass: RenewalExtensions.MassOutcome) {
        print("")
        print("An outage on day 24: renewal extend --days 3 --reason 3 --user alice --user ivan")
        for line in lines {
            print("  \(pad(line.userID, 12)) \(line.outcome.name)")
        }
        print("renewal extend --days 3 --reason 3 --product com.example.pro.yearly --storefront FRA")
        print("  \(mass.name): Apple extends every yearly subscriber in France over two hours")
    }

    /// Run 9's view of the mass extension: `renewal extend` again says where it stands, sending nothing.
    func afterExtensions(_ outcome: RenewalOutcome, mass: RenewalExtensions.MassOutcome) {
        if case .complete(let succeeded, let failed) = mass {
            print(
                "  renewal extend --product again: the mass extension is complete, \(succeeded ?? 0) extended, "
                    + "\(failed ?? 0) failed; nothing sent")
        } else {
            print("  mass extension: \(mass.name)")
        }
    }

    /// The analytics of the demo's days, as `renewal analytics` prints them, and where the page is.
    func analytics(_ report: AnalyticsReport, rates: [String: Decimal], path: String) {
        let total = report.total
        let rateList = rates.keys.sorted().map { "\($0) \(rates[$0] ?? 0)" }.joined(separator: ", ")
        print("")
        print("Analytics of the demo's days (renewal analytics), in USD at the demo's rates (\(rateList)):")
        print(
            "  MRR \(AnalyticsReport.money(total.mrr)), \(total.activeSubscriptions) active subscriptions, "
                + "\(total.activeTrials) in a free trial; \(total.newSubscriptions) new, "
                + "\(total.trialConversions) trials converted, \(total.churned) churned")
        print(
            "  revenue \(AnalyticsReport.money(total.revenue)), refunds \(AnalyticsReport.money(total.refunds)), "
                + "net \(AnalyticsReport.money(total.netRevenue)); "
                + "\(total.unpricedTransactions) transactions without a price (verifyReceipt rows)")
        for product in report.byProduct {
            print(
                "  \(pad(product.productID ?? "-", 36)) active \(product.activeSubscriptions), "
                    + "MRR \(AnalyticsReport.money(product.mrr))")
        }
        print("Analytics page: \(path)")
    }

    func footer(directory: String, databasePath: String, htmlPath: String) {
        print("")
        print("Database: \(databasePath)")
        print("Reports:  \(directory)/report-run-{1,2,3,4,5,6,7,8,9}.json")
        print("HTML report: \(htmlPath)")
        print("Render any run again: renewal report --database \(databasePath) --format table --since 2000-01-01")
        print("Look at it: swift run renewal status --database \(databasePath)")
    }

    /// The demo's last section: how MRR moved over its days (`mrr_movement` of `renewal analytics --json`),
    /// bucket by bucket, adding up to the net, and where each day's movement is.
    func movement(_ report: AnalyticsReport) {
        guard let window = report.mrrMovement?.movement else { return }
        print("")
        print(
            "MRR movement over the demo's days (renewal analytics: mrr_movement, \(report.currency)): "
                + "from \(AnalyticsReport.money(window.mrrSince)) to \(AnalyticsReport.money(window.mrrUntil))")
        let buckets: [(name: String, amount: Decimal, story: String)] = [
            ("new", window.new, "first paid periods, trials converted"),
            ("expansion", window.expansion, "upgrades, more seats, an introductory price ending"),
            ("contraction", window.contraction, "downgrades, seats refunded"),
            ("churned", window.churned, "expiries, billing retry, refunds"),
            ("reactivation", window.reactivation, "resubscriptions, renewals recovered from billing retry"),
            ("net", window.net, "= MRR at the end − MRR at the start"),
        ]
        for bucket in buckets {
            let amount = AnalyticsReport.money(bucket.amount)
            let signed = bucket.amount > 0 ? "+" + amount : amount
            let column = String(repeating: " ", count: max(0, 9 - signed.count)) + signed
            print("  \(pad(bucket.name, 14)) \(column)   \(bucket.story)")
        }
        print("  Each day's movement: the analytics page's chart, and analytics_daily_series (new_mrr … net_new_mrr)")
    }

    private func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}
