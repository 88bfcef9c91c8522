import Foundation
import Hummingbird
import RenewalCore

/// Look Up Order ID, Set App Account Token and the control route that makes purchases the app never
/// imports: what customer support uses when a customer paid but the app's server has no record of it.
extension SimulatorRoutes {
    /// Look Up Order ID (`GET /inApps/v1/lookup/{orderId}`): after the token, the rate limits (the global one
    /// and `SimulatorState.Endpoint.lookup`'s) and faults, `{"status": 0, "signedTransactions": […]}` for an
    /// order of a registered receipt of the token's app in this environment, else `{"status": 1}`.
    func lookUpOrder(_ request: Request, orderID: String, sandbox: Bool) async throws -> Response {
        let (bundle, serverAPI): (String, SimulatedServerAPI)
        switch try await authorize(request, sandbox: sandbox) {
        case .refused(let response): return response
        case .authorized(let app, let api): (bundle, serverAPI) = (app, api)
        }
        if let until = state.recordEndpointRequest(SimulatorState.Endpoint.lookup, app: bundle) {
            return rateLimited(until: until)
        }
        state.countOrderLookup()
        let asked = orderID.removingPercentEncoding ?? orderID
        // Another app's order is unknown to this app's key, as at Apple.
        guard let receipt = state.registered(orderID: asked), receipt.bundleIdentifier == bundle else {
            return send(.json(SimulatedReceipt.json(["status": 1])))
        }
        return send(
            receipt.lookupAnswer(orderID: asked, at: state.now, sandboxEndpoint: sandbox, signer: serverAPI.chain))
    }

    /// Set App Account Token (`PUT /inApps/v1/transactions/{originalTransactionId}/appAccountToken`): after the
    /// token, the rate limits and faults, the body `{"appAccountToken": UUID}` is bound to the subscription
    /// from the simulator clock's now on (HTTP 200, no body). Apple's refusals: 400 4000008 for a malformed id,
    /// 4000183 for a malformed UUID, 4000187 for a renewal's id, 4000185 for a family-shared purchase, 404
    /// 4040010 for an id the app's key does not know in this environment.
    func setAppAccountToken(_ request: Request, id: String, sandbox: Bool) async throws -> Response {
        let bundle: String
        switch try await authorize(request, sandbox: sandbox) {
        case .refused(let response): return response
        case .authorized(let app, _): bundle = app
        }
        if let until = state.recordEndpointRequest(SimulatorState.Endpoint.appAccountToken, app: bundle) {
            return rateLimited(until: until)
        }
        state.countAppAccountTokenSet()
        guard !id.isEmpty, id.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            return serverAPIError(400, code: 4_000_008, message: "Invalid original transaction id.")
        }
        let fields = try await jsonObject(request)
        guard let token = fields?["appAccountToken"] as? String, SimulatedReceipt.isAppAccountToken(token) else {
            return serverAPIError(400, code: 4_000_183, message: "Invalid appAccountToken UUID.")
        }
        let answers: Set<Scenario> = [.accountNotFound, .notAuthentic, .malformed]
        guard let receipt = state.registered(transactionID: id), receipt.bundleIdentifier == bundle,
            (receipt.scenario == .sandbox) == sandbox, !answers.contains(receipt.scenario)
        else {
            if let owner = state.registered(anyTransactionID: id), owner.bundleIdentifier == bundle,
                (owner.scenario == .sandbox) == sandbox
            {
                return serverAPIError(
                    400, code: 4_000_187, message: "Transaction id is not an original transaction id.")
            }
            return send(.notFound)
        }
        guard receipt.ownershipType != "FAMILY_SHARED" else {
            return serverAPIError(400, code: 4_000_185, message: "Family-shared transactions are not supported.")
        }
        state.setAppAccountToken(originalTransactionID: id, token: token)
        return Response(status: .ok)
    }

    /// `POST /_simulator/lost-purchases` with `{"count": N}` and optionally `"prefix"` (default `lost`),
    /// `"scenario"` (default `renewal`), `"with_token"` (default true), `"start_ms"` (default now) and
    /// `"spacing_seconds"` (default 3600): registers N purchases the app never imports
    /// (`SimulatorState.makeLostPurchases`) and lists each one's account, original transaction id, order
    /// ID, token and receipt.
    func makeLostPurchases(_ request: Request) async throws -> Response {
        struct Ask: Decodable {
            var count: Int
            var prefix: String?
            var scenario: Scenario?
            var withToken: Bool?
            var startMS: Int64?
            var spacingSeconds: Double?
            enum CodingKeys: String, CodingKey {
                case count, prefix, scenario
                case withToken = "with_token"
                case startMS = "start_ms"
                case spacingSeconds = "spacing_seconds"
            }
        }
        guard let ask = try await decode(Ask.self, from: request), (0...100_000).contains(ask.count),
            ask.spacingSeconds?.isFinite ?? true
        else {
            return badRequest(
                #"Send {"count": N} (0 to 100000), optionally "prefix", "scenario", "with_token", "start_ms", "#
                    + #""spacing_seconds"."#)
        }
        let receipts = state.makeLostPurchases(
            count: ask.count, prefix: ask.prefix ?? "lost", scenario: ask.scenario ?? .renewal,
            start: ask.startMS.map(AppleDateFormat.date(milliseconds:)), spacing: ask.spacingSeconds ?? 3_600,
            withToken: ask.withToken ?? true)
        return json(["purchases": receipts.map(LostPurchase.init)])
    }

    private func rateLimited(until: Date) -> Response {
        var response = serverAPIError(429, code: 4_290_000, message: "Rate limit exceeded.")
        response.headers[.retryAfter] = String(AppleDateFormat.milliseconds(until))
        return response
    }
}

/// One purchase `POST /_simulator/lost-purchases` made.
private struct LostPurchase: Encodable {
    var account: String
    var originalTransactionID: String
    var orderID: String
    var appAccountToken: String?
    var receipt: String

    init(_ receipt: SimulatedReceipt) {
        account = receipt.account
        originalTransactionID = receipt.originalTransactionID
        orderID = receipt.orderID
        appAccountToken = receipt.accountToken
        self.receipt = receipt.encoded
    }

    enum CodingKeys: String, CodingKey {
        case account, receipt
        case originalTransactionID = "original_transaction_id"
        case orderID = "order_id"
        case appAccountToken = "app_account_token"
    }
}
