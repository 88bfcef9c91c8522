import Crypto
#if canImport(Glibc)
    import Glibc
#endif
import Foundation
import RenewalCore
import SwiftASN1
import Testing
import X509

@testable import RenewalServerAPI

@Suite("Generated signing chains and the API token: what the simulator signs verifies, what it should not does not")
struct SigningChainTests {
    static func payload(signedAt date: Date, bundle: String = "com.example.app", environment: String = "Production")
        -> Data
    {
        Data(
            #"{"transactionId":"2000000000000001","originalTransactionId":"2000000000000001","bundleId":"\#(bundle)","productId":"com.example.pro.monthly","expiresDate":\#(Int64(date.timeIntervalSince1970 * 1000) + 86_400_000),"signedDate":\#(Int64(date.timeIntervalSince1970 * 1000)),"environment":"\#(environment)","type":"Auto-Renewable Subscription","inAppOwnershipType":"PURCHASED"}"#
                .utf8)
    }

    @Test("A generated chain's JWS verifies under its own root, and under no other")
    func roundTrip() async throws {
        let chain = try SigningChain.generate()
        let now = Date()
        let jws = try chain.sign(Self.payload(signedAt: now))
        let verifier = SignedDataVerifier(rootCertificates: [chain.root], bundleID: "com.example.app")
        let transaction = try await verifier.transaction(jws, environment: "Production")
        #expect(transaction.originalTransactionId == "2000000000000001")
        #expect(transaction.productId == "com.example.pro.monthly")
        #expect(abs((transaction.signedDate ?? .distantPast).timeIntervalSince(now)) < 0.01)

        // The root as PEM parses back to the same certificate (what APPSTORE_ROOT_CERTIFICATES reads).
        #expect(try Certificate(pemEncoded: chain.rootPEM()) == chain.root)

        let stranger = try SigningChain.generate()
        let other = SignedDataVerifier(rootCertificates: [stranger.root], bundleID: "com.example.app")
        await #expect(throws: SignedDataFailure.self) {
            _ = try await other.transaction(jws, environment: "Production")
        }
    }

    @Test("A chain that expired before signedDate, or one not yet valid, is refused")
    func expiredChain() async throws {
        let chain = try SigningChain.generate(
            notBefore: Date(timeIntervalSince1970: 1_600_000_000), notAfter: Date(timeIntervalSince1970: 1_700_000_000))
        let verifier = SignedDataVerifier(rootCertificates: [chain.root], bundleID: "com.example.app")
        _ = try await verifier.transaction(
            chain.sign(Self.payload(signedAt: Date(timeIntervalSince1970: 1_650_000_000))), environment: "Production")
        for signedAt in [Date(timeIntervalSince1970: 1_750_000_000), Date(timeIntervalSince1970: 1_500_000_000)] {
            let jws = try chain.sign(Self.payload(signedAt: signedAt))
            do {
                _ = try await verifier.transaction(jws, environment: "Production")
                Issue.record("signed at \(signedAt), outside the chain's validity, and accepted")
            } catch {
                #expect(error.reason == "jws_untrusted_chain", "\(error)")
            }
        }
        // The cache must not let a chain verified for one time vouch for a time it does not cover.
        #expect(verifier.cacheStatistics.hits == 0)
    }

    @Test("Chains without Apple's OIDs are refused, naming the OID")
    func wrongOIDs() async throws {
        for (chain, oid) in [
            (try SigningChain.generate(leafOID: [1, 2, 840, 113_635, 100, 6, 11, 2]), "1.2.840.113635.100.6.11.1"),
            (
                try SigningChain.generate(intermediateOID: [1, 2, 840, 113_635, 100, 6, 2, 2]),
                "1.2.840.113635.100.6.2.1"
            ),
        ] {
            let verifier = SignedDataVerifier(rootCertificates: [chain.root], bundleID: "com.example.app")
            let jws = try chain.sign(Self.payload(signedAt: Date()))
            do {
                _ = try await verifier.transaction(jws, environment: "Production")
                Issue.record("a chain without \(oid) was accepted")
            } catch {
                guard case .untrustedChain(let detail) = error else { Issue.record("\(error)"); continue }
                #expect(detail.contains(oid), "\(detail)")
            }
        }
    }

    @Test(
        "The API token: ES256 over kid/iss/iat/exp/aud/bid, exp at most 60 minutes after iat, verifiable with the key")
    func token() throws {
        let key = P256.Signing.PrivateKey()
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let token = try ServerAPIToken(
            keyID: "ABC123DEFG", issuerID: "57246542-96fe-1a63-e053-0824d011072a", bundleID: "com.example.app",
            lifetime: 7200
        )
        .signed(with: key, now: now)
        let parts = token.split(separator: ".")
        try #require(parts.count == 3)
        let header = try JSONSerialization.jsonObject(with: #require(Base64URL.decode(parts[0]))) as? [String: Any]
        let claims = try JSONSerialization.jsonObject(with: #require(Base64URL.decode(parts[1]))) as? [String: Any]
        #expect(
            header?["alg"] as? String == "ES256" && header?["kid"] as? String == "ABC123DEFG"
                && header?["typ"] as? String == "JWT")
        #expect(claims?["iss"] as? String == "57246542-96fe-1a63-e053-0824d011072a")
        #expect(claims?["aud"] as? String == "appstoreconnect-v1" && claims?["bid"] as? String == "com.example.app")
        #expect(claims?["iat"] as? Int == 1_800_000_000)
        #expect(claims?["exp"] as? Int == 1_800_003_600, "a 2-hour request is capped at 60 minutes")
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: #require(Base64URL.decode(parts[2])))
        #expect(key.publicKey.isValidSignature(signature, for: Data(parts[0...1].joined(separator: ".").utf8)))
    }
}

@Suite("Verified chains are cached, and what one answer costs")
struct SignedDataCostTests {
    @Test(
        """
        Only the first answer of a chain builds and checks it; the rest reuse it (figures: CPU per answer, cache \
        hit rate)
        """
    )
    func warmCache() async throws {
        let chain = try SigningChain.generate()
        let verifier = SignedDataVerifier(rootCertificates: [chain.root], bundleID: "com.example.app")
        let now = Date()
        let answers = try (0..<100).map { _ in try chain.sign(SigningChainTests.payload(signedAt: now)) }
        // clock(): this process's CPU time in microseconds (CLOCKS_PER_SEC is 1,000,000 on Linux).
        let cold = clock()
        _ = try await verifier.transaction(answers[0], environment: "Production")
        let start = clock()
        for jws in answers.dropFirst() {
            _ = try await verifier.transaction(jws, environment: "Production")
        }
        let end = clock()
        let statistics = verifier.cacheStatistics
        #expect(statistics.misses == 1 && statistics.hits == answers.count - 1)
        func micros(_ a: clock_t, _ b: clock_t) -> Double { Double(b - a) }
        // Process CPU time: other suites running in parallel inflate it, so it is an upper bound.
        print(
            String(
                format:
                    """
                    figures[jws verify]: first answer (chain built and checked) %.0f µs CPU, then %.0f µs CPU per \
                    answer with a warm cache (process CPU, debug build, an upper bound); cache hits %d of %d
                    """,
                micros(cold, start), micros(start, end) / Double(answers.count - 1), statistics.hits, answers.count))
    }
}

@Suite("Credentials from files: the .p8 key and the trusted roots")
struct ServerAPICredentialsTests {
    @Test("A .p8 (PKCS#8 PEM) key loads; a file that is not a key, or is missing, is named with the fix")
    func privateKey() throws {
        let directory = NSTemporaryDirectory() + "renewal-credentials-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let key = P256.Signing.PrivateKey()
        try key.pemRepresentation.write(toFile: directory + "/AuthKey.p8", atomically: true, encoding: .utf8)
        #expect(
            try ServerAPICredentials.privateKey(file: directory + "/AuthKey.p8").publicKey.rawRepresentation
                == key.publicKey.rawRepresentation)
        try "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n".write(
            toFile: directory + "/cert.p8", atomically: true, encoding: .utf8)
        #expect(throws: ServerAPICredentials.LoadError.notAKey(path: directory + "/cert.p8")) {
            try ServerAPICredentials.privateKey(file: directory + "/cert.p8")
        }
        do {
            _ = try ServerAPICredentials.privateKey(file: directory + "/missing.p8")
            Issue.record("a missing file loaded")
        } catch {
            #expect("\(error)".contains(directory + "/missing.p8"))
            #expect(!"\(error)".contains("PRIVATE KEY"))
        }
    }

    @Test("Roots load from PEM (several per file) and DER; Apple Root CA - G3 is built in")
    func roots() throws {
        let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "Fixtures/jws")
        let der = fixtures.appendingPathComponent("apple-pki/AppleRootCA-G3.cer").path
        let pem = fixtures.appendingPathComponent("test-pki/testCA.pem").path
        let loaded = try ServerAPICredentials.certificates(files: [der, pem])
        #expect(loaded.count == 2)
        #expect(AppleRoots.certificates.count == 1)
        #expect(AppleRoots.certificates.first == loaded.first, "the built-in root is the file Apple publishes")
        #expect(
            throws: ServerAPICredentials.LoadError.notACertificate(
                path: fixtures.appendingPathComponent("decoded-transaction.apple-lib.json").path)
        ) {
            try ServerAPICredentials.certificates(files: [
                fixtures.appendingPathComponent("decoded-transaction.apple-lib.json").path
            ])
        }
    }
}
