import Foundation
import Prometheus
import RenewalStorage

extension RunMetrics {
    /// The adopted purchases no user has claimed (docs/design.md §7), per app and environment: how many
    /// and how long the oldest has waited. A customer who paid and whose app shows nothing waits on
    /// these, so `RenewalUnclaimedPurchaseWaiting` fires when one waits past a day. Written by `run`,
    /// with zeros for `Production` and `Sandbox` when none wait so the alert sees values, not gaps.
    public func unclaimedPurchases(_ summary: [UnclaimedSummary], now: Date) {
        let count = Self.name(
            "unclaimed_purchases", "",
            "Purchases the change feed adopted that no user has claimed yet (renewal status --unclaimed lists them).")
        let age = Self.name(
            "unclaimed_purchases_oldest_age", "seconds",
            "How long the oldest unclaimed adopted purchase has waited since the feed adopted it (0: none waits).")
        var seen = Set<String>()
        for row in summary {
            let app = row.bundleID ?? "unknown"
            seen.insert(row.environment)
            let labels = [("command", command), ("app", app), ("environment", row.environment)]
            registry.makeGauge(descriptor: count, labels: labels).set(to: Double(row.count))
            registry.makeGauge(descriptor: age, labels: labels).set(
                to: max(0, now.timeIntervalSince(row.oldestAdoptedAt)).rounded())
        }
        if summary.isEmpty {
            for environment in ["Production", "Sandbox"] where !seen.contains(environment) {
                let labels = [("command", command), ("environment", environment)]
                registry.makeGauge(descriptor: count, labels: labels).set(to: 0)
                registry.makeGauge(descriptor: age, labels: labels).set(to: 0)
            }
        }
    }
}
