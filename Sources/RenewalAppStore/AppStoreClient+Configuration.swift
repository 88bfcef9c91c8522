import RenewalAppleAPI

extension AppStoreClient {
    /// How the client talks to verifyReceipt. Every value has a documented default.
    public struct Configuration: Sendable, Hashable {
        /// The production endpoint, always asked first. Default `https://buy.itunes.apple.com/verifyReceipt`.
        public var productionURL: String
        /// The sandbox endpoint, asked after a 21007. Default `https://sandbox.itunes.apple.com/verifyReceipt`.
        public var sandboxURL: String
        /// The app's shared secret, sent as `password`. Default nil (not sent). Never logged and redacted
        /// from `description`.
        public var sharedSecret: String?
        /// Sent as `exclude-old-transactions`: only the latest transaction per subscription. Default true.
        public var excludeOldTransactions: Bool
        /// The time one HTTP request may take, body included. Default 30 seconds.
        public var requestTimeout: Duration
        /// The largest answer read; a bigger one fails with `.responseTooLarge`. Default 8 MiB.
        public var maxResponseBytes: Int
        /// Requests per receipt for temporary failures (21002, 21005, 21009, retryable 211xx, HTTP 5xx
        /// and 429, timeouts, connection errors, unreadable bodies). Environment switches (21007/21008)
        /// do not count. Default 4; values below 1 act as 1.
        public var maxAttempts: Int
        /// The backoff before the second attempt; it doubles per attempt, with full jitter. Default 0.5 seconds.
        public var retryBaseDelay: Duration
        /// The cap on one backoff delay. Default 8 seconds.
        public var retryMaxDelay: Duration
        /// HTTP/1.1 connections kept per Apple host; set it to the job's concurrency so requests never
        /// queue behind each other (AsyncHTTPClient's own default is 8). Default 16.
        public var maxConnectionsPerHost: Int

        /// Creates a configuration; every parameter has the default documented on its property.
        public init(
            productionURL: String = "https://buy.itunes.apple.com/verifyReceipt",
            sandboxURL: String = "https://sandbox.itunes.apple.com/verifyReceipt",
            sharedSecret: String? = nil,
            excludeOldTransactions: Bool = true,
            requestTimeout: Duration = .seconds(30),
            maxResponseBytes: Int = 8 << 20,
            maxAttempts: Int = 4,
            retryBaseDelay: Duration = .milliseconds(500),
            retryMaxDelay: Duration = .seconds(8),
            maxConnectionsPerHost: Int = 16
        ) {
            self.productionURL = productionURL
            self.sandboxURL = sandboxURL
            self.sharedSecret = sharedSecret
            self.excludeOldTransactions = excludeOldTransactions
            self.requestTimeout = requestTimeout
            self.maxResponseBytes = maxResponseBytes
            self.maxAttempts = maxAttempts
            self.retryBaseDelay = retryBaseDelay
            self.retryMaxDelay = retryMaxDelay
            self.maxConnectionsPerHost = maxConnectionsPerHost
        }

        /// `maxAttempts`, `retryBaseDelay` and `retryMaxDelay` as the loop every Apple client retries with.
        public var retryPolicy: RetryPolicy {
            RetryPolicy(maxAttempts: maxAttempts, baseDelay: retryBaseDelay, maxDelay: retryMaxDelay)
        }
    }
}

extension AppStoreClient.Configuration: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The configuration with the shared secret redacted, fit for logs.
    public var description: String {
        "AppStoreClient.Configuration(productionURL: \(productionURL), sandboxURL: \(sandboxURL), "
            + "sharedSecret: \(sharedSecret == nil ? "none" : "<redacted>"), "
            + "excludeOldTransactions: \(excludeOldTransactions), "
            + "requestTimeout: \(requestTimeout), maxResponseBytes: \(maxResponseBytes), maxAttempts: \(maxAttempts), "
                + """
                retryBaseDelay: \(retryBaseDelay), retryMaxDelay: \(retryMaxDelay), maxConnectionsPerHost: \
                \(maxConnectionsPerHost))
                """
    }

    /// Same as `description`: the secret stays redacted.
    public var debugDescription: String { description }

    /// A mirror without the secret, so `dump` cannot print it.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "productionURL": productionURL, "sandboxURL": sandboxURL,
                "sharedSecret": sharedSecret == nil ? "none" : "<redacted>",
                "excludeOldTransactions": excludeOldTransactions, "requestTimeout": requestTimeout,
                "maxResponseBytes": maxResponseBytes, "maxAttempts": maxAttempts,
                "retryBaseDelay": retryBaseDelay, "retryMaxDelay": retryMaxDelay,
                "maxConnectionsPerHost": maxConnectionsPerHost,
            ],
            displayStyle: .struct)
    }
}
