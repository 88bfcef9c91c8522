extension SQLSchema {
    /// Version 6: StoreKit 2 rows. A row may hold a transaction id and no receipt (`latest_receipt`
    /// is then the empty string: the column stays `NOT NULL`, so no table is rewritten), and the
    /// `appAccountToken` the app set at purchase. Adding a nullable column rewrites nothing on
    /// either database.
    static func version6(_ dialect: SQLDialect) -> [String] {
        [
            "ALTER TABLE receipts ADD COLUMN app_account_token TEXT"
        ]
    }
}
