import Logging
import RenewalCore

/// Which of Apple's APIs a run asks (`--source`).
public enum SourceMode: String, Sendable, CaseIterable {
    /// The Server API where credentials are configured and the row has (or its receipt yields) a
    /// transaction id Apple knows; verifyReceipt otherwise.
    case auto
    /// verifyReceipt only, as before the Server API.
    case verifyReceipt = "verify-receipt"
    /// The Server API only; a row without a transaction id fails (`no_transaction_id`) and keeps its state.
    case serverAPI = "server-api"
}

/// Sends each check to the API `mode` chooses. In `auto`, a transaction id neither environment of
/// the Server API knows (or none at all) falls back to verifyReceipt for that check; any other
/// Server API failure is the answer, so an outage never doubles the requests.
///
/// A row imported by transaction id only (StoreKit 2: no receipt) never goes to verifyReceipt: without
/// the Server API (no credentials, or `verify-receipt`) its check fails with `needs_server_api` and
/// its state is kept.
public struct SourceRouter: ReceiptVerifier {
    public let mode: SourceMode
    public let verifyReceipt: any ReceiptVerifier
    public let serverAPI: (any TransactionVerifier)?

    public init(mode: SourceMode, verifyReceipt: any ReceiptVerifier, serverAPI: (any TransactionVerifier)?) {
        self.mode = mode
        self.verifyReceipt = verifyReceipt
        self.serverAPI = serverAPI
    }

    public func verify(receipt: String, logger: Logger) async -> AppleAnswer {
        await verify(ReceiptCheck(receipt: receipt), logger: logger)
    }

    public func verify(_ check: ReceiptCheck, logger: Logger) async -> AppleAnswer {
        guard check.receipt != nil else { return await verifyWithoutReceipt(check, logger: logger) }
        switch mode {
        case .verifyReceipt:
            return await verifyReceipt.verify(check, logger: logger)
        case .serverAPI:
            guard let serverAPI else { return .misconfigured(Self.noCredentials) }
            return await serverAPI.verify(check, logger: logger)
        case .auto:
            guard let serverAPI, let id = serverAPI.transactionID(for: check) else {
                return await verifyReceipt.verify(check, logger: logger)
            }
            let answer = await serverAPI.verify(transactionID: id, preferring: check.environment, logger: logger)
            if case .transient(let failure, _) = answer, failure.reason == .transactionNotFound {
                return await verifyReceipt.verify(check, logger: logger)
            }
            return answer
        }
    }

    private func verifyWithoutReceipt(_ check: ReceiptCheck, logger: Logger) async -> AppleAnswer {
        switch mode {
        case .verifyReceipt:
            return .transient(.needsServerAPI, isOutage: false)
        case .serverAPI:
            guard let serverAPI else { return .misconfigured(Self.noCredentials) }
            return await serverAPI.verify(check, logger: logger)
        case .auto:
            guard let serverAPI else { return .transient(.needsServerAPI, isOutage: false) }
            return await serverAPI.verify(check, logger: logger)
        }
    }

    static let noCredentials = CheckFailure(
        reason: .serverAPINotConfigured,
        message:
            """
            --source server-api needs APPSTORE_KEY_ID, APPSTORE_ISSUER_ID, APPSTORE_BUNDLE_ID and \
            APPSTORE_PRIVATE_KEY_FILE.
            """
    )
}
