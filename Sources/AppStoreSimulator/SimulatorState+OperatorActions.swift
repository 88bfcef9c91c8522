import Foundation
import RenewalCore
import Synchronization

/// Apple's operator actions as the simulator carries them out: renewal-date extensions (one subscription and
/// mass) and Send Consumption Information.
extension SimulatorState {
    /// Every Extend a Subscription Renewal Date request identifier received, in order, repeats included.
    public var extensionRequests: [String] {
        storage.withLock { $0.extensionRequests }
    }

    /// Extend a Subscription Renewal Date for the subscription `originalTransactionID`, as Apple answers it:
    /// a repeated request identifier gets the first answer again and extends nothing; an ineligible
    /// subscription (not active, in a free trial, family-shared, a multiseat member, or extended twice in
    /// the last 365 days) gets Apple's error; otherwise the subscription's renewal date moves by `days`.
    func extend(originalTransactionID: String, days: Int, requestIdentifier: String) -> ServerAPIAnswer {
        let now = self.now
        return storage.withLock { storage in
            storage.extensionRequests.append(requestIdentifier)
            if let earlier = storage.extensionAnswers[requestIdentifier] { return earlier }
            guard var receipt = storage.registry[originalTransactionID] else { return .notFound }
            let answer = receipt.extensionAnswer(
                originalTransactionID: originalTransactionID, days: days, requestIdentifier: requestIdentifier,
                at: now)
            if case .json = answer {
                receipt.extensions =
                    (receipt.extensions ?? [])
                    + [
                        SimulatedExtension(
                            at: now, days: days, requestIdentifier: requestIdentifier,
                            originalTransactionID: originalTransactionID)
                    ]
                for id in receipt.originalTransactionIDs { storage.registry[id] = receipt }
            }
            storage.extensionAnswers[requestIdentifier] = answer
            return answer
        }
    }

    /// How long Extend a Subscription Renewal Date waits, after granting an extension, before it answers:
    /// a client killed meanwhile was extended without hearing so.
    public var extensionAnswerDelay: Duration {
        get { storage.withLock { $0.extensionAnswerDelay } }
        set { storage.withLock { $0.extensionAnswerDelay = newValue } }
    }

    /// The extensions Apple granted the subscription `originalTransactionID`, oldest first.
    public func extensions(of originalTransactionID: String) -> [SimulatedExtension] {
        storage.withLock { $0.registry[originalTransactionID]?.extensions ?? [] }
    }

    /// How long Apple takes to carry out a mass extension (the subscribers' extensions are spread over it,
    /// the summary comes at its end). Default two hours.
    public var massExtensionDuration: TimeInterval {
        get { storage.withLock { $0.massExtensionDuration } }
        set { storage.withLock { $0.massExtensionDuration = newValue } }
    }

    /// Every mass extension request accepted, in order.
    public var massExtensions: [SimulatedMassExtension] {
        storage.withLock { $0.massExtensions }
    }

    /// Extend Subscription Renewal Dates for All Active Subscribers of `productID` in `bundle` (in
    /// `storefronts`, all when nil): every registered subscriber Apple would extend one by one is extended,
    /// the extensions spread over `massExtensionDuration`; the others count as failed. A repeated request
    /// identifier is answered again and does nothing.
    func massExtend(bundle: String, productID: String, storefronts: [String]?, days: Int, requestIdentifier: String)
        -> ServerAPIAnswer
    {
        let now = self.now
        let accepted = ServerAPIAnswer.json(SimulatedReceipt.json(["requestIdentifier": requestIdentifier]))
        return storage.withLock { storage in
            if storage.massExtensions.contains(where: { $0.requestIdentifier == requestIdentifier }) { return accepted }
            var seen: Set<String> = []
            let subscribers = storage.registry.values
                .filter { seen.insert($0.account).inserted }
                .filter { receipt in
                    receipt.bundleIdentifier == bundle && receipt.productID == productID
                        && (storefronts.map { $0.contains(receipt.storefront ?? "USA") } ?? true)
                }
                .sorted { $0.account < $1.account }
            let duration = storage.massExtensionDuration
            var mass = SimulatedMassExtension(
                requestIdentifier: requestIdentifier, bundleID: bundle, productID: productID, storefronts: storefronts,
                requestedAt: now, completesAt: now.addingTimeInterval(duration), succeeded: [], failed: 0)
            for (index, var receipt) in subscribers.enumerated() {
                let id = receipt.originalTransactionID
                guard
                    case .json = receipt.extensionAnswer(
                        originalTransactionID: id, days: days, requestIdentifier: requestIdentifier, at: now)
                else {
                    mass.failed += 1
                    continue
                }
                let at = now.addingTimeInterval(duration * Double(index + 1) / Double(subscribers.count + 1))
                receipt.extensions =
                    (receipt.extensions ?? []) + [
                        SimulatedExtension(at: at, days: days, requestIdentifier: requestIdentifier)
                    ]
                for known in receipt.originalTransactionIDs { storage.registry[known] = receipt }
                mass.succeeded.append(SimulatedExtension(at: at, days: days, requestIdentifier: id))
            }
            storage.massExtensions.append(mass)
            return accepted
        }
    }

    /// Get Status of Subscription Renewal Date Extensions: complete once its time has run, with the counts so far.
    func massExtensionStatus(productID: String, requestIdentifier: String) -> ServerAPIAnswer {
        let now = self.now
        return storage.withLock { storage in
            guard
                let mass = storage.massExtensions.first(where: {
                    $0.requestIdentifier == requestIdentifier && $0.productID == productID
                })
            else {
                return .error(httpStatus: 404, code: 4_040_009, message: "Status request not found.")
            }
            let complete = now >= mass.completesAt
            var body: [String: Any] = [
                "requestIdentifier": requestIdentifier, "complete": complete,
                "succeededCount": mass.succeeded.filter { $0.at <= now }.count,
                "failedCount": mass.failed,
            ]
            if complete { body["completeDate"] = SimulatedReceipt.ms(mass.completesAt) }
            return .json(SimulatedReceipt.json(body))
        }
    }

    /// The `RENEWAL_EXTENSION` `SUMMARY` notifications of the mass extensions of `bundle` finished by `until`.
    func massExtensionSummaries(bundle: String, until: Date) -> [SimulatedNotification] {
        storage.withLock { $0.massExtensions }
            .filter { $0.bundleID == bundle && $0.completesAt <= until }
            .map { $0.summaryNotification }
    }

    /// Extends a subscription as a request from elsewhere would (another tool, App Store Connect): true
    /// when Apple granted it.
    @discardableResult
    public func extendRenewalDate(originalTransactionID: String, days: Int, requestIdentifier: String) -> Bool {
        if case .json = extend(
            originalTransactionID: originalTransactionID, days: days, requestIdentifier: requestIdentifier)
        {
            return true
        }
        return false
    }

    /// Every Send Consumption Information request accepted so far, in order.
    public var consumptionAnswers: [ConsumptionAnswer] {
        storage.withLock { $0.consumptionAnswers }
    }

    func recordConsumption(_ answer: ConsumptionAnswer?) {
        storage.withLock {
            $0.serverAPIStats.consumption += 1
            if let answer { $0.consumptionAnswers.append(answer) }
        }
    }
}
