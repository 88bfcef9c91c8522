import Foundation
import Testing

@testable import RenewalCore

/// The copied fixtures (see `Fixtures/SOURCES.md`), loaded from the test bundle.
enum Fixture {
    static let exceptOld = "verify-receipt/status-0-exclude-old-autorenew-off-intent-1.edited.json"
    static let venice = "verify-receipt/status-0-production-autorenew-off.anonymized.json"
    static let sandboxCassette = "verify-receipt/prod-21007-then-sandbox-0.vcr.json"
    static let malformedCassette = "verify-receipt/status-21002-malformed.vcr.json"
    static let v1Notification = "notifications/v1-DID_CHANGE_RENEWAL_STATUS-sandbox.json"

    static func url(_ path: String) throws -> URL {
        let root = try #require(Bundle.module.resourceURL, "the test bundle has no resources")
        return root.appendingPathComponent("Fixtures").appendingPathComponent(path)
    }

    static func data(_ path: String) throws -> Data {
        try Data(contentsOf: url(path))
    }

    static func response(_ path: String) throws -> VerifyReceiptResponse {
        try VerifyReceiptResponse(json: data(path))
    }

    /// The raw JSON of a fixture, for checks that compare the decoded values with what Apple sent.
    static func json(_ path: String) throws -> Any {
        try JSONSerialization.jsonObject(with: data(path))
    }

    /// The recorded exchanges of an ExVCR cassette, in the order they happened.
    static func cassette(_ path: String) throws -> [Exchange] {
        try JSONDecoder().decode([Exchange].self, from: data(path))
    }

    struct Exchange: Decodable {
        struct Request: Decodable {
            var url: String
            var method: String
        }
        struct Response: Decodable {
            var body: String
            var statusCode: Int

            enum CodingKeys: String, CodingKey {
                case body
                case statusCode = "status_code"
            }
        }
        var request: Request
        var response: Response

        func decodedBody() throws -> VerifyReceiptResponse {
            try VerifyReceiptResponse(json: Data(response.body.utf8))
        }
    }

    /// A V1 server notification; its `unified_receipt` is a verifyReceipt-shaped answer.
    struct V1Notification {
        var notificationType: String
        var autoRenewStatus: String
        var autoRenewStatusChangeDateMs: String
        var unifiedReceipt: VerifyReceiptResponse

        /// The fixture's fields; `unified_receipt` read by the job's own answer reader.
        static func load() throws -> V1Notification {
            let object = try #require(
                JSONSerialization.jsonObject(with: Fixture.data(Fixture.v1Notification)) as? [String: Any])
            let unified = try JSONSerialization.data(withJSONObject: try #require(object["unified_receipt"]))
            return V1Notification(
                notificationType: try #require(object["notification_type"] as? String),
                autoRenewStatus: try #require(object["auto_renew_status"] as? String),
                autoRenewStatusChangeDateMs: try #require(object["auto_renew_status_change_date_ms"] as? String),
                unifiedReceipt: try VerifyReceiptResponse(json: unified))
        }
    }
}

/// Decodes a synthetic answer written as a JSON string.
func decodeAnswer(_ json: String) throws -> VerifyReceiptResponse {
    try VerifyReceiptResponse(json: Data(json.utf8))
}

/// Decodes a synthetic answer and derives its subscriptions at `now`.
func derive(_ json: String, now: Date, answeredBy: AppStoreEnvironment? = .production) throws -> [SubscriptionSnapshot]
{
    DerivedAnswer(response: try decodeAnswer(json), answeredBy: answeredBy, now: now).subscriptions
}

/// Derives the single subscription of a synthetic answer.
func deriveOne(_ json: String, now: Date, answeredBy: AppStoreEnvironment? = .production) throws -> SubscriptionSnapshot
{
    let subscriptions = try derive(json, now: now, answeredBy: answeredBy)
    #expect(subscriptions.count == 1)
    return try #require(subscriptions.first)
}

/// Fixed instants for synthetic scenarios.
enum Clock {
    /// 2023-11-14T22:13:20Z.
    static let now = Date(timeIntervalSince1970: 1_700_000_000)
    static let minute: TimeInterval = 60
    static let hour: TimeInterval = 3600
    static let day: TimeInterval = 86_400

    static func ms(_ date: Date) -> Int64 { AppleDateFormat.milliseconds(date) }
    static func at(_ offset: TimeInterval) -> Date { now.addingTimeInterval(offset) }
    static func date(ms: Int64) -> Date { AppleDateFormat.date(milliseconds: ms) }
}

/// Builders for synthetic verifyReceipt JSON, in Apple's shape: string-typed numbers and flags,
/// full date triples.
enum Wire {
    static func dateTriple(_ name: String, _ date: Date) -> String {
        """
        "\(name)": "\(AppleDateFormat.gmtString(date))", \
        "\(name)_ms": "\(AppleDateFormat.milliseconds(date))", \
        "\(name)_pst": "\(AppleDateFormat.pacificString(date))"
        """
    }

    /// One `latest_receipt_info` row; `extra` is appended verbatim (e.g. `"is_upgraded": "true"`).
    static func row(
        product: String = "com.example.monthly", transaction: String, original: String = "1000000000000001",
        purchased: Date, expires: Date, trial: Bool = false, intro: Bool = false,
        ownership: String = "PURCHASED", extra: String = ""
    ) -> String {
        """
        {
          "quantity": "1",
          "product_id": "\(product)",
          "transaction_id": "\(transaction)",
          "original_transaction_id": "\(original)",
          \(dateTriple("purchase_date", purchased)),
          \(dateTriple("original_purchase_date", purchased)),
          \(dateTriple("expires_date", expires)),
          "web_order_line_item_id": "2\(transaction)",
          "is_trial_period": "\(trial)",
          "is_in_intro_offer_period": "\(intro)",
          "in_app_ownership_type": "\(ownership)",
          "subscription_group_identifier": "20667927"\(extra.isEmpty ? "" : ",\n  " + extra)
        }
        """
    }

    /// One `pending_renewal_info` element.
    static func pending(
        original: String = "1000000000000001", product: String = "com.example.monthly",
        autoRenewProduct: String? = nil, autoRenew: Bool = true, retrying: Bool? = nil,
        intent: String? = nil, graceEnds: Date? = nil
    ) -> String {
        var fields = [
            #""original_transaction_id": "\#(original)""#,
            #""product_id": "\#(product)""#,
            #""auto_renew_product_id": "\#(autoRenewProduct ?? product)""#,
            #""auto_renew_status": "\#(autoRenew ? "1" : "0")""#,
        ]
        if let retrying { fields.append(#""is_in_billing_retry_period": "\#(retrying ? "1" : "0")""#) }
        if let intent { fields.append(#""expiration_intent": "\#(intent)""#) }
        if let graceEnds { fields.append(dateTriple("grace_period_expires_date", graceEnds)) }
        return "{\n  " + fields.joined(separator: ",\n  ") + "\n}"
    }

    /// A status-0 app-receipt answer.
    static func answer(
        rows: [String], pending: [String] = [], environment: String? = "Production", status: Int = 0
    ) -> String {
        var fields = [#""status": \#(status)"#]
        if let environment { fields.append(#""environment": "\#(environment)""#) }
        fields.append(#""latest_receipt": "MIIbase64receipt""#)
        fields.append(#""latest_receipt_info": [\#(rows.joined(separator: ",\n"))]"#)
        if !pending.isEmpty { fields.append(#""pending_renewal_info": [\#(pending.joined(separator: ",\n"))]"#) }
        return "{\n" + fields.joined(separator: ",\n") + "\n}"
    }
}

/// A valid verifyReceipt answer read and judged the way the job does: the evidence, then each
/// subscription's snapshot at `now`.
struct DerivedAnswer: Equatable {
    var environment: AppStoreEnvironment?
    var latestReceipt: String?
    var subscriptions: [SubscriptionSnapshot]
    var evidence: AppleEvidence

    init(response: VerifyReceiptResponse, answeredBy: AppStoreEnvironment?, now: Date) {
        evidence = AppleEvidence(verifyReceipt: response, answeredBy: answeredBy)
        environment = evidence.environment
        latestReceipt = evidence.latestReceipt
        subscriptions = evidence.subscriptions.map { SubscriptionSnapshot(evidence: $0, now: now) }
    }
}
