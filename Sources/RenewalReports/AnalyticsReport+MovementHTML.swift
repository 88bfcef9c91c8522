import Foundation
import RenewalCore

extension AnalyticsReport {
    /// The page's MRR movement: a card row for the window (the same numbers as `mrr_movement`), the
    /// movement of each day from the daily series (`days`, as the page's other charts: a few rows however
    /// large the ledger) as bars gained above and lost below the line with the net as a line, then ARPU and
    /// the tables of refund rate, trial conversion and LTV by month.
    func movementHTML(_ days: [AnalyticsDayRow]) -> String {
        guard let window = mrrMovement?.movement else { return "" }
        var page = "<h2>MRR movement: from \(Self.money(window.mrrSince)) to \(Self.money(window.mrrUntil))</h2>\n"
        let cards: [(key: String, label: String, value: Decimal)] = [
            ("new", "new", window.new), ("expansion", "expansion", window.expansion),
            ("contraction", "contraction", window.contraction), ("churned", "churned", window.churned),
            ("reactivation", "reactivation", window.reactivation), ("net", "net", window.net),
        ]
        page += "<section class=\"cards\">\n"
        for card in cards {
            page +=
                "<div class=\"card\" data-figure=\"mrr_movement.\(card.key)\"><span>\(card.label) MRR</span>"
                + "<strong>\(HTMLPage.escape(Self.money(card.value)))</strong></div>\n"
        }
        if let arpu {
            page +=
                "<div class=\"card\" data-figure=\"arpu\"><span>ARPU (MRR per paid subscription)</span><strong>"
                + HTMLPage.escape(arpu.mrrPerSubscription.map(Self.money) ?? "n/a") + "</strong></div>\n"
        }
        page += "</section>\n"
        page +=
            "<p class=\"note\">Each subscription's MRR at the window's start and end, compared: contraction and "
            + "churned are MRR lost, and the five add up to the net change.</p>\n"
        page += "<h2>MRR movement each day (\(HTMLPage.escape(currency)), from the daily series)</h2>\n"
        page +=
            "<p class=\"note\">Gained above the line, lost below it, the day's net as a line: each day's window "
            + "compared at its two midnights, so a subscription that lapses and comes back churns one day and "
            + "reactivates another (the columns <code>new_mrr</code> to <code>net_new_mrr</code> of "
            + "<code>analytics_daily_series</code>).</p>\n"
        func values(_ bucket: MRRMovement.Bucket) -> [Double] {
            days.map { Double($0.movementCents[bucket] ?? 0) / 100 }
        }
        page += SVGChart.divergingBars(
            id: "mrr-movement",
            series: [
                ("new", values(.new)), ("expansion", values(.expansion)), ("reactivation", values(.reactivation)),
                ("contraction", values(.contraction)), ("churned", values(.churned)),
            ], xLabels: days.map(\.key.day), net: days.map { Double($0.netNewMRRCents) / 100 })
        page += explainingTables()
        return page
    }

    private func explainingTables() -> String {
        func percent(_ rate: Double?) -> String { rate.map { String(format: "%.1f%%", $0 * 100) } ?? "" }
        var page = "<h2>Refund rate by month of purchase</h2>\n"
        page += HTMLPage.table(
            ["month", "paid transactions", "refunded", "rate", "revenue", "refunds", "amount rate"],
            refundRateByPeriod.map { row in
                [
                    .text(row.month), .text("\(row.transactions)"), .text("\(row.refunded)"),
                    .number(percent(row.rate)),
                    .number(Self.money(row.revenue)), .number(Self.money(row.refunds)),
                    .number(percent(row.amountRate)),
                ]
            })
        page += "<h2>Trial conversion by month the trial began</h2>\n"
        page += HTMLPage.table(
            ["month", "trials", "converted", "still in trial", "rate"],
            trialConversionByCohort.map { row in
                [
                    .text(row.month), .text("\(row.started)"), .text("\(row.converted)"), .text("\(row.inTrial)"),
                    .number(percent(row.rate)),
                ]
            })
        page += "<h2>Realized LTV per paying customer by month of first payment</h2>\n"
        page += "<p class=\"note\">Net revenue within 7, 30, 90 and 365 days of the first paid purchase, "
        page += "per paying subscription; empty until the whole cohort is that old.</p>\n"
        page += HTMLPage.table(
            ["month", "paying customers", "7 days", "30 days", "90 days", "365 days"],
            ltvByCohort.map { row in
                [.text(row.month), .text("\(row.payingCustomers)")]
                    + row.ltv.map { .number($0.map(Self.money) ?? "") }
            })
        return page
    }
}
