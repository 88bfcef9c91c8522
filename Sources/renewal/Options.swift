import ArgumentParser
import Foundation
import Logging
import RenewalCore
import RenewalObservability
import RenewalStorage
import Synchronization

/// `--database` / `RENEWAL_DATABASE`.
struct DatabaseOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "SQLite file path or postgres:// URL. Env: RENEWAL_DATABASE. Default: renewal.sqlite.",
            valueName: "path-or-url"))
    var database: String?

    /// The flag, else the environment variable, else the default.
    var resolved: String {
        database ?? Environment.value("RENEWAL_DATABASE") ?? "renewal.sqlite"
    }
}

/// Where Apple is and how to talk to it. The shared secret comes only from the environment.
struct AppStoreOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp("verifyReceipt production URL. Env: APPSTORE_VERIFY_RECEIPT_URL.", valueName: "url"))
    var productionURL: String?

    @Option(
        name: .long,
        help: ArgumentHelp("verifyReceipt sandbox URL. Env: APPSTORE_SANDBOX_VERIFY_RECEIPT_URL.", valueName: "url"))
    var sandboxURL: String?

    @Option(name: .long, help: ArgumentHelp("Seconds to wait for one Apple answer.", valueName: "seconds"))
    var timeout: Double = 30

    @Option(name: .long, help: "Attempts per receipt before it counts as failed (retries back off with jitter).")
    var maxAttempts: Int = 4

    @Option(name: .long, help: ArgumentHelp("Largest Apple answer accepted, in bytes.", valueName: "bytes"))
    var maxResponseBytes: Int = 8 << 20

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            The app's bundle id; answers for another bundle change nothing. Env: APPSTORE_BUNDLE_ID. Default: not \
            checked.
            """,
            valueName: "id"))
    var bundleID: String?

    @Option(
        name: .long, parsing: .singleValue,
        help: ArgumentHelp(
            """
            Product ids this app sells (comma-separated, repeatable); answers only for other products change \
            nothing. Env: RENEWAL_PRODUCTS. Default: any.
            """,
            valueName: "ids"))
    var products: [String] = []

    @Flag(
        name: .long,
        help: "Also allow every product id already in the database (subscriptions and imported product ids).")
    var productsFromDatabase = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            JSON file listing several apps in one database, each with its bundle id, shared secret file, \
            optional Server API key and products (docs/several-apps.md). Env: RENEWAL_APPS_FILE. Default: one \
            app, from the APPSTORE_* variables.
            """,
            valueName: "file"))
    var apps: String?

    /// `--apps`, else `RENEWAL_APPS_FILE`.
    var resolvedAppsFile: String? {
        apps ?? Environment.value("RENEWAL_APPS_FILE")
    }

    func validate() throws {
        guard timeout > 0, timeout.isFinite else { throw ValidationError("--timeout must be a number of seconds > 0.") }
        guard (1...20).contains(maxAttempts) else { throw ValidationError("--max-attempts must be between 1 and 20.") }
        guard maxResponseBytes >= 1024 else { throw ValidationError("--max-response-bytes must be at least 1024.") }
        if apps != nil, bundleID != nil || !products.isEmpty {
            throw ValidationError(
                "--apps lists each app's bundle id and products; drop --bundle-id and --products, or drop --apps.")
        }
        for (flag, value) in [("--production-url", resolvedProductionURL), ("--sandbox-url", resolvedSandboxURL)] {
            guard let url = URL(string: value), let scheme = url.scheme, ["http", "https"].contains(scheme),
                url.host != nil
            else {
                throw ValidationError("\(flag) must be an http(s) URL, got '\(value)'.")
            }
        }
    }

    /// `--bundle-id`, else `APPSTORE_BUNDLE_ID`.
    var resolvedBundleID: String? {
        bundleID ?? Environment.value("APPSTORE_BUNDLE_ID")
    }

    /// `--products`, else `RENEWAL_PRODUCTS`, split on commas; nil when neither names any.
    var resolvedProducts: Set<String>? {
        let lists = products.isEmpty ? Environment.value("RENEWAL_PRODUCTS").map { [$0] } ?? [] : products
        let ids = lists.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }.filter {
            !$0.isEmpty
        }
        return ids.isEmpty ? nil : Set(ids)
    }

    /// The app's identity: bundle id and product allow-list (with `--products-from-database`, the
    /// products the database has seen are allowed too).
    func identity(store: any SubscriptionStore) async throws -> AppIdentity {
        var products = resolvedProducts
        if productsFromDatabase {
            products = (products ?? []).union(try await store.knownProductIDs())
        }
        return AppIdentity(bundleID: resolvedBundleID, productIDs: products)
    }

    var resolvedProductionURL: String {
        productionURL ?? Environment.value("APPSTORE_VERIFY_RECEIPT_URL")
            ?? "https://buy.itunes.apple.com/verifyReceipt"
    }

    var resolvedSandboxURL: String {
        sandboxURL ?? Environment.value("APPSTORE_SANDBOX_VERIFY_RECEIPT_URL")
            ?? "https://sandbox.itunes.apple.com/verifyReceipt"
    }
}

/// `--log-level` / `RENEWAL_LOG_LEVEL`.
struct LoggingOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "trace, debug, info, notice, warning, error or critical. Env: RENEWAL_LOG_LEVEL. Default: info.",
            valueName: "level"))
    var logLevel: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            text (one readable line per entry) or json (one JSON object per line: timestamp, level, message, \
            label, source, metadata; metadata only when the entry has any). Env: RENEWAL_LOG_FORMAT. Default: text.
            """,
            valueName: "format"))
    var logFormat: String?

    func validate() throws {
        guard level != nil else {
            throw ValidationError(
                "--log-level must be one of: \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")).")
        }
        guard format != nil else {
            throw ValidationError("--log-format must be text or json (also RENEWAL_LOG_FORMAT).")
        }
    }

    private var format: LogFormat? {
        LogFormat(rawValue: (logFormat ?? Environment.value("RENEWAL_LOG_FORMAT") ?? "text").lowercased())
    }

    private var level: Logger.Level? {
        level(default: .info)
    }

    private func level(default fallback: Logger.Level) -> Logger.Level? {
        guard let text = logLevel ?? Environment.value("RENEWAL_LOG_LEVEL") else { return fallback }
        return Logger.Level(rawValue: text.lowercased())
    }

    /// Bootstraps logging to standard error (standard output carries JSON and summaries) once per process.
    func makeLogger(defaultLevel: Logger.Level = .info) -> Logger {
        let level = self.level(default: defaultLevel) ?? defaultLevel
        LoggingBootstrap.once(level: level, format: format ?? .text)
        var logger = Logger(label: "renewal")
        logger.logLevel = level
        return logger
    }
}

enum LoggingBootstrap {
    private static let done = Mutex(false)

    static func once(level: Logger.Level, format: LogFormat) {
        // Only the first caller bootstraps: the logging system may be set up once per process.
        let first = done.withLock { done in
            defer { done = true }
            return !done
        }
        guard first else { return }
        LoggingSystem.bootstrap { label in
            switch format {
            case .text:
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            case .json:
                var handler = JSONLogHandler(label: label)
                handler.logLevel = level
                return handler
            }
        }
    }
}

enum Environment {
    /// A non-empty environment variable.
    static func value(_ name: String) -> String? {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else { return nil }
        return value
    }
}
