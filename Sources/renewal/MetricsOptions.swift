import ArgumentParser
import Foundation
import RenewalObservability

/// Where a command's Prometheus metrics go: `run`, `backfill` and `deliver` take the same flags.
struct MetricsOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Write Prometheus metrics here at the end of the run (or deliver), atomically (node_exporter's textfile collector).",
            valueName: "path"))
    var metricsTextfile: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            Push Prometheus metrics to this Pushgateway (job=renewal, instance=host) during and at the end of the \
            run (deliver: its own group, command=deliver). Env: RENEWAL_PUSHGATEWAY_URL.
            """,
            valueName: "url"))
    var pushgateway: String?

    @Option(name: .long, help: ArgumentHelp("Seconds between pushes during a run.", valueName: "seconds"))
    var pushInterval: Double = 30

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            The Pushgateway's instance label (use a stable name where hosts come and go, e.g. Kubernetes pods). \
            Env: RENEWAL_METRICS_INSTANCE. Default: the host name.
            """,
            valueName: "name"))
    var metricsInstance: String?

    var resolvedPushgateway: String? {
        pushgateway ?? Environment.value("RENEWAL_PUSHGATEWAY_URL")
    }

    var resolvedMetricsInstance: String? {
        metricsInstance ?? Environment.value("RENEWAL_METRICS_INSTANCE")
    }

    /// The output for a command on `host` (the default instance). `group` adds grouping labels to the
    /// Pushgateway path, so a command that pushes beside `run` never replaces the run's metrics.
    func output(host: String, group: [(String, String)] = []) -> MetricsOutput {
        MetricsOutput(
            textfile: metricsTextfile, pushgateway: resolvedPushgateway, interval: pushInterval,
            instance: resolvedMetricsInstance ?? host, group: group)
    }

    func validate() throws {
        guard pushInterval >= 1 else { throw ValidationError("--push-interval must be at least 1 second.") }
        if let url = resolvedPushgateway {
            guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil
            else {
                throw ValidationError(
                    """
                    --pushgateway \(url) is not an http(s) URL; give the Pushgateway's base URL, e.g. \
                    http://pushgateway:9091.
                    """
                )
            }
        }
        if let instance = resolvedMetricsInstance, instance.isEmpty || instance.contains("/") {
            throw ValidationError(
                "--metrics-instance \"\(instance)\" must be a non-empty name without '/', e.g. renewal-worker-0.")
        }
    }
}
