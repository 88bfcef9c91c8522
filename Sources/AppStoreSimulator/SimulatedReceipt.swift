import Foundation

/// A renewal-date extension Apple granted: when, by how many days, and the request that asked for it.
public struct SimulatedExtension: Codable, Sendable, Hashable {
    public var at: Date
    public var days: Int
    public var requestIdentifier: String
    /// The subscription extended, when the customer has several (`multiple_subscriptions`); nil for the main one.
    public var originalTransactionID: String?

    public init(at: Date, days: Int, requestIdentifier: String, originalTransactionID: String? = nil) {
        self.at = at
        self.days = days
        self.requestIdentifier = requestIdentifier
        self.originalTransactionID = originalTransactionID
    }
}

/// A receipt the simulator understands. Its `encoded` form plays the part of Apple's opaque base64
/// receipt: the job stores it, sends it as `receipt-data` and replaces it with `latest_receipt`.
public struct SimulatedReceipt: Codable, Sendable, Hashable {
    /// The customer; unique per customer, and the seed of every identifier in the answers.
    public var account: String
    /// What Apple does with this receipt over time.
    public var scenario: Scenario
    /// The original purchase.
    public var start: Date
    /// The length of one paid period, in seconds.
    public var period: TimeInterval
    /// The subscription's product identifier.
    public var productID: String
    /// How many renewals this receipt already knows about; every `latest_receipt` bumps it.
    public var generation: Int
    /// The app the receipt is of; nil for the simulated app, `SimulatedReceipt.bundleID`.
    public var bundle: String?
    /// The customer's App Store country (ISO 3166-1 alpha-3), which sets the currency and price Apple's
    /// signed transactions carry (`SimulatedPrices`); nil for `USA`.
    public var storefront: String?
    /// The first paid period is an introductory offer at half price (pay as you go); nil for none.
    public var paidIntroductoryOffer: Bool?
    /// The seats of a multiseat purchase (`multiseat`, `assigned_seat`); nil for the default, 5.
    public var seats: Int?
    /// The `refund` scenario's refund is prorated: this share of the price in milliunits (50000 is
    /// 50 %), `revocationType` `REFUND_PRORATED`; nil for a full refund.
    public var refundPercentage: Int?
    /// The `refund` scenario's customer asked for the refund a day before it: a `CONSUMPTION_REQUEST`
    /// (reason `UNINTENDED_PURCHASE`) at `s+1.5p-1d`.
    public var refundRequested: Bool?
    /// Renewal-date extensions Apple granted this subscription (Extend a Subscription Renewal Date); nil
    /// for none. Each moves the end of the period it was granted in, and every later period, by its days.
    public var extensions: [SimulatedExtension]?
    /// The `appAccountToken` the app set at purchase, which Apple returns in every signed transaction and
    /// renewal info of the Server API and of notifications; nil (the default): the app set none, so they
    /// carry none. `withAppAccountToken(_:)` sets one (by default the derived `appAccountToken`).
    public var accountToken: String?
    /// Tokens bound later by Set App Account Token, oldest first: each replaces the token of the subscription
    /// it names from its date on. `SimulatorState` fills it from what it was sent; nil for none.
    public var accountTokenChanges: [SimulatedTokenChange]?

    /// The seats bought with a multiseat purchase.
    public var purchasedSeats: Int { seats ?? 5 }

    /// The seats `multiseat`'s seat refund takes back at `s+1.5p`.
    public static let refundedSeats = 2

    /// When the customer asks for a refund, and why (`refund_request`, or `refund` with
    /// `refundRequested`); nil for none.
    public var refundRequest: (at: Date, reason: String)? {
        switch scenario {
        case .refundRequest: (start.addingTimeInterval(1.2 * period), "UNSATISFIED_WITH_PURCHASE")
        case .refund where refundRequested == true:
            (start.addingTimeInterval(1.5 * period - 86_400), "UNINTENDED_PURCHASE")
        default: nil
        }
    }

    /// Whether `transactionID` is one of this customer's purchase or renewals up to `now`.
    func owns(transactionID: String, at now: Date) -> Bool {
        if originalTransactionIDs.contains(transactionID) { return true }
        let periods = max(0, Int(now.timeIntervalSince(start) / period)) + 1
        return (0...periods).contains {
            SimulatedIdentifier.id(account, "transaction", "", String($0)) == transactionID
        }
    }

    /// The receipt's bundle id.
    public var bundleIdentifier: String { bundle ?? Self.bundleID }

    /// Creates a receipt.
    /// - Parameters:
    ///   - account: unique per customer.
    ///   - scenario: the timeline the simulator plays for it.
    ///   - start: the original purchase date.
    ///   - period: the paid period length; default 30 days.
    ///   - productID: default `com.example.pro.monthly`.
    ///   - generation: default 0 (the receipt of the original purchase).
    public init(
        account: String, scenario: Scenario, start: Date, period: TimeInterval = 30 * 86_400,
        productID: String = "com.example.pro.monthly", generation: Int = 0, bundle: String? = nil
    ) {
        self.bundle = bundle
        self.account = account
        self.scenario = scenario
        self.start = start
        self.period = period
        self.productID = productID
        self.generation = generation
    }

    /// Base64 of the receipt's JSON: opaque to the job, like a real receipt.
    public var encoded: String {
        // Encoding a struct of strings and numbers cannot fail.
        let data = (try? Self.encoder.encode(self)) ?? Data()
        return container(json: data).base64EncodedString()
    }

    /// Reads a receipt produced by `encoded` (or the bare base64 JSON earlier versions made); nil for
    /// anything else (a real receipt, garbage).
    public init?(encoded: String) {
        guard
            let data = Self.json(inContainer: encoded)
                ?? Data(base64Encoded: encoded, options: .ignoreUnknownCharacters),
            let receipt = try? Self.decoder.decode(SimulatedReceipt.self, from: data),
            receipt.period > 0, receipt.period.isFinite, receipt.generation >= 0
        else { return nil }
        self = receipt
    }

    private static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .millisecondsSince1970
        return encoder
    }

    private static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        return decoder
    }
}
