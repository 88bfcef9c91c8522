import Foundation

/// The verifyReceipt shared secret: only from `APPSTORE_SHARED_SECRET` or the file named by
/// `APPSTORE_SHARED_SECRET_FILE`, never from argv, never logged.
enum SharedSecret {
    /// Whether either variable is set.
    static var isSet: Bool {
        Environment.value("APPSTORE_SHARED_SECRET") != nil || Environment.value("APPSTORE_SHARED_SECRET_FILE") != nil
    }

    static func load() throws -> String {
        if let secret = Environment.value("APPSTORE_SHARED_SECRET") {
            return secret.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        if let path = Environment.value("APPSTORE_SHARED_SECRET_FILE") {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ConfigurationError(
                    """
                    APPSTORE_SHARED_SECRET_FILE names \(path), which cannot be read. Point it at a readable file \
                    holding the shared secret.
                    """
                )
            }
            let secret = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard !secret.isEmpty else {
                throw ConfigurationError(
                    "APPSTORE_SHARED_SECRET_FILE names \(path), which is empty. Put the app's shared secret in it.")
            }
            return secret
        }
        throw ConfigurationError(
            """
            No shared secret: set APPSTORE_SHARED_SECRET (or APPSTORE_SHARED_SECRET_FILE) to the app's App Store \
            Connect shared secret.
            """
        )
    }
}

/// A configuration problem: printed, then exit 78.
struct ConfigurationError: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}
