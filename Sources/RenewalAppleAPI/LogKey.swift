/// Logger metadata keys of this module, declared once.
package enum LogKey {
    /// The `status` of Apple's answer.
    package static let appStoreStatus = "appstore.status"
    /// The environment that answered (`Production`, `Sandbox`).
    package static let appStoreEnvironment = "appstore.environment"
    /// The attempt number for this receipt, from 1.
    package static let appStoreAttempt = "appstore.attempt"
    /// The endpoint a request went to (`production` or `sandbox`; never the receipt).
    package static let appStoreEndpoint = "appstore.endpoint"
    /// Why an attempt failed (`AppleAPIError.reason`).
    package static let appStoreFailure = "appstore.failure"
    /// The HTTP status code of the answer.
    package static let httpStatus = "http.status"
    /// Size of the request body in bytes.
    package static let requestBytes = "http.request_bytes"
    /// Size of the response body in bytes.
    package static let responseBytes = "http.response_bytes"
    /// The delay before the next attempt, in milliseconds.
    package static let retryDelayMS = "appstore.retry_delay_ms"
}
