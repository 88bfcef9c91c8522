import AsyncHTTPClient
import Logging
import NIOCore

/// The HTTP both Apple clients speak: one client configuration, and one request read within a
/// deadline and a size cap, its transport failures mapped to short, secret-free errors.
package enum AppleHTTP {
    /// No redirects; a connect timeout within one request (AHC keeps retrying a refused connection
    /// until it); `connectionsPerHost` HTTP/1.1 connections kept per host.
    package static func configuration(requestTimeout: Duration, connectionsPerHost: Int) -> HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        let connectTimeout = min(requestTimeout, .seconds(10))
        configuration.timeout = .init(connect: .nanoseconds(max(1, connectTimeout.nanoseconds)))
        configuration.connectionPool = HTTPClient.Configuration.ConnectionPool(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: max(1, connectionsPerHost))
        // No spans: nothing here bootstraps a tracer, and the default one still costs a span per request.
        configuration.tracing.tracer = nil
        return configuration
    }

    /// What the HTTP client logs with when its trace lines cannot show.
    private static let quiet = Logger(label: "renewal.http", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Why one request gave no body to read.
    package enum Failure: Error {
        /// The body exceeded `maxBytes`.
        case tooLarge
        /// Timeout or connection failure (`.timeout` or `.connection`).
        case transport(AppStoreClientError)
    }

    /// Sends `request` and reads its whole body within `timeout` and `maxBytes`.
    package static func fetch(
        _ request: HTTPClientRequest, on httpClient: HTTPClient, timeout: Duration, maxBytes: Int, logger: Logger
    ) async -> Result<(response: HTTPClientResponse, body: ByteBuffer), Failure> {
        let deadline = NIODeadline.now() + .nanoseconds(max(1, timeout.nanoseconds))
        do {
            // The client tags its logger per request; below trace level that only costs a re-render.
            let response = try await httpClient.execute(request, deadline: deadline, logger: logger.logLevel <= .trace ? logger : quiet)
            let body = try await response.body.collect(upTo: maxBytes)
            return .success((response, body))
        } catch is NIOTooManyBytesError {
            return .failure(.tooLarge)
        } catch {
            return .failure(.transport(AppStoreClient.clientError(error)))
        }
    }
}
