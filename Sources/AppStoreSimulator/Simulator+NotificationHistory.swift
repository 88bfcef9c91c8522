import Foundation
import Hummingbird
import RenewalCore
import RenewalServerAPI

/// Get Notification History (`POST /inApps/v1/notifications/history`), served from the registered
/// customers' timelines: at most 20 records a page, paged with `paginationToken` while `hasMore`,
/// 180 days kept in production and 30 in the sandbox, an `endDate` in the future read as now, and a
/// notification listed only `notificationDelay` seconds after it was signed; `FeedFault` breaks it
/// (outage, 429), empties it (no V2 URL), lists each notification twice, or lists them newest first.
/// Like Apple's, it is per app: a token for one app lists that app's notifications only.
extension SimulatorRoutes {
    static let historyPageSize = 20

    func notificationHistory(_ request: Request, sandbox: Bool) async throws -> Response {
        state.countFeedRequest()
        guard let serverAPI = configuration.serverAPI,
            let bundle = serverAPI.acceptedBundle(authorization: request.headers[.authorization])
        else {
            return raw(status: 401, contentType: "text/plain", data: Data("Unauthenticated\n".utf8))
        }
        let delay = configuration.latency + state.latency
        if delay > .zero { try await Task.sleep(for: delay) }
        switch state.feedFault {
        case .none, .silent, .duplicated, .reordered: break
        case .outage: return respond(SimulatedAnswer.outagePage)
        case .rateLimited:
            var response = historyError(429, code: 4_290_000, message: "Rate limit exceeded.")
            response.headers[.retryAfter] = String(AppleDateFormat.milliseconds(state.now.addingTimeInterval(60)))
            return response
        }
        struct Query: Decodable {
            var startDate: Int64
            var endDate: Int64
        }
        guard let query = try await decode(Query.self, from: request) else {
            return historyError(400, code: 4_000_000, message: "startDate and endDate (ms) are required.")
        }
        let now = state.now
        let kept: TimeInterval = (sandbox ? 30 : 180) * 86_400
        let start = Date(timeIntervalSince1970: Double(query.startDate) / 1000)
        let end = min(Date(timeIntervalSince1970: Double(query.endDate) / 1000), now)
        guard start >= now.addingTimeInterval(-kept) else {
            return historyError(400, code: 4_000_012, message: "Start date too far in the past.")
        }
        guard query.endDate > query.startDate else {
            return historyError(400, code: 4_000_013, message: "Start date after end date.")
        }
        let visibleUntil = now.addingTimeInterval(-state.notificationDelay)
        // Notification History is per app: the token's app's notifications only.
        let genuine = state.registeredReceipts()
            .filter { ($0.scenario == .sandbox) == sandbox && $0.bundleIdentifier == bundle }
            .flatMap { $0.notifications(until: min(end, visibleUntil)) }
        let forged = (state.forgedNotifications + state.unreadableNotifications).filter {
            ($0.receipt.scenario == .sandbox) == sandbox && $0.signedDate <= visibleUntil
        }
        let summaries = sandbox ? [] : state.massExtensionSummaries(bundle: bundle, until: visibleUntil)
        let listed = (genuine + forged + summaries)
            .filter { $0.signedDate >= start && $0.signedDate < end }
            .sorted { ($0.signedDate, $0.uuid) < ($1.signedDate, $1.uuid) }
        let twice = state.feedDuplicatePercent
        let records: [SimulatedNotification] =
            switch state.feedFault {
            case .silent: []
            case .duplicated: listed.flatMap { [$0, $0] }
            case .reordered: listed.reversed()
            default: listed.flatMap { $0.isListedTwice(percent: twice) ? [$0, $0] : [$0] }
            }
        let offset = request.uri.queryParameters.get("paginationToken").flatMap(Self.offset(ofToken:)) ?? 0
        let page = records.dropFirst(offset).prefix(Self.historyPageSize)
        var history: [[String: Any]] = []
        for notification in page {
            let signer = notification.isForged ? SigningChain.forger : serverAPI.chain
            guard let signer, let signed = try? notification.signedPayload(signer: signer) else { continue }
            history.append([
                "signedPayload": signed,
                "sendAttempts": [
                    [
                        "attemptDate": AppleDateFormat.milliseconds(notification.signedDate),
                        "sendAttemptResult": "SUCCESS",
                    ]
                ],
            ])
        }
        let next = offset + page.count
        var body: [String: Any] = ["notificationHistory": history, "hasMore": next < records.count]
        if next < records.count { body["paginationToken"] = Self.token(ofOffset: next) }
        return raw(status: 200, contentType: "application/json", data: SimulatedReceipt.json(body))
    }

    /// An opaque token: the offset of the next record, base64.
    static func token(ofOffset offset: Int) -> String {
        Data("page:\(offset)".utf8).base64EncodedString()
    }

    static func offset(ofToken token: String) -> Int? {
        guard let data = Data(base64Encoded: token), let text = String(data: data, encoding: .utf8),
            text.hasPrefix("page:")
        else { return nil }
        return Int(text.dropFirst(5))
    }

    private func historyError(_ status: Int, code: Int, message: String) -> Response {
        raw(
            status: status, contentType: "application/json",
            data: SimulatedReceipt.json(["errorCode": code, "errorMessage": message]))
    }

    /// `{"fault": "none"|"outage"|"rate_limited"|"silent"|"duplicated"|"reordered", "delay_seconds": N}` (either key optional) sets the
    /// feed's own fault and how long after signing a notification is listed; answers the settings.
    func changeFeed(_ request: Request) async throws -> Response {
        struct Change: Decodable {
            var fault: SimulatorState.FeedFault?
            var delaySeconds: Double?
            enum CodingKeys: String, CodingKey {
                case fault
                case delaySeconds = "delay_seconds"
            }
        }
        guard let change = try await decode(Change.self, from: request), (change.delaySeconds ?? 0) >= 0 else {
            let faults = SimulatorState.FeedFault.allCases.map(\.rawValue).joined(separator: ", ")
            return badRequest("Send {\"fault\": F, \"delay_seconds\": N} with F one of \(faults) and N >= 0.")
        }
        if let fault = change.fault { state.feedFault = fault }
        if let delay = change.delaySeconds { state.notificationDelay = delay }
        return feedSettings()
    }

    func feedSettings() -> Response {
        raw(
            status: 200, contentType: "application/json",
            data: SimulatedReceipt.json([
                "fault": state.feedFault.rawValue, "delay_seconds": state.notificationDelay,
                "requests": state.feedRequests,
            ]))
    }
}
