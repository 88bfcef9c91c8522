import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import RenewalCore

extension AppStoreClient {
    /// The result of one HTTP request to verifyReceipt.
    enum Exchange: Sendable {
        /// A decoded Apple answer with HTTP 200, whatever its `status`.
        case answer(VerifyReceiptResponse)
        /// No usable answer.
        case failure(AppStoreClientError)
    }

    /// Sends one request to `environment`'s endpoint and reads the answer within the timeout and size cap.
    func exchange(receipt: String, environment: AppStoreEnvironment, logger: Logger) async -> Exchange {
        let isSandbox = environment == .sandbox
        let url = isSandbox ? configuration.sandboxURL : configuration.productionURL
        let payload = VerifyReceiptRequest(
            receiptData: receipt, password: configuration.sharedSecret,
            excludeOldTransactions: configuration.excludeOldTransactions)
        let body = payload.jsonBody
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Accept", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: body))

        var logger = logger
        if logger.logLevel <= .debug { logger[metadataKey: LogKey.appStoreEndpoint] = isSandbox ? "sandbox" : "production" }
        logger.trace("Sending verifyReceipt", metadata: [LogKey.requestBytes: "\(body.count)"])

        let response: HTTPClientResponse
        let buffer: ByteBuffer
        switch await AppleHTTP.fetch(
            request, on: httpClient, timeout: configuration.requestTimeout, maxBytes: configuration.maxResponseBytes, logger: logger)
        {
        case .success(let fetched):
            (response, buffer) = fetched
        case .failure(.tooLarge):
            logger.trace("verifyReceipt answer over the size cap", metadata: [LogKey.responseBytes: "\(configuration.maxResponseBytes)+"])
            return .failure(.responseTooLarge(limit: configuration.maxResponseBytes))
        case .failure(.transport(let failure)):
            logger.trace("verifyReceipt request failed", metadata: [LogKey.appStoreFailure: "\(failure.reason)"])
            return .failure(failure)
        }

        let contentType = response.headers.first(name: "Content-Type")
        logger.trace(
            "verifyReceipt answered",
            metadata: [
                LogKey.httpStatus: "\(response.status.code)",
                LogKey.responseBytes: "\(buffer.readableBytes)",
            ])
        guard response.status.code == 200 else {
            return .failure(.httpStatus(Int(response.status.code)))
        }
        let decoded: VerifyReceiptResponse
        do throws(AppleAnswerError) {
            decoded = try VerifyReceiptResponse(json: buffer.readableBytesView)
        } catch {
            switch error {
            case .notJSON:
                return .failure(.notJSON(contentType: contentType, bytes: buffer.readableBytes))
            case .unreadableField(let path, let detail):
                // Apple sent JSON with a status and one field the job needs is odd: Apple answered,
                // so it is not an outage.
                logger.trace("verifyReceipt answer has an unreadable field", metadata: [LogKey.appStoreFailure: "\(path)"])
                return .failure(.unreadableField(path: path, detail: detail))
            }
        }
        logger.trace(
            "verifyReceipt status",
            metadata: [
                LogKey.appStoreStatus: "\(decoded.status.rawValue)",
                LogKey.appStoreEnvironment: "\(decoded.environment?.rawValue ?? environment.rawValue)",
            ])
        return .answer(decoded)
    }

    /// Maps a transport error onto the module's error, keeping only a short, secret-free description.
    package static func clientError(_ error: any Error) -> AppStoreClientError {
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

extension Duration {
    /// The duration in whole nanoseconds (saturating).
    package var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? .max : product &+ attoseconds / 1_000_000_000
    }
}
