/// Logger metadata keys of this module, declared once.
enum LogKey {
    /// The `status` of Apple's answer.
    static let appStoreStatus = "appstore.status"
    /// The environment that answered (`Production`, `Sandbox`).
    static let appStoreEnvironment = "appstore.environment"
    /// The attempt number for this receipt, from 1.
    static let appStoreAttempt = "appstore.attempt"
    /// The endpoint a request went to (`production` or `sandbox`; never the receipt).
    static let appStoreEndpoint = "appstore.endpoint"
    /// Why an attempt failed (`AppStoreClientError.reason`).
    static let appStoreFailure = "appstore.failure"
    /// The HTTP status code of the answer.
    static let httpStatus = "http.status"
    /// Size of the request body in bytes.
    static let requestBytes = "http.request_bytes"
    /// Size of the response body in bytes.
    static let responseBytes = "http.response_bytes"
    /// The delay before the next attempt, in milliseconds.
    static let retryDelayMS = "appstore.retry_delay_ms"
}
