import AppStoreSimulator
import Foundation
import RenewalImport
import RenewalServerAPI
import RenewalStorage

/// The demo's sample customers: one per simulator scenario, timed so that each scenario's event
/// falls between the demo's runs (day 0, day 11, day 15, day 16).
enum DemoData {
    struct Customer {
        var userID: String
        var receipt: SimulatedReceipt
        var story: String
        /// How the app's server stored the customer: a receipt, or (StoreKit 2) a signed transaction.
        var form: SimulatedReceipt.ImportForm = .receipt
        /// The import line's `consumption_consent`.
        var consumptionConsent: Bool?
    }

    static func customers(at start: Date) -> [Customer] {
        let day: TimeInterval = 86_400
        func customer(
            _ user: String, _ scenario: Scenario, daysAgo: Double, period: Double = 30, account: String? = nil,
            product: String = "com.example.pro.monthly", storefront: String? = nil, introductoryOffer: Bool? = nil,
            _ story: String
        ) -> Customer {
            var receipt = SimulatedReceipt(
                account: account ?? user, scenario: scenario, start: start.addingTimeInterval(-daysAgo * day),
                period: period * day, productID: product)
            receipt.storefront = storefront
            receipt.paidIntroductoryOffer = introductoryOffer
            return Customer(userID: user, receipt: receipt, story: story)
        }
        return [
            customer("alice", .renewal, daysAgo: 20, "renews every month"),
            customer("bob", .voluntaryExpiry, daysAgo: 20, "turned auto-renew off; expires on day 10"),
            customer("carol", .billingRetry, daysAgo: 20, "card declined on day 10; Apple keeps retrying"),
            customer("dan", .gracePeriod, daysAgo: 20, "card declined on day 10; 16-day grace period"),
            customer("erin", .billingRecovery, daysAgo: 20, "card declined on day 10; paid on day 13"),
            customer("frank", .refund, daysAgo: 40, "refunded on day 5"),
            customer("grace", .upgrade, daysAgo: 40, "upgraded to premium on day 5"),
            customer("sam", .refund, daysAgo: 29, "refunded on day 16, mid-period: only the change feed tells"),
            customer("heidi", .sandbox, daysAgo: 20, "TestFlight tester (sandbox receipt)"),
            customer("ivan", .familyShared, daysAgo: 5, "family member of a subscriber"),
            customer(
                "judy", .trial, daysAgo: 5, period: 7, product: "com.example.pro.weekly", "weekly plan, first week free"
            ),
            customer("ken", .legacyIOS6, daysAgo: 20, "iOS 6-era transaction receipt; expires on day 10"),
            customer("lara", .multipleSubscriptions, daysAgo: 20, "two subscription groups; the add-on lapses"),
            customer("mallory", .accountNotFound, daysAgo: 20, "Apple answers 21010 (account gone)"),
            customer("nina", .transient21005, daysAgo: 20, "Apple answers 21005 twice, then succeeds"),
            customer("oscar", .outage, daysAgo: 20, "Apple answers an HTML 503 page"),
            customer("peggy", .truncatedJSON, daysAgo: 20, "Apple's answer is cut off mid-JSON"),
            customer("quinn", .slow, daysAgo: 20, "Apple answers after the timeout"),
            customer(
                "tomas", .renewal, daysAgo: 100, period: 365, product: "com.example.pro.yearly", storefront: "FRA",
                "yearly plan bought in France: 99.99 EUR"),
            customer("yuki", .renewal, daysAgo: 5, storefront: "JPN", "monthly plan bought in Japan: 1500 JPY"),
            customer(
                "wes", .renewal, daysAgo: 3, storefront: "GBR", introductoryOffer: true,
                "first month at the introductory price in the UK: 4.49 GBP"),
            customer(
                "alice-work", .renewal, daysAgo: 20, account: "alice",
                "second app account paying with alice's Apple ID (shared_apple_id)"),
            customer(
                "olga", .multiseat, daysAgo: 29,
                "team plan of 5 seats; 2 seats refunded on day 16 (REFUND, SEATS): stays entitled"),
            customer("piet", .assignedSeat, daysAgo: 20, "member of a team plan (ASSIGNED): entitled by his own seat"),
            {
                var rita = customer(
                    "rita", .refundRequest, daysAgo: 19.8,
                    "asks Apple for a refund on day 16 and consented to share usage: answered within 12 hours")
                rita.consumptionConsent = true
                return rita
            }(),
            {
                var rosa = customer(
                    "rosa", .renewal, daysAgo: 20,
                    "StoreKit 2 app: signed transaction, no receipt; only the Server API (run 5) checks it")
                rosa.form = .signedTransaction
                return rosa
            }(),
        ]
    }

    /// The demo's exchange rates to US dollars (an operator's rates file holds the same).
    static let rates: [String: Decimal] = ["EUR": 1.08, "GBP": 1.27, "JPY": 0.0067]

    /// The second app of the demo's last run.
    static let macApp = "com.example.mac"

    /// The second app's customers: one imported with its `bundle_id`, one without (pinned to the
    /// app by Apple's first answer), one whose subscription has lapsed.
    static func macCustomers(at now: Date) -> [Customer] {
        let day: TimeInterval = 86_400
        func customer(_ user: String, _ scenario: Scenario, daysAgo: Double, _ story: String) -> Customer {
            Customer(
                userID: user,
                receipt: SimulatedReceipt(
                    account: user, scenario: scenario, start: now.addingTimeInterval(-daysAgo * day),
                    productID: "com.example.mac.monthly", bundle: macApp),
                story: story)
        }
        return [
            customer("mac-tom", .renewal, daysAgo: 10, "Mac app; imported with its bundle_id"),
            customer("mac-uma", .renewal, daysAgo: 3, "Mac app; imported without bundle_id: Apple's answer pins it"),
            customer("mac-vic", .voluntaryExpiry, daysAgo: 40, "Mac app; turned auto-renew off, lapsed"),
        ]
    }

    /// The second app's import lines; the second customer's names no app.
    static func macImports(_ customers: [Customer]) -> [ReceiptImport] {
        customers.enumerated().map { index, customer in
            ReceiptImport(
                userID: customer.userID, latestReceipt: customer.receipt.encoded, productID: customer.receipt.productID,
                bundleID: index == 1 ? nil : macApp)
        }
    }

    /// The import of each customer, as `renewal import` makes it: a StoreKit 2 customer's signed
    /// transaction is signed by `chain` and verified against its root before it is stored.
    static func imports(_ customers: [Customer], chain: SigningChain?) async throws -> [ReceiptImport] {
        var imports: [ReceiptImport] = []
        for customer in customers {
            var item = ReceiptImport(
                userID: customer.userID, latestReceipt: customer.receipt.encoded, productID: customer.receipt.productID)
            item.consumptionConsent = customer.consumptionConsent
            guard customer.form == .signedTransaction, let chain else {
                imports.append(item)
                continue
            }
            let signed = SignedTransactionImport(roots: [chain.root], bundleID: SimulatedReceipt.bundleID)
            let jws = try customer.receipt.signedTransaction(signer: chain)
            switch await signed.complete(
                ReceiptImport(userID: customer.userID, latestReceipt: nil), signedTransaction: jws)
            {
            case .success(let completed): imports.append(completed)
            case .failure(let error): throw ConfigurationError("demo: \(error)")
            }
        }
        return imports
    }
}
