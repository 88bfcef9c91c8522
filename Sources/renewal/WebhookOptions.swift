import ArgumentParser
import Foundation
import RenewalDelivery
import RenewalJob

/// Where webhooks go and the key they are signed with. The secret comes only from the file named by
/// `RENEWAL_WEBHOOK_SECRET_FILE`: never argv, never logged.
struct WebhookOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            Where each entitlement change is POSTed (Standard Webhooks, signed with the key in the file named by \
            RENEWAL_WEBHOOK_SECRET_FILE). Env: RENEWAL_WEBHOOK_URL. Default: no webhooks.
            """,
            valueName: "url"))
    var webhookURL: String?

    /// The flag, else the environment variable; nil (no webhooks) when neither is set or it is empty.
    var resolvedURL: String? {
        let url = webhookURL ?? Environment.value("RENEWAL_WEBHOOK_URL")
        return url?.isEmpty == false ? url : nil
    }

    /// The URL, checked: http or https with a host.
    func url() throws -> String {
        guard let url = resolvedURL else {
            throw ConfigurationError("No webhook URL: set RENEWAL_WEBHOOK_URL or pass --webhook-url.")
        }
        guard let components = URLComponents(string: url), ["http", "https"].contains(components.scheme ?? ""),
            components.host?.isEmpty == false
        else {
            throw ConfigurationError(
                "The webhook URL is not an http(s) URL with a host; give one like https://app.example.com/hooks.")
        }
        return url
    }

    /// The signer, from `RENEWAL_WEBHOOK_SECRET_FILE`.
    func signer() throws -> WebhookSigner {
        guard let path = Environment.value("RENEWAL_WEBHOOK_SECRET_FILE") else {
            throw ConfigurationError(
                """
                A webhook URL is set but RENEWAL_WEBHOOK_SECRET_FILE is not: point it at a file holding the signing \
                secret (whsec_ and the base64 of at least 16 random bytes).
                """)
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError(
                "RENEWAL_WEBHOOK_SECRET_FILE names \(path), which cannot be read. Point it at a readable file.")
        }
        do {
            return try WebhookSigner(secret: String(decoding: data, as: UTF8.self))
        } catch let error as WebhookSecretError {
            throw ConfigurationError("RENEWAL_WEBHOOK_SECRET_FILE (\(path)): \(error).")
        }
    }
}
