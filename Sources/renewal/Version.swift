import RenewalSQL
import RenewalStorage

/// What `renewal --version` prints: the release, and the database schema this build migrates to (an
/// operator upgrading workers one by one compares it with `schema_migrations`).
enum RenewalVersion {
    /// Raised with each release.
    static let number = "0.35.0"

    static var text: String { "\(number) (database schema \(SQLSchema.currentVersion))" }
}

/// Secrets are never flags: a flag's value shows in `ps`, in shell history and in cron's mail. A
/// command line that tries one is refused (exit 64) with the variable to use instead, before
/// ArgumentParser would only call it an unknown option.
enum SecretFlags {
    /// Flags people reach for, and where that secret goes instead.
    static let refused: [(flag: String, instead: String)] = [
        (
            "--shared-secret",
            "APPSTORE_SHARED_SECRET_FILE (a file readable by this user only) or APPSTORE_SHARED_SECRET"
        ),
        ("--secret", "APPSTORE_SHARED_SECRET_FILE (a file readable by this user only) or APPSTORE_SHARED_SECRET"),
        ("--private-key", "APPSTORE_PRIVATE_KEY_FILE (the .p8 file's path)"),
        ("--private-key-file", "APPSTORE_PRIVATE_KEY_FILE"),
        ("--key-id", "APPSTORE_KEY_ID"),
        ("--issuer-id", "APPSTORE_ISSUER_ID"),
        ("--webhook-secret", "RENEWAL_WEBHOOK_SECRET_FILE (a file readable by this user only)"),
        ("--password", "PGPASSWORD or ~/.pgpass (never in the database URL)"),
    ]

    /// The refusal for the first secret flag in `arguments` (up to a `--`), or nil.
    static func refusal(_ arguments: some Sequence<String>) -> String? {
        for argument in arguments {
            if argument == "--" { return nil }
            let flag = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
            if let match = refused.first(where: { $0.flag == flag }) {
                return """
                    \(match.flag) is not a flag: secrets are never taken on the command line, where ps, shell \
                    history and cron mail show them. Set \(match.instead) instead.
                    """
            }
        }
        return nil
    }
}
