import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import RenewalStorage

/// Where a run's metrics go: a textfile for node_exporter (written atomically at the end) and/or a
/// Pushgateway (pushed every `interval` during the run and once at the end).
package struct MetricsOutput: Sendable {
    package var textfile: String?
    package var pushgateway: String?
    package var interval: Double
    package var instance: String
    /// Grouping labels after `instance` (`deliver` pushes with `command=deliver`).
    package var group: [(String, String)] = []

    package init(
        textfile: String?, pushgateway: String?, interval: Double, instance: String, group: [(String, String)] = []
    ) {
        self.textfile = textfile
        self.pushgateway = pushgateway
        self.interval = interval
        self.instance = instance
        self.group = group
    }

    package var isEnabled: Bool { textfile != nil || pushgateway != nil }

    /// `{base}/metrics/job/renewal/instance/{host}` (then `/{label}/{value}` for each of `group`): a
    /// PUT there replaces that group's metrics, and only those.
    package var pushURL: String? {
        guard let pushgateway else { return nil }
        let base = pushgateway.hasSuffix("/") ? String(pushgateway.dropLast()) : pushgateway
        let segment = CharacterSet.urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))
        var url =
            "\(base)/metrics/job/renewal/instance/\(instance.addingPercentEncoding(withAllowedCharacters: segment) ?? "unknown")"
        for (label, value) in group {
            url += "/\(label)/\(value.addingPercentEncoding(withAllowedCharacters: segment) ?? "unknown")"
        }
        return url
    }

    /// Writes the textfile: a temporary file beside it, renamed into place, so the collector never
    /// reads half of it.
    package func writeTextfile(_ text: String) throws {
        guard let textfile else { return }
        let temporary = textfile + ".tmp-\(ProcessInfo.processInfo.processIdentifier)"
        guard OwnerOnlyFile.create(atPath: temporary, truncate: true),
            let handle = FileHandle(forWritingAtPath: temporary),
            (try? handle.write(contentsOf: Data(text.utf8))) != nil, (try? handle.close()) != nil
        else {
            throw MetricsOutputError(
                description:
                    "cannot write \(temporary); check that the directory of --metrics-textfile exists and is writable")
        }
        guard rename(temporary, textfile) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw MetricsOutputError(description: "cannot rename the metrics into \(textfile): \(reason)")
        }
    }

    /// PUTs the metrics to the Pushgateway; throws a message naming the gateway on failure.
    package func push(_ text: String, client: HTTPClient) async throws {
        guard let url = pushURL else { return }
        var request = HTTPClientRequest(url: url)
        request.method = .PUT
        request.headers.add(name: "Content-Type", value: "text/plain; version=0.0.4")
        request.body = .bytes(ByteBuffer(string: text))
        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, timeout: .seconds(10))
        } catch {
            throw MetricsOutputError(description: "cannot reach the Pushgateway at \(pushgateway ?? url): \(error)")
        }
        guard (200..<300).contains(Int(response.status.code)) else {
            let body = try? await response.body.collect(upTo: 4_096)
            let detail = body.map { String(buffer: $0) }?.prefix(300) ?? ""
            throw MetricsOutputError(
                description: "the Pushgateway at \(pushgateway ?? url) answered HTTP \(response.status.code): \(detail)"
            )
        }
    }

    /// Writes the textfile and pushes once more at the end; failures are warnings, never the
    /// command's exit code.
    package func write(_ metrics: RunMetrics, warn: @escaping @Sendable (String) -> Void) async {
        let text = metrics.text()
        do { try writeTextfile(text) } catch { warn("\(error)") }
        guard pushURL != nil else { return }
        do {
            try await HTTPClient.withHTTPClient { client in try await push(text, client: client) }
        } catch {
            warn("\(error)")
        }
    }

    /// Runs `body` while pushing `metrics` every `interval` seconds; pushes once more at the end.
    /// Metric delivery problems are logged as warnings: they never change the run's exit code.
    package func around<T>(
        _ metrics: RunMetrics?, warn: @escaping @Sendable (String) -> Void, _ body: () async throws -> T
    )
        async throws -> T
    {
        guard let metrics, pushURL != nil else { return try await body() }
        return try await HTTPClient.withHTTPClient { client in
            // The pusher is a child task: the group waits for it to end before the HTTP client it
            // pushes with shuts down.
            try await withThrowingTaskGroup(of: Void.self, returning: T.self) { group in
                group.addTask {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .milliseconds(Int64(interval * 1000)))
                        guard !Task.isCancelled else { return }
                        do { try await push(metrics.text(), client: client) } catch { warn("\(error)") }
                    }
                }
                defer { group.cancelAll() }
                return try await body()
            }
        }
    }
}

package struct MetricsOutputError: Error, CustomStringConvertible {
    package var description: String
}
