import ArgumentParser
import Foundation
import Logging

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
    @Option(name: .long, help: ArgumentHelp("verifyReceipt production URL. Env: APPSTORE_VERIFY_RECEIPT_URL.", valueName: "url"))
    var productionURL: String?

    @Option(name: .long, help: ArgumentHelp("verifyReceipt sandbox URL. Env: APPSTORE_SANDBOX_VERIFY_RECEIPT_URL.", valueName: "url"))
    var sandboxURL: String?

    @Option(name: .long, help: ArgumentHelp("Seconds to wait for one Apple answer.", valueName: "seconds"))
    var timeout: Double = 30

    @Option(name: .long, help: "Attempts per receipt before it counts as failed (retries back off with jitter).")
    var maxAttempts: Int = 4

    @Option(name: .long, help: ArgumentHelp("Largest Apple answer accepted, in bytes.", valueName: "bytes"))
    var maxResponseBytes: Int = 8 << 20

    func validate() throws {
        guard timeout > 0, timeout.isFinite else { throw ValidationError("--timeout must be a number of seconds > 0.") }
        guard (1...20).contains(maxAttempts) else { throw ValidationError("--max-attempts must be between 1 and 20.") }
        guard maxResponseBytes >= 1024 else { throw ValidationError("--max-response-bytes must be at least 1024.") }
        for (flag, value) in [("--production-url", resolvedProductionURL), ("--sandbox-url", resolvedSandboxURL)] {
            guard let url = URL(string: value), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil else {
                throw ValidationError("\(flag) must be an http(s) URL, got '\(value)'.")
            }
        }
    }

    var resolvedProductionURL: String {
        productionURL ?? Environment.value("APPSTORE_VERIFY_RECEIPT_URL") ?? "https://buy.itunes.apple.com/verifyReceipt"
    }

    var resolvedSandboxURL: String {
        sandboxURL ?? Environment.value("APPSTORE_SANDBOX_VERIFY_RECEIPT_URL") ?? "https://sandbox.itunes.apple.com/verifyReceipt"
    }
}

/// `--log-level` / `RENEWAL_LOG_LEVEL`.
struct LoggingOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "trace, debug, info, notice, warning, error or critical. Env: RENEWAL_LOG_LEVEL. Default: info.",
        valueName: "level"))
    var logLevel: String?

    func validate() throws {
        guard level != nil else {
            throw ValidationError("--log-level must be one of: \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")).")
        }
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
        LoggingBootstrap.once(level: level)
        var logger = Logger(label: "renewal")
        logger.logLevel = level
        return logger
    }
}

enum LoggingBootstrap {
    nonisolated(unsafe) private static var done = false

    static func once(level: Logger.Level) {
        guard !done else { return }
        done = true
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
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
