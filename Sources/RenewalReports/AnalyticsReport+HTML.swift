import Foundation
import RenewalCore

extension AnalyticsReport {
    /// The page's day series: for each of the window's days (`names`), the daily series' Production rows
    /// in the reporting currency summed over apps and products (active subscriptions, trials and MRR at the
    /// end of the day, the day's MRR movement); a day without a row is all zero.
    public static func daySeries(_ rows: [AnalyticsDayRow], names: [String]) -> [AnalyticsDayRow] {
        var days = Dictionary(
            uniqueKeysWithValues: names.map { name in
                (
                    name,
                    AnalyticsDayRow(
                        key: DailyAnalytics.Key(
                            day: name, bundleID: "", productID: "", environment: AppStoreEnvironment.production.rawValue
                        ),
                        currency: "", converted: true)
                )
            })
        for row in rows where row.converted && row.key.environment == AppStoreEnvironment.production.rawValue {
            days[row.key.day]?.add(row)
        }
        return names.compactMap { days[$0] }
    }

    /// One self-contained page (inline CSS and SVG, nothing fetched): the window's figures as cards, MRR
    /// and active subscriptions over time, the trial funnel and churn from the day series (`daySeries`), one
    /// row per day, the products and the cohorts. `missing` names the days the daily series does not hold
    /// and `refresh` the command that fills them.
    public func html(days: [AnalyticsDayRow], missing: [String], refresh: String?) -> String {
        let title =
            "Subscription analytics \(HTMLPage.readable(since)) to \(HTMLPage.readable(until))"
            + (bundleID.map { " for \($0)" } ?? "")
        var page = HTMLPage.head(title: title) + "<h1>\(HTMLPage.escape(title))</h1>\n"
        page +=
            "<p class=\"note\">Amounts in \(HTMLPage.escape(currency)). Production purchases only: family sharing, "
            + "multiseat members and Sandbox are apart. Active subscriptions, trials and MRR are at the window's end.</p>\n"
        page += cards()
        if let unclaimed, unclaimed.purchases > 0 {
            page += "<p class=\"note\">\(HTMLPage.escape(unclaimed.line)).</p>\n"
        }
        if !missing.isEmpty, let refresh {
            page +=
                "<p class=\"note\">The daily series holds no figures for \(missing.count) of the \(days.count) days "
                + "(\(missing.first ?? "") to \(missing.last ?? "")); their charts show zero. Fill them with "
                + "<code>\(HTMLPage.escape(refresh))</code>, with the same catalogue and rates files.</p>\n"
        }
        let names = days.map(\.key.day)
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
        page += movementHTML(days)
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

    private func dayTable(_ days: [AnalyticsDayRow]) -> String {
        let header = [
            "day", "active", "trials", "MRR", "new", "new trials", "converted", "churned", "reactivated", "revenue",
            "refunds", "net new MRR",
        ]
        var html = "<table><thead><tr>" + header.map { "<th>\($0)</th>" }.joined() + "</tr></thead><tbody>\n"
        for day in days {
            let cells: [HTMLPage.Cell] = [
                .text(day.key.day), .text("\(day.activeSubscriptions)"), .text("\(day.activeTrials)"),
                .number(Self.money(Decimal(day.mrrCents) / 100)), .text("\(day.newSubscriptions)"),
                .text("\(day.newTrials)"), .text("\(day.trialConversions)"), .text("\(day.churned)"),
                .text("\(day.reactivations)"), .number(Self.money(Decimal(day.revenueCents) / 100)),
                .number(Self.money(Decimal(day.refundsCents) / 100)),
                .number(Self.money(Decimal(day.netNewMRRCents) / 100)),
            ]
            html += "<tr data-day=\"\(day.key.day)\">" + cells.map(\.html).joined() + "</tr>\n"
        }
        return html + "</tbody></table>\n"
    }
}
