import Foundation
import RenewalJob
import RenewalObservability
import RenewalStorage
import Testing

/// One run status vocabulary for the outcome, the `runs` table, the metrics and the exit code.
@Suite("RunStatus: one vocabulary for outcome, stored run, metrics and exit code")
struct RunStatusTests {
    @Test("each ending has the exit code docs/operating.md lists; a status that is not an ending is exit 1")
    func exitCodes() {
        let expected: [RunStatus: Int32] = [
            .completed: 0, .completedWithFailures: 3, .incomplete: 3, .interrupted: 3, .abortedAppleUnavailable: 4,
            .sharedSecretRejected: 78, .credentialsRejected: 78, .appsStopped: 5, .failed: 1, .locked: 75,
        ]
        #expect(Set(expected.keys) == Set(RunStatus.endings))
        for (status, code) in expected { #expect(status.exitCode == code, "\(status)") }
        #expect(RunStatus.running.exitCode == 1 && RunStatus.abandoned.exitCode == 1)
        // Stored statuses another version wrote are kept as they are.
        #expect(RunStatus(rawValue: "paused_by_operator").rawValue == "paused_by_operator")
    }

    @Test("renewal_last_run_status is one-hot over every ending, and no series names a status no run produces")
    func metricsOneHot() {
        let metrics = RunMetrics(command: "run")
        let now = Date()
        metrics.finish(
            status: .locked, exitCode: RunStatus.locked.exitCode, startedAt: now, finishedAt: now, dueAtStart: nil,
            dueLeft: nil, lastSuccess: nil)
        let lines = metrics.text().split(separator: "\n").filter { $0.hasPrefix("renewal_last_run_status{") }
        let series = Dictionary(
            uniqueKeysWithValues: lines.compactMap { line -> (String, String)? in
                guard let match = line.firstMatch(of: /status="([^"]+)"\} (\S+)/) else { return nil }
                return (String(match.output.1), String(match.output.2))
            })
        #expect(Set(series.keys) == Set(RunStatus.endings.map(\.rawValue)))
        #expect(series["locked"] == "1.0" || series["locked"] == "1")
        #expect(series.filter { $0.key != "locked" }.values.allSatisfy { $0 == "0.0" || $0 == "0" })
        #expect(series["aborted_configuration"] == nil)
    }
}
