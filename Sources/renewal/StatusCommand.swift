import ArgumentParser
import Foundation
import RenewalCore
import RenewalJob
import RenewalReports
import RenewalStorage

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show every subscription's state (one per subscription, one per never-verified receipt).",
        discussion: """
            --json prints a JSON array of objects with user_id, original_transaction_id, product_id, state, \
            entitled, expires_at, auto_renew, environment, grace_period_expires_at, last_verified_at, \
            next_check_at (RFC 3339 UTC or null), ownership_type, last_failure, source (verify_receipt, \
            server_api, or null before the first valid answer) and bundle_id (the app; null until known). Rows are streamed, so it \
            works on any table size. --unclaimed lists the adopted purchases no user has claimed instead (--json: \
            original_transaction_id, bundle_id, product_id, environment, adopted_at, app_account_token, state, \
            expires_at, revenue by currency).
            """ + EnvironmentHelp.text(.database))

    @Flag(name: .long, help: "Print JSON (the stable contract) instead of a table.")
    var json = false

    @Option(
        name: .long,
        help: ArgumentHelp("Only this user; repeat it for several (`--user 42 --user 43`).", valueName: "id"))
    var user: [String] = []

    @Flag(
        name: .long,
        help: """
            List the purchases the change feed adopted that no user has claimed yet (docs/design.md §7), \
            oldest id first, instead of every subscription.
            """)
    var unclaimed = false

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        if unclaimed && !user.isEmpty {
            throw ValidationError("--unclaimed lists the purchases no user holds; leave out --user.")
        }
    }

    func run() async throws {
        try await ExitMapping.run {
            _ = logging.makeLogger()
            let store = try StoreFactory.open(database.resolved, create: false)
            try await store.checkSchema()
            if unclaimed { return try await UnclaimedOutput.write(store: store, json: json) }
            // Each user named once, in the order given; nil for every user.
            var seen = Set<String>()
            let users: [String?] = user.isEmpty ? [nil] : user.filter { seen.insert($0).inserted }
            // The table's columns fit their widest value: one pass measures, a second prints, so memory
            // stays flat however many rows there are.
            var widths: [Int]?
            if !json {
                var measured = StatusOutput.headings.map(\.count)
                try await Self.forEachPage(of: store, users: users) { _, page in
                    for row in page {
                        for (index, value) in StatusOutput.cells(row).enumerated() {
                            measured[index] = max(measured[index], value.count)
                        }
                    }
                }
                widths = measured
            }
            var output = StatusOutput(json: json, widths: widths)
            var missing: [String] = []
            try await Self.forEachPage(of: store, users: users) { user, page in
                if page.isEmpty, let user { missing.append(user) }
                try await output.write(page)
            }
            try await output.finish(missing: missing)
        }
    }

    /// Calls `body` with each page of each user's rows (of every row for a nil user); a user without
    /// rows gets one empty page.
    private static func forEachPage(
        of store: any RenewalStore, users: [String?], _ body: (String?, [StatusRow]) async throws -> Void
    ) async throws {
        for user in users {
            var cursor: StatusCursor?
            while true {
                let page = try await store.statusPage(userID: user, after: cursor, limit: 500)
                if !page.isEmpty || cursor == nil { try await body(user, page) }
                guard page.count == 500, let last = page.last else { break }
                cursor = last.cursor
            }
        }
    }
}

/// Streams status rows to standard output as a JSON array or an aligned table (through
/// `ReportOutput`, so a reader that stops reading never holds an event loop).
struct StatusOutput {
    static let headings = [
        "USER", "ORIGINAL_TRANSACTION_ID", "PRODUCT", "STATE", "ENTITLED", "EXPIRES_AT", "ENV", "NEXT_CHECK_AT", "APP",
    ]

    let json: Bool
    /// Each table column's width: its widest value or heading.
    let widths: [Int]
    private let sink = ReportOutput()
    private var count = 0
    private let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    init(json: Bool, widths: [Int]? = nil) {
        self.json = json
        self.widths = widths ?? Self.headings.map(\.count)
    }

    /// A row's table cells, in the order of `headings`.
    static func cells(_ row: StatusRow) -> [String] {
        [
            row.userID, row.originalTransactionID ?? "-", row.productID ?? "-", row.state.rawValue,
            row.entitled ? "yes" : "no", row.expiresAt.map(Timestamp.string) ?? "-",
            row.environment?.rawValue ?? "-", row.nextCheckAt.map(Timestamp.string) ?? "-", row.bundleID ?? "-",
        ]
    }

    /// Writes one page of rows in one call.
    mutating func write(_ page: [StatusRow]) async throws {
        var text = ""
        for row in page {
            if json {
                text += count == 0 ? "[\n" : ",\n"
                text += (try? encoder.encode(StatusJSON(row: row))).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
            } else {
                if count == 0 { text += line(Self.headings) + "\n" }
                text += line(Self.cells(row)) + "\n"
            }
            count += 1
        }
        try await sink.write(text)
    }

    /// Ends the output; in the table, says which of the users asked for (`missing`) have no receipt.
    func finish(missing: [String] = []) async throws {
        if json {
            try await sink.write(count == 0 ? "[]\n" : "\n]\n")
        } else {
            for user in missing {
                try await sink.write(
                    "User \(user) has no receipt in this database (user ids match exactly; `renewal status` lists them all).\n"
                )
            }
            if count == 0 && missing.isEmpty {
                try await sink.write("No receipts. Load some with `renewal import FILE`.\n")
            }
        }
        try await sink.finish()
    }

    /// Two spaces between columns; the last column unpadded.
    private func line(_ values: [String]) -> String {
        TextColumns.line(values, widths: widths.dropLast().map { $0 + 2 } + [0])
    }
}

/// One element of `status --json`: every key always present, null when unknown.
struct StatusJSON: Encodable {
    var row: StatusRow

    enum CodingKeys: String, CodingKey {
        case userID = "user_id", originalTransactionID = "original_transaction_id", productID = "product_id"
        case state, entitled, expiresAt = "expires_at", autoRenew = "auto_renew", environment
        case gracePeriodExpiresAt = "grace_period_expires_at", lastVerifiedAt = "last_verified_at"
        case nextCheckAt = "next_check_at", ownershipType = "ownership_type", lastFailure = "last_failure", source
        case lastNotification = "last_notification"
        case bundleID = "bundle_id"
    }

    /// `{"type", "subtype", "signed_at"}` of the last notification the change feed brought.
    struct LastNotificationJSON: Encodable {
        var notification: StatusRow.LastNotification

        enum CodingKeys: String, CodingKey {
            case type, subtype
            case signedAt = "signed_at"
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(notification.type, forKey: .type)
            try c.encode(notification.subtype, forKey: .subtype)
            try c.encode(Timestamp.string(notification.signedAt), forKey: .signedAt)
        }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(row.userID, forKey: .userID)
        try c.encode(row.originalTransactionID, forKey: .originalTransactionID)
        try c.encode(row.productID, forKey: .productID)
        try c.encode(row.state.rawValue, forKey: .state)
        try c.encode(row.entitled, forKey: .entitled)
        try c.encode(row.expiresAt.map(Timestamp.string), forKey: .expiresAt)
        try c.encode(row.autoRenew, forKey: .autoRenew)
        try c.encode(row.environment?.rawValue, forKey: .environment)
        try c.encode(row.gracePeriodExpiresAt.map(Timestamp.string), forKey: .gracePeriodExpiresAt)
        try c.encode(row.lastVerifiedAt.map(Timestamp.string), forKey: .lastVerifiedAt)
        try c.encode(row.nextCheckAt.map(Timestamp.string), forKey: .nextCheckAt)
        try c.encode(row.ownershipType, forKey: .ownershipType)
        try c.encode(row.lastFailure, forKey: .lastFailure)
        try c.encode(row.source, forKey: .source)
        try c.encode(row.lastNotification.map(LastNotificationJSON.init), forKey: .lastNotification)
        try c.encode(row.bundleID, forKey: .bundleID)
    }
}
