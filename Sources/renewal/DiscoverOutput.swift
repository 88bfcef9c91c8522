import Foundation
import RenewalCore
import RenewalJob

/// What `renewal discover` prints: text for people, `--json` for programs (docs/design.md §7).
enum DiscoverOutput {
    static func text(_ outcome: DiscoveryOutcome) -> String {
        var lines: [String] = []
        for (stream, window) in outcome.windows.sorted(by: { $0.key.key < $1.key.key }) {
            let resumed = outcome.resumed.contains(stream) ? " (resumed an interrupted discover)" : ""
            lines.append(
                "\(stream.key): \(Timestamp.string(window.lowerBound)) to \(Timestamp.string(window.upperBound))\(resumed)"
            )
        }
        lines.append("Notifications read: \(outcome.notifications) (\(outcome.newNotifications) not recorded before)")
        lines.append("Subscriptions found: \(outcome.found)")
        lines.append("  adopted: \(outcome.adopted) (claimed by appAccountToken at once: \(outcome.claimed))")
        lines.append("  already held: \(outcome.alreadyHeld)")
        lines.append("  not adopted (another app or product, or not a subscription): \(outcome.notAdopted)")
        let net = outcome.netRevenue
        let revenue = net.keys.sorted().map { currency in
            let gross = outcome.revenue[currency] ?? 0
            let refunds = outcome.refunds[currency] ?? 0
            return "\(amount(gross)) \(currency) gross, \(amount(refunds)) refunded, \(amount(net[currency] ?? 0)) net"
        }
        lines.append(
            "Revenue of the adopted transactions: " + (revenue.isEmpty ? "none" : revenue.joined(separator: "; ")))
        if outcome.adopted > 0 {
            lines.append("The adopted subscriptions are due: the next `renewal run` checks them.")
        }
        for (stream, reason) in outcome.failed.sorted(by: { $0.key.key < $1.key.key }) {
            lines.append("\(stream.key): could not be read (\(reason.rawValue)); run discover again to go on")
        }
        if !outcome.refused.isEmpty {
            lines.append("Notifications that failed verification (changed nothing): \(outcome.refused.count)")
        }
        for stream in outcome.busy.sorted(by: { $0.key < $1.key }) {
            lines.append("\(stream.key): another discover is reading it; left to that one")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Milliunits as a decimal amount: 9990 is 9.99.
    static func amount(_ milliunits: Int64) -> String {
        let sign = milliunits < 0 ? "-" : ""
        let value = milliunits.magnitude
        let cents = (value % 1000 + 5) / 10
        let whole = value / 1000 + cents / 100
        return "\(sign)\(whole)." + String(format: "%02d", Int(cents % 100))
    }

    static func json(_ outcome: DiscoveryOutcome) -> String {
        let document = DiscoverJSON(
            windows: outcome.windows.sorted(by: { $0.key.key < $1.key.key }).map {
                .init(
                    stream: $0.key.key, environment: $0.key.environment.rawValue, app: $0.key.app,
                    start: Timestamp.string($0.value.lowerBound), end: Timestamp.string($0.value.upperBound),
                    resumed: outcome.resumed.contains($0.key))
            },
            notifications: outcome.notifications, newNotifications: outcome.newNotifications,
            subscriptionsFound: outcome.found, adopted: outcome.adopted, claimed: outcome.claimed,
            alreadyHeld: outcome.alreadyHeld, notAdopted: outcome.notAdopted,
            revenue: outcome.netRevenue.keys.sorted().map { currency in
                let gross = outcome.revenue[currency] ?? 0
                let refunds = outcome.refunds[currency] ?? 0
                return .init(
                    currency: currency, milliunits: gross, amount: amount(gross), refundsMilliunits: refunds,
                    refundsAmount: amount(refunds), netMilliunits: gross - refunds, netAmount: amount(gross - refunds))
            },
            refused: outcome.refused.count,
            failed: outcome.failed.sorted(by: { $0.key.key < $1.key.key }).map {
                .init(stream: $0.key.key, reason: $0.value.rawValue)
            },
            busy: outcome.busy.map(\.key).sorted())
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        let data = (try? encoder.encode(document)) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self) + "\n"
    }
}

/// `renewal discover --json`, the stable contract (docs/design.md §7).
struct DiscoverJSON: Encodable {
    struct Window: Encodable {
        var stream: String
        var environment: String
        var app: String?
        var start: String
        var end: String
        var resumed: Bool
    }

    /// One currency's revenue: `milliunits`/`amount` gross (every adopted transaction's price), the refunds
    /// Apple made of them, and net (gross less refunds).
    struct Revenue: Encodable {
        var currency: String
        var milliunits: Int64
        var amount: String
        var refundsMilliunits: Int64
        var refundsAmount: String
        var netMilliunits: Int64
        var netAmount: String
    }

    struct Failure: Encodable {
        var stream: String
        var reason: String
    }

    var windows: [Window]
    var notifications: Int
    var newNotifications: Int
    var subscriptionsFound: Int
    var adopted: Int
    var claimed: Int
    var alreadyHeld: Int
    var notAdopted: Int
    var revenue: [Revenue]
    var refused: Int
    var failed: [Failure]
    var busy: [String]
}
