import AppStoreSimulator
import ArgumentParser
import Foundation
import RenewalCore
import RenewalServerAPI

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension AppStoreSimulatorCommand {
    /// Times `renewal`'s JWS verifier (the one its Server API path uses) on answers this simulator
    /// signs: one signed transaction and one signed renewal info per answer, as a subscription
    /// status answer carries. Signing is not timed; verification runs on one thread, so the rate
    /// printed per CPU second is the rate per core.
    struct BenchJWS: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "bench-jws",
            abstract: "Time the job's JWS verification (chain cache warm) on answers signed with the simulator's chain."
        )

        @Option(help: "How many answers (each a signed transaction and a signed renewal info).") var count = 10_000

        func validate() throws {
            guard count > 0 else { throw ValidationError("--count must be more than 0.") }
        }

        func run() async throws {
            let chain = try SigningChain.generate()
            let signedDate = Int64(Date().timeIntervalSince1970 * 1_000)  // milliseconds, as JWS payloads carry dates
            var answers: [(transaction: String, renewal: String)] = []
            answers.reserveCapacity(count)
            for index in 0..<count {
                let original = String(1_000_000_000_000 + index)
                let transaction: [String: Any] = [
                    "bundleId": SimulatedReceipt.bundleID, "environment": "Production", "signedDate": signedDate,
                    "quantity": 1,
                    "type": "Auto-Renewable Subscription", "storefront": "USA", "storefrontId": "143441",
                    "inAppOwnershipType": "PURCHASED", "transactionReason": "RENEWAL",
                    "transactionId": String(2_000_000_000_000 + index), "originalTransactionId": original,
                    "webOrderLineItemId": String(3_000_000_000_000 + index), "productId": "com.example.pro.monthly",
                    "subscriptionGroupIdentifier": "20000001", "purchaseDate": signedDate - 86_400_000,
                    "originalPurchaseDate": signedDate - 40 * 86_400_000, "expiresDate": signedDate + 29 * 86_400_000,
                ]
                let renewal: [String: Any] = [
                    "environment": "Production", "signedDate": signedDate, "originalTransactionId": original,
                    "productId": "com.example.pro.monthly", "autoRenewProductId": "com.example.pro.monthly",
                    "autoRenewStatus": 1,
                    "isInBillingRetryPeriod": false, "recentSubscriptionStartDate": signedDate - 40 * 86_400_000,
                    "renewalDate": signedDate + 29 * 86_400_000,
                ]
                answers.append(
                    (
                        try chain.sign(JSONSerialization.data(withJSONObject: transaction, options: [.sortedKeys])),
                        try chain.sign(JSONSerialization.data(withJSONObject: renewal, options: [.sortedKeys]))
                    ))
            }
            let verifier = SignedDataVerifier(rootCertificates: [chain.root], bundleID: SimulatedReceipt.bundleID)
            // Warm the chain cache with the first answer, as a run does with its first.
            _ = try await verifier.transaction(answers[0].transaction, environment: "Production")
            let cpuBefore = Self.cpuSeconds()
            let started = ContinuousClock.now
            for answer in answers {
                _ = try await verifier.transaction(answer.transaction, environment: "Production")
                _ = try await verifier.renewalInfo(answer.renewal, environment: "Production")
            }
            let wall = (ContinuousClock.now - started).seconds
            let cpu = Self.cpuSeconds() - cpuBefore
            let cache = verifier.cacheStatistics
            let perCore = Double(count) / max(cpu, 1e-9)
            print(
                String(
                    format:
                        """
                        bench-jws: %d answers (%d JWS) in %.3f s wall, %.3f s CPU: %.0f answers/s per core (%.0f \
                        JWS/s), %.1f µs per answer; chain cache %d hits, %d misses
                        """,
                    count, 2 * count, wall, cpu, perCore, 2 * perCore, cpu / Double(count) * 1e6, cache.hits,
                    cache.misses))
        }

        static func cpuSeconds() -> Double {
            var usage = rusage()
            getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
            let user = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            let system = Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
            return user + system
        }
    }
}
