import Foundation
import Testing

@testable import RenewalCore

@Suite("Receipt owner: a claim's user, nobody for an unclaimed adoption, else the importing user")
struct ReceiptOwnerTests {
    @Test("the claim wins; an adopted row nobody claimed has no owner; an imported row is its user's")
    func owner() {
        let adopted = PurchaseAdoption.reservedUserPrefix + "1000"
        #expect(ReceiptOwner.of(ownerUserID: "alice", userID: "bob") == "alice")
        #expect(ReceiptOwner.of(ownerUserID: "alice", userID: adopted) == "alice")
        #expect(ReceiptOwner.of(ownerUserID: nil, userID: adopted) == nil)
        #expect(ReceiptOwner.of(ownerUserID: nil, userID: "bob") == "bob")
    }
}
