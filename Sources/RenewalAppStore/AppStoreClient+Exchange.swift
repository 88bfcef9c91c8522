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
        let body: Data
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = .withoutEscapingSlashes
            body = try encoder.encode(payload)
        } catch {
            return .failure(.connection("request body could not be encoded"))
        }
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Accept", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: body))

        var logger = logger
        logger[metadataKey: LogKey.appStoreEndpoint] = isSandbox ? "sandbox" : "production"
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
        do {
            decoded = try JSONDecoder().decode(VerifyReceiptResponse.self, from: Data(buffer.readableBytesView))
        } catch let error as DecodingError {
            // A field path means Apple sent JSON with a status and one field the job needs is odd:
            // Apple answered, so it is not an outage. No path: not JSON, or no status at all.
            guard let field = Self.fieldPath(of: error) else {
                return .failure(.notJSON(contentType: contentType, bytes: buffer.readableBytes))
            }
            logger.trace("verifyReceipt answer has an unreadable field", metadata: [LogKey.appStoreFailure: "\(field.path)"])
            return .failure(.unreadableField(path: field.path, detail: field.detail))
        } catch {
            return .failure(.notJSON(contentType: contentType, bytes: buffer.readableBytes))
        }
        logger.trace(
            "verifyReceipt status",
            metadata: [
                LogKey.appStoreStatus: "\(decoded.status.rawValue)",
                LogKey.appStoreEnvironment: "\(decoded.environment?.rawValue ?? environment.rawValue)",
            ])
        return .answer(decoded)
    }

    /// The dotted path (`latest_receipt_info[0].expires_date_ms`) and a short reason of a decoding
    /// error inside a JSON object; nil when the body is not JSON or has no readable status.
    static func fieldPath(of error: DecodingError) -> (path: String, detail: String)? {
        let context: DecodingError.Context
        var path: [any CodingKey]
        switch error {
        case .typeMismatch(_, let c), .valueNotFound(_, let c), .dataCorrupted(let c):
            context = c
            path = c.codingPath
        case .keyNotFound(let key, let c):
            context = c
            path = c.codingPath + [key]
        @unknown default:
            return nil
        }
        guard !path.isEmpty, path.first?.stringValue != "status" else { return nil }
        var text = ""
        for key in path {
            if let index = key.intValue {
                text += "[\(index)]"
            } else if key.stringValue.hasPrefix("Index "), let index = Int(key.stringValue.dropFirst(6)) {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? key.stringValue : "." + key.stringValue
            }
        }
        let detail: String
        switch error {
        case .typeMismatch: detail = "unexpected type"
        case .valueNotFound: detail = "null where a value is needed"
        case .keyNotFound: detail = "missing"
        default: detail = context.debugDescription.count > 120 ? "unreadable value" : context.debugDescription
        }
        return (text, detail)
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
