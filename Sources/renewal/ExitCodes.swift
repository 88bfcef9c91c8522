/// Every exit code the binary uses, with what it means: the one table `renewal --help` prints, and the
/// one the documentation's exit code table is tested against (`DocumentedExitCodesTests`).
enum ExitCodes {
    /// The codes in the order `--help` lists them; `codes` is how the docs write them ("130 / 143").
    static let table: [(codes: String, meaning: String)] = [
        ("0", "all due work done"),
        ("3", "finished, but some receipts could not be verified (they keep their state and are retried later)"),
        ("4", "aborted because Apple was unavailable"),
        ("5", "several apps: some but not all were stopped (their receipts left as they were)"),
        ("64", "usage error (a secret given as a flag among them)"),
        ("75", "another run holds the lock"),
        (
            "78",
            "configuration error (bad database, shared secret rejected, one of a production/sandbox URL pair set "
                + "without the other)"
        ),
        ("1", "internal error"),
        ("130 / 143", "a second SIGINT / SIGTERM ended the process at once"),
    ]

    /// The `Exit codes:` paragraph of `renewal --help`.
    static var help: String {
        "Exit codes: " + table.map { "\($0.codes) \($0.meaning)" }.joined(separator: "; ") + "."
    }
}
