import AppStoreSimulator
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import RenewalCore
import RenewalServerAPI

/// Calls the simulator's App Store Server API over HTTP with a token of the simulator's API key, and reads
/// what comes back (signed transactions verified against the simulator's root, or decoded as sent).
struct SimulatedAPICaller {
    let endpoints: SimulatorEndpoints
    let serverAPI: SimulatedServerAPI

    struct Answer {
        var status: Int
        var headers: HTTPHeaders
        var data: Data
        var json: [String: Any] { ((try? JSONSerialization.jsonObject(with: data)) as? [String: Any]) ?? [:] }
        var statusAndHeaders: (status: Int, headers: HTTPHeaders) { (status, headers) }
    }

    /// Runs `body` with a simulator over `state` and a caller pointed at it.
    static func with(_ state: SimulatorState, _ body: (SimulatedAPICaller) async throws -> Void) async throws {
        let configuration = SimulatorConfiguration(sharedSecret: TestSupport.secret, state: state)
        guard let serverAPI = configuration.serverAPI else { throw CallerError.noServerAPI }
        try await withAppStoreSimulator(configuration: configuration, logger: TestSupport.quiet) { endpoints in
            try await body(SimulatedAPICaller(endpoints: endpoints, serverAPI: serverAPI))
        }
    }

    enum CallerError: Error { case noServerAPI, unreadable(String) }

    func call(
        _ method: HTTPMethod, _ path: String, sandbox: Bool = false, body: String? = nil, authorized: Bool = true
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: (sandbox ? endpoints.sandboxServerAPIURL : endpoints.serverAPIURL) + path)
        request.method = method
        if authorized {
            let token = try ServerAPIToken(
                keyID: serverAPI.keyID, issuerID: serverAPI.issuerID, bundleID: SimulatedReceipt.bundleID
            ).signed(with: serverAPI.apiKey)
            request.headers.add(name: "Authorization", value: "Bearer " + token)
        }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: body))
        }
        return try await HTTPClient.withHTTPClient { http in
            let response = try await http.execute(request, timeout: .seconds(30))
            let buffer = try await response.body.collect(upTo: 4 << 20)
            return Answer(
                status: Int(response.status.code), headers: response.headers, data: Data(buffer.readableBytesView))
        }
    }

    /// Look Up Order ID: Apple's `status` and the signed transactions, each verified.
    func lookUp(_ orderID: String, sandbox: Bool = false) async throws -> (
        status: Int?, transactions: [JWSTransaction], body: [String: Any]
    ) {
        let answer = try await call(.GET, "/inApps/v1/lookup/" + orderID, sandbox: sandbox)
        let body = answer.json
        let verifier = SignedDataVerifier(rootCertificates: [serverAPI.chain.root], bundleID: SimulatedReceipt.bundleID)
        var transactions: [JWSTransaction] = []
        for jws in body["signedTransactions"] as? [String] ?? [] {
            transactions.append(try await verifier.transaction(jws, environment: sandbox ? "Sandbox" : "Production"))
        }
        return ((body["status"] as? NSNumber)?.intValue, transactions, body)
    }

    /// Every transaction of Get Transaction History's first page for `id`, decoded.
    func historyTransactions(_ id: String) async throws -> [[String: Any]] {
        let answer = try await call(.GET, "/inApps/v2/history/" + id)
        return try (answer.json["signedTransactions"] as? [String] ?? []).map(Self.payload)
    }

    /// The renewal info of every subscription Get All Subscription Statuses lists for `id`, decoded.
    func statusRenewalInfo(_ id: String) async throws -> [[String: Any]] {
        let answer = try await call(.GET, "/inApps/v1/subscriptions/" + id)
        let groups = answer.json["data"] as? [[String: Any]] ?? []
        let items = groups.flatMap { $0["lastTransactions"] as? [[String: Any]] ?? [] }
        return try items.map { try Self.payload($0["signedRenewalInfo"] as? String ?? "") }
    }

    /// Notification History's notifications signed in [from, to) (first page): `type/subtype`, when, and the
    /// signed transaction, decoded.
    func notificationTransactions(from: Date, to: Date) async throws -> [(
        type: String, signedDate: Date, transaction: [String: Any]
    )] {
        let body =
            #"{"startDate": \#(AppleDateFormat.milliseconds(from)), "endDate": \#(AppleDateFormat.milliseconds(to))}"#
        let answer = try await call(.POST, "/inApps/v1/notifications/history", body: body)
        let records = answer.json["notificationHistory"] as? [[String: Any]] ?? []
        return try records.map { record in
            let payload = try Self.payload(record["signedPayload"] as? String ?? "")
            let data = payload["data"] as? [String: Any] ?? [:]
            let type = [payload["notificationType"], payload["subtype"]].compactMap { $0 as? String }
                .joined(separator: "/")
            let signed = AppleDateFormat.date(milliseconds: (payload["signedDate"] as? NSNumber)?.int64Value ?? 0)
            return (type, signed, try Self.payload(data["signedTransactionInfo"] as? String ?? ""))
        }
    }

    /// The payload of a JWS as sent (not verified).
    static func payload(_ jws: String) throws -> [String: Any] {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let data = Base64URL.decode(parts[1]),
            let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
        else { throw CallerError.unreadable(String(jws.prefix(40))) }
        return object
    }
}
