import AsyncHTTPClient
import Logging
import NIOCore
import RenewalCore

/// The HTTP every Apple API client speaks through: one HTTP client (no redirects, a bounded connect
/// timeout, a connection pool), each request read within a deadline and a size cap, its transport
/// failures mapped to short, secret-free `AppleAPIError`s, and every exchange timed for the observer.
///
/// The API clients build requests and read answers; they never touch AsyncHTTPClient's errors.
public final class AppleTransport: Sendable {
    let httpClient: HTTPClient
    /// Told about each exchange and retry (metrics); nil for none.
    public let observer: (any AppStoreObserver)?

    /// A transport over an existing `HTTPClient`; the caller shuts that client down.
    public init(httpClient: HTTPClient, observer: (any AppStoreObserver)? = nil) {
        self.httpClient = httpClient
        self.observer = observer
    }

    /// Creates an `HTTPClient` configured for Apple, runs `body` with a transport over it, and always
    /// shuts the client down.
    ///
    /// - Parameters:
    ///   - requestTimeout: the longest one request may take; the connect timeout is the smaller of it
    ///     and 10 seconds (AsyncHTTPClient keeps retrying a refused connection until then).
    ///   - connectionsPerHost: HTTP/1.1 connections kept per host.
    public static func withAppleTransport<T>(
        requestTimeout: Duration, connectionsPerHost: Int, observer: (any AppStoreObserver)? = nil,
        _ body: (AppleTransport) async throws -> T
    ) async throws -> T {
        try await HTTPClient.withHTTPClient(
            configuration: configuration(requestTimeout: requestTimeout, connectionsPerHost: connectionsPerHost)
        ) { httpClient in
            try await body(AppleTransport(httpClient: httpClient, observer: observer))
        }
    }

    static func configuration(requestTimeout: Duration, connectionsPerHost: Int) -> HTTPClient.Configuration {
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

    /// Sends `request` and reads its whole body within `timeout` and `maxBytes`. Fails with
    /// `.responseTooLarge`, `.timeout` or `.connection`; any HTTP status is a response.
    package func fetch(
        _ request: HTTPClientRequest, timeout: Duration, maxBytes: Int, logger: Logger
    ) async -> Result<(response: HTTPClientResponse, body: ByteBuffer), AppleAPIError> {
        let deadline = NIODeadline.now() + .nanoseconds(max(1, timeout.nanoseconds))
        do {
            // The client tags its logger per request; below trace level that only costs a re-render.
            let response = try await httpClient.execute(
                request, deadline: deadline, logger: logger.logLevel <= .trace ? logger : Self.quiet)
            let body = try await response.body.collect(upTo: maxBytes)
            return .success((response, body))
        } catch is NIOTooManyBytesError {
            logger.trace("Apple's answer is over the size cap", metadata: [LogKey.responseBytes: "\(maxBytes)+"])
            return .failure(.responseTooLarge(limit: maxBytes))
        } catch {
            let failure = Self.transportError(error)
            logger.trace("Apple request failed", metadata: [LogKey.appStoreFailure: "\(failure.reason)"])
            return .failure(failure)
        }
    }

    /// Runs one exchange and tells the observer how long it took and how it ended (`status`: Apple's
    /// status code for an answer, the failure's reason otherwise).
    package func timed<Exchange>(
        _ environment: AppStoreEnvironment, status: (Exchange) -> String, _ exchange: () async -> Exchange
    ) async -> Exchange {
        guard let observer else { return await exchange() }
        let started = ContinuousClock.now
        let result = await exchange()
        observer.exchanged(
            status: status(result), environment: environment, seconds: (ContinuousClock.now - started).seconds)
        return result
    }

    /// A transport error as `.timeout` or `.connection`, keeping only a short, secret-free description.
    static func transportError(_ error: any Error) -> AppleAPIError {
        if let error = error as? HTTPClientError {
            let timeouts: [HTTPClientError] = [
                .deadlineExceeded, .readTimeout, .writeTimeout, .connectTimeout,
                .getConnectionFromPoolTimeout, .tlsHandshakeTimeout,
            ]
            if timeouts.contains(error) { return .timeout }
            return .connection(String(describing: error))
        }
        if error is CancellationError { return .connection("cancelled") }
        let text = String(describing: error)
        return .connection(text.count > 200 ? String(text.prefix(200)) + "…" : text)
    }
}
