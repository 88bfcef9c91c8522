import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalStorage

/// `renewal extend`: for subscribers named by user id, each subscription judged (`RenewalExtension`) and each
/// eligible one asked of Apple once per intent; for every subscriber of a product, one mass request
/// (`MassExtensions.swift`).
///
/// Each request's identifier is stored before anything is sent (`pending`), marked `sending` in its own
/// committed write just before it is sent, and its answer recorded after. A second invocation of the same
/// intent finds the stored request: a `pending` one (never sent) is sent with its stored identifier, a
/// `sending` one (sent, answer unknown: a crash, a kill, a timeout) is never sent again, and a finished one
/// is reported as it ended. So a doubled invocation or a kill -9 never extends a subscriber twice.
public struct RenewalExtensions: Sendable {
    /// What the operator asked.
    public struct Request: Sendable, Hashable {
        /// Names the intent: the same intent about the same subscription is sent once.
        public var intent: String
        public var days: Int
        public var reason: Int
        public var userIDs: [String]

        public init(intent: String, days: Int, reason: Int, userIDs: [String]) {
            self.intent = intent
            self.days = days
            self.reason = reason
            self.userIDs = userIDs
        }
    }

    /// What became of one subscription (or of a user without one).
    public struct Line: Sendable, Hashable {
        public var userID: String
        public var originalTransactionID: String?
        public var productID: String?
        public var outcome: Outcome

        public init(userID: String, originalTransactionID: String? = nil, productID: String? = nil, outcome: Outcome) {
            self.userID = userID
            self.originalTransactionID = originalTransactionID
            self.productID = productID
            self.outcome = outcome
        }
    }

    public enum Outcome: Sendable, Hashable {
        /// The database holds no verified subscription of the user.
        case noSubscription
        case ineligible(RenewalExtension.Ineligibility)
        /// A dry run: it would be sent.
        case wouldExtend
        /// Apple extended it in this invocation.
        case extended(effectiveAt: Date?)
        /// An earlier invocation of this intent extended it (or Apple confirmed it since).
        case alreadyExtended
        /// Apple refused it (now or before): its error code and reason.
        case rejected(code: Int?, reason: String)
        /// Sent before without a recorded answer: never sent again; Apple's `RENEWAL_EXTENDED` confirms it.
        case unconfirmed
        /// Not sent (a rate limit, a refused token): a later invocation of the intent sends it.
        case notSent(reason: String)
        /// No Server API key for its app.
        case noKey

        /// The word the table and the report use.
        public var name: String {
            switch self {
            case .noSubscription: "no_subscription"
            case .ineligible(let why): "ineligible:" + why.rawValue
            case .wouldExtend: "would_extend"
            case .extended: "extended"
            case .alreadyExtended: "already_extended"
            case .rejected: "rejected"
            case .unconfirmed: "unconfirmed"
            case .notSent: "not_sent"
            case .noKey: "no_key"
            }
        }

        /// Work left for a later invocation or a person.
        public var isUnfinished: Bool {
            switch self {
            case .unconfirmed, .notSent, .noKey: true
            default: false
            }
        }
    }

    let store: any SubscriptionStore
    /// By bundle id; the nil key is the one app's.
    let extenders: [String?: any OperatorActions]
    let now: @Sendable () -> Date
    let logger: Logger
    let newIdentifier: @Sendable () -> String

    public init(
        store: any SubscriptionStore, extenders: [String?: any OperatorActions], logger: Logger,
        now: @escaping @Sendable () -> Date = { Date() },
        newIdentifier: @escaping @Sendable () -> String = { UUID().uuidString.lowercased() }
    ) {
        self.store = store
        self.extenders = extenders
        self.logger = logger
        self.now = now
        self.newIdentifier = newIdentifier
    }

    /// Judges every subscription of the request's users and, unless `dryRun`, sends each one `judge` lets
    /// through once. A dry run judges exactly as the real call does. Lines come in user order.
    public func run(_ request: Request, dryRun: Bool) async throws -> [Line] {
        let candidates = try await store.extensionCandidates(userIDs: request.userIDs, now: now())
        let stored = try await store.storedExtensions(
            intent: request.intent, originalTransactionIDs: candidates.map(\.originalTransactionID))
        var lines: [Line] = []
        for user in request.userIDs {
            let theirs = candidates.filter { $0.userID == user }
            if theirs.isEmpty { lines.append(Line(userID: user, outcome: .noSubscription)) }
            for candidate in theirs {
                var line = Line(
                    userID: user, originalTransactionID: candidate.originalTransactionID,
                    productID: candidate.productID,
                    outcome: judge(candidate, stored: stored[candidate.originalTransactionID]) ?? .wouldExtend)
                if line.outcome == .wouldExtend, !dryRun {
                    line.outcome = try await extend(candidate, request)
                }
                log(line)
                lines.append(line)
            }
        }
        return lines
    }

    /// What becomes of `candidate` without a request sent, as the dry run and the real call both judge it: the
    /// request stored for this intent as it ended, Apple's rules, a missing key; nil when it would be sent.
    func judge(_ candidate: ExtensionCandidate, stored: StoredExtension?) -> Outcome? {
        if let stored, let ended = Self.outcome(of: stored) { return ended }
        if let why = RenewalExtension.ineligibility(of: candidate.subject) { return .ineligible(why) }
        if extenders[candidate.bundleID] ?? extenders[nil] == nil { return .noKey }
        return nil
    }

    /// A stored request's outcome; nil for one never sent (`pending`), which is sent with its identifier.
    static func outcome(of stored: StoredExtension) -> Outcome? {
        switch stored.state {
        case .succeeded: .alreadyExtended
        case .rejected: .rejected(code: stored.appleErrorCode, reason: stored.lastError ?? "rejected")
        case .sending: .unconfirmed
        case .pending: nil
        }
    }

    private func extend(_ candidate: ExtensionCandidate, _ request: Request) async throws -> Outcome {
        let intent = ExtensionIntent(
            intent: request.intent, candidate: candidate, days: request.days, reason: request.reason)
        let stored = try await store.storeExtensionIntent(intent, requestIdentifier: newIdentifier(), now: now())
        // Another invocation may have stored and sent it since it was judged.
        if let ended = Self.outcome(of: stored) { return ended }
        guard let extender = extenders[candidate.bundleID] ?? extenders[nil] else { return .noKey }
        // Committed before the request leaves: from here on it is never sent again.
        guard try await store.markExtensionSending(stored.requestIdentifier, now: now()) else { return .unconfirmed }
        let answer = await extender.extendRenewalDate(
            originalTransactionID: candidate.originalTransactionID, days: request.days, reason: request.reason,
            requestIdentifier: stored.requestIdentifier, environment: candidate.environment ?? .production,
            logger: logger)
        let (result, outcome) = Self.result(of: answer, at: now())
        try await store.recordExtension(stored.requestIdentifier, result: result)
        return outcome
    }

    /// Apple's answer as the stored result and the line's outcome. Only a failure that certainly never
    /// reached Apple leaves the request to be sent again.
    static func result(of answer: Result<RenewalDateExtended, AppleAPIError>, at: Date) -> (ExtensionResult, Outcome) {
        switch answer {
        case .success(let extended) where extended.success:
            return (
                .succeeded(effectiveAt: extended.effectiveDate, at: at), .extended(effectiveAt: extended.effectiveDate)
            )
        case .success:
            return (
                .rejected(httpStatus: 200, errorCode: nil, reason: "apple_declined", at: at),
                .rejected(code: nil, reason: "apple_declined")
            )
        case .failure(let error):
            switch error {
            case .rateLimited, .unauthorized:
                return (.notSent(reason: error.reason.rawValue), .notSent(reason: error.reason.rawValue))
            case .httpStatus(400..<500, _), .notFound:
                let (status, code) = error.appleRefusal
                return (
                    .rejected(httpStatus: status, errorCode: code, reason: error.reason.rawValue, at: at),
                    .rejected(code: code, reason: error.reason.rawValue)
                )
            default:
                return (.unconfirmed(reason: error.reason.rawValue), .unconfirmed)
            }
        }
    }

    private func log(_ line: Line) {
        let metadata: Logger.Metadata = [
            LogKey.userID: "\(line.userID)", LogKey.originalTransactionID: "\(line.originalTransactionID ?? "")",
            LogKey.reason: "\(line.outcome.name)",
        ]
        switch line.outcome {
        case .extended: logger.info("Renewal date extended", metadata: metadata)
        case .unconfirmed, .notSent, .noKey:
            logger.warning("Renewal date extension not confirmed", metadata: metadata)
        case .rejected: logger.warning("Apple refused the renewal date extension", metadata: metadata)
        default: logger.debug("Renewal date extension", metadata: metadata)
        }
    }
}
