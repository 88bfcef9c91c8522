import Foundation
import RenewalCore
import RenewalServerAPI

/// Simulated receipts are shaped like Apple's app receipts: base64 of a PKCS#7 `SignedData` (DER,
/// unsigned) whose content is the SET of receipt attributes: bundle id (2) and one in-app purchase
/// (17) per subscription with product (1702), transaction (1703), original transaction (1705) and
/// expiry (1708). So the job reads transaction ids out of them as it does out of real receipts. The
/// simulator's own description of the receipt rides in a private attribute Apple does not use.
extension SimulatedReceipt {
    /// The private attribute holding the receipt's JSON.
    static let simulatorAttribute = 91_001

    /// The original transaction ids this receipt's customer holds, main subscription last.
    var originalTransactionIDs: [String] {
        let main = SimulatedIdentifier.id(account)
        return scenario == .multipleSubscriptions ? [SimulatedIdentifier.id(account, "addon"), main] : [main]
    }

    func container(json: Data) -> Data {
        let expiry = ISO8601DateFormatter()
        let mainEnd = start.addingTimeInterval(period * Double(generation + 1))
        var purchases: [[UInt8]] = []
        for id in originalTransactionIDs {
            let isAddon = id != SimulatedIdentifier.id(account)
            let product = isAddon ? productID + ".addon" : productID
            let end = isAddon ? start.addingTimeInterval(period) : mainEnd
            purchases.append(
                DERWriter.attribute(
                    17,
                    DERWriter.set([
                        DERWriter.attribute(1701, DERWriter.integer(1)),
                        DERWriter.attribute(1702, DERWriter.utf8(product)),
                        DERWriter.attribute(1703, DERWriter.utf8(id)),
                        DERWriter.attribute(1705, DERWriter.utf8(id)),
                        DERWriter.attribute(1708, DERWriter.ia5(expiry.string(from: end))),
                    ])))
        }
        let payload = DERWriter.set(
            [DERWriter.attribute(2, DERWriter.utf8(bundleIdentifier))] + purchases
                + [
                    DERWriter.sequence([
                        DERWriter.integer(Self.simulatorAttribute), DERWriter.integer(1), DERWriter.octets(Array(json)),
                    ])
                ])
        let signedData = DERWriter.sequence([
            DERWriter.integer(1),
            DERWriter.set([]),
            DERWriter.sequence([
                DERWriter.oid([1, 2, 840, 113_549, 1, 7, 1]), DERWriter.explicit0(DERWriter.octets(payload)),
            ]),
            DERWriter.set([]),
        ])
        return Data(
            DERWriter.sequence([DERWriter.oid([1, 2, 840, 113_549, 1, 7, 2]), DERWriter.explicit0(signedData)]))
    }

    /// The JSON of the private attribute of a container made by `container(json:)`; nil otherwise.
    static func json(inContainer base64: String) -> Data? {
        guard let attributes = try? LegacyReceipt.attributes(appReceipt: base64),
            let attribute = attributes.first(where: { $0.type == simulatorAttribute })
        else { return nil }
        return Data(attribute.value)
    }
}

/// The few DER constructions a receipt needs.
enum DERWriter {
    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        var length: [UInt8] = []
        if content.count < 0x80 {
            length = [UInt8(content.count)]
        } else {
            var n = content.count
            var bytes: [UInt8] = []
            while n > 0 {
                bytes.insert(UInt8(n & 0xff), at: 0)
                n >>= 8
            }
            length = [0x80 | UInt8(bytes.count)] + bytes
        }
        return [tag] + length + content
    }

    static func integer(_ value: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        var n = value
        repeat {
            bytes.insert(UInt8(n & 0xff), at: 0)
            n >>= 8
        } while n > 0
        if bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return tlv(0x02, bytes)
    }

    static func octets(_ bytes: [UInt8]) -> [UInt8] { tlv(0x04, bytes) }
    static func utf8(_ text: String) -> [UInt8] { tlv(0x0c, Array(text.utf8)) }
    static func ia5(_ text: String) -> [UInt8] { tlv(0x16, Array(text.utf8)) }
    static func sequence(_ items: [[UInt8]]) -> [UInt8] { tlv(0x30, items.flatMap { $0 }) }
    static func set(_ items: [[UInt8]]) -> [UInt8] { tlv(0x31, items.flatMap { $0 }) }
    static func explicit0(_ inner: [UInt8]) -> [UInt8] { tlv(0xa0, inner) }

    static func oid(_ arcs: [UInt]) -> [UInt8] {
        var bytes: [UInt8] = [UInt8(arcs[0] * 40 + arcs[1])]
        for arc in arcs.dropFirst(2) {
            var chunk: [UInt8] = [UInt8(arc & 0x7f)]
            var n = arc >> 7
            while n > 0 {
                chunk.insert(UInt8(n & 0x7f) | 0x80, at: 0)
                n >>= 7
            }
            bytes += chunk
        }
        return tlv(0x06, bytes)
    }

    /// `SEQUENCE { INTEGER type, INTEGER 1, OCTET STRING value }`.
    static func attribute(_ type: Int, _ value: [UInt8]) -> [UInt8] {
        sequence([integer(type), integer(1), octets(value)])
    }
}
