import AppStoreSimulator
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Synchronization

/// A webhook receiver on loopback, as an app's server would run one: it checks each request's
/// Standard Webhooks signature with the shared secret, records what arrived, and answers as the
/// test sets it (`ok`, `slow`: ok after 50 ms, `fail` with 500, `gone` with 410, `hang` past the sender's timeout,
/// `redirect`: 307 to `/elsewhere`, which counts what reaches it and answers 204).
final class WebhookReceiver: Sendable {
    enum Mode: Sendable { case ok, slow, fail, gone, hang, redirect }

    struct Received: Sendable {
        var id: String
        var timestamp: String
        var signatureValid: Bool
        var body: [String: Any] { (try? JSONSerialization.jsonObject(with: raw) as? [String: Any]) ?? [:] }
        var raw: Data
        /// What the receiver answered.
        var answered: Int
        /// When the request arrived.
        var arrived = ContinuousClock.now
    }

    private struct State {
        var mode: Mode = .ok
        var received: [Received] = []
        var redirected = 0
    }

    private let state = Mutex(State())
    let key: Data

    init(secret: String) {
        key = Data(base64Encoded: String(secret.dropFirst("whsec_".count))) ?? Data()
    }

    var mode: Mode {
        get { state.withLock { $0.mode } }
        set { state.withLock { $0.mode = newValue } }
    }

    var received: [Received] { state.withLock { $0.received } }

    /// Requests that followed a redirect to `/elsewhere`.
    var redirected: Int { state.withLock { $0.redirected } }

    /// The receiver's own check, written as docs/webhooks.md tells app developers to.
    func verify(id: String, timestamp: String, body: Data, signatures: String) -> Bool {
        let mac = HMAC<SHA256>.authenticationCode(
            for: Data("\(id).\(timestamp).".utf8) + body, using: SymmetricKey(data: key))
        let expected = "v1," + Data(mac).base64EncodedString()
        return signatures.split(separator: " ").contains { $0 == expected }
    }

    /// Runs the receiver for the length of `body`, with its URL.
    func serve<T>(_ body: (String) async throws -> T) async throws -> T {
        let router = Router()
        router.post("hooks") { [self] request, _ -> Response in
            let data = Data(try await request.body.collect(upTo: 1 << 20).readableBytesView)
            let headers = request.headers
            let id = headers[HTTPField.Name("webhook-id")!] ?? ""
            let timestamp = headers[HTTPField.Name("webhook-timestamp")!] ?? ""
            let signature = headers[HTTPField.Name("webhook-signature")!] ?? ""
            let valid = verify(id: id, timestamp: timestamp, body: data, signatures: signature)
            let mode = self.mode
            let status: HTTPResponse.Status =
                switch mode {
                case .ok, .slow: valid ? .noContent : .unauthorized
                case .fail: .internalServerError
                case .gone: .gone
                case .hang: .noContent
                case .redirect: .temporaryRedirect
                }
            state.withLock {
                $0.received.append(
                    Received(id: id, timestamp: timestamp, signatureValid: valid, raw: data, answered: status.code))
            }
            if mode == .hang { try await Task.sleep(for: .seconds(12)) }
            if mode == .slow { try await Task.sleep(for: .milliseconds(50)) }
            if mode == .redirect { return Response(status: status, headers: [.location: "/elsewhere"]) }
            return Response(status: status)
        }
        router.post("elsewhere") { [self] _, _ -> Response in
            state.withLock { $0.redirected += 1 }
            return Response(status: .noContent)
        }
        let logger = Logger(label: "receiver", factory: { _ in SwiftLogNoOpLogHandler() })
        return try await withLoopbackServer(router, logger: logger) { port in
            try await body("http://127.0.0.1:\(port)/hooks")
        }
    }
}
