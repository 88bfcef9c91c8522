import Foundation
import RenewalCore
import RenewalPostgres
import RenewalSQLite
import Testing

@testable import RenewalSQL
@testable import RenewalStorage

/// Storage applies Core's extension state machines and decides nothing itself: from every stored state,
/// each answer leaves the request in the state Core's transition says, Apple's `RENEWAL_EXTENDED`
/// confirms what Core says it confirms, and the mass extensions a run follows up are those Core's
/// `MassExtensionFollowUp.due` names.
@Suite("Extension lifecycle in storage: every state and answer as Core decides, on SQLite and PostgreSQL")
struct ExtensionLifecycleStoreTests {
    typealias Backend = StoreBackend

    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static var ms: Int64 { Int64(now.timeIntervalSince1970 * 1000) }

    static let extensionResults: [ExtensionResult] = [
        .succeeded(effectiveAt: now, at: now),
        .rejected(httpStatus: 400, errorCode: 4_040_003, reason: "ineligible", at: now),
        .notSent(reason: "rate_limited"), .unconfirmed(reason: "timeout"),
    ]

    static let massResults: [MassExtensionResult] = [
        .accepted(at: now, nextStatusAt: now), .rejected(httpStatus: 400, errorCode: nil, reason: "refused"),
        .notAccepted(reason: "outage"), .inProgress(succeeded: 1, failed: 0, nextStatusAt: now),
        .complete(succeeded: 2, failed: 0, at: now),
    ]

    @Test("each extension answer, from each stored state, leaves Core's state", arguments: Backend.available)
    func extensionAnswers(backend: Backend) async throws {
        try await backend.withMigratedStore { store in
            for (index, result) in Self.extensionResults.enumerated() {
                for state in ExtensionState.allCases {
                    let id = "x-\(index)-\(state.rawValue)"
                    try await store.run(Self.insertExtension(id, state: state, sentAt: Self.ms - 1))
                    try await store.recordExtension(id, result: result)
                    let stored = try await store.stateOf(id, in: "renewal_extensions")
                    #expect(stored == ExtensionState.transition(for: result).apply(to: state).rawValue, "\(result)")
                }
            }
            for state in ExtensionState.allCases {
                let id = "send-\(state.rawValue)"
                try await store.run(Self.insertExtension(id, state: state, sentAt: nil))
                let taken = try await store.markExtensionSending(id, now: Self.now)
                #expect(taken == ExtensionState.send.applies(to: state))
                #expect(
                    try await store.stateOf(id, in: "renewal_extensions")
                        == ExtensionState.send.apply(to: state).rawValue)
            }
        }
    }

    @Test("RENEWAL_EXTENDED confirms what Core says, sent before it was signed", arguments: Backend.available)
    func confirmation(backend: Backend) async throws {
        try await backend.withMigratedStore { store in
            for state in ExtensionState.allCases {
                try await store.run(Self.insertExtension("c-\(state.rawValue)", state: state, sentAt: Self.ms - 1))
            }
            try await store.run(Self.insertExtension("late", state: .sending, sentAt: Self.ms + 1))
            try await store.confirm("1000", at: Self.now)
            for state in ExtensionState.allCases {
                let expected = ExtensionState.confirmable.contains(state) ? state.confirmed : state
                #expect(try await store.stateOf("c-\(state.rawValue)", in: "renewal_extensions") == expected.rawValue)
            }
            #expect(try await store.stateOf("late", in: "renewal_extensions") == ExtensionState.sending.rawValue)
        }
    }

    @Test("each mass-extension answer, from each stored state, leaves Core's state", arguments: Backend.available)
    func massAnswers(backend: Backend) async throws {
        try await backend.withMigratedStore { store in
            for (index, result) in Self.massResults.enumerated() {
                for state in MassExtensionState.allCases {
                    let id = "m-\(index)-\(state.rawValue)"
                    try await store.run(Self.insertMass(id, state: state, sentAt: Self.ms, nextStatusAt: Self.ms))
                    try await store.recordMassExtension(id, result: result, now: Self.now)
                    let stored = try await store.stateOf(id, in: "renewal_mass_extensions")
                    #expect(stored == MassExtensionState.transition(for: result).apply(to: state).rawValue, "\(result)")
                }
            }
            for state in MassExtensionState.allCases {
                let id = "summary-\(state.rawValue)"
                try await store.run(Self.insertMass(id, state: state, sentAt: Self.ms, nextStatusAt: Self.ms))
                try await store.completeBySummary(id, at: Self.now)
                let expected = MassExtensionState.completedBySummary.apply(to: state)
                #expect(try await store.stateOf(id, in: "renewal_mass_extensions") == expected.rawValue)
            }
        }
    }

    @Test("the mass extensions due are those Core's follow-up rule names", arguments: Backend.available)
    func dueFollowUps(backend: Backend) async throws {
        try await backend.withMigratedStore { store in
            var expected: [String] = []
            for state in MassExtensionState.allCases {
                for offset in [-601, -600, -1, 0, 1] as [TimeInterval] {
                    let id = "d-\(state.rawValue)\(Int(offset))"
                    let at = Self.now.addingTimeInterval(offset)
                    let atMs = Int64(at.timeIntervalSince1970 * 1000)
                    try await store.run(Self.insertMass(id, state: state, sentAt: atMs, nextStatusAt: atMs))
                    if MassExtensionFollowUp.due(
                        state: state, nextStatusAt: at, sentAt: at, now: Self.now, resendAfter: 600) != nil
                    {
                        expected.append(id)
                    }
                }
            }
            let due = try await store.dueMassExtensions(now: Self.now, resendAfter: 600).map(\.requestIdentifier)
            #expect(due.sorted() == expected.sorted())
            #expect(!expected.isEmpty)
        }
    }

    static func insertExtension(_ id: String, state: ExtensionState, sentAt: Int64?) -> String {
        """
        INSERT INTO renewal_extensions (request_identifier, intent_key, intent, original_transaction_id, user_id,
            environment, days, reason, state, created_at, sent_at)
        VALUES ('\(id)', 'k-\(id)', 'outage', '1000', 'u', 'Production', 7, 3, '\(state.rawValue)', 0,
            \(sentAt.map(String.init) ?? "NULL"))
        """
    }

    static func insertMass(_ id: String, state: MassExtensionState, sentAt: Int64, nextStatusAt: Int64) -> String {
        """
        INSERT INTO renewal_mass_extensions (request_identifier, intent_key, intent, product_id, environment, days,
            reason, state, created_at, sent_at, next_status_at)
        VALUES ('\(id)', 'k-\(id)', 'outage', 'pro.monthly', 'Production', 7, 3, '\(state.rawValue)', 0, \(sentAt),
            \(nextStatusAt))
        """
    }
}

/// What the suite asks of either store, beside the public port.
protocol SQLStoreChecks: RenewalExtensionStore, RefundRequestStore {
    func int64(_ sql: String) async throws -> Int64?
    func text(_ sql: String) async throws -> String?
    func run(_ sql: String) async throws
    func stateOf(_ id: String, in table: String) async throws -> String?
    func confirm(_ originalTransactionID: String, at: Date) async throws
    func completeBySummary(_ id: String, at: Date) async throws
}

extension SQLSubscriptionStore: SQLStoreChecks {
    func run(_ sql: String) async throws {
        _ = try await database.withConnection { try $0.execute(sql, []) }
    }

    func stateOf(_ id: String, in table: String) async throws -> String? {
        try await database.withConnection {
            try $0.execute("SELECT state FROM \(table) WHERE request_identifier = $1", [.text(id)]).first?.text("state")
        }
    }

    func confirm(_ originalTransactionID: String, at: Date) async throws {
        try await database.withConnection { try Self.confirmExtensions(of: originalTransactionID, at: at, on: $0) }
    }

    func completeBySummary(_ id: String, at: Date) async throws {
        try await database.withConnection {
            try Self.completeMassExtension(
                ExtensionSummary(requestIdentifier: id, succeeded: 1, failed: 0), at: at, on: $0)
        }
    }
}
