import Foundation
import SwiftASN1

/// Reads transaction ids out of a stored legacy receipt without asking Apple and without checking its
/// signature: the ids are only ever used as keys for the App Store Server API, which answers with
/// signed data of its own.
///
/// Two shapes exist: the iOS 7+ app receipt (base64 of a PKCS#7 `SignedData` whose content is a SET of
/// receipt attributes; type 17 holds one in-app purchase, in which 1703 is the transaction id and 1705
/// the original transaction id), and the iOS 6 transaction receipt (base64 of an old-style plist whose
/// `purchase-info` is itself base64 of a plist with a `transaction-id`).
public enum LegacyReceipt {
    /// One in-app purchase row of an app receipt.
    public struct Purchase: Sendable, Hashable {
        public var productID: String?
        public var transactionID: String?
        public var originalTransactionID: String?
        /// Attribute 1708, kept as Apple wrote it (RFC 3339); nil for non-subscriptions.
        public var expiresDate: String?
    }

    public enum ReadError: Error, Hashable, CustomStringConvertible {
        case notBase64
        case notAReceipt(String)

        public var description: String {
            switch self {
            case .notBase64: "the stored receipt is not base64"
            case .notAReceipt(let reason):
                "the stored receipt is neither an app receipt nor an iOS 6 transaction receipt (\(reason))"
            }
        }
    }

    /// The OID of PKCS#7 `signedData`.
    static let signedDataOID: ASN1ObjectIdentifier = [1, 2, 840, 113_549, 1, 7, 2]

    /// The top-level attributes of an iOS 7+ app receipt's payload, as (type, value bytes), in order.
    public static func attributes(appReceipt base64: String) throws(ReadError) -> [(type: Int, value: [UInt8])] {
        guard let data = Data(base64Encoded: base64, options: .ignoreUnknownCharacters), !data.isEmpty else {
            throw .notBase64
        }
        do {
            let contentInfo = try BER.parse(Array(data))
            let contentInfoItems = children(of: contentInfo)
            guard contentInfoItems.count >= 2, objectIdentifier(contentInfoItems[0]) == signedDataOID else {
                throw ReadError.notAReceipt("no PKCS#7 signedData")
            }
            // [0] EXPLICIT SignedData ::= SEQUENCE { version, digestAlgorithms, encapContentInfo, … }
            guard let signedData = children(of: contentInfoItems[1]).first, children(of: signedData).count >= 3 else {
                throw ReadError.notAReceipt("signedData has no content")
            }
            let encapsulated = children(of: children(of: signedData)[2])
            guard encapsulated.count >= 2, let explicit = children(of: encapsulated[1]).first else { return [] }
            guard let attributes = try receiptAttributes(inside: octets(of: explicit)) else {
                throw ReadError.notAReceipt("the receipt payload is not a set of attributes")
            }
            return attributes.map { ($0.type, $0.value) }
        } catch let error as ReadError {
            throw error
        } catch {
            throw .notAReceipt("ASN.1: \(error)")
        }
    }

    /// The in-app purchase rows of an iOS 7+ app receipt (empty when it has none).
    public static func purchases(appReceipt base64: String) throws(ReadError) -> [Purchase] {
        let attributes = try attributes(appReceipt: base64)
        do {
            var purchases: [Purchase] = []
            for attribute in attributes where attribute.type == 17 {
                guard let fields = try receiptAttributes(inside: attribute.value) else { continue }
                var purchase = Purchase()
                for field in fields {
                    switch field.type {
                    case 1702: purchase.productID = try string(inside: field.value)
                    case 1703: purchase.transactionID = try string(inside: field.value)
                    case 1705: purchase.originalTransactionID = try string(inside: field.value)
                    case 1708: purchase.expiresDate = try string(inside: field.value).flatMap { $0.isEmpty ? nil : $0 }
                    default: break
                    }
                }
                purchases.append(purchase)
            }
            return purchases
        } catch let error as ReadError {
            throw error
        } catch {
            throw .notAReceipt("ASN.1: \(error)")
        }
    }

    /// The transaction id of an iOS 6 transaction receipt.
    public static func transactionID(transactionReceipt base64: String) throws(ReadError) -> String {
        guard let data = Data(base64Encoded: base64, options: .ignoreUnknownCharacters),
            let text = String(data: data, encoding: .utf8)
        else {
            throw .notBase64
        }
        guard let info = plistValue("purchase-info", in: text),
            let infoData = Data(base64Encoded: info, options: .ignoreUnknownCharacters),
            let infoText = String(data: infoData, encoding: .utf8)
        else { throw .notAReceipt("no \"purchase-info\"") }
        guard let id = plistValue("transaction-id", in: infoText), !id.isEmpty, id.allSatisfy(\.isNumber) else {
            throw .notAReceipt("no \"transaction-id\" in \"purchase-info\"")
        }
        return id
    }

    /// The original transaction id to look a stored receipt up by: for an app receipt, that of the
    /// subscription row that expires last (the last row when none has an expiry); for an iOS 6
    /// receipt, its transaction id. Nil when the receipt holds no purchase at all.
    public static func lookupID(receipt base64: String) throws(ReadError) -> String? {
        let appReceipt: [Purchase]
        do {
            appReceipt = try purchases(appReceipt: base64)
        } catch {
            if let id = try? transactionID(transactionReceipt: base64) { return id }
            throw error
        }
        let latest = appReceipt.max { ($0.expiresDate ?? "") < ($1.expiresDate ?? "") }
        return latest.flatMap { $0.originalTransactionID ?? $0.transactionID }
    }

    // MARK: - ASN.1 helpers

    struct Attribute {
        var type: Int
        var value: [UInt8]
    }

    static func children(of node: ASN1Node) -> [ASN1Node] {
        guard case .constructed(let collection) = node.content else { return [] }
        return Array(collection)
    }

    /// The bytes of an OCTET STRING, primitive or (in BER) constructed from pieces.
    static func octets(of node: ASN1Node) -> [UInt8] {
        switch node.content {
        case .primitive(let bytes): Array(bytes)
        case .constructed(let pieces): pieces.flatMap { octets(of: $0) }
        }
    }

    static func integer(_ node: ASN1Node) -> Int? {
        guard node.identifier.tagNumber == 2, node.identifier.tagClass == .universal,
            case .primitive(let bytes) = node.content,
            (1...7).contains(bytes.count)
        else { return nil }
        return bytes.reduce(0) { $0 << 8 | Int($1) }
    }

    static func objectIdentifier(_ node: ASN1Node) -> ASN1ObjectIdentifier? {
        guard node.identifier.tagNumber == 6, node.identifier.tagClass == .universal else { return nil }
        return try? ASN1ObjectIdentifier(derEncoded: node)
    }

    /// A SET of `SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }`, unwrapping the extra
    /// OCTET STRING that Xcode's receipts put around it. Nil when the bytes are something else.
    static func receiptAttributes(inside bytes: [UInt8]) throws -> [Attribute]? {
        var node = try BER.parse(bytes)
        while node.identifier.tagNumber == 4, node.identifier.tagClass == .universal {
            node = try BER.parse(octets(of: node))
        }
        guard node.identifier.tagNumber == 17, node.identifier.tagClass == .universal else { return nil }
        return children(of: node).compactMap { item in
            let parts = children(of: item)
            guard parts.count == 3, let type = integer(parts[0]), parts[2].identifier.tagNumber == 4 else { return nil }
            return Attribute(type: type, value: octets(of: parts[2]))
        }
    }

    /// A UTF8String or IA5String wrapped in an attribute's OCTET STRING.
    static func string(inside bytes: [UInt8]) throws -> String? {
        guard !bytes.isEmpty else { return nil }
        let node = try BER.parse(bytes)
        guard [12, 22].contains(node.identifier.tagNumber), node.identifier.tagClass == .universal else { return nil }
        return String(decoding: octets(of: node), as: UTF8.self)
    }

    /// `"key" = "value";` in an old-style plist.
    static func plistValue(_ key: String, in text: String) -> String? {
        guard let keyRange = text.range(of: "\"\(key)\"") else { return nil }
        let rest = text[keyRange.upperBound...].drop { $0 == " " || $0 == "\t" }
        guard rest.first == "=" else { return nil }
        let value = rest.dropFirst().drop { $0 == " " || $0 == "\t" }
        guard value.first == "\"", let end = value.dropFirst().firstIndex(of: "\"") else { return nil }
        return String(value[value.index(after: value.startIndex)..<end])
    }
}
