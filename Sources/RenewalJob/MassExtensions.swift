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

    /// The mass extension `request` makes, before anything is stored or sent: the environment it goes to
    /// (production, unless the database holds only sandbox subscriptions of the product: Apple extends the
    /// subscribers of one environment), the app, and the request stored for its intent, if any.
    func massPlan(_ request: MassRequest) async throws -> (intent: MassExtensionIntent, stored: StoredMassExtension?) {
        let environment: AppStoreEnvironment =
            try await store.holdsProductionSubscription(productID: request.productID) ? .production : .sandbox
        let first = try await store.massExtensionCandidates(
            productID: request.productID, environment: environment, after: nil, limit: 1, now: now())
        let intent = MassExtensionIntent(
            intent: request.intent, productID: request.productID, storefronts: request.storefronts,
            bundleID: first.first?.candidate.bundleID, environment: environment, days: request.days,
            reason: request.reason)
        return (intent, try await store.storedMassExtension(intent))
    }

    /// What becomes of a mass extension without a request sent, as the dry run and the real call both judge
    /// it: the request stored for this intent as it stands, a missing key; nil when it would be sent.
    func judgeMass(_ stored: StoredMassExtension?, bundleID: String?) -> MassOutcome? {
        switch stored?.state {
        case .accepted?: return .inProgress(succeeded: stored?.succeededCount, failed: stored?.failedCount)
        case .complete?: return .complete(succeeded: stored?.succeededCount, failed: stored?.failedCount)
        case .rejected?: return .rejected(code: nil, reason: stored?.lastError ?? "rejected")
        case .pending?, .sending?, nil: break
        }
        return extenders[stored?.bundleID ?? bundleID] ?? extenders[nil] == nil ? .noKey : nil
    }

    /// `--dry-run --product`: what the real call would do. When it would send nothing (Apple accepted this
    /// intent's request before, or there is no key), that outcome; otherwise nil, after `body` heard each of
    /// the product's subscribers in the request's environment, a page at a time: who Apple would extend and
    /// who it would not, and why (those of other storefronts are left out).
    public func dryRunMass(_ request: MassRequest, _ body: (Line, _ storefront: String?) throws -> Void)
        async throws -> MassOutcome?
    {
        let plan = try await massPlan(request)
        if let outcome = judgeMass(plan.stored, bundleID: plan.intent.bundleID) { return outcome }
        try await forEachSubscriber(request, environment: plan.intent.environment, body)
        return nil
    }

    /// The product's subscribers in `environment` (by default the one the request goes to), a page at a time,
    /// each judged as Apple would (those of other storefronts are left out).
    public func forEachSubscriber(
        _ request: MassRequest, environment: AppStoreEnvironment? = nil,
        _ body: (Line, _ storefront: String?) throws -> Void
    ) async throws {
        var resolved = environment
        if resolved == nil { resolved = try await massPlan(request).intent.environment }
        var after: String?
        while true {
            let page = try await store.massExtensionCandidates(
                productID: request.productID, environment: resolved ?? .production, after: after, limit: 500,
                now: now())
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
        let plan = try await massPlan(request)
        if let outcome = judgeMass(plan.stored, bundleID: plan.intent.bundleID) { return outcome }
        let stored = try await store.storeMassExtension(plan.intent, requestIdentifier: newIdentifier(), now: now())
        // Another invocation may have sent it since it was judged.
        if let outcome = judgeMass(stored, bundleID: stored.bundleID) { return outcome }
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

    /// The mass extensions Apple reported complete in this run, and those it could not follow (Apple gave
    /// no status, or did not accept a request sent again).
    func run() async throws -> (completed: Int, failed: Int) {
        var completed = 0
        var failed = 0
        for stored in try await store.dueMassExtensions(now: now(), resendAfter: Self.resendAfter) {
            guard let extender = extenders[stored.bundleID] ?? extenders[nil] else { continue }
            if stored.state == .sending {
                switch try await Self.send(stored, with: extender, store: store, now: now, logger: logger) {
                case .accepted: break
                default: failed += 1
                }
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
                failed += 1
            }
        }
        return (completed, failed)
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
