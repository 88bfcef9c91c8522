import Foundation
import Logging
import RenewalCore

/// Apple's Send Consumption Information: the answer to a refund request. The Server API client conforms.
public protocol RefundRequestAnswering: Sendable {
    /// Sends `information` about `transactionID` in `environment`; success is Apple's HTTP 202.
    func sendConsumptionInformation(
        _ information: ConsumptionInformation, transactionID: String, environment: AppStoreEnvironment,
        logger: Logger
    ) async -> Result<Void, AppleAPIError>
}
