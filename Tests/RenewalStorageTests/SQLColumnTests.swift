import Foundation
import RenewalStorage
import Testing

@testable import RenewalSQL

/// A column found once per result (`SQLColumn`) reads a row of that result by position, a row of another
/// result by name, and names itself in the error when the column is missing or null.
@Suite("A result's columns found once read every row as reading by name does")
struct SQLColumnTests {
    @Test("by position in its own result, by name in another whose columns are in another order")
    func positionAndFallback() throws {
        let names = SQLColumnNames(["id", "Purchased_At", "currency"])
        let row = SQLRow(names: names, values: [.text("a"), .int64(5), .null])
        let purchased = names.column("purchased_at")
        #expect(purchased.position == 1)
        #expect(try row.int64(purchased) == 5)
        #expect(try row.optionalText(names.column("currency")) == nil)

        let other = SQLRow(columns: ["purchased_at", "id"], values: [.int64(7), .text("b")])
        #expect(try other.int64(purchased) == 7)
        #expect(try other.text(names.column("id")) == "b")
    }

    @Test("a missing or null column is named in the error")
    func errorsNameTheColumn() throws {
        let names = SQLColumnNames(["id", "currency"])
        let row = SQLRow(names: names, values: [.text("a"), .null])
        #expect(message { try row.int(names.column("quantity")) } == "column quantity is missing")
        #expect(message { try row.text(names.column("currency")) } == "column currency is null")
    }

    /// The `corruptRow` detail `body` throws, nil when it throws nothing or another error.
    private func message(_ body: () throws -> Any) -> String? {
        do {
            _ = try body()
        } catch SubscriptionStoreError.corruptRow(let detail) {
            return detail
        } catch {}
        return nil
    }
}
