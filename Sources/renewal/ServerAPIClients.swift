import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalServerAPI
import RenewalStorage

/// Where every command's App Store Server API clients are made (`run`, `backfill`, `extend`, `check`), so
/// each request of each command waits for the same request budget: on PostgreSQL one budget for every
/// worker on the database, each request reserving its slot there; on SQLite this process's own.
extension AppleSetup {
    /// The request budget of a command's Server API requests, kept in `store`.
    static func requestBudget(serverAPI: ServerAPIOptions, store: any RequestSlotStore, logger: Logger)
        -> FleetRequestBudget
    {
        FleetRequestBudget(rates: serverAPI.rates, logger: logger) { bucket, interval in
            try await store.reserveRequestSlot(bucket: bucket, interval: interval)
        }
    }

    /// One Server API client over `transport`, spending `budget`: the only place a command makes one.
    static func serverAPIClient(
        _ configuration: ServerAPIClient.Configuration, transport: AppleTransport, budget: any RequestBudget
    ) -> ServerAPIClient {
        ServerAPIClient(transport: transport, configuration: configuration, budget: budget)
    }

    /// The Server API client of every app with a key, by bundle id (nil: the one app of the `APPSTORE_*`
    /// variables), over one transport and spending one budget.
    func serverAPIClients(transport: AppleTransport, budget: any RequestBudget) -> [String?: ServerAPIClient] {
        guard let apps else {
            return serverAPI.map { [nil: Self.serverAPIClient($0, transport: transport, budget: budget)] } ?? [:]
        }
        var clients: [String?: ServerAPIClient] = [:]
        for app in apps {
            if let configuration = app.serverAPI {
                clients[app.identity.bundleID] = Self.serverAPIClient(
                    configuration, transport: transport, budget: budget)
            }
        }
        return clients
    }

    /// Runs `body` with a client of `configuration` over a transport of its own, spending `budget`.
    static func withServerAPIClient<T>(
        _ configuration: ServerAPIClient.Configuration, budget: any RequestBudget,
        _ body: (ServerAPIClient) async throws -> T
    ) async throws -> T {
        try await AppleTransport.withAppleTransport(
            requestTimeout: configuration.requestTimeout, connectionsPerHost: configuration.maxConnectionsPerHost
        ) { transport in
            try await body(serverAPIClient(configuration, transport: transport, budget: budget))
        }
    }
}
