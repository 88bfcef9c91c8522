import Foundation
import RenewalCore
import RenewalStorage

/// The `--report` object's own parts, written in one place for the file a run writes as it goes
/// (`ReportWriter`) and for `renewal report --format json` (`StoredReport`), so the two cannot drift:
/// `head`, the `changes` elements, `afterChanges`, the `failures`, `afterFailures`, the `conflicts`,
/// then `tail`. Elements are `ReportChange`, `ReportFailure` and `ReportConflict`, each after
/// `separator(first:)`.
enum ReportJSON {
    static func head(runID: String, command: String, dryRun: Bool, startedAt: Date) throws -> String {
        "{\"run_id\":\(try json(runID)),\"command\":\(try json(command)),\"dry_run\":\(dryRun),"
            + "\"started_at\":\(try json(Timestamp.string(startedAt))),\"changes\":["
    }

    static let afterChanges = "\n],\"failures\":["
    static let afterFailures = "\n],\"conflicts\":["

    /// The end of the object, after the conflicts (no newline after the closing brace).
    static func tail(finishedAt: Date?, status: RunStatus, exitCode: Int?, counts: RenewalCounts) throws -> String {
        "\n],\"finished_at\":\(try json(finishedAt.map(Timestamp.string))),\"status\":\(try json(status.rawValue)),"
            + "\"exit_code\":\(try json(exitCode)),\"counts\":\(try json(counts)),"
            + "\"checked\":\(counts.checked),\"changed\":\(counts.changed),\"failed\":\(counts.failed)}"
    }

    static func separator(first: Bool) -> String { first ? "\n" : ",\n" }

    /// One value as the report writes it: sorted keys, slashes unescaped.
    static func json(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}

/// One element of the report's `changes`.
package struct ReportChange: Encodable {
    var userID: String
    var event: SubscriptionEvent
    var ownershipType: String?
    /// The API whose answer made the change; omitted when unknown (changes stored before schema v5).
    var source: String?
    /// The receipt's app; omitted when not known yet.
    var bundleID: String?

    package init(userID: String, event: SubscriptionEvent, ownershipType: String?, source: String?, bundleID: String?) {
        self.userID = userID
        self.event = event
        self.ownershipType = ownershipType
        self.source = source
        self.bundleID = bundleID
    }

    /// A change as the database recorded it.
    package init(_ recorded: RecordedChange) {
        self.init(
            userID: recorded.userID, event: recorded.event, ownershipType: recorded.ownershipType,
            source: recorded.source, bundleID: recorded.bundleID)
    }

    /// The user as reports and webhooks show it: nil (JSON null) while the subscription is unclaimed, since
    /// its stored key (`adopted:<original transaction id>`) names no user of the app (docs/design.md §7).
    package static func shownUser(_ userID: String) -> String? {
        PurchaseAdoption.isReserved(userID) ? nil : userID
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ReportKey.self)
        try c.encode(Self.shownUser(userID), forKey: ReportKey("user_id"))
        try c.encodeIfPresent(bundleID, forKey: ReportKey("bundle_id"))
        try c.encode(event.originalTransactionID, forKey: ReportKey("original_transaction_id"))
        try c.encode(event.productID, forKey: ReportKey("product_id"))
        try c.encode(event.fromProductID, forKey: ReportKey("from_product_id"))
        try c.encode(event.kind.rawValue, forKey: ReportKey("kind"))
        try c.encode(event.fromState.rawValue, forKey: ReportKey("from_state"))
        try c.encode(event.toState.rawValue, forKey: ReportKey("to_state"))
        try c.encode(event.oldExpiresAt.map(Timestamp.string), forKey: ReportKey("old_expires_at"))
        try c.encode(event.newExpiresAt.map(Timestamp.string), forKey: ReportKey("new_expires_at"))
        try c.encode(event.environment?.rawValue, forKey: ReportKey("environment"))
        try c.encode(ownershipType, forKey: ReportKey("ownership_type"))
        try c.encode(event.toState.grantsAccess, forKey: ReportKey("entitled"))
        try c.encodeIfPresent(source, forKey: ReportKey("source"))
        try c.encodeIfPresent(event.revocationType, forKey: ReportKey("revocation_type"))
        try c.encodeIfPresent(event.revocationPercentage, forKey: ReportKey("revocation_percentage"))
    }
}

/// One element of the report's `failures`.
struct ReportFailure: Encodable {
    var userID: String
    var receiptID: Int64
    var failure: CheckFailure
    /// The receipt's app; omitted when not known yet.
    var bundleID: String?

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ReportKey.self)
        try c.encode(userID, forKey: ReportKey("user_id"))
        try c.encodeIfPresent(bundleID, forKey: ReportKey("bundle_id"))
        try c.encode(failure.reason, forKey: ReportKey("reason"))
        try c.encode(failure.message, forKey: ReportKey("message"))
        try c.encode(receiptID, forKey: ReportKey("receipt_id"))
    }
}

/// One element of the report's `conflicts`.
struct ReportConflict: Encodable {
    var conflict: OwnershipConflict

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ReportKey.self)
        try c.encode("shared_apple_id", forKey: ReportKey("kind"))
        try c.encode(conflict.claimantUserID, forKey: ReportKey("user_id"))
        try c.encode(conflict.ownerUserID, forKey: ReportKey("owner_user_id"))
        try c.encode(conflict.originalTransactionID, forKey: ReportKey("original_transaction_id"))
        try c.encode(conflict.productID, forKey: ReportKey("product_id"))
        try c.encode("kept_first_owner", forKey: ReportKey("resolution"))
    }
}

package struct ReportKey: CodingKey {
    package var stringValue: String
    package var intValue: Int? { nil }
    package init(_ string: String) { stringValue = string }
    package init?(stringValue: String) { self.stringValue = stringValue }
    package init?(intValue: Int) { nil }
}

/// A report file that cannot be written (the run fails: exit 1).
public struct ReportFileError: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var detail: String

    public init(path: String, detail: String) {
        self.path = path
        self.detail = detail
    }

    public var description: String { "Cannot write the report to \(path): \(detail)." }
}
