import Foundation
import RenewalCore
import SwiftASN1
import Testing
import X509

@testable import RenewalServerAPI

@Suite("JWS verification with Apple's test chain: what passes and what is refused")
struct SignedDataVerifierTests {
    static func testRoot() throws -> Certificate {
        try Certificate(derEncoded: Array(Fixture.data("jws/test-pki/testCA.der")))
    }

    /// The DER of the PEM block in a file that may start with an openssl text dump.
    static func pemBlockBase64(_ path: String) throws -> String {
        let text = try Fixture.text(path)
        let start = try #require(text.range(of: "-----BEGIN CERTIFICATE-----"))
        let end = try #require(text.range(of: "-----END CERTIFICATE-----"))
        return text[start.upperBound..<end.lowerBound].filter { !$0.isWhitespace }
    }

    /// The fixture JWS with its header's x5c[0] (and x5c[1]) swapped for other certificates.
    static func withLeaf(_ jws: String, leaf: String, intermediate: String? = nil) throws -> String {
        let parts = jws.split(separator: ".")
        let headerData = try #require(Base64URL.decode(parts[0]))
        var header = try #require(try JSONSerialization.jsonObject(with: headerData) as? [String: Any])
        var x5c = try #require(header["x5c"] as? [String])
        x5c[0] = leaf
        if let intermediate { x5c[1] = intermediate }
        header["x5c"] = x5c
        let encoded = Base64URL.encode(try JSONSerialization.data(withJSONObject: header))
        return ([encoded] + parts.dropFirst().map(String.init)).joined(separator: ".")
    }

    @Test(
        "Apple's signed transaction and renewal info verify against the test root; a second check hits the chain cache")
    func validFixtures() async throws {
        let verifier = SignedDataVerifier(rootCertificates: [try Self.testRoot()], bundleID: "com.example")
        let transaction = try await verifier.transaction(
            Fixture.text("jws/signed-transaction.test-chain.jws"), environment: "Sandbox")
        #expect(transaction.bundleId == "com.example")
        #expect(transaction.signedDate == Date(timeIntervalSince1970: 1_672_956_154))
        let renewal = try await verifier.renewalInfo(
            Fixture.text("jws/signed-renewal-info.test-chain.jws"), environment: "Sandbox")
        #expect(renewal.signedDate == Date(timeIntervalSince1970: 1_672_956_154))
        _ = try await verifier.transaction(
            Fixture.text("jws/signed-transaction.test-chain.jws"), environment: "Sandbox")
        #expect(
            verifier.cacheStatistics.hits == 1 && verifier.cacheStatistics.misses == 2, "\(verifier.cacheStatistics)")
    }

    @Test(
        """
        With the chain cached under its header, a JWS with that header still has its signature checked, and any \
        other header is read and checked
        """
    )
    func warmCacheChecksEverything() async throws {
        let good = try Fixture.text("jws/signed-transaction.test-chain.jws")
        let verifier = SignedDataVerifier(rootCertificates: [try Self.testRoot()], bundleID: "com.example")
        _ = try await verifier.transaction(good, environment: "Sandbox")
        // Surrounding whitespace is not part of the JWS: the same header, a cache hit.
        _ = try await verifier.transaction("\n " + good + "\r\n", environment: "Sandbox")
        #expect(
            verifier.cacheStatistics.hits == 1 && verifier.cacheStatistics.misses == 1, "\(verifier.cacheStatistics)")

        // A character in the middle of the signature changed.
        var forged = Array(good)
        let signatureStart = try #require(forged.lastIndex(of: "."))
        let middle = signatureStart + 10
        forged[middle] = forged[middle] == "A" ? "B" : "A"
        await #expect(throws: SignedDataFailure.badSignature) {
            _ = try await verifier.transaction(String(forged), environment: "Sandbox")
        }

        // The cached chain under another algorithm: another header, so it is read, and refused.
        let parts = good.split(separator: ".")
        let headerData = try #require(Base64URL.decode(parts[0]))
        var header = try #require(try JSONSerialization.jsonObject(with: headerData) as? [String: Any])
        header["alg"] = "ES384"
        let otherHeader = Base64URL.encode(try JSONSerialization.data(withJSONObject: header))
        await #expect(throws: SignedDataFailure.malformed("alg is ES384, not ES256")) {
            _ = try await verifier.transaction(
                ([otherHeader] + parts.dropFirst().map(String.init)).joined(separator: "."), environment: "Sandbox")
        }
        #expect(verifier.cacheStatistics.hits == 2, "\(verifier.cacheStatistics)")
    }

    @Test(
        """
        Refused: no x5c, a leaf without Apple's OID, a forged signature, another bundle, another environment, \
        another root
        """
    )
    func refused() async throws {
        let good = try Fixture.text("jws/signed-transaction.test-chain.jws")
        let verifier = SignedDataVerifier(rootCertificates: [try Self.testRoot()], bundleID: "com.example")

        await #expect(throws: SignedDataFailure.malformed("the header has no three-certificate x5c")) {
            _ = try await verifier.transaction(
                Fixture.text("jws/signed-notification-missing-x5c.test-chain.jws"), environment: "Sandbox")
        }

        // Apple's negative fixture: a leaf (issued by the test intermediate) marked 1.2.840.113635.100.6.11.2.
        let wrongOID = try Self.withLeaf(
            good, leaf: Self.pemBlockBase64("jws/test-pki/testInvalidOIDLeaf.pem"),
            intermediate: Self.pemBlockBase64("jws/test-pki/testIntermediate.pem"))
        do {
            _ = try await verifier.transaction(wrongOID, environment: "Sandbox")
            Issue.record("a leaf without the receipt-signing OID was accepted")
        } catch {
            guard case .untrustedChain(let detail) = error else { Issue.record("\(error)"); return }
            #expect(detail.contains("1.2.840.113635.100.6.11.1"), "\(detail)")
        }

        var forged = Array(good)
        let last = forged.index(before: forged.endIndex)
        forged[last] = forged[last] == "A" ? "B" : "A"
        await #expect(throws: SignedDataFailure.badSignature) {
            _ = try await verifier.transaction(String(forged), environment: "Sandbox")
        }
        // A payload swapped under the same signature.
        let parts = good.split(separator: ".")
        let otherPayload = Base64URL.encode(
            Data(#"{"environment":"Sandbox","bundleId":"com.example","signedDate":1672956154001}"#.utf8))
        await #expect(throws: SignedDataFailure.badSignature) {
            _ = try await verifier.transaction(
                [String(parts[0]), otherPayload, String(parts[2])].joined(separator: "."), environment: "Sandbox")
        }

        let otherBundle = SignedDataVerifier(rootCertificates: [try Self.testRoot()], bundleID: "com.example.other")
        await #expect(throws: SignedDataFailure.wrongBundle(expected: "com.example.other", found: "com.example")) {
            _ = try await otherBundle.transaction(good, environment: "Sandbox")
        }
        await #expect(throws: SignedDataFailure.wrongEnvironment(expected: "Production", found: "Sandbox")) {
            _ = try await verifier.transaction(good, environment: "Production")
        }

        // Apple's real root does not vouch for the test chain: trust comes only from configured roots.
        let appleRoot = try Certificate(derEncoded: Array(Fixture.data("jws/apple-pki/AppleRootCA-G3.cer")))
        let realRootOnly = SignedDataVerifier(rootCertificates: [appleRoot], bundleID: "com.example")
        do {
            _ = try await realRootOnly.transaction(good, environment: "Sandbox")
            Issue.record("the test chain was trusted under Apple's real root")
        } catch {
            #expect(error.reason == "jws_untrusted_chain", "\(error)")
        }
        for garbage in ["", "a.b", "a.b.c", "e30.e30.e30", String(repeating: "x", count: 5000)] {
            await #expect(throws: SignedDataFailure.self) {
                _ = try await verifier.transaction(garbage, environment: "Sandbox")
            }
        }
    }

    @Test("Xcode's self-signed StoreKit test data is refused: one certificate, not Apple's chain")
    func xcodeDataRefused() async throws {
        let verifier = SignedDataVerifier(rootCertificates: [try Self.testRoot()], bundleID: "com.example")
        do {
            _ = try await verifier.transaction(Fixture.text("jws/xcode-signed-transaction.jws"), environment: "Xcode")
            Issue.record("Xcode data was accepted")
        } catch let error as SignedDataFailure {
            #expect(error.reason == "jws_malformed", "\(error)")
        }
    }
}
