import Foundation
import RenewalCore
import RenewalStorage

/// Parses and checks one import line. Messages name the problem and the fix, never the receipt.
package enum ImportLine {
    enum Parsed {
        case skip
        /// A good line; a `signedTransaction` still has to pass verification (`StoreKitImport`).
        case success(ReceiptImport, signedTransaction: String?)
        case failure(String)
    }

    /// The members a line is read for.
    private static let keys = JSONKeys([
        "user_id", "latest_receipt", "product_id", "original_transaction_id", "signed_transaction",
        "app_account_token", "bundle_id", "consumption_consent", "consumption_delivery_status",
        "consumption_percentage",
    ])

    static func parse(_ line: ImportLineBytes) -> Parsed {
        let fields: JSONMembers
        switch members(of: line) {
        case .skip: return .skip
        case .failure(let problem): return .failure(problem)
        case .success(let members): fields = members
        }
        do throws(LineProblem) {
            let userID = try userID(fields[0])
            let receipt = try receipt(fields[1], user: userID)
            let productID = try productID(fields[2], user: userID)
            let transactionID = try transactionID(fields[3], user: userID)
            let signedTransaction = try signedTransaction(fields[4], user: userID)
            let appAccountToken = try appAccountToken(fields[5], user: userID)
            let bundleID = try bundleID(fields[6], user: userID)
            let consent = try consumptionConsent(fields.given(7), user: userID)
            let deliveryStatus = try consumptionDeliveryStatus(fields.given(8), user: userID)
            let share = try consumptionPercentage(fields.given(9), user: userID)
            // A line with a token only registers it for the user (docs/design.md §7).
            guard receipt != nil || transactionID != nil || signedTransaction != nil || appAccountToken != nil else {
                throw LineProblem(
                    """
                    the line names no subscription (user \(userID)): give latest_receipt (the base64 app receipt), \
                    original_transaction_id or signed_transaction, or app_account_token alone to register the \
                    user's token
                    """)
            }
            var item = ReceiptImport(
                userID: userID, latestReceipt: receipt, productID: productID, originalTransactionID: transactionID,
                appAccountToken: appAccountToken, bundleID: bundleID)
            item.consumptionConsent = consent
            item.consumptionDeliveryStatus = deliveryStatus
            item.consumptionPercentage = share
            return .success(item, signedTransaction: signedTransaction)
        } catch {
            return .failure(error.message)
        }
    }

    /// Why a line is refused: a sentence naming the problem and the fix.
    private struct LineProblem: Error {
        var message: String
        init(_ message: String) { self.message = message }
    }

    private enum Members {
        case skip
        case failure(String)
        case success(JSONMembers)
    }

    /// The members of the line's JSON object: a blank line is skipped, anything but an object refused.
    private static func members(of line: ImportLineBytes) -> Members {
        let bytes: Data
        switch line {
        case .tooLong(let length):
            return .failure(
                """
                the line is \(length) bytes, over the \(LineReader.maximumLineBytes) allowed; is this a JSON \
                Lines file?
                """
            )
        case .line(let data): bytes = data
        }
        if bytes.allSatisfy(isWhitespace) { return .skip }
        let shape = """
            each line must be {"user_id": "...", "latest_receipt": "..."}, or name the subscription by \
            "original_transaction_id" or "signed_transaction" instead of (or as well as) the receipt
            """
        guard let document = try? JSONDocument(bytes: Array(bytes)) else {
            if String(validating: bytes, as: UTF8.self) == nil {
                return .failure("the line is not UTF-8; export the file as UTF-8 JSON Lines")
            }
            return .failure("not valid JSON (cut short, or nested too deep?); \(shape)")
        }
        // A name given twice: the last value counts, as most JSON readers do.
        guard document.root.kind == .object, let fields = try? document.root.members(keys, lastWins: true) else {
            return .failure("not a JSON object; \(shape)")
        }
        return .success(fields)
    }

    private static func userID(_ value: JSONValue?) throws(LineProblem) -> String {
        switch value?.kind {
        case .string?:
            guard let text = value?.string else {
                throw LineProblem("user_id is not UTF-8; export the file as UTF-8 JSON Lines")
            }
            guard text.utf8.contains(where: { !isWhitespace($0) }) else {
                throw LineProblem("user_id is missing or empty; give the app's user id as a string")
            }
            if let problem = TextField.userID.problem(with: text) {
                throw LineProblem("user_id \(problem); give the app's user id as it stores it")
            }
            if PurchaseAdoption.isReserved(text) {
                throw LineProblem(
                    """
                    user_id \(text) starts with \(PurchaseAdoption.reservedUserPrefix), which is reserved for \
                    purchases no user claimed yet; give the app's own user id
                    """)
            }
            return text
        case .true?, .false?: throw LineProblem("user_id must be a string or an integer, not a boolean")
        case .number?:
            guard let number = value?.integer else {
                throw LineProblem("user_id must be a string or an integer, not \(value?.numberText ?? "a fraction")")
            }
            return String(number)
        default: throw LineProblem("user_id is missing or empty; give the app's user id as a string")
        }
    }

    private static func receipt(_ value: JSONValue?, user userID: String) throws(LineProblem) -> String? {
        guard let value, value.kind != .null else { return nil }
        guard value.kind == .string, let rawReceipt = value.string else {
            throw LineProblem("latest_receipt is not a string; give the base64 receipt the app stored (user \(userID))")
        }
        // Receipts pasted from a terminal or a wrapped export carry line breaks: those go.
        let cleaned =
            isBase64(rawReceipt)
            ? rawReceipt : String(decoding: rawReceipt.utf8.filter { !isWhitespace($0) }, as: UTF8.self)
        guard !cleaned.isEmpty else { throw LineProblem("latest_receipt is empty (user \(userID))") }
        guard isBase64(cleaned) else {
            throw LineProblem(
                "latest_receipt is not valid base64 (user \(userID)); export the receipt exactly as Apple gave it")
        }
        return cleaned
    }

    private static func productID(_ value: JSONValue?, user userID: String) throws(LineProblem) -> String? {
        guard let value, value.kind != .null else { return nil }
        guard value.kind == .string, let text = value.string else {
            throw LineProblem("product_id must be a string (user \(userID))")
        }
        if let problem = TextField.productID.problem(with: text) {
            throw LineProblem(
                "product_id \(problem) (user \(userID)); give the product id from App Store Connect, or leave it out")
        }
        return text.isEmpty ? nil : text
    }

    private static func transactionID(_ value: JSONValue?, user userID: String) throws(LineProblem) -> String? {
        guard let value, value.kind != .null else { return nil }
        var transactionID: String?
        switch value.kind {
        case .string: transactionID = value.string
        case .number: transactionID = value.integer.map(String.init)
        default: break
        }
        guard let id = transactionID, isTransactionID(id) else {
            throw LineProblem(
                """
                original_transaction_id must be Apple's transaction id, digits only, e.g. "2000000123456789" \
                (user \(userID)); StoreKit 2 gives it as Transaction.originalID
                """)
        }
        return id
    }

    private static func signedTransaction(_ value: JSONValue?, user userID: String) throws(LineProblem) -> String? {
        guard let value, value.kind != .null else { return nil }
        guard value.kind == .string, let text = value.string, isCompactJWS(text) else {
            throw LineProblem(
                """
                signed_transaction is not a signed transaction (three base64url parts joined by dots) \
                (user \(userID)); give StoreKit 2's Transaction.jwsRepresentation as the app received it
                """)
        }
        return text
    }

    private static func appAccountToken(_ value: JSONValue?, user userID: String) throws(LineProblem) -> String? {
        guard let value, value.kind != .null else { return nil }
        guard value.kind == .string, let text = value.string, let uuid = UUID(uuidString: text) else {
            throw LineProblem(
                """
                app_account_token must be a UUID such as "6d1b1e9c-3f5e-4b0a-9a57-0c1c1c1c1c1c" \
                (user \(userID)); give the appAccountToken the app set at purchase
                """)
        }
        return uuid.uuidString.lowercased()
    }

    private static func consumptionConsent(_ value: JSONValue?, user userID: String) throws(LineProblem) -> Bool? {
        guard let value else { return nil }
        try refuseNull(value, "consumption_consent", user: userID, give: "true or false")
        switch value.kind {
        case .true: return true
        case .false: return false
        default:
            throw LineProblem(
                """
                consumption_consent must be true or false (user \(userID)): true once the customer agreed that \
                consumption data may be sent to Apple when they ask for a refund, false when they withdraw it
                """)
        }
    }

    private static func consumptionDeliveryStatus(_ value: JSONValue?, user userID: String) throws(LineProblem)
        -> String?
    {
        guard let value else { return nil }
        try refuseNull(value, "consumption_delivery_status", user: userID, give: "one of Apple's delivery statuses")
        guard value.kind == .string, let text = value.string, ConsumptionInformation.deliveryStatuses.contains(text)
        else {
            throw LineProblem(
                """
                consumption_delivery_status must be one of Apple's delivery statuses (user \(userID)): \
                \(ConsumptionInformation.deliveryStatuses.sorted().joined(separator: ", "))
                """)
        }
        return text
    }

    private static func consumptionPercentage(_ value: JSONValue?, user userID: String) throws(LineProblem) -> Int? {
        guard let value else { return nil }
        try refuseNull(value, "consumption_percentage", user: userID, give: "a whole number from 0 to 100000")
        guard value.kind == .number, let share = value.integer, (0...100_000).contains(share) else {
            throw LineProblem(
                """
                consumption_percentage must be a whole number from 0 to 100000 (user \(userID)): the share of the \
                purchase the customer consumed, in thousandths of a percent (50000 is half)
                """)
        }
        return Int(share)
    }

    /// The consumption fields change what is stored for the user when given: an explicit null would say
    /// neither "keep" nor "clear", so it is refused rather than read as either.
    private static func refuseNull(_ value: JSONValue, _ field: String, user userID: String, give: String)
        throws(LineProblem)
    {
        guard value.kind == .null else { return }
        throw LineProblem(
            """
            \(field) is null (user \(userID)): give \(give), or leave \(field) out to keep what is stored
            """)
    }

    private static func bundleID(_ value: JSONValue?, user userID: String) throws(LineProblem) -> String? {
        guard let value, value.kind != .null else { return nil }
        guard value.kind == .string, let text = value.string, isBundleID(text) else {
            throw LineProblem(
                """
                bundle_id must be the app's bundle id, such as "com.example.app" (letters, digits, dots and \
                hyphens) (user \(userID)); leave it out to learn it from Apple's first answer
                """)
        }
        return text
    }

    /// A bundle id as App Store Connect allows it: letters, digits, dots and hyphens, at most 155.
    package static func isBundleID(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 155
            && text.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == 0x2E || byte == 0x2D
            }
    }

    /// Apple's transaction ids are decimal digits (16 today); 1 to 32 are accepted.
    static func isTransactionID(_ text: String) -> Bool {
        (1...32).contains(text.utf8.count) && text.utf8.allSatisfy { (0x30...0x39).contains($0) }
    }

    /// Three non-empty base64url parts joined by dots, under 64 KiB (a signed transaction is about 3 KiB).
    static func isCompactJWS(_ text: String) -> Bool {
        guard text.utf8.count < 64 << 10 else { return false }
        let parts = text.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        return parts.count == 3
            && parts.allSatisfy { part in
                !part.isEmpty
                    && part.allSatisfy { byte in
                        (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte)
                            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
                    }
            }
    }

    /// Space, tab, line feed, vertical tab, form feed, carriage return.
    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || (0x09...0x0D).contains(byte)
    }

    /// Standard base64 with padding, as `Data(base64Encoded:)` takes it: whole groups of four, the
    /// alphabet, and at most two `=` at the very end. Checked without decoding.
    static func isBase64(_ text: String) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            guard bytes.count % 4 == 0 else { return false }
            var end = bytes.count
            for _ in 0..<2 where end > 0 && bytes[end - 1] == UInt8(ascii: "=") { end -= 1 }
            // Every byte is tested, without branching on the answer, so the compiler can test many
            // at once: a receipt is kilobytes, and a byte at a time took a fifth of an import's CPU.
            var allDigits = true
            for byte in UnsafeBufferPointer(rebasing: bytes[0..<end]) {
                let letter = (byte | 0x20) &- UInt8(ascii: "a") < 26
                let digit = byte &- UInt8(ascii: "0") < 10
                allDigits = allDigits && (letter || digit || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "/"))
            }
            return allDigits
        } ?? (Data(base64Encoded: text) != nil)
    }
}
