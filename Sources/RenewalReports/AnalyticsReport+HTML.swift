import Foundation
import RenewalCore

extension AnalyticsReport {
    /// One day of the page's charts: the daily series' Production figures in the reporting currency,
    /// summed over apps and products. Active subscriptions, trials and MRR are those at the end of the day.
    public struct Day: Sendable, Hashable {
        public var name: String
        public var activeSubscriptions = 0
        public var activeTrials = 0
        public var newSubscriptions = 0
        public var newTrials = 0
        public var trialConversions = 0
        public var churned = 0
        public var reactivations = 0
        public var mrrCents: Int64 = 0
        public var revenueCents: Int64 = 0
        public var refundsCents: Int64 = 0

        public init(name: String) { self.name = name }

        /// The window's days (`names`) from the daily series' `rows`; a day without a row is all zero.
        public static func series(_ rows: [AnalyticsDayRow], names: [String]) -> [Day] {
            var days = Dictionary(uniqueKeysWithValues: names.map { ($0, Day(name: $0)) })
            for row in rows where row.converted && row.key.environment == AppStoreEnvironment.production.rawValue {
                guard var day = days[row.key.day] else { continue }
                day.activeSubscriptions += row.activeSubscriptions
                day.activeTrials += row.activeTrials
                day.newSubscriptions += row.newSubscriptions
                day.newTrials += row.newTrials
                day.trialConversions += row.trialConversions
                day.churned += row.churned
                day.reactivations += row.reactivations
                day.mrrCents += row.mrrCents
                day.revenueCents += row.revenueCents
                day.refundsCents += row.refundsCents
                days[row.key.day] = day
            }
            return names.compactMap { days[$0] }
        }
    }

    /// One self-contained page (inline CSS and SVG, nothing fetched): the window's figures as cards, MRR
    /// and active subscriptions over time, the trial funnel and churn from the daily series (`days`), one
    /// row per day, the products and the cohorts. `missing` names the days the daily series does not hold
    /// and `refresh` the command that fills them.
    public func html(days: [Day], missing: [String], refresh: String?) -> String {
        let title =
            "Subscription analytics \(HTMLPage.readable(since)) to \(HTMLPage.readable(until))"
            + (bundleID.map { " for \($0)" } ?? "")
        var page = HTMLPage.head(title: title) + "<h1>\(HTMLPage.escape(title))</h1>\n"
        page +=
            "<p class=\"note\">Amounts in \(HTMLPage.escape(currency)). Production purchases only: family sharing, "
            + "multiseat members and Sandbox are apart. Active subscriptions, trials and MRR are at the window's end.</p>\n"
        page += cards()
        if !missing.isEmpty, let refresh {
            page +=
                "<p class=\"note\">The daily series holds no figures for \(missing.count) of the \(days.count) days "
                + "(\(missing.first ?? "") to \(missing.last ?? "")); their charts show zero. Fill them with "
                + "<code>\(HTMLPage.escape(refresh))</code>, with the same catalogue and rates files.</p>\n"
        }
        let names = days.map(\.name)
        page += "<h2>MRR at the end of each day (\(HTMLPage.escape(currency)))</h2>\n"
        page += SVGChart.lines(
            id: "mrr-over-time", series: [("MRR", days.map { Int(($0.mrrCents + 50) / 100) })], xLabels: names)
        page += "<h2>Active subscriptions and trials at the end of each day</h2>\n"
        page += SVGChart.lines(
            id: "active-over-time",
            series: [
                ("paid subscriptions", days.map(\.activeSubscriptions)), ("free trials", days.map(\.activeTrials)),
            ],
            xLabels: names)
        let funnel = total.trialFunnel
        page += "<h2>Trial funnel: the \(funnel.started) free trials begun in the window, at its end</h2>\n"
        page += SVGChart.bars(
            id: "trial-funnel",
            [
                ("began a trial", funnel.started), ("paid", funnel.converted), ("still in the trial", funnel.inTrial),
                ("lapsed", funnel.lapsed),
            ])
        let rate = total.churnRate.map { String(format: "%.1f %%", $0 * 100) } ?? "n/a"
        page +=
            "<h2>Churn and new subscriptions each day</h2>\n<p>Over the window: \(total.churned) churned of the "
            + "paid subscriptions at its start (churn rate \(rate)), \(total.newSubscriptions) new, "
            + "\(total.reactivations) reactivated.</p>\n"
        page += SVGChart.lines(
            id: "churn-over-time",
            series: [
                ("churned", days.map(\.churned)), ("new subscriptions", days.map(\.newSubscriptions)),
                ("reactivations", days.map(\.reactivations)),
            ], xLabels: names)
        page += "<h2>Each day</h2>\n" + dayTable(days)
        page += "<h2>By product</h2>\n"
        page += HTMLPage.table(
            ["product", "active", "trials", "MRR", "new", "new trials", "converted", "churned", "revenue", "refunds"],
            (byProduct + [total]).map { figures in
                [
                    .text(figures.productID ?? "all products"), .text("\(figures.activeSubscriptions)"),
                    .text("\(figures.activeTrials)"), .number(Self.money(figures.mrr)),
                    .text("\(figures.newSubscriptions)"), .text("\(figures.newTrials)"),
                    .text("\(figures.trialConversions)"), .text("\(figures.churned)"),
                    .number(Self.money(figures.revenue)), .number(Self.money(figures.refunds)),
                ]
            })
        page += "<h2>Retention by cohort</h2>\n<p class=\"note\">By the month of the first paid period: the share "
        page += "still paid one day after each period; empty while a period has not ended.</p>\n"
        page += HTMLPage.table(
            ["cohort", "subscriptions"] + (1...CohortRetention.periods).map { "P\($0)" },
            cohorts.map { cohort in
                [.text(cohort.month), .text("\(cohort.subscriptions)")]
                    + cohort.retention.map { share in .number(share.map { String(format: "%.0f%%", $0 * 100) } ?? "") }
            })
        return page + HTMLPage.tail
    }

    private func cards() -> String {
        let rate = total.churnRate.map { String(format: " (%.1f %%)", $0 * 100) } ?? ""
        let cards: [(key: String, label: String, value: String)] = [
            ("mrr", "MRR", Self.money(total.mrr) + " " + currency),
            ("active_subscriptions", "active subscriptions", "\(total.activeSubscriptions)"),
            ("active_trials", "active trials", "\(total.activeTrials)"),
            ("new_subscriptions", "new subscriptions", "\(total.newSubscriptions)"),
            ("trial_conversions", "trial conversions", "\(total.trialConversions)"),
            ("churned", "churned", "\(total.churned)\(rate)"),
            ("revenue", "revenue", Self.money(total.revenue)),
            ("refunds", "refunds", Self.money(total.refunds)),
            ("net_revenue", "net revenue", Self.money(total.netRevenue)),
        ]
        return "<section class=\"cards\">\n"
            + cards.map { card in
                "<div class=\"card\" data-figure=\"\(card.key)\"><span>\(HTMLPage.escape(card.label))</span>"
                    + "<strong>\(HTMLPage.escape(card.value))</strong></div>\n"
            }.joined() + "</section>\n"
    }

    private func dayTable(_ days: [Day]) -> String {
        let header = [
            "day", "active", "trials", "MRR", "new", "new trials", "converted", "churned", "reactivated", "revenue",
            "refunds",
        ]
        var html = "<table><thead><tr>" + header.map { "<th>\($0)</th>" }.joined() + "</tr></thead><tbody>\n"
        for day in days {
            let cells: [HTMLPage.Cell] = [
                .text(day.name), .text("\(day.activeSubscriptions)"), .text("\(day.activeTrials)"),
                .number(Self.money(Decimal(day.mrrCents) / 100)), .text("\(day.newSubscriptions)"),
                .text("\(day.newTrials)"), .text("\(day.trialConversions)"), .text("\(day.churned)"),
                .text("\(day.reactivations)"), .number(Self.money(Decimal(day.revenueCents) / 100)),
                .number(Self.money(Decimal(day.refundsCents) / 100)),
            ]
            html += "<tr data-day=\"\(day.name)\">" + cells.map(\.html).joined() + "</tr>\n"
        }
        return html + "</tbody></table>\n"
    }
}
