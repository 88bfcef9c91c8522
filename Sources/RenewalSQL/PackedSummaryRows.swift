import RenewalCore

/// A rebuild page's summed rows in little memory (`SQLSubscriptionStore.appendSummedRows`). A
/// `ContributionKey` takes some 170 bytes in a dictionary, and a page of a ledger covering three years sums
/// to 90,000 keys; but those repeat a few thousand keys without their shape (figure, product, price, app,
/// movement, cohort) at many days. Each of those is kept once with its row-key text, and a summed row is
/// its number and the shape's columns (about 50 bytes). The texts are kept here alone: not in the
/// writes' cache (`AnalyticsSummaryUpkeep.keyText`), which would hold each a second time.
struct PackedSummaryRows {
    /// One row: the key without its shape (an index into `keys`), the shape as the table's columns.
    private struct Row: Hashable {
        var key: Int32
        var shape: String
        var day: Int64
        var sinceDay: Int64
    }

    /// The table's columns of a key without its shape.
    private struct Key {
        var environment: String
        var bundleID: String
        var text: String
    }

    private var index: [ContributionKey: Int32] = [:]
    private var keys: [Key] = []
    private var counts: [Row: Int] = [:]

    /// The summed rows held (nonzero counts).
    var count: Int { counts.count }

    /// Adds `rows` (a part's sum), dropping a count that reaches zero.
    mutating func add(_ rows: [ContributionKey: Int]) throws {
        for (key, count) in rows where count != 0 {
            let bare = key.withoutShape
            let number: Int32
            if let known = index[bare] {
                number = known
            } else {
                number = Int32(keys.count)
                keys.append(
                    Key(
                        environment: key.environment.rawValue, bundleID: key.bundleID ?? "",
                        text: try AnalyticsSummaryRowKey.text(of: bare)))
                index[bare] = number
            }
            let (shape, day, sinceDay) = AnalyticsSummaryUpkeep.columns(of: key.shape)
            let row = Row(key: number, shape: shape, day: day, sinceDay: sinceDay)
            let sum = (counts[row] ?? 0) + count
            counts[row] = sum == 0 ? nil : sum
        }
    }

    /// Upserts the rows held into `table` and empties them (the keys stay known).
    mutating func upsert(into table: String, on connection: any SQLConnection) throws {
        var insert = AnalyticsSummaryUpkeep.RowInsert(
            table: table, upsert: true, expected: counts.count, connection: connection)
        for (row, count) in counts {
            let key = keys[Int(row.key)]
            try insert.add(
                shape: row.shape, day: row.day, sinceDay: row.sinceDay, environment: key.environment,
                bundleID: key.bundleID, keyText: key.text, count: count)
        }
        try insert.finish()
        counts.removeAll()
    }
}
