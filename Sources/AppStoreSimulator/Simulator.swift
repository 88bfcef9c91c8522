import Foundation
import Hummingbird
import Logging
import NIOCore
import RenewalCore

/// Builds the verifyReceipt simulator: `POST /verifyReceipt`, `POST /sandbox/verifyReceipt` and the
/// `/_simulator` control routes. Run it with `runService()` or inside a `ServiceGroup`, or use
/// `withAppStoreSimulator(configuration:logger:_:)` to run it for the length of a closure.
/// - Parameters:
///   - configuration: address, shared secret, delays and the shared state.
///   - logger: the server's logger; nil uses Hummingbird's default.
///   - onListening: called once the server listens, with its URLs (the real port when `port` is 0).
public func buildSimulator(
    configuration: SimulatorConfiguration, logger: Logger? = nil,
    onListening: @escaping @Sendable (SimulatorEndpoints) async -> Void = { _ in }
) -> some ApplicationProtocol {
    let router = Router()
    let routes = SimulatorRoutes(configuration: configuration)
    /// Each of Apple's endpoints is served for production at `path` and for the sandbox at `sandbox/path`.
    func apple(
        _ method: HTTPRequest.Method, _ path: String,
        _ handle: @escaping @Sendable (Request, BasicRequestContext, _ sandbox: Bool) async throws -> Response
    ) {
        for sandbox in [false, true] {
            router.on(RouterPath(stringLiteral: (sandbox ? "sandbox/" : "") + path), method: method) {
                request, context in try await handle(request, context, sandbox)
            }
        }
    }
    @Sendable func id(_ context: BasicRequestContext, _ name: String = "id") -> String {
        context.parameters.get(name) ?? ""
    }
    apple(.post, "verifyReceipt") { request, _, sandbox in try await routes.verify(request, sandbox: sandbox) }
    apple(.get, "inApps/v1/subscriptions/:id") { request, context, sandbox in
        try await routes.statuses(request, id: id(context), sandbox: sandbox)
    }
    apple(.get, "inApps/v2/history/:id") { request, context, sandbox in
        try await routes.transactionHistory(request, id: id(context), sandbox: sandbox)
    }
    apple(.post, "inApps/v1/subscriptions/extend/mass") { request, _, sandbox in
        try await routes.massExtend(request, sandbox: sandbox)
    }
    apple(.get, "inApps/v1/subscriptions/extend/mass/:product/:request") { request, context, sandbox in
        try await routes.massExtensionStatus(
            request, productID: id(context, "product"), requestIdentifier: id(context, "request"), sandbox: sandbox)
    }
    apple(.put, "inApps/v1/subscriptions/extend/:id") { request, context, sandbox in
        try await routes.extend(request, id: id(context), sandbox: sandbox)
    }
    apple(.put, "inApps/v2/transactions/consumption/:id") { request, context, sandbox in
        try await routes.consumption(request, id: id(context), sandbox: sandbox)
    }
    apple(.post, "inApps/v1/notifications/history") { request, _, sandbox in
        try await routes.notificationHistory(request, sandbox: sandbox)
    }
    apple(.get, "inApps/v1/lookup/:id") { request, context, sandbox in
        try await routes.lookUpOrder(request, orderID: id(context), sandbox: sandbox)
    }
    apple(.put, "inApps/v1/transactions/:id/appAccountToken") { request, context, sandbox in
        try await routes.setAppAccountToken(request, id: id(context), sandbox: sandbox)
    }
    router.post("_simulator/lost-purchases") { request, _ in try await routes.makeLostPurchases(request) }
    router.get("_simulator/feed") { _, _ in routes.feedSettings() }
    router.post("_simulator/feed") { request, _ in try await routes.changeFeed(request) }
    router.post("_simulator/receipts") { request, _ in try await routes.registerReceipts(request) }
    router.get("_simulator/server-api/stats") { _, _ in routes.json(configuration.state.serverAPIStats) }
    router.get("_simulator/server-api/arrivals") { _, _ in
        let byApp = configuration.state.serverAPIArrivalsByApp.mapValues { $0.map(AppleDateFormat.milliseconds) }
        return routes.json(
            Arrivals(
                arrivalsMS: configuration.state.serverAPIArrivals.map(AppleDateFormat.milliseconds), byApp: byApp))
    }
    router.post("_simulator/server-api/rate-limit") { request, _ in try await routes.changeRateLimit(request) }
    router.get("_simulator/clock") { _, _ in routes.clock() }
    router.post("_simulator/clock") { request, _ in try await routes.changeClock(request) }
    router.get("_simulator/fault") { _, _ in routes.json(["mode": configuration.state.fault.rawValue]) }
    router.post("_simulator/fault") { request, _ in try await routes.changeFault(request) }
    router.get("_simulator/stats") { _, _ in routes.json(configuration.state.stats) }
    router.get("_simulator/received/:account") { _, context in
        routes.received(account: context.parameters.get("account") ?? "")
    }
    return Application(
        router: router,
        configuration: .init(
            address: .hostname(configuration.host, port: configuration.port), serverName: "appstore-simulator"),
        onServerRunning: { channel in
            await onListening(
                SimulatorEndpoints(host: configuration.host, port: channel.localAddress?.port ?? configuration.port))
        },
        logger: logger)
}

/// The route handlers, kept apart from the routing table.
struct SimulatorRoutes: Sendable {
    let configuration: SimulatorConfiguration
    static let maxRequestBytes = 4 << 20

    var state: SimulatorState { configuration.state }

    /// Answers after the configured latency, counted from the request's arrival: the answer is
    /// worked out while the latency runs, so a burst of requests costs no queueing on top of it
    /// (the simulator's own CPU never stretches the latency a benchmark measures against).
    func verify(_ request: Request, sandbox: Bool) async throws -> Response {
        let arrived = ContinuousClock.now
        state.recordRequest(sandbox: sandbox)
        let delay = configuration.latency + state.latency
        let response = try await answer(request, sandbox: sandbox)
        let remaining = delay - (ContinuousClock.now - arrived)
        if remaining > .zero { try await Task.sleep(for: remaining) }
        return response
    }

    private func answer(_ request: Request, sandbox: Bool) async throws -> Response {
        let body = try await request.body.collect(upTo: Self.maxRequestBytes)
        let verifyRequest = try? JSONDecoder().decode(VerifyReceiptRequest.self, from: Data(body.readableBytesView))
        let receipt = verifyRequest.flatMap { SimulatedReceipt(encoded: $0.receiptData) }
        var attempt = 1
        if let receipt, let verifyRequest {
            state.register([receipt])
            attempt = state.recordReceipt(
                account: receipt.account, receiptData: verifyRequest.receiptData,
                withHistory: verifyRequest.excludeOldTransactions == false)
        }
        switch state.fault {
        case .none: break
        case .outage: return respond(SimulatedAnswer.outagePage)
        case .html200: return respond(SimulatedAnswer.htmlPage)
        case .status21005: return respond(.status(.serverUnavailable))
        }
        // Like Apple, the secret can only be checked on a receipt that can be read: an unreadable
        // one answers 21002 whatever the password.
        guard verifyRequest != nil, let receipt else { return respond(.status(.malformedOrTemporary)) }
        if !configuration.accepts(password: verifyRequest?.password, for: receipt.bundleIdentifier) {
            return respond(.status(.sharedSecretRejected))
        }
        if let script = state.scripted(account: receipt.account) {
            return raw(status: script.httpStatus, contentType: script.contentType, data: script.body)
        }
        if receipt.scenario == .slow { try await Task.sleep(for: configuration.slowDelay) }
        return respond(
            receipt.answer(
                at: state.now, sandboxEndpoint: sandbox, attempt: attempt,
                withHistory: verifyRequest?.excludeOldTransactions == false))
    }

    /// What a Server API request about one transaction is checked for first, as at Apple: the token
    /// (401), the simulated rate limit (429), faults, the registered receipt holding `id` (404 when none).
    enum Admission {
        case admitted(SimulatedReceipt, SimulatedServerAPI)
        case refused(Response)
    }

    /// Checks the token, the rate limit and any fault, then finds the receipt `id` names: by an original
    /// transaction id, or any of its transactions when `anyTransaction`.
    private func admit(_ request: Request, id: String, sandbox: Bool, anyTransaction: Bool = false) async throws
        -> Admission
    {
        let (bundle, serverAPI): (String, SimulatedServerAPI)
        switch try await authorize(request, sandbox: sandbox) {
        case .refused(let response): return .refused(response)
        case .authorized(let app, let api): (bundle, serverAPI) = (app, api)
        }
        // A transaction of another app is unknown to this app's key, as at Apple.
        let found = anyTransaction ? state.registered(anyTransactionID: id) : state.registered(transactionID: id)
        guard let receipt = found, receipt.bundleIdentifier == bundle else {
            state.countServerAPI(.notFound)
            return .refused(serverAPIError(404, code: 4_040_010, message: "Transaction id not found."))
        }
        return .admitted(receipt, serverAPI)
    }

    enum Authorization {
        case authorized(bundle: String, SimulatedServerAPI)
        case refused(Response)
    }

    /// The token (401), the simulated rate limit (429) and faults, for any Server API request.
    func authorize(_ request: Request, sandbox: Bool) async throws -> Authorization {
        guard let serverAPI = configuration.serverAPI else {
            return .refused(
                raw(
                    status: 500, contentType: "application/json",
                    data: Data(#"{"errorCode":5000000,"errorMessage":"No signing chain."}"#.utf8)))
        }
        guard let bundle = serverAPI.acceptedBundle(authorization: request.headers[.authorization]) else {
            state.countServerAPI(.unauthorized)
            return .refused(raw(status: 401, contentType: "text/plain", data: Data("Unauthenticated\n".utf8)))
        }
        if let until = state.recordServerAPIRequest(sandbox: sandbox, app: bundle) {
            var response = serverAPIError(429, code: 4_290_000, message: "Rate limit exceeded.")
            response.headers[.retryAfter] = String(AppleDateFormat.milliseconds(until))
            return .refused(response)
        }
        let delay = configuration.latency + state.latency
        if delay > .zero { try await Task.sleep(for: delay) }
        switch state.fault {
        case .none: break
        case .outage: return .refused(respond(SimulatedAnswer.outagePage))
        case .html200: return .refused(respond(SimulatedAnswer.htmlPage))
        case .status21005:
            return .refused(
                serverAPIError(500, code: 5_000_001, message: "An unknown error occurred. Please try again."))
        }
        return .authorized(bundle: bundle, serverAPI)
    }

    /// Extend Subscription Renewal Dates for All Active Subscribers: the body checked as Apple checks it,
    /// then the request accepted (a repeated identifier answered again, nothing done twice) and carried out
    /// over `SimulatorState.massExtensionDuration`.
    func massExtend(_ request: Request, sandbox: Bool) async throws -> Response {
        let bundle: String
        switch try await authorize(request, sandbox: sandbox) {
        case .refused(let response): return response
        case .authorized(let app, _): bundle = app
        }
        let fields = try await jsonObject(request)
        let days: Int
        let identifier: String
        switch SimulatedReceipt.extensionRequest(fields) {
        case .failure(let problem): return serverAPIError(400, code: problem.code, message: problem.message)
        case .success(let asked): (days, identifier) = asked
        }
        guard let product = fields?["productId"] as? String, !product.isEmpty else {
            return serverAPIError(400, code: 4_000_023, message: "Invalid product id.")
        }
        let storefronts = fields?["storefrontCountryCodes"] as? [String]
        return send(
            state.massExtend(
                bundle: bundle, productID: product, storefronts: storefronts, days: days,
                requestIdentifier: identifier))
    }

    /// Get Status of Subscription Renewal Date Extensions.
    func massExtensionStatus(_ request: Request, productID: String, requestIdentifier: String, sandbox: Bool)
        async throws -> Response
    {
        switch try await authorize(request, sandbox: sandbox) {
        case .refused(let response): return response
        case .authorized: break
        }
        return send(
            state.massExtensionStatus(
                productID: productID.removingPercentEncoding ?? productID,
                requestIdentifier: requestIdentifier.removingPercentEncoding ?? requestIdentifier))
    }

    /// Get All Subscription Statuses: once admitted, the receipt's scenario.
    func statuses(_ request: Request, id: String, sandbox: Bool) async throws -> Response {
        let (receipt, serverAPI): (SimulatedReceipt, SimulatedServerAPI)
        switch try await admit(request, id: id, sandbox: sandbox) {
        case .refused(let response): return response
        case .admitted(let admitted, let api): (receipt, serverAPI) = (admitted, api)
        }
        let attempt = state.recordServerAPIAttempt(account: receipt.account)
        if receipt.scenario == .slow { try await Task.sleep(for: configuration.slowDelay) }
        return send(
            receipt.statusAnswer(at: state.now, sandboxEndpoint: sandbox, attempt: attempt, signer: serverAPI.chain))
    }

    /// Get Transaction History (v2): once admitted, the page after `revision` of the receipt's transactions.
    func transactionHistory(_ request: Request, id: String, sandbox: Bool) async throws -> Response {
        let (receipt, serverAPI): (SimulatedReceipt, SimulatedServerAPI)
        switch try await admit(request, id: id, sandbox: sandbox) {
        case .refused(let response): return response
        case .admitted(let admitted, let api): (receipt, serverAPI) = (admitted, api)
        }
        let revision = request.uri.queryParameters.get("revision")
        state.recordHistoryRequest(revision: revision)
        return send(
            receipt.historyAnswer(
                at: state.now, sandboxEndpoint: sandbox, revision: revision, pageSize: state.historyPageSize,
                signer: serverAPI.chain))
    }

    /// Send Consumption Information (V2): once admitted, the body checked as Apple checks it (consent,
    /// delivery status, percentage, preference); 202 with no body, the answer kept for tests.
    func consumption(_ request: Request, id: String, sandbox: Bool) async throws -> Response {
        switch try await admit(request, id: id, sandbox: sandbox, anyTransaction: true) {
        case .refused(let response): return response
        case .admitted: break
        }
        let fields = try await jsonObject(request)
        switch SimulatedReceipt.consumptionProblem(fields) {
        case .some(let problem):
            state.recordConsumption(nil)
            return serverAPIError(400, code: problem.code, message: problem.message)
        case .none:
            state.recordConsumption(
                SimulatorState.ConsumptionAnswer(
                    transactionID: id, customerConsented: fields?["customerConsented"] as? Bool,
                    deliveryStatus: fields?["deliveryStatus"] as? String,
                    sampleContentProvided: fields?["sampleContentProvided"] as? Bool,
                    consumptionPercentage: (fields?["consumptionPercentage"] as? NSNumber)?.intValue,
                    refundPreference: fields?["refundPreference"] as? String, receivedAt: state.now))
            return Response(status: .accepted)
        }
    }

    /// Extend a Subscription Renewal Date: once admitted, the body checked as Apple checks it (days 1–90,
    /// reason 0–3, a request identifier), then the extension granted or refused (`SimulatorState.extend`).
    func extend(_ request: Request, id: String, sandbox: Bool) async throws -> Response {
        switch try await admit(request, id: id, sandbox: sandbox) {
        case .refused(let response): return response
        case .admitted: break
        }
        let fields = try await jsonObject(request)
        let days: Int
        let identifier: String
        switch SimulatedReceipt.extensionRequest(fields) {
        case .failure(let problem): return serverAPIError(400, code: problem.code, message: problem.message)
        case .success(let asked): (days, identifier) = asked
        }
        let answer = state.extend(originalTransactionID: id, days: days, requestIdentifier: identifier)
        let delay = state.extensionAnswerDelay
        if delay > .zero { try await Task.sleep(for: delay) }
        return send(answer)
    }

    func send(_ answer: ServerAPIAnswer) -> Response {
        switch answer {
        case .json(let data): return raw(status: 200, contentType: "application/json", data: data)
        case .error(let status, let code, let message):
            if status == 404 { state.countServerAPI(.notFound) }
            return serverAPIError(status, code: code, message: message)
        case .raw(let status, let contentType, let body):
            return raw(status: status, contentType: contentType, data: body)
        }
    }

    func serverAPIError(_ status: Int, code: Int, message: String) -> Response {
        raw(
            status: status, contentType: "application/json",
            data: Self.encode(ServerAPIErrorBody(errorCode: code, errorMessage: message)))
    }

    private struct ServerAPIErrorBody: Encodable {
        var errorCode: Int
        var errorMessage: String
    }

    /// The request's body as a JSON object; nil when it is not one.
    func jsonObject(_ request: Request) async throws -> [String: Any]? {
        let body = try await request.body.collect(upTo: 64 << 10)
        return (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))) as? [String: Any]
    }

    func decode<T: Decodable>(_ type: T.Type, from request: Request) async throws -> T? {
        let body = try await request.body.collect(upTo: 64 << 10)
        return try? JSONDecoder().decode(type, from: Data(body.readableBytesView))
    }

    func json(_ value: some Encodable) -> Response {
        raw(status: 200, contentType: "application/json", data: Self.encode(value))
    }

    func badRequest(_ message: String) -> Response {
        var response = json(["error": message])
        response.status = .badRequest
        return response
    }

    func raw(status: Int, contentType: String, data: Data) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = contentType
        return Response(
            status: HTTPResponse.Status(code: status), headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func encode(_ value: some Encodable) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
        // The simulator's own types always encode.
        return (try? encoder.encode(value)) ?? Data(#"{"status":21005}"#.utf8)
    }
}

/// The body of `GET /_simulator/server-api/arrivals`: every Server API request's arrival (UNIX ms),
/// oldest first, and the same by app (the bundle id its token named).
struct Arrivals: Encodable {
    var arrivalsMS: [Int64]
    var byApp: [String: [Int64]]

    enum CodingKeys: String, CodingKey {
        case arrivalsMS = "arrivals_ms"
        case byApp = "arrivals_by_app"
    }
}
