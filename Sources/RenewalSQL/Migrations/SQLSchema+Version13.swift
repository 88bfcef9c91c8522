extension SQLSchema {
    /// Version 13: a `product_changed` change records the product it changed from
    /// (`entitlement_changes.from_product_id`, NULL on every other kind), so history read backwards
    /// (the HTML report's entitled subscribers by product) puts an upgrade's subscriber on the old
    /// plan before it and on the new one after. A column only: no table is rewritten.
    static func version13(_ dialect: SQLDialect) -> [String] {
        ["ALTER TABLE entitlement_changes ADD COLUMN from_product_id TEXT"]
    }
}
