import Foundation

extension SimulatorState {
    /// App Store Server API request counters.
    public struct ServerAPIStats: Codable, Sendable, Hashable {
        public var requests = 0
        public var production = 0
        public var sandbox = 0
        /// Requests refused for a bad or missing token (HTTP 401).
        public var unauthorized = 0
        /// Requests refused by the simulated rate limit (HTTP 429).
        public var rateLimited = 0
        /// Requests for a transaction id no registered receipt holds (HTTP 404).
        public var notFound = 0
        /// Get Transaction History requests answered (any answer past the token and the rate limit).
        public var history = 0
        /// Send Consumption Information requests answered (any answer past the token and the rate limit).
        public var consumption = 0
        /// Look Up Order ID requests answered (any answer past the token and the rate limits).
        public var orderLookups = 0
        /// Set App Account Token requests answered (any answer past the token and the rate limits).
        public var appAccountTokenSets = 0
    }
}
