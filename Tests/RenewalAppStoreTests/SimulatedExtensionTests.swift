import AppStoreSimulator
import Foundation
import RenewalCore
import Testing

/// The simulator's Extend a Subscription Renewal Date, for every scenario at many points of its timeline:
/// an extension Apple acknowledges moves the subscription's expiry by its days in every answer after it.
@Suite("Simulated renewal-date extensions: every acknowledged extension moves the expiry")
struct SimulatedExtensionTests {
    let day = TestSupport.day
    let now = TestSupport.now

    @Test(
        """
        For every scenario and point of its timeline, an extension the simulator acknowledges moves the expiry of \
        the subscription it names by the days (verifyReceipt rows, so the Server API too) and is notified as \
        RENEWAL_EXTENDED; Apple's eligible cases (auto-renew off but still active, a billing grace period, an \
        add-on, a recovered or upgraded subscription) are acknowledged, the ineligible ones refused
        """,
        arguments: Scenario.allCases)
    func acknowledgedExtensionMovesExpiry(scenario: Scenario) {
        var granted: Set<Int> = []
        for daysAgo in [3, 10, 25, 33, 40, 50, 75] {
            let receipt = SimulatedReceipt(
                account: "sim-ext-\(scenario.rawValue)-\(daysAgo)", scenario: scenario,
                start: now.addingTimeInterval(-Double(daysAgo) * day))
            let state = SimulatorState(now: now)
            state.register([receipt])
            let rows = receipt.response(at: now).latestReceiptInfo
            for id in Set(rows.compactMap(\.originalTransactionID)).sorted() {
                let before = rows.filter { $0.originalTransactionID == id }.compactMap(\.expiresDate).max()
                guard
                    state.extendRenewalDate(
                        originalTransactionID: id, days: 7, requestIdentifier: "req-\(daysAgo)-\(id)")
                else { continue }
                granted.insert(daysAgo)
                var extended = receipt
                extended.extensions = state.extensions(of: id)
                let later = now.addingTimeInterval(60)
                let after = extended.response(at: later).latestReceiptInfo
                    .filter { $0.originalTransactionID == id }.compactMap(\.expiresDate).max()
                #expect(
                    after.map { $0.timeIntervalSince(before ?? .distantPast) } == 7 * day,
                    "\(scenario.rawValue) \(daysAgo) days in, \(id): expiry \(String(describing: before)) -> \(String(describing: after))"
                )
                // In a billing grace period the customer keeps access until the grace (moved too) is over.
                if scenario != .gracePeriod {
                    #expect((after ?? .distantPast) > later, "\(scenario.rawValue) \(daysAgo): active after it")
                }
                let notified = extended.notifications(until: later).contains {
                    $0.type == "RENEWAL_EXTENDED" && $0.originalTransactionID == id
                }
                #expect(notified, "\(scenario.rawValue) \(daysAgo): RENEWAL_EXTENDED")
            }
        }
        // Apple's judgement, day by day (a period is 30 days; grace_period's grace is 16 days).
        let expected: [Scenario: Set<Int>] = [
            .voluntaryExpiry: [3, 10, 25], .legacyIOS6: [3, 10, 25], .billingRetry: [3, 10, 25],
            .gracePeriod: [3, 10, 25, 33, 40], .billingRecovery: [3, 10, 25, 33, 40, 50, 75],
            .gracePeriodRecovery: [3, 10, 25, 33, 40, 50, 75],
            .familyShared: [], .assignedSeat: [], .trial: [33, 40, 50, 75], .accountNotFound: [], .notAuthentic: [],
            .malformed: [], .outage: [], .html200: [],
        ]
        if let expected = expected[scenario] {
            #expect(granted == expected, "\(scenario.rawValue): granted \(granted.sorted())")
        }
        if [.renewal, .multiseat, .refundRequest, .upgrade, .multipleSubscriptions].contains(scenario) {
            #expect(granted == [3, 10, 25, 33, 40, 50, 75], "\(scenario.rawValue): granted \(granted.sorted())")
        }
    }
}
