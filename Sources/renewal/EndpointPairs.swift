/// Apple's endpoints come in pairs, production and sandbox. Overriding one of a pair and not the other
/// is how test traffic reaches Apple: with only `--production-url` pointed at a simulator, sandbox
/// receipts went to Apple's real sandbox, shared secret included. So a half-overridden pair stops the
/// command before anything connects (exit 78), naming the sibling to set.
struct EndpointPairs {
    /// One pair: each side's flag and variable, and the flag's value when given.
    struct Pair {
        var api: String
        var production: Side
        var sandbox: Side
    }

    struct Side {
        var flag: String?
        var variable: String
        var flagValue: String?

        /// Set by the flag or the variable (an empty variable is unset).
        var isOverridden: Bool { flagValue != nil || Environment.value(variable) != nil }

        var name: String { flag.map { "\($0) / \(variable)" } ?? variable }
    }

    var pairs: [Pair]

    /// The verifyReceipt and Server API pairs, from the options (nil: only the variables count, for a
    /// command without those flags, and the messages name only them).
    init(appStore: AppStoreOptions?, serverAPI: ServerAPIOptions?) {
        let flag = { (name: String) in appStore == nil ? nil : name }
        pairs = [
            Pair(
                api: "verifyReceipt",
                production: Side(
                    flag: flag("--production-url"), variable: "APPSTORE_VERIFY_RECEIPT_URL",
                    flagValue: appStore?.productionURL),
                sandbox: Side(
                    flag: flag("--sandbox-url"), variable: "APPSTORE_SANDBOX_VERIFY_RECEIPT_URL",
                    flagValue: appStore?.sandboxURL)),
            Pair(
                api: "App Store Server API",
                production: Side(
                    flag: flag("--server-api-url"), variable: "APPSTORE_SERVER_API_URL",
                    flagValue: serverAPI?.serverAPIURL),
                sandbox: Side(
                    flag: flag("--sandbox-server-api-url"), variable: "APPSTORE_SANDBOX_SERVER_API_URL",
                    flagValue: serverAPI?.sandboxServerAPIURL)),
        ]
    }

    /// Throws a `ConfigurationError` (exit 78) for the first pair overridden on one side only.
    func check() throws {
        for pair in pairs where pair.production.isOverridden != pair.sandbox.isOverridden {
            let (set, unset, environment) =
                pair.production.isOverridden
                ? (pair.production, pair.sandbox, "sandbox") : (pair.sandbox, pair.production, "production")
            throw ConfigurationError(
                """
                \(set.name) is set but \(unset.name) is not: \(environment) requests would go to Apple's real \
                \(pair.api) with this configuration's credentials. Set \(unset.name) too (to the same test server, \
                or to Apple's own URL if that is meant), or unset \(set.name).
                """)
        }
    }
}
