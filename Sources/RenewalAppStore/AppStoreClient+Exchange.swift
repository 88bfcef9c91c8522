import AsyncHTTPClient
import Logging
import NIOCore
import NIOHTTP1
import RenewalAppleAPI
import RenewalCore

extension AppStoreClient {
    /// Sends one request to `environment`'s endpoint and reads the answer within the timeout and size
    /// cap: a decoded answer with HTTP 200, whatever its `status`, or why there is none.
    func exchange(receipt: String, environment: AppStoreEnvironment, excludingOld: Bool? = nil, logger: Logger)
        async -> Result<VerifyReceiptResponse, AppleAPIError>
    {
        await transport.timed(environment, status: Self.observedStatus) {
            await send(
                receipt: receipt, environment: environment,
                excludingOld: excludingOld ?? configuration.excludeOldTransactions, logger: logger)
        }
    }

    /// Apple's status code for an answer, the failure's reason otherwise.
    static func observedStatus(_ exchanged: Result<VerifyReceiptResponse, AppleAPIError>) -> String {
        switch exchanged {
        case .success(let response): "\(response.status.rawValue)"
        case .failure(let error): error.reason.rawValue
        }
    }

    private func send(receipt: String, environment: AppStoreEnvironment, excludingOld: Bool, logger: Logger)
        async -> Result<VerifyReceiptResponse, AppleAPIError>
    {
        let isSandbox = environment == .sandbox
        let url = isSandbox ? configuration.sandboxURL : configuration.productionURL
        let payload = VerifyReceiptRequest(
            receiptData: receipt, password: configuration.sharedSecret,
            excludeOldTransactions: excludingOld)
        let body = payload.jsonBody
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Accept", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: body))

        var logger = logger
        if logger.logLevel <= .debug {
            logger[metadataKey: LogKey.appStoreEndpoint] = isSandbox ? "sandbox" : "production"
        }
        logger.trace("Sending verifyReceipt", metadata: [LogKey.requestBytes: "\(body.count)"])

        let response: HTTPClientResponse
        let buffer: ByteBuffer
        switch await transport.fetch(
            request, timeout: configuration.requestTimeout, maxBytes: configuration.maxResponseBytes, logger: logger)
        {
        case .success(let fetched):
            (response, buffer) = fetched
        case .failure(let failure):
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
                logger.trace(
                    "verifyReceipt answer has an unreadable field", metadata: [LogKey.appStoreFailure: "\(path)"])
                return .failure(.unreadableField(path: path, detail: detail))
            }
        }
        logger.trace(
            "verifyReceipt status",
            metadata: [
                LogKey.appStoreStatus: "\(decoded.status.rawValue)",
                LogKey.appStoreEnvironment: "\(decoded.environment?.rawValue ?? environment.rawValue)",
            ])
        return .success(decoded)
    }
}
