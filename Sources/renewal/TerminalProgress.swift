import Foundation
import RenewalObservability
import RenewalStorage
import Synchronization

/// A progress line on standard error (`done/total, rate, ETA`), redrawn at most four times a second.
/// Only on a terminal, without `NO_COLOR` and without `--quiet`.
final class TerminalProgress: RunProgress, Sendable {
    private struct State {
        var total: Int?
        var started = Date()
        var lastDraw = Date.distantPast
        var drawn = false
    }

    private let state = Mutex(State())

    /// A progress display when standard error is a terminal and nothing asks for quiet.
    static func make(quiet: Bool) -> TerminalProgress? {
        guard !quiet, isatty(STDERR_FILENO) == 1, Environment.value("NO_COLOR") == nil else { return nil }
        return TerminalProgress()
    }

    func started(total: Int?) {
        state.withLock {
            $0.total = total
            $0.started = Date()
        }
    }

    func receiptDone(counts: RenewalCounts) {
        let line: String? = state.withLock { state in
            let now = Date()
            guard now.timeIntervalSince(state.lastDraw) >= 0.25 else { return nil }
            state.lastDraw = now
            state.drawn = true
            return Self.line(
                done: counts.checked, failed: counts.failed, total: state.total,
                elapsed: now.timeIntervalSince(state.started))
        }
        if let line { FileHandle.standardError.write(Data(("\r\u{1B}[K" + line).utf8)) }
    }

    func finished() {
        let drawn = state.withLock { $0.drawn }
        if drawn { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }

    static func line(done: Int, failed: Int, total: Int?, elapsed: TimeInterval) -> String {
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        var text = "renewal: \(done)"
        if let total, total > 0 {
            text += "/\(total) (\(min(100, done * 100 / total))%)"
        }
        text += String(format: ", %.0f receipts/s", rate)
        if failed > 0 { text += ", \(failed) failed" }
        if let total, rate > 0, total > done {
            text += String(format: ", ETA %.0f s", Double(total - done) / rate)
        }
        return text
    }
}
