import AppStoreSimulator
import Foundation
import Hummingbird
import Logging
import Testing

/// `renewal check` against a sandbox URL that answers as the other environment does: a configuration
/// finding, never an internal error.
@Suite("check: a sandbox URL answering 21007/21008 is a configuration error")
struct CheckSandboxURLTests {
    @Test(
        """
        check whose sandbox URL answers the made-up receipt with 21007 or 21008 (it sends it back and forth) exits \
        78 and names the sandbox URL setting to fix
        """,
        arguments: [21_007, 21_008])
    func sandboxURLAnsweringTheOtherEnvironment(status: Int) async throws {
        try await CLI.withDirectoryAndSimulator(secret: NewUserFixesTests.secret) { directory, _, _, endpoints in
            let database = directory + "/renewal.sqlite"
            var environment = [
                "RENEWAL_DATABASE": database, "APPSTORE_SHARED_SECRET": NewUserFixesTests.secret,
                "APPSTORE_VERIFY_RECEIPT_URL": endpoints.productionURL,
            ]
            #expect(try await CLI.run(["migrate"], environment: environment).status == 0)
            let quiet = Logger(label: "listener", factory: { _ in SwiftLogNoOpLogHandler() })
            let router = Router()
            router.post("verifyReceipt") { _, _ in
                Response(
                    status: .ok, headers: [.contentType: "application/json"],
                    body: ResponseBody(byteBuffer: ByteBuffer(string: #"{"status":\#(status)}"#)))
            }
            try await withLoopbackServer(router, logger: quiet) { port in
                let url = "http://127.0.0.1:\(port)/verifyReceipt"
                environment["APPSTORE_SANDBOX_VERIFY_RECEIPT_URL"] = url
                let check = try await CLI.run(["check", "--max-attempts", "1"], environment: environment)
                #expect(check.status == 78, "\(status): exit \(check.status) \(check.stdout) \(check.stderr)")
                #expect(check.stderr.contains("APPSTORE_SANDBOX_VERIFY_RECEIPT_URL"), "\(check.stderr)")
                #expect(check.stderr.contains(url), "\(check.stderr)")
            }
        }
    }
}
