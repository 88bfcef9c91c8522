import RenewalCore

/// The exit code table as `renewal --help` prints it (the documentation's table is tested against it,
/// `DocumentedExitCodesTests`): `ExitStatus`, with the two signal codes on one row ("130 / 143").
enum ExitCodes {
    static var table: [(codes: String, meaning: String)] {
        var rows: [(codes: String, meaning: String)] = []
        for status in ExitStatus.allCases {
            if status == .terminated, let last = rows.last, last.meaning == status.meaning {
                rows[rows.count - 1].codes += " / \(status.rawValue)"
            } else {
                rows.append(("\(status.rawValue)", status.meaning))
            }
        }
        return rows
    }

    /// The `Exit codes:` paragraph of `renewal --help`.
    static var help: String {
        "Exit codes: " + table.map { "\($0.codes) \($0.meaning)" }.joined(separator: "; ") + "."
    }
}
