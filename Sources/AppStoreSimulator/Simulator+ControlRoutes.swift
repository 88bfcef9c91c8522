import Foundation
import Hummingbird
import Logging
import NIOCore
import RenewalCore

/// The simulator's own control routes (`/_simulator/…`): registering receipts, the rate limit, the clock,
/// faults and what an account sent.
extension SimulatorRoutes {
    /// `{"receipts": ["<encoded>", …]}` makes receipts known to the Server API routes.
    func registerReceipts(_ request: Request) async throws -> Response {
        struct Registration: Decodable { var receipts: [String] }
        let body = try await request.body.collect(upTo: Self.maxRequestBytes)
        guard let registration = try? JSONDecoder().decode(Registration.self, from: Data(body.readableBytesView)) else {
            return badRequest(#"Send {"receipts": ["<receipt>", …]}."#)
        }
        let receipts = registration.receipts.compactMap(SimulatedReceipt.init(encoded:))
        state.register(receipts)
        return json(["registered": receipts.count, "unreadable": registration.receipts.count - receipts.count])
    }

    /// `{"per_second": N}` sets the simulated Server API rate limit; `{"per_second": null}` lifts it.
    func changeRateLimit(_ request: Request) async throws -> Response {
        struct Change: Decodable {
            var perSecond: Int?
            enum CodingKeys: String, CodingKey { case perSecond = "per_second" }
        }
        guard let change = try await decode(Change.self, from: request), (change.perSecond ?? 1) > 0 else {
            return badRequest(#"Send {"per_second": N} with N > 0, or {"per_second": null}."#)
        }
        state.serverAPIRateLimit = change.perSecond
        return json(["per_second": change.perSecond])
    }

    func respond(_ answer: SimulatedAnswer) -> Response {
        switch answer {
        case .apple(let response): return json(response)
        case .legacy(let response): return json(response)
        case .truncated(let response):
            let data = Self.encode(response)
            return raw(status: 200, contentType: "application/json", data: data.prefix(data.count / 2))
        case .raw(let httpStatus, let contentType, let body):
            return raw(status: httpStatus, contentType: contentType, data: Data(body.utf8))
        }
    }

    func clock() -> Response {
        json(["now_ms": AppleDateFormat.milliseconds(state.now)])
    }

    /// `{"now_ms": N}` sets (and freezes) the clock; `{"advance_seconds": N}` moves it.
    func changeClock(_ request: Request) async throws -> Response {
        struct Change: Decodable {
            var nowMS: Int64?
            var advanceSeconds: Double?
            enum CodingKeys: String, CodingKey {
                case nowMS = "now_ms"
                case advanceSeconds = "advance_seconds"
            }
        }
        guard let change = try await decode(Change.self, from: request),
            change.nowMS != nil || change.advanceSeconds?.isFinite == true
        else { return badRequest(#"Send {"now_ms": N} or {"advance_seconds": N}."#) }
        if let nowMS = change.nowMS { state.set(AppleDateFormat.date(milliseconds: nowMS)) }
        if let seconds = change.advanceSeconds, seconds.isFinite { state.advance(by: seconds) }
        return clock()
    }

    /// `{"mode": "none" | "outage" | "html_200" | "status_21005"}`.
    func changeFault(_ request: Request) async throws -> Response {
        struct Change: Decodable { var mode: SimulatorState.Fault }
        guard let change = try await decode(Change.self, from: request) else {
            let modes = SimulatorState.Fault.allCases.map(\.rawValue).joined(separator: ", ")
            return badRequest("Send {\"mode\": M} with M one of \(modes).")
        }
        state.fault = change.mode
        return json(["mode": change.mode.rawValue])
    }

    func received(account: String) -> Response {
        guard let receiptData = state.lastReceived(account: account) else {
            var response = json(["error": "No receipt received for this account."])
            response.status = .notFound
            return response
        }
        return json(
            Received(
                account: account, receiptData: receiptData,
                generation: SimulatedReceipt(encoded: receiptData)?.generation,
                attempts: state.attempts(account: account)))
    }

    fileprivate struct Received: Encodable {
        var account: String
        var receiptData: String
        var generation: Int?
        var attempts: Int
        enum CodingKeys: String, CodingKey {
            case account, generation, attempts
            case receiptData = "receipt_data"
        }
    }
}
