import CSQLite
import RenewalStorage

/// The SQLite library this process is linked against, and the oldest one the job's SQL runs on.
public enum SQLiteVersion {
    /// 3.35.0: `RETURNING` (claiming leased rows, ownership claims) first appeared there.
    public static let minimum: Int32 = 3_035_000
    public static let minimumText = "3.35.0"

    /// The linked library's version number (`sqlite3_libversion_number`) and text.
    public static var linked: (number: Int32, text: String) {
        (sqlite3_libversion_number(), String(cString: sqlite3_libversion()))
    }

    /// Throws `SubscriptionStoreError.unavailable` naming both versions and the fix when `found` is
    /// older than `minimum`.
    public static func check(found: Int32, text: String) throws {
        guard found >= minimum else {
            throw SubscriptionStoreError.unavailable(
                "SQLite \(text) is too old: renewal needs \(minimumText) or newer (for RETURNING). "
                    + "Install a newer libsqlite3 (Debian 12 and Ubuntu 22.04 ship 3.40 and 3.37), or use PostgreSQL.")
        }
    }
}
