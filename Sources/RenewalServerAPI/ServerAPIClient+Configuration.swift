import Crypto
import Foundation
import RenewalAppleAPI
import RenewalCore
import SwiftASN1
import X509

extension ServerAPIClient {
    /// How the client talks to the App Store Server API. Every value but the credentials has a
    /// documented default.
    public struct Configuration: Sendable {
        /// The key's id in App Store Connect (`APPSTORE_KEY_ID`), the JWT's `kid`.
        public var keyID: String
        /// The issuer id (`APPSTORE_ISSUER_ID`), the JWT's `iss`.
        public var issuerID: String
        /// The app's bundle id (`APPSTORE_BUNDLE_ID`): the JWT's `bid`, and what every signed payload must name.
        public var bundleID: String
        /// The .p8 key (`APPSTORE_PRIVATE_KEY_FILE`). Never logged: `description` redacts it.
        public var privateKey: P256.Signing.PrivateKey
        /// Default `https://api.storekit.apple.com`.
        public var productionURL: String
        /// Default `https://api.storekit-sandbox.apple.com`.
        public var sandboxURL: String
        /// Roots trusted for signed data; default Apple Root CA - G3 (shipped with the project).
        public var rootCertificates: [Certificate]
        /// The time one HTTP request may take, body included. Default 30 seconds.
        public var requestTimeout: Duration
        /// The largest answer read. Default 4 MiB.
        public var maxResponseBytes: Int
        /// Requests per receipt for temporary failures (5xx, Apple's retryable codes, 429, timeouts,
        /// connection errors). Environment switches do not count. Default 4.
        public var maxAttempts: Int
        /// Backoff before the second attempt, doubling per attempt with full jitter. Default 0.5 s.
        public var retryBaseDelay: Duration
        /// Cap on one backoff delay. Default 8 s.
        public var retryMaxDelay: Duration
        /// The longest a 429's `Retry-After` is waited out within one check; a longer pause fails the
        /// check as an outage (the row is retried later) rather than hold the run. Default 60 s.
        public var maxRetryAfter: Duration
        /// How long a token is used: Apple allows at most 60 minutes. Default 20 minutes; a new one is
        /// signed a minute before the old one expires.
        public var tokenLifetime: TimeInterval
        /// HTTP/1.1 connections kept per host. Default 16.
        public var maxConnectionsPerHost: Int
        /// With several apps in one database, the app whose rate budget requests count against
        /// (Apple's limits are per app). Default nil: one app, the budget of before.
        public var budgetApp: String?

        public init(
            keyID: String, issuerID: String, bundleID: String, privateKey: P256.Signing.PrivateKey,
            productionURL: String = "https://api.storekit.apple.com",
            sandboxURL: String = "https://api.storekit-sandbox.apple.com",
            rootCertificates: [Certificate] = AppleRoots.certificates,
            requestTimeout: Duration = .seconds(30), maxResponseBytes: Int = 4 << 20, maxAttempts: Int = 4,
            retryBaseDelay: Duration = .milliseconds(500), retryMaxDelay: Duration = .seconds(8),
            maxRetryAfter: Duration = .seconds(60), tokenLifetime: TimeInterval = 20 * 60,
            maxConnectionsPerHost: Int = 16
        ) {
            self.keyID = keyID
            self.issuerID = issuerID
            self.bundleID = bundleID
            self.privateKey = privateKey
            self.productionURL = productionURL
            self.sandboxURL = sandboxURL
            self.rootCertificates = rootCertificates
            self.requestTimeout = requestTimeout
            self.maxResponseBytes = maxResponseBytes
            self.maxAttempts = maxAttempts
            self.retryBaseDelay = retryBaseDelay
            self.retryMaxDelay = retryMaxDelay
            self.maxRetryAfter = maxRetryAfter
            self.tokenLifetime = tokenLifetime
            self.maxConnectionsPerHost = maxConnectionsPerHost
        }

        /// `maxAttempts`, `retryBaseDelay` and `retryMaxDelay` as the loop every Apple client retries with.
        public var retryPolicy: RetryPolicy {
            RetryPolicy(maxAttempts: maxAttempts, baseDelay: retryBaseDelay, maxDelay: retryMaxDelay)
        }

        /// The base URL of `environment`, without a trailing slash.
        func baseURL(_ environment: AppStoreEnvironment) -> String {
            let url = environment == .sandbox ? sandboxURL : productionURL
            return url.hasSuffix("/") ? String(url.dropLast()) : url
        }
    }
}

extension ServerAPIClient.Configuration: CustomStringConvertible {
    /// The configuration without the key, fit for logs.
    public var description: String {
        "ServerAPIClient.Configuration(keyID: \(keyID), issuerID: \(issuerID), bundleID: \(bundleID), "
            + "privateKey: <redacted>, "
            + "productionURL: \(productionURL), sandboxURL: \(sandboxURL), roots: \(rootCertificates.count), "
            + "requestTimeout: \(requestTimeout), maxAttempts: \(maxAttempts))"
    }
}

/// Reading the credentials and roots the configuration names, with errors that say which file and
/// what to do. Nothing here ever prints a key.
public enum ServerAPICredentials {
    public enum LoadError: Error, CustomStringConvertible, Equatable {
        case unreadable(path: String, detail: String)
        case notAKey(path: String)
        case notACertificate(path: String)

        public var description: String {
            switch self {
            case .unreadable(let path, let detail):
                "Cannot read \(path) (\(detail)); check the path and the file's permissions."
            case .notAKey(let path):
                """
                \(path) is not an App Store Connect API key; APPSTORE_PRIVATE_KEY_FILE must name the .p8 file \
                (PEM, \"BEGIN PRIVATE KEY\") downloaded from App Store Connect.
                """
            case .notACertificate(let path):
                "\(path) is not a certificate; APPSTORE_ROOT_CERTIFICATES takes comma-separated PEM or DER files."
            }
        }
    }

    /// The P-256 key of a .p8 file (PKCS#8 PEM), or of SEC1 PEM.
    public static func privateKey(file path: String) throws(LoadError) -> P256.Signing.PrivateKey {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw .unreadable(path: path, detail: (error as NSError).localizedDescription)
        }
        guard let key = try? P256.Signing.PrivateKey(pemRepresentation: text) else { throw .notAKey(path: path) }
        return key
    }

    /// Certificates from PEM (one or more per file) or DER files.
    public static func certificates(files paths: [String]) throws(LoadError) -> [Certificate] {
        var result: [Certificate] = []
        for path in paths {
            let data: Data
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: path))
            } catch {
                throw .unreadable(path: path, detail: (error as NSError).localizedDescription)
            }
            if let text = String(data: data, encoding: .utf8), text.contains("-----BEGIN CERTIFICATE-----") {
                let blocks = text.components(separatedBy: "-----END CERTIFICATE-----").filter {
                    $0.contains("-----BEGIN CERTIFICATE-----")
                }
                for block in blocks {
                    guard let certificate = try? Certificate(pemEncoded: block + "-----END CERTIFICATE-----") else {
                        throw .notACertificate(path: path)
                    }
                    result.append(certificate)
                }
            } else {
                guard let certificate = try? Certificate(derEncoded: Array(data)) else {
                    throw .notACertificate(path: path)
                }
                result.append(certificate)
            }
        }
        return result
    }
}
