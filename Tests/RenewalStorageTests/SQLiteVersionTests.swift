import RenewalSQLite
import RenewalStorage
import Testing

@Suite struct SQLiteVersionTests {
    @Test("A SQLite older than 3.35 is refused with a message naming the version found, the one needed and the fix")
    func oldLibraryRefused() throws {
        let error = #expect(throws: SubscriptionStoreError.self) {
            try SQLiteVersion.check(found: 3_034_001, text: "3.34.1")
        }
        let message = "\(try #require(error))"
        #expect(message.contains("3.34.1"))
        #expect(message.contains("3.35.0"))
        #expect(message.contains("Install a newer libsqlite3"))
    }

    @Test(
        "3.35.0 and newer are accepted, and so is the library this build links",
        arguments: [
            (Int32(3_035_000), "3.35.0"), (Int32(3_040_001), "3.40.1"),
        ])
    func newLibraryAccepted(number: Int32, text: String) throws {
        try SQLiteVersion.check(found: number, text: text)
        let linked = SQLiteVersion.linked
        try SQLiteVersion.check(found: linked.number, text: linked.text)
        #expect(linked.text.hasPrefix("3."))
    }
}
