import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalStorage

/// Answers the refund requests (`CONSUMPTION_REQUEST`) the change feed recorded, right after a run reads the
/// feed and before its due work (a long backlog never holds them past Apple's 12 hours):
/// each once, within Apple's 12 hours, with Send Consumption Information, and only for a customer whose
/// consent the app recorded (`consumption_consent`); a request without consent is recorded as not
/// answered. Delivery and consumption come from the job's own data (`ConsumptionInformation`), the refund
/// preference from the operator. A failure that may pass (an outage, a rate limit) is tried again by a
/// later run after the shared backoff; Apple refusing the answer is recorded; a request whose 12 hours
/// pass unanswered is recorded as missed and alerted on (an error in the log, the run's count).
///
/// Each request is claimed right before it is sent, one at a time, and its result written after, so two
/// workers never answer one request, and a request answered is never sent again. A worker killed between
/// sending and writing leaves that one claim, which the next run takes at once once it knows the worker
/// is dead (`claimRefundRequests`), and sends the same answer once more (Apple keeps the last).
struct RefundRequestAnswers {
    let store: any SubscriptionStore
    /// By bundle id; the nil key is the one app's.
    let sources: [String?: any OperatorActions]
    let preference: RefundPreference?
    let runID: String?
    let now: @Sendable () -> Date
    let logger: Logger
    var random: @Sendable () -> Double = { Double.random(in: 0..<1) }

    struct Outcome {
        var answered = 0
        var unanswered = 0
        var missed = 0
        var rejected = 0
        var retried = 0

        func count(into counts: inout RenewalCounts) {
            counts.refundRequestsAnswered = answered
            counts.refundRequestsUnanswered = unanswered
            counts.refundRequestsMissed = missed
            counts.refundRequestsFailed = rejected + retried
        }
    }

    /// How long a claim keeps other workers off a request.
    static let claimDuration: TimeInterval = 600
    /// The wait before a failed answer is tried again: the shared backoff, from a minute up to an hour,
    /// well inside the 12 hours.
    static let backoff = Backoff(base: 60, maximum: 3_600, jitter: .proportional(0.2))

    func run() async throws -> Outcome {
        var outcome = Outcome()
        // One request claimed at a time, the one about to be sent: a run killed while answering holds
        // only that one, and the other workers answer the rest meanwhile. After an outage the rest wait
        // for the next run, unclaimed.
        while !Task.isCancelled {
            guard
                let request = try await store.claimRefundRequests(
                    limit: 1, now: now(), claimedUntil: now().addingTimeInterval(Self.claimDuration), runID: runID
                ).first
            else { break }
            let result = await answer(request)
            try await store.recordRefundRequest(request, result: result, runID: runID)
            log(request, result)
            switch result {
            case .answered: outcome.answered += 1
            case .noConsent: outcome.unanswered += 1
            case .rejected: outcome.rejected += 1
            case .missed: outcome.missed += 1
            case .released: break
            case .retry(let reason, _):
                outcome.retried += 1
                if reason != "no_key" { return outcome }
            }
        }
        return outcome
    }

    /// One attempt at `request`.
    private func answer(_ request: RefundRequest) async -> RefundRequestResult {
        let at = now()
        guard RefundRequests.isAnswerable(answerBy: request.answerBy, at: at) else {
            return .missed(reason: nil, at: at)
        }
        guard request.consented == true else { return .noConsent(at: at) }
        guard let source = sources[request.bundleID] ?? sources[nil] else {
            // No Server API key for its app: nothing can answer it; it is missed when its time is up.
            return .retry(reason: "no_key", retryAt: at.addingTimeInterval(Self.backoff.maximum))
        }
        let period = request.periodStart.flatMap { start in request.periodEnd.map { (start, $0) } }
        let information = ConsumptionInformation(
            delivered: request.delivered, hadTrial: request.hadTrial, period: period, requestedAt: request.requestedAt,
            preference: preference, appDeliveryStatus: request.appDeliveryStatus,
            appConsumptionPercentage: request.appConsumptionPercentage)
        switch await source.sendConsumptionInformation(
            information, transactionID: request.transactionID, environment: request.environment, logger: logger)
        {
        case .success:
            return .answered(sent: information.json, at: now())
        case .failure(let error) where error.isRetryable:
            let retryAt = now().addingTimeInterval(
                Self.backoff.delay(afterRetries: request.attempts, random: random()))
            // A retry due at or after the deadline could not be answered: missed now (Core's rule).
            guard RefundRequests.isAnswerable(answerBy: request.answerBy, at: retryAt) else {
                return .missed(reason: error.reason.rawValue, at: now())
            }
            return .retry(reason: error.reason.rawValue, retryAt: retryAt)
        case .failure(let error):
            let (status, code) = error.appleRefusal
            return .rejected(
                httpStatus: status, errorCode: code, reason: error.reason.rawValue, sent: information.json, at: now())
        }
    }

    private func log(_ request: RefundRequest, _ result: RefundRequestResult) {
        var metadata: Logger.Metadata = [
            LogKey.refundRequestNotification: "\(request.notificationUUID)",
            LogKey.originalTransactionID: "\(request.originalTransactionID ?? "")",
            LogKey.refundRequestAnswerBy: "\(Timestamp.string(request.answerBy))",
        ]
        switch result {
        case .answered: logger.info("Refund request answered", metadata: metadata)
        case .noConsent:
            logger.notice(
                """
                Refund request left unanswered: the app recorded no consumption_consent for the user; import the \
                user's consent to have later requests answered
                """, metadata: metadata)
        case .rejected(_, _, let reason, _, _):
            metadata[LogKey.reason] = "\(reason)"
            logger.error("Apple refused the answer to a refund request", metadata: metadata)
        case .retry(let reason, _):
            metadata[LogKey.reason] = "\(reason)"
            logger.warning("Refund request not answered yet; a later run tries again", metadata: metadata)
        case .released: break
        case .missed(let reason, _):
            metadata[LogKey.reason] = "\(reason ?? "not_answered_in_time")"
            logger.error(
                "Refund request missed: Apple's 12 hours passed without an answer; run renewal more often",
                metadata: metadata)
        }
    }
}
