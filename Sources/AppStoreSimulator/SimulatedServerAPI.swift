import Crypto
import Foundation
import RenewalCore
import RenewalServerAPI

/// The simulator's App Store Server API identity: a chain shaped like Apple's that signs every JWS
/// it sends (its root is what clients trust instead of Apple's), and the one API key it accepts.
public struct SimulatedServerAPI: Sendable {
    public let chain: SigningChain
    public let keyID: String
    public let issuerID: String
    /// The API key clients sign their tokens with; the simulator checks tokens with its public half.
    public let apiKey: P256.Signing.PrivateKey
    /// Further API keys accepted, by key id (all of the same issuer): a team may hold several.
    public var otherKeys: [String: P256.Signing.PublicKey] = [:]
    /// The apps the API answers for (a token's `bid`); any accepted key may sign for any of them,
    /// as a team's key does. A token for another bundle is refused (401). Default: the simulated app.
    public var bundleIDs: Set<String> = [SimulatedReceipt.bundleID]

    public init(chain: SigningChain, keyID: String, issuerID: String, apiKey: P256.Signing.PrivateKey) {
        self.chain = chain
        self.keyID = keyID
        self.issuerID = issuerID
        self.apiKey = apiKey
    }

    /// A fresh chain and key, made at start.
    public static func generate() throws -> SimulatedServerAPI {
        SimulatedServerAPI(
            chain: try SigningChain.generate(), keyID: "SIMKEY0001", issuerID: "57246542-96fe-1a63-e053-0824d011072a",
            apiKey: P256.Signing.PrivateKey())
    }

    /// The API key as a .p8 file holds it (PKCS#8 PEM).
    public var privateKeyPEM: String { apiKey.pemRepresentation }

    /// The app (`bid`) of the token `authorization` carries, when Apple would accept it: ES256 by an
    /// accepted key named by `kid`, `iss`, `aud` = `appstoreconnect-v1`, `bid` = one of `bundleIDs`,
    /// not expired, at most an hour long. Nil: refused.
    func acceptedBundle(authorization: String?, now: Date = Date()) -> String? {
        guard let authorization, authorization.hasPrefix("Bearer ") else { return nil }
        let parts = authorization.dropFirst(7).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Base64URL.decode(parts[0]),
            let claimsData = Base64URL.decode(parts[1]),
            let signatureData = Base64URL.decode(parts[2]),
            let header = (try? JSONSerialization.jsonObject(with: headerData)) as? [String: Any],
            let claims = (try? JSONSerialization.jsonObject(with: claimsData)) as? [String: Any],
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData),
            let kid = header["kid"] as? String,
            let key = kid == keyID ? apiKey.publicKey : otherKeys[kid],
            key.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8))
        else { return nil }
        guard header["alg"] as? String == "ES256",
            claims["iss"] as? String == issuerID, claims["aud"] as? String == "appstoreconnect-v1",
            let bundle = claims["bid"] as? String, bundleIDs.contains(bundle),
            let issued = (claims["iat"] as? NSNumber)?.doubleValue,
            let expires = (claims["exp"] as? NSNumber)?.doubleValue
        else { return nil }
        let wall = now.timeIntervalSince1970
        return expires > wall && expires - issued <= 3_600 && issued <= wall + 60 ? bundle : nil
    }
}

/// What the simulator sends back for one Server API request.
enum ServerAPIAnswer: Sendable {
    /// HTTP 200 with a JSON body.
    case json(Data)
    /// An Apple error: HTTP status with `{"errorCode": N, "errorMessage": …}`.
    case error(httpStatus: Int, code: Int, message: String)
    /// A body that is not Apple's.
    case raw(httpStatus: Int, contentType: String, body: Data)

    static let notFound = ServerAPIAnswer.error(httpStatus: 404, code: 4_040_010, message: "Transaction id not found.")
}

extension SimulatedReceipt {
    /// The Get All Subscription Statuses answer at `now`, built from the same timeline as the
    /// verifyReceipt answer so both sources tell the same history.
    func statusAnswer(at now: Date, sandboxEndpoint: Bool, attempt: Int, signer: SigningChain) -> ServerAPIAnswer {
        let isSandbox = scenario == .sandbox
        guard isSandbox == sandboxEndpoint else { return .notFound }
        switch scenario {
        case .accountNotFound, .notAuthentic, .malformed: return .notFound
        case .transient21005 where attempt <= 2:
            return .error(httpStatus: 500, code: 5_000_001, message: "An unknown error occurred. Please try again.")
        case .outage:
            return .raw(
                httpStatus: 503, contentType: "text/html; charset=utf-8",
                body: Data("<html><body><h1>Service Unavailable</h1></body></html>".utf8))
        case .html200:
            return .raw(
                httpStatus: 200, contentType: "text/html; charset=utf-8",
                body: Data("<!DOCTYPE html><html><body>We'll be right back.</body></html>".utf8))
        default: break
        }
        let response = self.response(at: now)
        let environment = isSandbox ? "Sandbox" : "Production"
        var groups: [String: [[String: Any]]] = [:]
        var order: [String] = []
        let originals = Set(response.latestReceiptInfo.compactMap(\.originalTransactionID)).sorted()
        for original in originals {
            guard
                let item = lastTransaction(
                    original, in: response, environment: environment, now: now, signer: signer)
            else { continue }
            if groups[item.group] == nil { order.append(item.group) }
            groups[item.group, default: []].append([
                "status": item.status, "originalTransactionId": original,
                "signedTransactionInfo": item.transaction, "signedRenewalInfo": item.renewal,
            ])
        }
        let body: [String: Any] = [
            "environment": environment, "bundleId": bundleIdentifier, "appAppleId": 1_234_567_890,
            "data": order.map { ["subscriptionGroupIdentifier": $0, "lastTransactions": groups[$0] ?? []] },
        ]
        let data = Self.json(body)
        if scenario == .truncatedJSON {
            return .raw(httpStatus: 200, contentType: "application/json", body: data.prefix(data.count / 2))
        }
        return .json(data)
    }

    /// A Get Transaction History (v2, ascending) page at `now`: every period of the timeline, oldest first,
    /// `pageSize` a page from the one after `revision` (`rev-N`: N transactions sent so far), each signed by
    /// `signer`. A revision the simulator never gave is Apple's 4000005.
    func historyAnswer(
        at now: Date, sandboxEndpoint: Bool, revision: String?, pageSize: Int, signer: SigningChain
    ) -> ServerAPIAnswer {
        let isSandbox = scenario == .sandbox
        guard isSandbox == sandboxEndpoint else { return .notFound }
        switch scenario {
        case .accountNotFound, .notAuthentic, .malformed: return .notFound
        default: break
        }
        let rows = response(at: now, withHistory: true).latestReceiptInfo.sorted {
            ($0.purchaseDate ?? .distantPast, $0.transactionID ?? "") < (
                $1.purchaseDate ?? .distantPast, $1.transactionID ?? ""
            )
        }
        let sent = revision.map { $0.hasPrefix("rev-") ? Int($0.dropFirst(4)) : nil } ?? 0
        guard let sent, (0...rows.count).contains(sent) else {
            return .error(httpStatus: 400, code: 4_000_005, message: "Invalid request revision.")
        }
        let environment = isSandbox ? "Sandbox" : "Production"
        let page = rows[sent..<min(rows.count, sent + pageSize)]
        let signed = page.compactMap { row in
            try? signer.sign(Self.json(transactionPayload(row, environment: environment, now: now)))
        }
        let body: [String: Any] = [
            "environment": environment, "bundleId": bundleIdentifier, "appAppleId": 1_234_567_890,
            "revision": "rev-\(sent + page.count)", "hasMore": sent + page.count < rows.count,
            "signedTransactions": signed,
        ]
        return .json(Self.json(body))
    }

    /// The subscription `original` as `response` shows it at `now`: its group, Apple's status, and its
    /// latest transaction and renewal info signed by `signer`; nil when the answer does not list it.
    func lastTransaction(
        _ original: String, in response: VerifyReceiptResponse, environment: String, now: Date, signer: SigningChain
    ) -> (group: String, status: Int, transaction: String, renewal: String)? {
        let rows = response.latestReceiptInfo.filter { $0.originalTransactionID == original }
        let current =
            rows.filter { $0.isUpgraded != true }.max {
                ($0.expiresDate ?? .distantPast) < ($1.expiresDate ?? .distantPast)
            }
            ?? rows.max { ($0.expiresDate ?? .distantPast) < ($1.expiresDate ?? .distantPast) }
        guard let current else { return nil }
        let pending = response.pendingRenewalInfo.first { $0.originalTransactionID == original }
        guard
            let transaction = try? signer.sign(
                Self.json(transactionPayload(current, environment: environment, now: now))),
            let renewal = try? signer.sign(
                Self.json(renewalPayload(pending, current: current, environment: environment, now: now)))
        else { return nil }
        return (
            current.subscriptionGroupIdentifier ?? "20000001", Self.status(of: current, pending: pending, now: now),
            transaction, renewal
        )
    }

    /// Apple's summary: 5 revoked, 1 active, 4 grace period, 3 billing retry, 2 expired.
    static func status(of current: LatestReceiptInfo, pending: PendingRenewalInfo?, now: Date) -> Int {
        if current.cancellationDate != nil, current.isUpgraded != true { return 5 }
        if let expires = current.expiresDate, expires > now { return 1 }
        if pending?.isInBillingRetryPeriod == true {
            if let grace = pending?.gracePeriodExpiresDate, grace > now { return 4 }
            return 3
        }
        return 2
    }

    /// One signed transaction's payload for `row`, as Apple signs it at `now`.
    func transactionPayload(_ row: LatestReceiptInfo, environment: String, now: Date) -> [String: Any] {
        var payload: [String: Any] = [
            "bundleId": bundleIdentifier, "environment": environment, "signedDate": Self.ms(now), "quantity": 1,
            "type": "Auto-Renewable Subscription", "storefront": prices.storefront,
            "inAppOwnershipType": row.inAppOwnershipType ?? ownershipType,
            "transactionReason": row.transactionID == row.originalTransactionID ? "PURCHASE" : "RENEWAL",
        ]
        payload["transactionId"] = row.transactionID
        payload["originalTransactionId"] = row.originalTransactionID
        payload["webOrderLineItemId"] = row.webOrderLineItemID
        payload["productId"] = row.productID
        payload["appAccountToken"] = appAccountToken(of: row.originalTransactionID ?? originalTransactionID, at: now)
        payload["subscriptionGroupIdentifier"] = row.subscriptionGroupIdentifier
        payload["purchaseDate"] = row.purchaseDate.map(Self.ms)
        payload["originalPurchaseDate"] = row.originalPurchaseDate.map(Self.ms)
        payload["expiresDate"] = row.expiresDate.map(Self.ms)
        payload["currency"] = prices.currency
        let introductory = paidIntroductoryOffer == true && row.transactionID == row.originalTransactionID
        if row.isTrialPeriod == true {
            payload["price"] = 0
            payload["offerType"] = 1
            payload["offerDiscountType"] = "FREE_TRIAL"
        } else if introductory {
            payload["price"] = prices.introductoryMilliunits(period: period)
            payload["offerType"] = 1
            payload["offerDiscountType"] = "PAY_AS_YOU_GO"
        } else {
            payload["price"] = prices.milliunits(period: period)
        }
        if row.isUpgraded == true { payload["isUpgraded"] = true }
        if let cancelled = row.cancellationDate, row.isUpgraded != true {
            payload["revocationDate"] = Self.ms(cancelled)
            payload["revocationReason"] = Int(row.cancellationReason ?? "0") ?? 0
            payload["revocationType"] = refundPercentage == nil ? "REFUND_FULL" : "REFUND_PRORATED"
            payload["revocationPercentage"] = refundPercentage
        }
        if let seats = seats(ofPeriod: periodIndex(of: row), at: now) {
            // Apple-hosted invitations; one price tier, the price per seat.
            payload["quantity"] = seats.quantity
            var info: [String: Any] = [
                "invitationManagement": "APPLE",
                "priceTiers": [["price": payload["price"] ?? 0, "quantity": seats.quantity]],
            ]
            info["revokedSeatQuantity"] = seats.revoked
            payload["multiSeatInfo"] = info
        }
        return payload
    }

    private func renewalPayload(
        _ pending: PendingRenewalInfo?, current: LatestReceiptInfo, environment: String, now: Date
    ) -> [String: Any] {
        var payload: [String: Any] = ["environment": environment, "signedDate": Self.ms(now)]
        payload["originalTransactionId"] = current.originalTransactionID
        payload["appAccountToken"] = appAccountToken(
            of: current.originalTransactionID ?? originalTransactionID, at: now)
        payload["productId"] = pending?.productID ?? current.productID
        payload["autoRenewProductId"] = pending?.autoRenewProductID ?? pending?.productID ?? current.productID
        payload["autoRenewStatus"] = (pending?.autoRenewStatus ?? false) ? 1 : 0
        payload["expirationIntent"] = pending?.expirationIntent.flatMap { Int($0) }
        payload["isInBillingRetryPeriod"] = pending?.isInBillingRetryPeriod ?? false
        payload["gracePeriodExpiresDate"] = pending?.gracePeriodExpiresDate.map(Self.ms)
        payload["recentSubscriptionStartDate"] = Self.ms(start)
        if pending?.autoRenewStatus == true { payload["renewalDate"] = current.expiresDate.map(Self.ms) }
        return payload
    }

    /// The receipt's storefront's price list.
    var prices: SimulatedPrices { SimulatedPrices(storefront: storefront ?? "USA") }

    static func ms(_ date: Date) -> Int64 { AppleDateFormat.milliseconds(date) }

    static func json(_ object: [String: Any]) -> Data {
        (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
    }
}
