import Foundation
import Testing

@testable import RenewalCore

/// `AppStoreStatus.disposition(isRetryableFlag:)` against the statuses in docs/design.md §2.
@Suite struct AppStoreStatusTests {
    typealias Disposition = AppStoreStatus.Disposition

    static let table: [(Int, Disposition)] = [
        (0, .valid),
        (21000, .permanentError),
        (21001, .permanentError),
        (21002, .malformedOrTemporary),
        (21003, .invalidReceipt),
        (21004, .sharedSecretRejected),
        (21005, .temporary),
        (21006, .valid),
        (21007, .useSandbox),
        (21008, .useProduction),
        (21009, .temporary),
        (21010, .invalidReceipt),
        (21011, .permanentError),
        (21099, .permanentError),
        (21200, .permanentError),
        (-1, .permanentError),
        (1, .permanentError),
    ]

    @Test("Each documented status maps to its disposition, whatever the retry flag says", arguments: table)
    func disposition(code: Int, expected: Disposition) {
        for flag in [true, false, nil] as [Bool?] {
            #expect(
                AppStoreStatus(code).disposition(isRetryableFlag: flag) == expected,
                "\(code) with flag \(String(describing: flag))")
        }
    }

    @Test(
        "21100–21199 are temporary only when flagged retryable",
        arguments: [21100, 21150, 21199],
        [(true, Disposition.temporary), (false, .permanentError), (nil, .permanentError)] as [(Bool?, Disposition)]
    )
    func internalErrors(code: Int, flagAndExpected: (Bool?, Disposition)) {
        #expect(AppStoreStatus(code).disposition(isRetryableFlag: flagAndExpected.0) == flagAndExpected.1)
    }

    @Test("Named statuses carry Apple's numbers")
    func namedStatuses() {
        #expect(AppStoreStatus.valid.rawValue == 0)
        #expect(AppStoreStatus.notPost.rawValue == 21000)
        #expect(AppStoreStatus.malformedOrTemporary.rawValue == 21002)
        #expect(AppStoreStatus.notAuthentic.rawValue == 21003)
        #expect(AppStoreStatus.sharedSecretRejected.rawValue == 21004)
        #expect(AppStoreStatus.serverUnavailable.rawValue == 21005)
        #expect(AppStoreStatus.validButExpired.rawValue == 21006)
        #expect(AppStoreStatus.sandboxReceiptOnProduction.rawValue == 21007)
        #expect(AppStoreStatus.productionReceiptOnSandbox.rawValue == 21008)
        #expect(AppStoreStatus.internalDataAccessError.rawValue == 21009)
        #expect(AppStoreStatus.accountNotFound.rawValue == 21010)
        #expect(AppStoreStatus(rawValue: 21199) == AppStoreStatus(21199))
    }

    @Test("Environments other than Production and Sandbox are kept as sent")
    func environments() throws {
        struct Box: Codable { var environment: AppStoreEnvironment }
        let decoded = try JSONDecoder().decode(Box.self, from: Data(#"{"environment": "Xcode"}"#.utf8))

        #expect(decoded.environment.rawValue == "Xcode")
        #expect(decoded.environment != .production && decoded.environment != .sandbox)
        #expect(AppStoreEnvironment.production.description == "Production")
        #expect(AppStoreEnvironment.sandbox.rawValue == "Sandbox")
        #expect(
            String(decoding: try JSONEncoder().encode(Box(environment: .sandbox)), as: UTF8.self)
                == #"{"environment":"Sandbox"}"#)
    }
}
