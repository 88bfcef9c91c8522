import Foundation
import Logging
import NIOHTTP1
import RenewalAppleAPI
import RenewalCore

/// Apple's own limits for the two support endpoints, lower than the status endpoint's: Look Up Order ID
/// allows 10 requests per second in production, Set App Account Token 20 (sandbox a tenth). Requests to
/// them draw on their own bucket at these rates as well as on the status budget every endpoint shares.
/// The budgets keep a margin under them (`RequestRates.headroom`, `RequestRates.lateness`): at most 9
/// lookups and 17 bindings leave in any one second, even after the process stalled.
public enum OrderEndpoints {
    /// The bucket and rate of Look Up Order ID.
    public static let lookUp = (endpoint: "lookup", rates: RequestRates(production: 10, sandbox: 1))
    /// The bucket and rate of Set App Account Token.
    public static let setAppAccountToken = (
        endpoint: "appAccountToken", rates: RequestRates(production: 20, sandbox: 2)
    )

    /// This process's spacing of each endpoint, used when the caller gives no budget of its own (a
    /// command on PostgreSQL gives the fleet's, so several support agents share Apple's limit).
    static let processBudgets = (
        lookUp: LocalRequestBudget(rates: lookUp.rates),
        setAppAccountToken: LocalRequestBudget(rates: setAppAccountToken.rates)
    )
}

/// What Look Up Order ID said about one order.
public enum OrderLookup: Sendable, Hashable {
    /// A valid order (status 0) in `environment`: its transactions, each verified (chain, Apple's
    /// certificate OIDs, bundle, environment), and the reasons of those that failed verification.
    case found(environment: AppStoreEnvironment, transactions: [JWSTransaction], refused: [FailureReason])
    /// Apple does not know the order id (status 1): Look Up Order ID is asked in production only.
    case invalidOrder
}

/// Look Up Order ID's answer as Apple sends it: the signed transactions, unverified.
struct OrderLookupResponse: Decodable {
    var status: Int?
    var signedTransactions: [String]?
}

extension ServerAPIClient {
    /// `GET /inApps/v1/lookup/{orderId}`: the transactions of the order on the customer's e-mailed receipt.
    ///
    /// Production only: Apple documents that the endpoint "isn't available in the sandbox environment" (the
    /// sandbox sends no e-mailed receipts, so its purchases have no order ID a customer could give), so asking
    /// the sandbox after production said "invalid" would only spend a request against Apple. Status 1 (or
    /// 404) is an invalid order. Retried like the other calls; the request waits for `endpointBudget`
    /// (Apple's 10 per second by default, this process's) and the status budget.
    public func lookUpOrder(
        orderID: String, endpointBudget: (any RequestBudget)? = nil, logger: Logger
    ) async -> Result<OrderLookup, AppleAPIError> {
        let path =
            "/inApps/v1/lookup/" + (orderID.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        let environment = AppStoreEnvironment.production
        let bucket = RequestBucket(
            endpoint: OrderEndpoints.lookUp.endpoint, environment: environment, app: configuration.budgetApp)
        do {
            try await (endpointBudget ?? OrderEndpoints.processBudgets.lookUp).admit(bucket)
        } catch {
            return .failure(.connection("cancelled"))
        }
        switch await pageExchange(path, environment: environment, logger: logger, as: OrderLookupResponse.self) {
        case .success(let response) where response.status == 0:
            return .success(await verified(response.signedTransactions ?? [], environment: environment))
        case .success(let response) where response.status == 1:
            return .success(.invalidOrder)
        case .success:
            return .failure(.unreadableField(path: "status", detail: "neither 0 (valid) nor 1 (invalid)"))
        case .failure(.notFound):
            return .success(.invalidOrder)
        case .failure(let error):
            return .failure(error)
        }
    }

    /// Each signed transaction verified; those that fail are counted by reason, never trusted.
    private func verified(_ signed: [String], environment: AppStoreEnvironment) async -> OrderLookup {
        var transactions: [JWSTransaction] = []
        var refused: [FailureReason] = []
        for jws in signed {
            do {
                transactions.append(try await verifier.transaction(jws, environment: environment.rawValue))
            } catch {
                refused.append(error.reason)
            }
        }
        return .found(environment: environment, transactions: transactions, refused: refused)
    }

    /// `PUT /inApps/v1/transactions/{originalTransactionId}/appAccountToken` with `{"appAccountToken": UUID}`:
    /// binds (or replaces) the token Apple puts in the subscription's later transactions and notifications.
    ///
    /// Apple answers an empty 2xx. Retried like the other calls (setting the same token twice is
    /// harmless); a 4xx is Apple's refusal (an unknown transaction, a malformed token), returned with its
    /// `errorCode` for the caller to report. Waits for `endpointBudget` (Apple's 20 per second by default,
    /// this process's) and the status budget.
    public func setAppAccountToken(
        originalTransactionID: String, token: UUID, environment: AppStoreEnvironment,
        endpointBudget: (any RequestBudget)? = nil, logger: Logger
    ) async -> Result<Void, AppleAPIError> {
        let path =
            "/inApps/v1/transactions/"
            + (originalTransactionID.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
            + "/appAccountToken"
        let body = Data(#"{"appAccountToken":"\#(token.uuidString.lowercased())"}"#.utf8)
        let bucket = RequestBucket(
            endpoint: OrderEndpoints.setAppAccountToken.endpoint, environment: environment,
            app: configuration.budgetApp)
        do {
            try await (endpointBudget ?? OrderEndpoints.processBudgets.setAppAccountToken).admit(bucket)
        } catch {
            return .failure(.connection("cancelled"))
        }
        switch await pageExchange(
            path, method: .PUT, body: body, environment: environment, logger: logger, as: NoContent.self)
        {
        case .success: return .success(())
        // An empty 204 (what Apple's libraries expect) is a success the shared exchange does not list.
        case .failure(.httpStatus(let code, _)) where (200..<300).contains(code): return .success(())
        case .failure(let error): return .failure(error)
        }
    }
}
