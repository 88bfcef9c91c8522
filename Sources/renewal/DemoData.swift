import AppStoreSimulator
import Foundation
import RenewalStorage

/// The demo's sample customers: one per simulator scenario, timed so that each scenario's event
/// falls between the demo's runs (day 0, day 11, day 15).
enum DemoData {
    struct Customer {
        var userID: String
        var receipt: SimulatedReceipt
        var story: String
    }

    static func customers(at start: Date) -> [Customer] {
        let day: TimeInterval = 86_400
        func customer(
            _ user: String, _ scenario: Scenario, daysAgo: Double, period: Double = 30, account: String? = nil,
            _ story: String
        ) -> Customer {
            Customer(
                userID: user,
                receipt: SimulatedReceipt(
                    account: account ?? user, scenario: scenario, start: start.addingTimeInterval(-daysAgo * day),
                    period: period * day),
                story: story)
        }
        return [
            customer("alice", .renewal, daysAgo: 20, "renews every month"),
            customer("bob", .voluntaryExpiry, daysAgo: 20, "turned auto-renew off; expires on day 10"),
            customer("carol", .billingRetry, daysAgo: 20, "card declined on day 10; Apple keeps retrying"),
            customer("dan", .gracePeriod, daysAgo: 20, "card declined on day 10; 16-day grace period"),
            customer("erin", .billingRecovery, daysAgo: 20, "card declined on day 10; paid on day 13"),
            customer("frank", .refund, daysAgo: 40, "refunded on day 5"),
            customer("grace", .upgrade, daysAgo: 40, "upgraded to premium on day 5"),
            customer("heidi", .sandbox, daysAgo: 20, "TestFlight tester (sandbox receipt)"),
            customer("ivan", .familyShared, daysAgo: 5, "family member of a subscriber"),
            customer("judy", .trial, daysAgo: 5, period: 7, "weekly plan, first week free"),
            customer("ken", .legacyIOS6, daysAgo: 20, "iOS 6-era transaction receipt; expires on day 10"),
            customer("lara", .multipleSubscriptions, daysAgo: 20, "two subscription groups; the add-on lapses"),
            customer("mallory", .accountNotFound, daysAgo: 20, "Apple answers 21010 (account gone)"),
            customer("nina", .transient21005, daysAgo: 20, "Apple answers 21005 twice, then succeeds"),
            customer("oscar", .outage, daysAgo: 20, "Apple answers an HTML 503 page"),
            customer("peggy", .truncatedJSON, daysAgo: 20, "Apple's answer is cut off mid-JSON"),
            customer("quinn", .slow, daysAgo: 20, "Apple answers after the timeout"),
            customer(
                "alice-work", .renewal, daysAgo: 20, account: "alice",
                "second app account paying with alice's Apple ID (shared_apple_id)"),
        ]
    }

    static func imports(_ customers: [Customer]) -> [ReceiptImport] {
        customers.map {
            ReceiptImport(userID: $0.userID, latestReceipt: $0.receipt.encoded, productID: $0.receipt.productID)
        }
    }
}
