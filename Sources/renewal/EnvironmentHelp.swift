/// The environment variables a command reads that no flag's help names: credentials (never flags, so
/// they stay out of `ps` and shell history) and settings read only from the environment. Each
/// command's `--help` ends with the groups it reads.
enum EnvironmentHelp: CaseIterable {
    case database
    case apple
    case webhook
    case logging

    /// The variables of the group, each with what it holds.
    var variables: [(name: String, holds: String)] {
        switch self {
        case .database:
            [
                ("PGPASSWORD", "the PostgreSQL password (or ~/.pgpass; never in the URL)"),
                ("PGCONNECT_TIMEOUT", "seconds to wait for PostgreSQL to accept a connection"),
            ]
        case .apple:
            [
                ("APPSTORE_SHARED_SECRET", "the app's shared secret for verifyReceipt"),
                ("APPSTORE_SHARED_SECRET_FILE", "or a file holding it (readable by this user only)"),
                ("APPSTORE_KEY_ID", "the App Store Server API key's id"),
                ("APPSTORE_ISSUER_ID", "its issuer id"),
                ("APPSTORE_PRIVATE_KEY_FILE", "the .p8 file of that key"),
                ("APPSTORE_ROOT_CERTIFICATES", "PEM file of the roots signed answers must chain to (default: Apple's)"),
            ]
        case .webhook:
            [("RENEWAL_WEBHOOK_SECRET_FILE", "the file holding the webhook signing secret (whsec_...)")]
        case .logging:
            [("NO_COLOR", "set: no progress bar on a terminal")]
        }
    }

    /// The `--help` section for `groups`.
    static func text(_ groups: EnvironmentHelp...) -> String {
        let lines = groups.flatMap(\.variables).map { "  \($0.name): \($0.holds)" }
        return "\n\nEnvironment (besides each flag's Env: variable):\n" + lines.joined(separator: "\n")
    }
}
