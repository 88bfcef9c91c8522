import AppStoreSimulator
import Foundation
import Testing

/// Each count has one name and one meaning wherever a run shows it: the stdout summary, the log's
/// `Run finished` line, the `--report` file, and `renewal report` read back from the database.
/// `changed` counts entitlement changes (the entries of `changes`); `receipts_changed` counts the
/// checked receipts that made at least one.
@Suite("One name per count: stdout, log line, report file and renewal report agree")
struct CountWordsTests {
    static let secret = "count-words-secret-51c0"
    /// lara's receipt holds two subscriptions, so one receipt makes two changes; gus's outage fails.
    static let scenarios: [(String, Scenario)] = [
        ("ana", .renewal), ("lara", .multipleSubscriptions), ("gus", .outage), ("ivy", .accountNotFound),
        ("hal", .voluntaryExpiry),
    ]
    static let words = [
        "checked", "changed", "receipts_changed", "unchanged", "failed", "invalid", "conflicts", "skipped",
    ]

    @Test("one run: every count word gives the same number in every place it is shown")
    func everyPlaceAgrees() async throws {
        try await CLI.withDirectoryAndSimulator(secret: Self.secret) { directory, state, _, endpoints in
            let environment = [
                "APPSTORE_SHARED_SECRET": Self.secret, "APPSTORE_VERIFY_RECEIPT_URL": endpoints.productionURL,
                "APPSTORE_SANDBOX_VERIFY_RECEIPT_URL": endpoints.sandboxURL,
                "RENEWAL_DATABASE": directory + "/renewal.sqlite",
            ]
            let start = state.now.addingTimeInterval(-50 * 86_400)
            let lines = Self.scenarios.map {
                let receipt = SimulatedReceipt(account: $0.0, scenario: $0.1, start: start)
                return #"{"user_id": "\#($0.0)", "latest_receipt": "\#(receipt.encoded)"}"#
            }
            try #require(try await CLI.run(["migrate"], environment: environment).status == 0)
            let imported = try await CLI.run(
                ["import", "-"], environment: environment, stdin: lines.joined(separator: "\n"))
            try #require(imported.status == 0, "\(imported.stderr)")
            let reportPath = directory + "/run.json"
            let run = try await CLI.run(
                ["run", "--report", reportPath, "--log-format", "json"], environment: environment)
            #expect(run.status == 3, "\(run.stdout)\(run.stderr)")

            let report = try Self.counts(ofReport: try #require(FileManager.default.contents(atPath: reportPath)))
            let changes = try Self.object(try #require(FileManager.default.contents(atPath: reportPath)))["changes"]
            #expect(report["changed"] == (changes as? [Any])?.count, "changed counts the entries of changes")
            #expect(
                report["changed"] != report["receipts_changed"],
                "lara's receipt makes two changes, so the two counts differ: \(report)")
            #expect(
                report["receipts_changed"].map { $0 + report["unchanged", default: 0] + report["failed", default: 0] }
                    == report["checked"], "\(report)")

            let summary = try #require(run.stdout.split(separator: "\n").last { $0.hasPrefix("run ") }, "\(run.stdout)")
            let logLine = try #require(
                run.stderr.split(separator: "\n").first { $0.contains("\"Run finished\"") }, "\(run.stderr)")
            let stored = try await CLI.run(["report", "--format", "json"], environment: environment)
            let table = try await CLI.run(["report", "--format", "table"], environment: environment)
            let storedCounts = try Self.counts(ofReport: Data(stored.stdout.utf8))
            let tableCounts = try Self.tableRow(table.stdout)
            for word in Self.words {
                let expected = try #require(report[word], "the report has no counts.\(word)")
                #expect(Self.number(after: word, in: String(summary)) == expected, "stdout \(word): \(summary)")
                #expect(
                    Self.logValue("renewal." + word, in: String(logLine)) == expected, "log line \(word): \(logLine)")
                #expect(storedCounts[word] == expected, "renewal report --format json \(word): \(stored.stdout)")
                if let shown = tableCounts[word] {
                    #expect(shown == expected, "renewal report --format table \(word): \(table.stdout)")
                }
            }
            #expect(tableCounts.keys.contains("changed"), "\(table.stdout)")
        }
    }

    static func object(_ data: Data) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    static func counts(ofReport data: Data) throws -> [String: Int] {
        let counts = try #require(try object(data)["counts"] as? [String: Any])
        return counts.compactMapValues { $0 as? Int }
    }

    /// The number right after `word ` in the stdout summary (`checked 5, changed 4, …`).
    static func number(after word: String, in line: String) -> Int? {
        let pattern = "(^|[ ;,:])" + word + " ([0-9]+)"
        guard let match = line.range(of: pattern, options: .regularExpression) else { return nil }
        return Int(line[match].split(separator: " ").last ?? "")
    }

    /// A metadata value of a JSON log line, wherever the line nests it.
    static func logValue(_ key: String, in line: String) -> Int? {
        let pattern = "\"" + NSRegularExpression.escapedPattern(for: key) + "\":\"?([0-9]+)"
        guard let match = line.range(of: pattern, options: .regularExpression) else { return nil }
        return Int(line[match].split(separator: ":").last?.filter(\.isNumber) ?? "")
    }

    /// The run's row of `renewal report --format table`, by header name: each column starts where its
    /// header does (cells such as the start time and `took` hold spaces).
    static func tableRow(_ text: String) throws -> [String: Int] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { Array(String($0)) }
        let headerIndex = try #require(
            lines.firstIndex { String($0).trimmingCharacters(in: .whitespaces).hasPrefix("started") }, "\(text)")
        let header = lines[headerIndex]
        let row = lines[headerIndex + 1]
        var starts: [(name: String, at: Int)] = []
        for index in header.indices where header[index] != " " && (index == 0 || header[index - 1] == " ") {
            let name = String(header[index...].prefix { $0 != " " })
            starts.append((name, index))
        }
        var counts: [String: Int] = [:]
        for (position, column) in starts.enumerated() {
            let end = position + 1 < starts.count ? starts[position + 1].at : row.count
            guard column.at < row.count else { continue }
            let cell = String(row[column.at..<min(end, row.count)]).trimmingCharacters(in: .whitespaces)
            if let value = Int(cell) { counts[column.name] = value }
        }
        return counts
    }
}
