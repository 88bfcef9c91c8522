/// A verifyReceipt answer, in both shapes Apple sends: app receipts (iOS 7+) and iOS 6-style
/// transaction receipts (single-object `latest_receipt_info`, `latest_expired_receipt_info`,
/// top-level numeric `auto_renew_status`, status 21006).
///
/// Reading (`init(json:)`) looks only at the fields the job uses, so an odd type in any other field
/// (a numeric `application_version`, an object `quantity`) never fails an answer; an unreadable used
/// field throws `AppleAnswerError.unreadableField` naming its path. Answers whose status is not
/// valid (0, 21006) are read no further than their status, environment and retry flag.
public struct VerifyReceiptResponse: Sendable, Hashable, Encodable {
    public var status: AppStoreStatus
    public var environment: AppStoreEnvironment?
    /// `is-retryable` or `is_retryable` (sources disagree on the spelling; both are read).
    public var isRetryable: Bool?
    /// The newest receipt; replaces the stored one.
    public var latestReceipt: String?
    /// Unordered; may hold several products and subscriptions.
    public var latestReceiptInfo: [LatestReceiptInfo]
    /// iOS 6-style answers only.
    public var latestExpiredReceiptInfo: LatestReceiptInfo?
    public var pendingRenewalInfo: [PendingRenewalInfo]
    public var receipt: ReceiptInfo?
    /// iOS 6-style answers carry their renewal fields at the top level: auto-renew, …
    public var autoRenewStatus: Bool?
    /// … the expiration intent …
    public var expirationIntent: String?
    /// … and the billing-retry flag.
    public var isInBillingRetryPeriod: Bool?

    public init(
        status: AppStoreStatus, environment: AppStoreEnvironment? = nil, isRetryable: Bool? = nil,
        latestReceipt: String? = nil, latestReceiptInfo: [LatestReceiptInfo] = [],
        latestExpiredReceiptInfo: LatestReceiptInfo? = nil, pendingRenewalInfo: [PendingRenewalInfo] = [],
        receipt: ReceiptInfo? = nil, autoRenewStatus: Bool? = nil, expirationIntent: String? = nil,
        isInBillingRetryPeriod: Bool? = nil
    ) {
        self.status = status
        self.environment = environment
        self.isRetryable = isRetryable
        self.latestReceipt = latestReceipt
        self.latestReceiptInfo = latestReceiptInfo
        self.latestExpiredReceiptInfo = latestExpiredReceiptInfo
        self.pendingRenewalInfo = pendingRenewalInfo
        self.receipt = receipt
        self.autoRenewStatus = autoRenewStatus
        self.expirationIntent = expirationIntent
        self.isInBillingRetryPeriod = isInBillingRetryPeriod
    }

    /// The top-level renewal fields of an iOS 6-style answer, as renewal info; nil when there are none.
    public var topLevelRenewal: PendingRenewalInfo? {
        guard autoRenewStatus != nil || expirationIntent != nil || isInBillingRetryPeriod != nil else { return nil }
        return PendingRenewalInfo(
            originalTransactionID: nil, productID: nil, autoRenewStatus: autoRenewStatus,
            expirationIntent: expirationIntent, isInBillingRetryPeriod: isInBillingRetryPeriod)
    }

    /// Whether the decoded receipt's `in_app` rows are worth reading: when the latest transactions
    /// hold no subscription, or miss one that `pending_renewal_info` names. Otherwise the latest
    /// transactions say all there is, and a long subscriber's hundreds of `in_app` rows are skipped.
    var needsReceiptTransactions: Bool {
        var latestSubscriptions: Set<String> = []
        for row in latestReceiptInfo + [latestExpiredReceiptInfo].compactMap({ $0 }) where row.expiresDate != nil {
            if let id = row.originalTransactionID ?? row.transactionID { latestSubscriptions.insert(id) }
        }
        guard !latestSubscriptions.isEmpty else { return true }
        return pendingRenewalInfo.contains { info in
            info.originalTransactionID.map { !latestSubscriptions.contains($0) } ?? false
        }
    }

    enum Field: Int, AppleField {
        case status, environment, isRetryableHyphen, isRetryable, latestReceipt, latestReceiptInfo
        case latestExpiredReceiptInfo, pendingRenewalInfo, receipt, autoRenewStatus, expirationIntent
        case isInBillingRetryPeriod

        var key: String {
            switch self {
            case .status: "status"
            case .environment: "environment"
            case .isRetryableHyphen: "is-retryable"
            case .isRetryable: "is_retryable"
            case .latestReceipt: "latest_receipt"
            case .latestReceiptInfo: "latest_receipt_info"
            case .latestExpiredReceiptInfo: "latest_expired_receipt_info"
            case .pendingRenewalInfo: "pending_renewal_info"
            case .receipt: "receipt"
            case .autoRenewStatus: "auto_renew_status"
            case .expirationIntent: "expiration_intent"
            case .isInBillingRetryPeriod: "is_in_billing_retry_period"
            }
        }

        static let keys = makeKeys()
    }

    /// Reads an answer's bytes.
    ///
    /// - Throws: `AppleAnswerError.notJSON` when the bytes are not a JSON object with a numeric
    ///   `status`; `.unreadableField` when a field the job uses cannot be read.
    public init(json bytes: some Sequence<UInt8>) throws(AppleAnswerError) {
        let document: JSONDocument
        do throws(JSONSyntaxError) {
            document = try JSONDocument(bytes)
        } catch {
            throw .notJSON(error.description)
        }
        try self.init(json: document.root)
    }

    init(json root: JSONValue) throws(AppleAnswerError) {
        guard root.kind == .object else { throw .notJSON("not a JSON object") }
        let f: AppleFields<Field>
        do throws(AppleAnswerError) {
            f = try AppleFields<Field>(root)
        } catch {
            if case .unreadableField(path: "status", _) = error { throw .notJSON("status given twice") }
            throw error
        }
        guard let statusText = try? f.string(.status), let code = Int(statusText) else {
            throw .notJSON("no numeric status in the answer")
        }
        status = AppStoreStatus(code)
        environment = try f.string(.environment).map(AppStoreEnvironment.init(rawValue:))
        let hyphenated = try f.bool(.isRetryableHyphen)
        isRetryable = hyphenated == nil ? try f.bool(.isRetryable) : hyphenated
        latestReceiptInfo = []
        pendingRenewalInfo = []
        guard status.disposition(isRetryableFlag: isRetryable) == .valid else { return }

        latestReceipt = try f.string(.latestReceipt)
        if let info = f[.latestReceiptInfo], info.kind == .object {
            // iOS 6-style answers give one object.
            latestReceiptInfo = [try LatestReceiptInfo(json: info)]
        } else {
            latestReceiptInfo = try f.array(.latestReceiptInfo, LatestReceiptInfo.init(json:))
        }
        latestExpiredReceiptInfo = try f[.latestExpiredReceiptInfo].map { (value) throws(AppleAnswerError) in
            try LatestReceiptInfo(json: value)
        }
        pendingRenewalInfo = try f.array(.pendingRenewalInfo, PendingRenewalInfo.init(json:))
        if let receiptValue = f[.receipt] {
            receipt = try ReceiptInfo(json: receiptValue, readInApp: needsReceiptTransactions)
        }
        autoRenewStatus = try f.bool(.autoRenewStatus)
        expirationIntent = try f.string(.expirationIntent)
        isInBillingRetryPeriod = try f.bool(.isInBillingRetryPeriod)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AppleKey.self)
        try c.encode(status, forKey: AppleKey("status"))
        try c.encodeIfPresent(environment, forKey: AppleKey("environment"))
        if let isRetryable { try c.encode(isRetryable, forKey: AppleKey("is_retryable")) }
        try c.encodeIfPresent(receipt, forKey: AppleKey("receipt"))
        if !latestReceiptInfo.isEmpty { try c.encode(latestReceiptInfo, forKey: AppleKey("latest_receipt_info")) }
        try c.encodeIfPresent(latestExpiredReceiptInfo, forKey: AppleKey("latest_expired_receipt_info"))
        try c.encodeApple(latestReceipt, "latest_receipt")
        if !pendingRenewalInfo.isEmpty { try c.encode(pendingRenewalInfo, forKey: AppleKey("pending_renewal_info")) }
        if let autoRenewStatus { try c.encode(autoRenewStatus ? 1 : 0, forKey: AppleKey("auto_renew_status")) }
    }
}
