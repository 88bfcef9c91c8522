import Crypto
import Foundation
import RenewalCore
import Synchronization
import SwiftASN1
import X509

/// Why a signed answer from the App Store Server API was refused. A refused answer never changes a
/// subscription; `reason` is the name the failure is recorded under.
public enum SignedDataFailure: Error, Hashable, Sendable, CustomStringConvertible {
    /// Not three base64url parts, not JSON, not ES256, or no three-certificate `x5c`.
    case malformed(String)
    /// The `x5c` chain does not lead to a trusted root, lacks Apple's OIDs, or was not valid at `signedDate`.
    case untrustedChain(String)
    /// The ES256 signature does not match the leaf certificate's key.
    case badSignature
    case wrongBundle(expected: String, found: String)
    case wrongEnvironment(expected: String, found: String)

    public var reason: FailureReason {
        switch self {
        case .malformed: .jwsMalformed
        case .untrustedChain: .jwsUntrustedChain
        case .badSignature: .jwsBadSignature
        case .wrongBundle: .jwsWrongBundle
        case .wrongEnvironment: .jwsWrongEnvironment
        }
    }

    public var description: String {
        switch self {
        case .malformed(let detail): "signed data is malformed: \(detail)"
        case .untrustedChain(let detail): "signed data's certificate chain is not trusted: \(detail)"
        case .badSignature: "signed data's signature does not match its certificate"
        case .wrongBundle(let expected, let found): "signed data is for bundle \(found), not \(expected)"
        case .wrongEnvironment(let expected, let found): "signed data is from environment \(found), not \(expected)"
        }
    }
}

/// Apple's marker extensions: the leaf signs App Store data, the intermediate is Apple's WWDR CA.
public enum AppleOID {
    public static let receiptSigner: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 11, 1]
    public static let wwdrIntermediate: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 2, 1]
}

/// Requires Apple's OIDs on the leaf and the intermediate of a three-certificate chain.
struct AppleOIDPolicy: VerifierPolicy {
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = [AppleOID.receiptSigner, AppleOID.wwdrIntermediate]

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
        guard chain.count == 3 else {
            return .failsToMeetPolicy(reason: "the chain has \(chain.count) certificates, not 3")
        }
        guard chain[0].extensions[oid: AppleOID.receiptSigner] != nil else {
            return .failsToMeetPolicy(reason: "the leaf lacks Apple's receipt-signing OID 1.2.840.113635.100.6.11.1")
        }
        guard chain[1].extensions[oid: AppleOID.wwdrIntermediate] != nil else {
            return .failsToMeetPolicy(reason: "the intermediate lacks Apple's WWDR OID 1.2.840.113635.100.6.2.1")
        }
        return .meetsPolicy
    }
}

/// Verifies App Store Server API JWS (transactions, renewal info) the way Apple's libraries do: the
/// `x5c` leaf and intermediate must chain to one of the configured roots (the `x5c` root is never
/// trusted), carry Apple's OIDs and be valid at the payload's `signedDate`; the ES256 signature must
/// match the leaf; bundle id and environment must match the configuration.
///
/// Verified chains are cached by their two certificates, with the span of time they are valid in, so
/// a warm verifier only checks the signature.
public final class SignedDataVerifier: Sendable {
    public let bundleID: String
    private let roots: [Certificate]
    /// Verified chains by the JWS header segment that carried them (its `alg` and `x5c`).
    private let cache = Mutex<[Data: CachedChain]>([:])
    private let counters = Mutex<(hits: Int, misses: Int)>((0, 0))
    static let cacheLimit = 64

    struct CachedChain {
        var key: P256.Signing.PublicKey
        var validFrom: Date
        var validUntil: Date
    }

    public init(rootCertificates: [Certificate], bundleID: String) {
        self.roots = rootCertificates
        self.bundleID = bundleID
    }

    /// Chain cache hits and misses since the verifier was made.
    public var cacheStatistics: (hits: Int, misses: Int) { counters.withLock { $0 } }

    /// Verifies a signed transaction and returns its payload.
    public func transaction(_ jws: String, environment: String) async throws(SignedDataFailure) -> JWSTransaction {
        let payload: JWSTransaction = try await verify(jws, environment: environment)
        guard payload.bundleId == bundleID else {
            throw .wrongBundle(expected: bundleID, found: payload.bundleId ?? "none")
        }
        return payload
    }

    /// Verifies a signed transaction an app sent its server (StoreKit 2's `jwsRepresentation`, read
    /// at import): signed in production or the sandbox (Xcode's local signing is refused: its chain
    /// is not Apple's), for this verifier's bundle unless its bundle id is empty (any bundle).
    public func appTransaction(_ jws: String) async throws(SignedDataFailure) -> JWSTransaction {
        let payload: JWSTransaction = try await verify(jws, environment: nil)
        guard bundleID.isEmpty || payload.bundleId == bundleID else {
            throw .wrongBundle(expected: bundleID, found: payload.bundleId ?? "none")
        }
        return payload
    }

    /// Verifies signed renewal info and returns its payload.
    public func renewalInfo(_ jws: String, environment: String) async throws(SignedDataFailure) -> JWSRenewalInfo {
        try await verify(jws, environment: environment)
    }

    /// The checks every signed payload gets; the payload must carry `signedDate` and `environment`
    /// (`environment`, or production or the sandbox when nil; with `allowingMissingEnvironment`, a
    /// payload that names none passes, for notifications without `data`).
    func verify<Payload: SignedPayload>(
        _ jws: String, environment: String?, allowingMissingEnvironment: Bool = false
    ) async throws(SignedDataFailure) -> Payload {
        let parts = try CompactJWS(jws)
        // A header seen before with a verified chain is not parsed again; any other is checked
        // here, before the payload, so a bad header is named first.
        let cached = cache.withLock { $0[parts.header] }
        let x5c = cached == nil ? try parts.certificates() : nil
        let payload: Payload
        do {
            payload = try JSONDecoder().decode(Payload.self, from: parts.payload)
        } catch {
            throw .malformed("the payload is not a \(Payload.self) (\(error))")
        }
        guard let signedDate = payload.signedDate else { throw .malformed("the payload has no signedDate") }
        if let environment {
            guard payload.environment == environment else {
                throw .wrongEnvironment(expected: environment, found: payload.environment ?? "none")
            }
        } else if payload.environment != "Production", payload.environment != "Sandbox",
            !(allowingMissingEnvironment && payload.environment == nil)
        {
            throw .wrongEnvironment(expected: "Production or Sandbox", found: payload.environment ?? "none")
        }
        let key: P256.Signing.PublicKey
        if let cached, cached.validFrom <= signedDate, signedDate <= cached.validUntil {
            counters.withLock { $0.hits += 1 }
            key = cached.key
        } else {
            let certificates: [String]
            if let x5c { certificates = x5c } else { certificates = try parts.certificates() }
            key = try await leafKey(parts.header, certificates, at: signedDate)
        }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: parts.signature),
            key.isValidSignature(signature, for: parts.signingInput)
        else { throw .badSignature }
        return payload
    }

    /// Verifies the header's chain (leaf, intermediate) at `signedDate` and caches the leaf's key
    /// under the header, for the span of time every certificate of the chain is valid in.
    func leafKey(_ header: Data, _ x5c: [String], at signedDate: Date) async throws(SignedDataFailure)
        -> P256.Signing.PublicKey
    {
        counters.withLock { $0.misses += 1 }
        let leaf: Certificate, intermediate: Certificate
        do {
            leaf = try Certificate(derEncoded: Array(Self.standardBase64(x5c[0])))
            intermediate = try Certificate(derEncoded: Array(Self.standardBase64(x5c[1])))
        } catch {
            throw .malformed("x5c holds something that is not a DER certificate")
        }
        var verifier = Verifier(rootCertificates: CertificateStore(roots)) {
            RFC5280Policy(validationTime: signedDate)
            AppleOIDPolicy()
        }
        let chain: [Certificate]
        switch await verifier.validate(leaf: leaf, intermediates: CertificateStore([intermediate])) {
        case .validCertificate(let validated):
            chain = Array(validated)
        case .couldNotValidate(let failures):
            let reasons = failures.map { "\($0.policyFailureReason)" }
            throw .untrustedChain(
                reasons.isEmpty ? "no path to a trusted root" : Set(reasons).sorted().joined(separator: "; "))
        }
        guard let key = P256.Signing.PublicKey(leaf.publicKey) else {
            throw .untrustedChain("the leaf's key is not P-256")
        }
        let entry = CachedChain(
            key: key, validFrom: chain.map(\.notValidBefore).max() ?? signedDate,
            validUntil: chain.map(\.notValidAfter).min() ?? signedDate)
        cache.withLock { cache in
            if cache.count >= Self.cacheLimit { cache.removeAll() }
            cache[header] = entry
        }
        return key
    }

    static func standardBase64(_ text: String) throws -> Data {
        guard let data = Data(base64Encoded: text) else {
            throw SignedDataFailure.malformed("an x5c entry is not base64")
        }
        return data
    }
}

/// A compact JWS: `base64url(header).base64url(payload).base64url(signature)`. The header is kept
/// as its base64url bytes (the chain cache's key) and decoded only when its chain is not cached.
struct CompactJWS {
    var header: Data
    var payload: Data
    var signingInput: Data
    var signature: Data

    struct Header: Decodable {
        var alg: String?
        var x5c: [String]?
    }

    init(_ text: String) throws(SignedDataFailure) {
        let trimmed = Self.trimmed(text)
        // Split on the byte, not on Characters: a JWS is ASCII, and a few KB long.
        let parts = trimmed.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).map {
            Substring($0)
        }
        guard parts.count == 3 else { throw .malformed("\(parts.count) parts, not 3") }
        // The header is decoded by `certificates()`, when its chain is not cached.
        guard let payload = Base64URL.decode(parts[1]), let signature = Base64URL.decode(parts[2]) else {
            throw .malformed("a part is not base64url")
        }
        self.header = Data(parts[0].utf8)
        self.payload = payload
        self.signingInput = Data(trimmed.utf8[parts[0].startIndex..<parts[1].endIndex])
        self.signature = signature
    }

    /// The header's `x5c` (leaf, intermediate, root; standard base64 DER), after checking it is
    /// JSON with `alg` ES256.
    func certificates() throws(SignedDataFailure) -> [String] {
        guard let headerData = Base64URL.decode(Substring(decoding: header, as: UTF8.self)) else {
            throw .malformed("a part is not base64url")
        }
        guard let header = try? JSONDecoder().decode(Header.self, from: headerData) else {
            throw .malformed("the header is not JSON")
        }
        guard header.alg == "ES256" else { throw .malformed("alg is \(header.alg ?? "missing"), not ES256") }
        guard let x5c = header.x5c, x5c.count == 3 else { throw .malformed("the header has no three-certificate x5c") }
        return x5c
    }

    /// `text` without leading and trailing ASCII whitespace (the common case, none, copies nothing).
    static func trimmed(_ text: String) -> Substring {
        let bytes = text.utf8
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) })
        else {
            return text[text.endIndex...]
        }
        return text[first...last]
    }
}
