import ArgumentParser
import Crypto
import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalServerAPI
import RenewalStorage
import X509

/// `--source` and the App Store Server API's credentials. The key id, issuer id and the key file
/// come only from the environment; the key never appears on argv or in a log.
struct ServerAPIOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            auto (the App Store Server API where credentials are set and the row has a transaction id, \
            verifyReceipt otherwise), verify-receipt or server-api. Env: RENEWAL_SOURCE. Default: auto.
            """,
            valueName: "source"))
    var source: String?

    // Named explicitly: ArgumentParser would spell these `--server-apiurl`. That spelling, which
    // earlier versions answered to, is still accepted.
    @Option(
        name: [.customLong("server-api-url"), .customLong("server-apiurl")],
        help: ArgumentHelp("App Store Server API production base URL. Env: APPSTORE_SERVER_API_URL.", valueName: "url"))
    var serverAPIURL: String?

    @Option(
        name: [.customLong("sandbox-server-api-url"), .customLong("sandbox-server-apiurl")],
        help: ArgumentHelp(
            "App Store Server API sandbox base URL. Env: APPSTORE_SANDBOX_SERVER_API_URL.", valueName: "url"))
    var sandboxServerAPIURL: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            Server API requests per second in production for all workers on this database together, a ceiling: \
            requests are spaced at 80% of it to absorb network jitter (Apple allows 50). Env: \
            RENEWAL_SERVER_API_RATE. Default: 45.
            """,
            valueName: "n"))
    var serverAPIRate: Double?

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            Server API requests per second in sandbox, for all workers together (spaced at 80% of it). Env: \
            RENEWAL_SERVER_API_SANDBOX_RATE. Default: 10.
            """,
            valueName: "n"))
    var serverAPISandboxRate: Double?

    var resolvedSource: SourceMode? {
        SourceMode(rawValue: (source ?? Environment.value("RENEWAL_SOURCE") ?? "auto").lowercased())
    }

    var rates: RequestRates {
        RequestRates(
            production: serverAPIRate ?? Environment.value("RENEWAL_SERVER_API_RATE").flatMap(Double.init) ?? 45,
            sandbox: serverAPISandboxRate ?? Environment.value("RENEWAL_SERVER_API_SANDBOX_RATE").flatMap(Double.init)
                ?? 10)
    }

    var resolvedURLs: (production: String, sandbox: String) {
        (
            serverAPIURL ?? Environment.value("APPSTORE_SERVER_API_URL") ?? "https://api.storekit.apple.com",
            sandboxServerAPIURL ?? Environment.value("APPSTORE_SANDBOX_SERVER_API_URL")
                ?? "https://api.storekit-sandbox.apple.com"
        )
    }

    func validate() throws {
        guard resolvedSource != nil else {
            throw ValidationError("--source must be auto, verify-receipt or server-api (also RENEWAL_SOURCE).")
        }
        for (name, rate) in [("--server-api-rate", rates.production), ("--server-api-sandbox-rate", rates.sandbox)] {
            guard rate > 0, rate <= 1_000, rate.isFinite else {
                throw ValidationError("\(name) must be a number of requests per second in (0, 1000].")
            }
        }
        for (flag, value) in [
            ("--server-api-url", resolvedURLs.production), ("--sandbox-server-api-url", resolvedURLs.sandbox),
        ] {
            guard let url = URL(string: value), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw ValidationError("\(flag) must be an http(s) URL, got '\(value)'.")
            }
        }
    }

    /// The client configuration, or nil when no Server API credential is set. Some but not all set,
    /// an unreadable key or root file: a configuration error naming the variable and the fix.
    func configuration(bundleID: String?, timeout: Double, maxAttempts: Int, connections: Int) throws -> ServerAPIClient
        .Configuration?
    {
        let keyID = Environment.value("APPSTORE_KEY_ID")
        let issuerID = Environment.value("APPSTORE_ISSUER_ID")
        let keyFile = Environment.value("APPSTORE_PRIVATE_KEY_FILE")
        let given = [
            ("APPSTORE_KEY_ID", keyID), ("APPSTORE_ISSUER_ID", issuerID), ("APPSTORE_PRIVATE_KEY_FILE", keyFile),
        ]
        guard given.contains(where: { $0.1 != nil }) else { return nil }
        let missing = given.filter { $0.1 == nil }.map(\.0) + (bundleID == nil ? ["APPSTORE_BUNDLE_ID"] : [])
        guard missing.isEmpty, let keyID, let issuerID, let keyFile, let bundleID else {
            throw ConfigurationError(
                """
                The App Store Server API needs \(missing.joined(separator: ", ")) too (APPSTORE_KEY_ID, \
                APPSTORE_ISSUER_ID, APPSTORE_BUNDLE_ID and APPSTORE_PRIVATE_KEY_FILE together), or none of them \
                to use verifyReceipt only.
                """
            )
        }
        return try configuration(
            keyID: keyID, issuerID: issuerID, keyFile: keyFile, keyFileSetting: "APPSTORE_PRIVATE_KEY_FILE",
            bundleID: bundleID, timeout: timeout, maxAttempts: maxAttempts, connections: connections)
    }

    /// The client configuration for one app's key (`keyFileSetting` names where the key file was
    /// given, for the error).
    func configuration(
        keyID: String, issuerID: String, keyFile: String, keyFileSetting: String, bundleID: String, timeout: Double,
        maxAttempts: Int, connections: Int
    ) throws -> ServerAPIClient.Configuration {
        let key: P256.Signing.PrivateKey
        do {
            key = try ServerAPICredentials.privateKey(file: keyFile)
        } catch {
            throw ConfigurationError("\(keyFileSetting): \(error)")
        }
        let roots = try Self.trustedRoots()
        let urls = resolvedURLs
        return ServerAPIClient.Configuration(
            keyID: keyID, issuerID: issuerID, bundleID: bundleID, privateKey: key, productionURL: urls.production,
            sandboxURL: urls.sandbox, rootCertificates: roots, requestTimeout: .milliseconds(Int64(timeout * 1000)),
            maxAttempts: maxAttempts, maxConnectionsPerHost: connections)
    }
}

extension ServerAPIOptions {
    /// The roots signed data must chain to: `APPSTORE_ROOT_CERTIFICATES` (comma-separated PEM or DER
    /// files), else Apple's root built into the job. An unreadable or empty list is a configuration error.
    static func trustedRoots() throws -> [Certificate] {
        guard let list = Environment.value("APPSTORE_ROOT_CERTIFICATES") else { return AppleRoots.certificates }
        let paths = list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
            !$0.isEmpty
        }
        let roots: [Certificate]
        do {
            roots = try ServerAPICredentials.certificates(files: paths)
        } catch {
            throw ConfigurationError("APPSTORE_ROOT_CERTIFICATES: \(error)")
        }
        guard !roots.isEmpty else {
            throw ConfigurationError(
                """
                APPSTORE_ROOT_CERTIFICATES names no certificate; give comma-separated PEM or DER files, or \
                unset it to trust Apple's root.
                """
            )
        }
        return roots
    }
}
