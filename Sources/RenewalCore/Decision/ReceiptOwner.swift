import Foundation

/// Who owns a receipt's subscriptions, from what its row stores: the user a claim named
/// (`owner_user_id`) when one did; nobody while it is a purchase the feed or `discover` adopted and no
/// user claimed (its `user_id` is a reserved key, `PurchaseAdoption.reservedUserPrefix`); else the user
/// it was imported for. Storage says the same in SQL (`SQLSubscriptionStore.ownerSQL`, an expression used
/// inside larger queries), and `ReceiptOwnerStoreTests` holds that SQL to this function on both databases.
public enum ReceiptOwner {
    /// The owner of a receipt stored with `ownerUserID` and `userID`; nil when nobody owns it yet.
    public static func of(ownerUserID: String?, userID: String) -> String? {
        if let ownerUserID { return ownerUserID }
        return PurchaseAdoption.isReserved(userID) ? nil : userID
    }
}
