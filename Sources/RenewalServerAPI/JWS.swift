import Crypto
import Foundation
import SwiftASN1
import X509

/// base64url without padding, as JWS and JWT use it.
package enum Base64URL {
    /// Decodes base64url (RFC 4648 §5, padding optional); nil when `part` is not base64.
    package static func decode(_ part: Substring) -> Data? {
        var bytes = [UInt8]()
        bytes.reserveCapacity(part.utf8.count + 3)
        for byte in part.utf8 {
            switch byte {
            case UInt8(ascii: "-"): bytes.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): bytes.append(UInt8(ascii: "/"))
            default: bytes.append(byte)
            }
        }
        while bytes.count % 4 != 0 { bytes.append(UInt8(ascii: "=")) }
        return Data(base64Encoded: Data(bytes))
    }

    package static func encode(_ data: some DataProtocol) -> String {
        var bytes = [UInt8]()
        for byte in Data(data).base64EncodedData() {
            switch byte {
            case UInt8(ascii: "+"): bytes.append(UInt8(ascii: "-"))
            case UInt8(ascii: "/"): bytes.append(UInt8(ascii: "_"))
            case UInt8(ascii: "="): break
            default: bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// The ES256 bearer token the App Store Server API wants: header `alg`, `kid`, `typ`; claims `iss`,
/// `iat`, `exp` (at most 60 minutes after `iat`), `aud` = `appstoreconnect-v1`, `bid`.
public struct ServerAPIToken: Sendable {
    public var keyID: String
    public var issuerID: String
    public var bundleID: String
    public var lifetime: TimeInterval

    public init(keyID: String, issuerID: String, bundleID: String, lifetime: TimeInterval = 20 * 60) {
        self.keyID = keyID
        self.issuerID = issuerID
        self.bundleID = bundleID
        self.lifetime = min(lifetime, 60 * 60)
    }

    /// A signed token issued at `now`.
    public func signed(with key: P256.Signing.PrivateKey, now: Date = Date()) throws -> String {
        let header = #"{"alg":"ES256","kid":"\#(Self.escaped(keyID))","typ":"JWT"}"#
        let issued = Int(now.timeIntervalSince1970)
        let claims =
            #"{"iss":"\#(Self.escaped(issuerID))","iat":\#(issued),"exp":\#(issued + Int(lifetime)),"#
            + #""aud":"appstoreconnect-v1","bid":"\#(Self.escaped(bundleID))"}"#
        let input = Base64URL.encode(Data(header.utf8)) + "." + Base64URL.encode(Data(claims.utf8))
        let signature = try key.signature(for: Data(input.utf8))
        return input + "." + Base64URL.encode(signature.rawRepresentation)
    }

    static func escaped(_ text: String) -> String {
        let data = (try? JSONEncoder().encode(text)) ?? Data("\"\"".utf8)
        return String(decoding: data.dropFirst().dropLast(), as: UTF8.self)
    }
}

/// A certificate chain shaped like Apple's (root, intermediate with the WWDR OID, leaf with the
/// receipt-signing OID) that signs JWS: the simulator's signing identity, and tests' forgeries.
public struct SigningChain: Sendable {
    public let root: Certificate
    public let intermediate: Certificate
    public let leaf: Certificate
    let leafKey: P256.Signing.PrivateKey

    /// Makes a fresh chain valid from `notBefore` to `notAfter`; `leafOID` and `intermediateOID` can be
    /// changed to make chains Apple's policy refuses.
    public static func generate(
        name: String = "renewal simulator",
        notBefore: Date = Date(timeIntervalSince1970: 946_684_800),
        notAfter: Date = Date(timeIntervalSince1970: 4_102_444_800),
        leafOID: ASN1ObjectIdentifier = AppleOID.receiptSigner,
        intermediateOID: ASN1ObjectIdentifier = AppleOID.wwdrIntermediate
    ) throws -> SigningChain {
        let rootKey = P256.Signing.PrivateKey(), intermediateKey = P256.Signing.PrivateKey(),
            leafKey = P256.Signing.PrivateKey()
        let rootName = try DistinguishedName { CommonName("\(name) root CA") }
        let intermediateName = try DistinguishedName { CommonName("\(name) intermediate CA") }
        let leafName = try DistinguishedName { CommonName("\(name) signing") }
        let marker = try ASN1Any(erasing: ASN1Null())
        let markerBytes: [UInt8] = try {
            var serializer = DER.Serializer(); try serializer.serialize(marker); return serializer.serializedBytes
        }()
        let root = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey), notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: rootName, subject: rootName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                KeyUsage(keyCertSign: true, cRLSign: true)
            },
            issuerPrivateKey: .init(rootKey))
        let intermediate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(intermediateKey.publicKey), notValidBefore: notBefore,
            notValidAfter: notAfter, issuer: rootName, subject: intermediateName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                KeyUsage(keyCertSign: true, cRLSign: true)
                Certificate.Extension(oid: intermediateOID, critical: false, value: markerBytes[...])
            },
            issuerPrivateKey: .init(rootKey))
        let leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(leafKey.publicKey), notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: intermediateName, subject: leafName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                Certificate.Extension(oid: leafOID, critical: false, value: markerBytes[...])
            },
            issuerPrivateKey: .init(intermediateKey))
        return SigningChain(root: root, intermediate: intermediate, leaf: leaf, leafKey: leafKey)
    }

    /// The whole chain with the leaf's private key, as PEM blocks (key, leaf, intermediate, root), so
    /// another process can sign as this chain (`init(exported:)`). Secret: write it with mode 0600.
    public func exported() throws -> String {
        try ([leafKey.pemRepresentation] + [leaf, intermediate, root].map { try $0.serializeAsPEM().pemString })
            .joined(separator: "\n") + "\n"
    }

    /// The root as PEM, for `APPSTORE_ROOT_CERTIFICATES`.
    public func rootPEM() throws -> String {
        try root.serializeAsPEM().pemString
    }

    /// A compact JWS of `payload` (JSON) with this chain in `x5c`.
    public func sign(_ payload: Data) throws -> String {
        let x5c = try [leaf, intermediate, root].map { certificate -> String in
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            return Data(serializer.serializedBytes).base64EncodedString()
        }
        let header = try JSONSerialization.data(
            withJSONObject: ["alg": "ES256", "typ": "JWT", "x5c": x5c], options: [.sortedKeys])
        let input = Base64URL.encode(header) + "." + Base64URL.encode(payload)
        let signature = try leafKey.signature(for: Data(input.utf8))
        return input + "." + Base64URL.encode(signature.rawRepresentation)
    }
}

extension SigningChain {
    /// Reads what `exported()` wrote.
    public init(exported text: String) throws {
        let blocks = try PEMDocument.parseMultiple(pemString: text)
        guard blocks.count == 4, let keyBlock = blocks.first else {
            throw SigningChainError("expected a private key and three certificates, found \(blocks.count) PEM blocks")
        }
        leafKey = try P256.Signing.PrivateKey(pemRepresentation: keyBlock.pemString)
        let certificates = try blocks.dropFirst().map { try Certificate(pemDocument: $0) }
        (leaf, intermediate, root) = (certificates[0], certificates[1], certificates[2])
    }

    struct SigningChainError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
