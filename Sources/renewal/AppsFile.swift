import Foundation
import RenewalImport

/// `--apps FILE` / `RENEWAL_APPS_FILE`: several apps in one database.
///
///     {"apps": [
///       {"bundle_id": "com.example.app", "shared_secret_file": "/run/secrets/app-secret",
///        "key_id": "ABC123DEFG", "issuer_id": "…", "private_key_file": "/run/secrets/team.p8",
///        "products": ["com.example.pro.monthly"]},
///       {"bundle_id": "com.example.mac", "shared_secret_file": "/run/secrets/mac-secret"}
///     ]}
///
/// Secrets stay in their own files: the apps file names them and never holds one, so it can be
/// kept in version control. Each app needs a shared secret file, a Server API key (`key_id`,
/// `issuer_id` and `private_key_file` together; one team key may serve several apps), or both.
struct AppsFile: Sendable, Hashable {
    struct App: Sendable, Hashable {
        var bundleID: String
        var sharedSecretFile: String?
        var keyID: String?
        var issuerID: String?
        var privateKeyFile: String?
        /// Nil: any product (or those `--products-from-database` allows).
        var products: Set<String>?

        /// Whether the entry names a Server API key.
        var hasServerAPIKey: Bool { keyID != nil }
    }

    var path: String
    /// In the file's order: a row of unknown app is tried with each in turn.
    var apps: [App]

    private static let appKeys: Set<String> = [
        "bundle_id", "shared_secret_file", "key_id", "issuer_id", "private_key_file", "products",
    ]

    /// Reads and checks the file; every problem names the file, the app and the fix.
    static func load(path: String) throws -> AppsFile {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError(
                "The apps file \(path) cannot be read (RENEWAL_APPS_FILE / --apps); check the path and its permissions."
            )
        }
        guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let entries = root["apps"] as? [Any]
        else {
            throw ConfigurationError(
                """
                The apps file \(path) is not a JSON object with an "apps" array; write \
                {"apps": [{"bundle_id": "…", "shared_secret_file": "…"}, …]}.
                """
            )
        }
        guard !entries.isEmpty else {
            throw ConfigurationError("The apps file \(path) lists no app; give at least one in \"apps\".")
        }
        var apps: [App] = []
        for (index, entry) in entries.enumerated() {
            let app = try parse(entry, number: index + 1, path: path)
            if apps.contains(where: { $0.bundleID == app.bundleID }) {
                throw ConfigurationError(
                    "The apps file \(path) lists \(app.bundleID) twice; give each app once.")
            }
            apps.append(app)
        }
        return AppsFile(path: path, apps: apps)
    }

    private static func parse(_ entry: Any, number: Int, path: String) throws -> App {
        let place = "app \(number) of \(path)"
        guard let fields = entry as? [String: Any] else {
            throw ConfigurationError("\(place) is not a JSON object; give {\"bundle_id\": \"…\", …}.")
        }
        if let unknown = fields.keys.filter({ !appKeys.contains($0) }).sorted().first {
            let hint =
                unknown.contains("secret") || unknown.contains("key")
                ? " Secrets are never written in the apps file: put each in its own file and name the file." : ""
            throw ConfigurationError(
                """
                \(place) has "\(unknown)", which is not a setting of an app (\(appKeys.sorted().joined(separator: ", "))).\
                \(hint)
                """
            )
        }
        func text(_ key: String) throws -> String? {
            guard let value = fields[key], !(value is NSNull) else { return nil }
            guard let string = value as? String, !string.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw ConfigurationError("\(place): \"\(key)\" must be a non-empty string.")
            }
            return string
        }
        guard let bundleID = try text("bundle_id"), ImportLine.isBundleID(bundleID) else {
            throw ConfigurationError(
                "\(place) needs \"bundle_id\": the app's bundle id, such as \"com.example.app\".")
        }
        let place2 = "\(bundleID) (\(place))"
        var app = App(
            bundleID: bundleID, sharedSecretFile: try text("shared_secret_file"), keyID: try text("key_id"),
            issuerID: try text("issuer_id"), privateKeyFile: try text("private_key_file"))
        let keyFields = [("key_id", app.keyID), ("issuer_id", app.issuerID), ("private_key_file", app.privateKeyFile)]
        let given = keyFields.filter { $0.1 != nil }
        if !given.isEmpty, given.count < keyFields.count {
            let missing = keyFields.filter { $0.1 == nil }.map(\.0).joined(separator: ", ")
            throw ConfigurationError(
                """
                \(place2) names a Server API key but not \(missing); give key_id, issuer_id and private_key_file \
                together, or none of them.
                """
            )
        }
        guard app.sharedSecretFile != nil || app.hasServerAPIKey else {
            throw ConfigurationError(
                """
                \(place2) has no credentials: give "shared_secret_file" (verifyReceipt), a Server API key \
                ("key_id", "issuer_id", "private_key_file"), or both.
                """
            )
        }
        if let value = fields["products"], !(value is NSNull) {
            guard let list = value as? [String], list.allSatisfy({ !$0.isEmpty }) else {
                throw ConfigurationError("\(place2): \"products\" must be an array of product ids (strings).")
            }
            app.products = list.isEmpty ? nil : Set(list)
        }
        return app
    }

    /// The shared secret of `app`, read from its file; nil when the entry names none.
    static func sharedSecret(of app: App) throws -> String? {
        guard let path = app.sharedSecretFile else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError(
                """
                The shared secret file of \(app.bundleID), \(path), cannot be read; point shared_secret_file at a \
                readable file holding the app's shared secret.
                """
            )
        }
        let secret = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !secret.isEmpty else {
            throw ConfigurationError(
                "The shared secret file of \(app.bundleID), \(path), is empty; put the app's shared secret in it.")
        }
        return secret
    }

    /// The variables of the one-app configuration that are set although the apps file replaces them.
    static var ignoredVariables: [String] {
        [
            "APPSTORE_SHARED_SECRET", "APPSTORE_SHARED_SECRET_FILE", "APPSTORE_BUNDLE_ID", "APPSTORE_KEY_ID",
            "APPSTORE_ISSUER_ID", "APPSTORE_PRIVATE_KEY_FILE", "RENEWAL_PRODUCTS",
        ].filter { Environment.value($0) != nil }
    }
}
