import Foundation
import Logging
import NIOHTTP1
import RenewalAppleAPI
import RenewalCore

extension ServerAPIClient: RefundRequestAnswering {
    /// `PUT /inApps/v2/transactions/consumption/{transactionId}` with the consumption information as JSON;
    /// Apple answers 202 with no body. Retried within the client's attempts like a status request; a 429
    /// is not waited out here (the request is tried again by a later run).
    public func sendConsumptionInformation(
        _ information: ConsumptionInformation, transactionID: String, environment: AppStoreEnvironment,
        logger: Logger
    ) async -> Result<Void, AppleAPIError> {
        let path =
            "/inApps/v2/transactions/consumption/"
            + (transactionID.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        let body = Data(information.json.utf8)
        return await pageExchange(
            path, method: .PUT, body: body, environment: environment, logger: logger, as: NoContent.self
        ).map { _ in () }
    }
}
