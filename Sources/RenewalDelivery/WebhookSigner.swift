import Crypto
import Foundation

/// Signs webhook payloads the Standard Webhooks way: `v1,` and the base64 HMAC-SHA256, keyed by the
/// secret's bytes, over `"{webhook-id}.{webhook-timestamp}.{body}"`.
public struct WebhookSigner: Sendable {
    private let key: SymmetricKey

    /// - Parameter secret: `whsec_` followed by the base64 of the key (at least 16 bytes), as
    ///   Standard Webhooks tools print it; surrounding whitespace is ignored.
    /// - Throws: `WebhookSecretError` naming what is wrong, never the secret.
    public init(secret: String) throws {
        let trimmed = secret.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.hasPrefix("whsec_") else { throw WebhookSecretError.missingPrefix }
        guard let bytes = Data(base64Encoded: String(trimmed.dropFirst("whsec_".count))) else {
            throw WebhookSecretError.notBase64
        }
        guard bytes.count >= 16 else { throw WebhookSecretError.tooShort(bytes.count) }
        key = SymmetricKey(data: bytes)
    }

    /// The `webhook-signature` header value for one attempt.
    public func signature(id: String, timestamp: Int64, body: Data) -> String {
        var message = Data("\(id).\(timestamp).".utf8)
        message.append(body)
        let mac = HMAC<SHA256>.authenticationCode(for: message, using: key)
        return "v1," + Data(mac).base64EncodedString()
    }
}

/// A webhook secret that cannot be used; the message never holds the secret.
public enum WebhookSecretError: Error, Sendable, Hashable, CustomStringConvertible {
    case missingPrefix
    case notBase64
    case tooShort(Int)

    public var description: String {
        switch self {
        case .missingPrefix: "the webhook secret must start with whsec_ (then the base64 of the key)"
        case .notBase64: "the webhook secret after whsec_ is not base64"
        case .tooShort(let count): "the webhook secret's key is \(count) bytes; use at least 16 (24 or 32 is usual)"
        }
    }
}
