import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalStorage

/// `renewal extend --product`: every active subscriber of a product (in some storefronts) extended by Apple
/// at once. Apple carries the request out over hours, answers a repeated request identifier again without
/// extending anyone twice, and says when it is done through its status endpoint and a `RENEWAL_EXTENSION`
/// summary; later runs follow it (`MassExtensionFollowUp`) until it is complete.
extension RenewalExtensions {
    public struct MassRequest: Sendable, Hashable {
        public var intent: String
        public var days: Int
        public var reason: Int
        public var productID: String
        /// ISO 3166-1 alpha-3 storefronts; empty for all.
        public var storefronts: [String]

        public init(intent: String, days: Int, reason: Int, productID: String, storefronts: [String]) {
            self.intent = intent
            self.days = days
            self.reason = reason
            self.productID = productID
            self.storefronts = storefronts
        }
    }

    /// Where a mass extension stands after this invocation.
    public enum MassOutcome: Sendable, Hashable {
        /// Apple accepted it now; later runs follow it.
        case accepted
        /// Accepted earlier and still running: Apple's counts so far.
        case inProgress(succeeded: Int?, failed: Int?)
        case complete(succeeded: Int?, failed: Int?)
        case rejected(code: Int?, reason: String)
        /// Not accepted yet (an outage): sent again with the same identifier by the next run or invocation.
        case notAccepted(reason: String)
        case noKey

        public var name: String {
            switch self {
            case .accepted: "accepted"
            case .inProgress: "in_progress"
            case .complete: "complete"
            case .rejected: "rejected"
            case .notAccepted: "not_accepted"
            case .noKey: "no_key"
            }
        }
    }

    /// The product's subscribers the database holds, a page at a time, as `--dry-run` lists them: who Apple
    /// would extend and who it would not, and why (those of other storefronts are left out).
    public func forEachSubscriber(
        _ request: MassRequest, _ body: (Line, _ storefront: String?) throws -> Void
    ) async throws {
        var after: String?
        while true {
            let page = try await store.massExtensionCandidates(
                productID: request.productID, after: after, limit: 500, now: now())
            for (candidate, storefront) in page {
                if !request.storefronts.isEmpty, let storefront, !request.storefronts.contains(storefront) { continue }
                let why = RenewalExtension.ineligibility(of: candidate.subject)
                try body(
                    Line(
                        userID: candidate.userID, originalTransactionID: candidate.originalTransactionID,
                        productID: candidate.productID, outcome: why.map { .ineligible($0) } ?? .wouldExtend),
                    storefront)
            }
            guard page.count == 500, let last = page.last else { return }
            after = last.candidate.originalTransactionID
        }
    }

    /// Stores the request's identifier, then sends it unless Apple already accepted it.
    public func runMass(_ request: MassRequest) async throws -> MassOutcome {
        let first = try await store.massExtensionCandidates(
            productID: request.productID, after: nil, limit: 1, now: now())
        let app = first.first?.candidate.bundleID
        let intent = MassExtensionIntent(
            intent: request.intent, productID: request.productID, storefronts: request.storefronts, bundleID: app,
            environment: first.first?.candidate.environment ?? .production, days: request.days, reason: request.reason)
        let stored = try await store.storeMassExtension(intent, requestIdentifier: newIdentifier(), now: now())
        switch stored.state {
        case .accepted: return .inProgress(succeeded: stored.succeededCount, failed: stored.failedCount)
        case .complete: return .complete(succeeded: stored.succeededCount, failed: stored.failedCount)
        case .rejected: return .rejected(code: nil, reason: stored.lastError ?? "rejected")
        case .pending, .sending: break
        }
        guard let extender = extenders[stored.bundleID] ?? extenders[nil] else { return .noKey }
        return try await MassExtensionFollowUp.send(stored, with: extender, store: store, now: now, logger: logger)
    }
}

/// What a `run` does for mass extensions in progress: asks Apple's status of each whose next check is due,
/// and sends again (with the same identifier) each sent without a recorded answer.
struct MassExtensionFollowUp {
    let store: any SubscriptionStore
    /// By bundle id; the nil key is the one app's.
    let extenders: [String?: any OperatorActions]
    let now: @Sendable () -> Date
    let logger: Logger

    /// How long after Apple accepted a mass extension its status is asked again.
    static let statusInterval: TimeInterval = 1_800
    /// A request sent this long ago without a recorded answer is sent again.
    static let resendAfter: TimeInterval = 600

    /// The mass extensions Apple reported complete in this run.
    func run() async throws -> Int {
        var completed = 0
        for stored in try await store.dueMassExtensions(now: now(), resendAfter: Self.resendAfter) {
            guard let extender = extenders[stored.bundleID] ?? extenders[nil] else { continue }
            if stored.state == .sending {
                _ = try await Self.send(stored, with: extender, store: store, now: now, logger: logger)
                continue
            }
            switch await extender.massExtensionStatus(
                productID: stored.productID, requestIdentifier: stored.requestIdentifier,
                environment: stored.environment, logger: logger)
            {
            case .success(let status) where status.complete:
                try await store.recordMassExtension(
                    stored.requestIdentifier,
                    result: .complete(
                        succeeded: status.succeededCount, failed: status.failedCount, at: status.completeDate ?? now()),
                    now: now())
                completed += 1
                logger.info(
                    "Mass renewal-date extension complete",
                    metadata: [
                        LogKey.productID: "\(stored.productID)",
                        LogKey.reason: "succeeded \(status.succeededCount ?? 0), failed \(status.failedCount ?? 0)",
                    ])
            case .success(let status):
                try await store.recordMassExtension(
                    stored.requestIdentifier,
                    result: .inProgress(
                        succeeded: status.succeededCount, failed: status.failedCount,
                        nextStatusAt: now().addingTimeInterval(Self.statusInterval)),
                    now: now())
            case .failure(let error):
                logger.warning(
                    "Mass renewal-date extension status not read; the next run asks again",
                    metadata: [LogKey.productID: "\(stored.productID)", LogKey.reason: "\(error.reason)"])
            }
        }
        return completed
    }

    /// Marks `stored` as being sent, sends it and records Apple's answer.
    static func send(
        _ stored: StoredMassExtension, with extender: any MassRenewalDateExtending, store: any SubscriptionStore,
        now: @Sendable () -> Date, logger: Logger
    ) async throws -> RenewalExtensions.MassOutcome {
        try await store.markMassExtensionSending(stored.requestIdentifier, now: now())
        let answer = await extender.massExtendRenewalDates(
            productID: stored.productID, storefronts: stored.storefronts, days: stored.days, reason: stored.reason,
            requestIdentifier: stored.requestIdentifier, environment: stored.environment, logger: logger)
        switch answer {
        case .success:
            try await store.recordMassExtension(
                stored.requestIdentifier,
                result: .accepted(at: now(), nextStatusAt: now().addingTimeInterval(statusInterval)), now: now())
            return .accepted
        case .failure(let error) where error.isRetryable:
            try await store.recordMassExtension(
                stored.requestIdentifier, result: .notAccepted(reason: error.reason.rawValue), now: now())
            return .notAccepted(reason: error.reason.rawValue)
        case .failure(let error):
            let (status, code) = error.appleRefusal
            try await store.recordMassExtension(
                stored.requestIdentifier,
                result: .rejected(httpStatus: status, errorCode: code, reason: error.reason.rawValue),
                now: now())
            return .rejected(code: code, reason: error.reason.rawValue)
        }
    }
}
