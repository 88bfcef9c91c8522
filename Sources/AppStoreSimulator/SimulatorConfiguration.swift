/// How to run the simulator.
public struct SimulatorConfiguration: Sendable {
    /// The address to bind. Default `127.0.0.1` (loopback only).
    public var host: String
    /// The port to bind. Default 0: any free port (`withAppStoreSimulator` reports the one chosen).
    public var port: Int
    /// The account's primary shared secret: when set, a request whose `password` differs (and is not
    /// the receipt's app-specific secret) answers `{"status":21004}`. Default nil: not checked.
    public var sharedSecret: String?
    /// App-specific shared secrets, by bundle id: a receipt of such an app is accepted with its own
    /// secret (or the primary one), and answers 21004 with any other. Default none.
    public var appSecrets: [String: String] = [:]
    /// A delay before every verifyReceipt answer, added to `state.latency`. Default zero.
    public var latency: Duration
    /// How long the `slow` scenario waits before answering. Default 10 seconds.
    public var slowDelay: Duration
    /// The clock, fault, counters and received receipts; hold it to change them in-process.
    /// Default: a fresh state whose clock follows the wall clock.
    public var state: SimulatorState
    /// The App Store Server API's signing chain and accepted API key. Default: generated at start;
    /// nil only if generation failed, and then the Server API routes answer HTTP 500.
    public var serverAPI: SimulatedServerAPI?

    /// Creates a configuration; every parameter has the default documented on its property.
    public init(
        host: String = "127.0.0.1", port: Int = 0, sharedSecret: String? = nil,
        latency: Duration = .zero, slowDelay: Duration = .seconds(10), state: SimulatorState = SimulatorState(),
        serverAPI: SimulatedServerAPI? = try? SimulatedServerAPI.generate()
    ) {
        self.serverAPI = serverAPI
        self.host = host
        self.port = port
        self.sharedSecret = sharedSecret
        self.latency = latency
        self.slowDelay = slowDelay
        self.state = state
    }
}

extension SimulatorConfiguration {
    /// Whether verifyReceipt accepts `password` for a receipt of `bundleID`, as Apple does: the
    /// app's own secret or the account's primary one; anything when neither is configured.
    func accepts(password: String?, for bundleID: String) -> Bool {
        let accepted = [sharedSecret, appSecrets[bundleID]].compactMap { $0 }
        return accepted.isEmpty || accepted.contains { $0 == password }
    }
}

extension SimulatorConfiguration: CustomStringConvertible {
    /// The configuration with the shared secret redacted.
    public var description: String {
        """
        SimulatorConfiguration(host: \(host), port: \(port), sharedSecret: \
        \(sharedSecret == nil ? "none" : "<redacted>"), latency: \(latency), slowDelay: \(slowDelay))
        """
    }
}

/// Where a running simulator listens.
public struct SimulatorEndpoints: Sendable, Hashable {
    /// The bound port.
    public var port: Int
    /// `http://127.0.0.1:PORT/verifyReceipt`: the production endpoint.
    public var productionURL: String
    /// `http://127.0.0.1:PORT/sandbox/verifyReceipt`: the sandbox endpoint.
    public var sandboxURL: String
    /// `http://127.0.0.1:PORT`: the App Store Server API's production base URL.
    public var serverAPIURL: String
    /// `http://127.0.0.1:PORT/sandbox`: the App Store Server API's sandbox base URL.
    public var sandboxServerAPIURL: String
    /// `http://127.0.0.1:PORT/_simulator`: the base of the control routes (`/clock`, `/fault`, `/stats`,
    /// `/received/{account}`).
    public var controlURL: String

    /// Endpoints on `host` (a wildcard bind address is reached through 127.0.0.1) and `port`.
    public init(host: String = "127.0.0.1", port: Int) {
        let reachable = ["0.0.0.0", "::", ""].contains(host) ? "127.0.0.1" : host
        let base = reachable.contains(":") ? "http://[\(reachable)]:\(port)" : "http://\(reachable):\(port)"
        self.port = port
        self.productionURL = base + "/verifyReceipt"
        self.sandboxURL = base + "/sandbox/verifyReceipt"
        self.controlURL = base + "/_simulator"
        self.serverAPIURL = base
        self.sandboxServerAPIURL = base + "/sandbox"
    }
}
