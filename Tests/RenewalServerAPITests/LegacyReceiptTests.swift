import Foundation
import Testing

@testable import RenewalServerAPI

enum Fixture {
    static func url(_ path: String) throws -> URL {
        try #require(Bundle.module.url(forResource: "Fixtures/" + path, withExtension: nil), "no fixture \(path)")
    }

    static func text(_ path: String) throws -> String {
        try String(contentsOf: url(path), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func data(_ path: String) throws -> Data {
        try Data(contentsOf: url(path))
    }
}

@Suite("Transaction ids read from stored legacy receipts (Apple's and real sandbox fixtures)")
struct LegacyReceiptTests {
    static func wrappedSandboxReceipt() throws -> String {
        let object =
            try JSONSerialization.jsonObject(with: Fixture.data("receipts/sandbox-app-receipt-42-in-app.wrapped.json"))
            as? [String: Any]
        return try #require(object?["transactionReceipt"] as? String)
    }

    @Test("A real sandbox app receipt: 42 in-app rows, first transaction 1000000739289145, original 1000000723811158")
    func realSandboxReceipt() throws {
        let purchases = try LegacyReceipt.purchases(appReceipt: Self.wrappedSandboxReceipt())
        #expect(purchases.count == 42)
        #expect(purchases.first?.transactionID == "1000000739289145")
        #expect(purchases.last?.originalTransactionID == "1000000723811158")
        #expect(purchases.allSatisfy { $0.productID?.isEmpty == false })
        #expect(try LegacyReceipt.lookupID(receipt: Self.wrappedSandboxReceipt()) == "1000000723811158")
    }

    @Test("Xcode receipts: one with a transaction gives id 0 (BER, wrapped payload); an empty one gives no id")
    func xcodeReceipts() throws {
        let withTransaction = try LegacyReceipt.purchases(
            appReceipt: Fixture.text("receipts/xcode-app-receipt-with-transaction.b64"))
        #expect(withTransaction.count == 1)
        #expect(withTransaction.first?.transactionID == "0")
        #expect(
            try LegacyReceipt.lookupID(receipt: Fixture.text("receipts/xcode-app-receipt-with-transaction.b64")) == "0")
        #expect(try LegacyReceipt.purchases(appReceipt: Fixture.text("receipts/xcode-app-receipt-empty.b64")).isEmpty)
        #expect(try LegacyReceipt.lookupID(receipt: Fixture.text("receipts/xcode-app-receipt-empty.b64")) == nil)
    }

    @Test("iOS 6 transaction receipts: Apple's gives 33993399, the real sandbox one 1000000046178817")
    func iOS6Receipts() throws {
        #expect(
            try LegacyReceipt.transactionID(
                transactionReceipt: Fixture.text("receipts/ios6-transaction-receipt.apple-lib.b64")) == "33993399")
        #expect(
            try LegacyReceipt.transactionID(
                transactionReceipt: Fixture.text("receipts/ios6-transaction-receipt-sandbox.b64")) == "1000000046178817"
        )
        #expect(
            try LegacyReceipt.lookupID(receipt: Fixture.text("receipts/ios6-transaction-receipt-sandbox.b64"))
                == "1000000046178817")
    }

    @Test(
        "Garbage is an error naming what is wrong, never a crash",
        arguments: [
            "", "not base64 at all!", Data("hello".utf8).base64EncodedString(),
            Data([0x30, 0x80, 0x06]).base64EncodedString(),
            Data([0x30, 0x03, 0x02, 0x01, 0x05]).base64EncodedString(),
            Data(repeating: 0x30, count: 64).base64EncodedString(),
        ])
    func garbage(_ input: String) throws {
        #expect(throws: LegacyReceipt.ReadError.self) { try LegacyReceipt.lookupID(receipt: input) }
    }

    @Test("Every truncation of a real receipt is refused or read, never a crash")
    func truncations() throws {
        let bytes = try #require(Data(base64Encoded: Self.wrappedSandboxReceipt()))
        var refused = 0
        for length in stride(from: 0, to: bytes.count, by: 97) {
            if (try? LegacyReceipt.lookupID(receipt: bytes.prefix(length).base64EncodedString())) == nil {
                refused += 1
            }
        }
        #expect(refused > 0)
    }
}
