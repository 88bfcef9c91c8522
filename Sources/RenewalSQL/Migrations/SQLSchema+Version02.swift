extension SQLSchema {
    /// Version 2: when a receipt's run of 21002/21003 rejections began (a never-verified receipt is
    /// invalid only after rejections spread over days), and since when a valid answer showed it
    /// holds no auto-renewable subscription.
    static func version2(_ dialect: SQLDialect) -> [String] {
        [
            "ALTER TABLE receipts ADD COLUMN rejected_since BIGINT",
            "ALTER TABLE receipts ADD COLUMN no_subscription_since BIGINT",
        ]
    }
}
