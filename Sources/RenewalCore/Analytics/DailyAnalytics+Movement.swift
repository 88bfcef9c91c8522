import Foundation

extension DailyAnalytics {
    /// One subscription's MRR movement on each day, as `MRRMovementSeries` works it out for a one-day
    /// window `[day, next day)`: its standing at the day's start against its standing at the day's end,
    /// asked only when an event of the subscription falls in `(start, end]` (between events it cannot
    /// change), so a day on which nothing happened to it costs nothing.
    mutating func addMovement(of ledger: SubscriptionLedger, in environment: AppStoreEnvironment) {
        guard let reference = days.first else { return }
        let analytics = environment == .production ? reference.production : reference.sandbox
        let timeline = ledger.timeline(in: environment)
        guard !timeline.transactions.isEmpty else { return }
        let events = MRRMovementSeries.events(of: timeline)
        let firstPaid = timeline.transactions.first { !$0.isTrial }?.purchasedAt
        // The same period usually holds at many midnights: its MRR is worked out once.
        var last: (id: String, mrr: Money?)?
        func point(_ moment: Date) -> (point: MRRMovement.Point, product: String?) {
            guard case .paid(let transaction, _) = timeline.standing(at: moment) else { return (.none, nil) }
            if let last, last.id == transaction.transactionID {
                return (MRRMovement.Point(paid: true, mrr: last.mrr), transaction.productID)
            }
            let mrr = analytics.monthlyPrice(of: transaction)
            last = (transaction.transactionID, mrr)
            return (MRRMovement.Point(paid: true, mrr: mrr), transaction.productID)
        }
        var previous = point(reference.start)
        var next = events.firstIndex { $0 > reference.start } ?? events.count
        for day in days {
            let end = day.start.addingTimeInterval(86_400)
            guard next < events.count, events[next] <= end else { continue }
            let current = point(end)
            while next < events.count, events[next] <= end { next += 1 }
            defer { previous = current }
            guard current.point != previous.point else { continue }
            // Gained or changed MRR counts under the product paid at the day's end; churned under the one
            // paid at its start.
            let product = (current.point.paid ? current.product : previous.product) ?? "unknown"
            let key = Key(
                day: day.name, bundleID: ledger.bundleID ?? "", productID: product, environment: environment.rawValue)
            movements[key, default: MRRMovement()].addChange(
                from: previous.point, to: current.point, paidBefore: firstPaid.map { $0 < day.start } ?? false)
        }
    }
}
