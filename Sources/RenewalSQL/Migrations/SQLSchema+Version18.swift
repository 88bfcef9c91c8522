extension SQLSchema {
    /// Version 18: multiseat purchases and the kind of each refund. `transactions.revoked_seat_quantity`
    /// keeps the seats a seat refund took back from a purchase that stays valid, and `seats_revoked_at`
    /// when the job first saw them refunded (Apple gives no date for a seat refund);
    /// `entitlement_changes.revocation_type` and `revocation_percentage` say of a `refunded` change
    /// whether the refund was full or prorated and how much of the price it returned. Columns only: no
    /// row is rewritten.
    static func version18(_ dialect: SQLDialect) -> [String] {
        [
            "ALTER TABLE transactions ADD COLUMN revoked_seat_quantity INTEGER",
            "ALTER TABLE transactions ADD COLUMN seats_revoked_at BIGINT",
            "ALTER TABLE entitlement_changes ADD COLUMN revocation_type TEXT",
            "ALTER TABLE entitlement_changes ADD COLUMN revocation_percentage INTEGER",
        ]
    }
}
