import AppStoreSimulator
import Foundation
import InMemoryLogging
import PropertyBased
import RenewalCore
import RenewalJob
import RenewalStorage
import Testing

/// One way to spoil a well-formed Apple answer (the simulator's status-0 answer for a scenario).
struct Garbage: Sendable, CustomStringConvertible {
    enum Kind: Int, CaseIterable, Sendable {
        /// The first part of the body only.
        case truncated
        /// Bytes that are not UTF-8, between tokens or inside a string.
        case notUTF8
        /// A field holding another JSON type (booleans, objects, arrays, null, numbers, strings).
        case retyped
        /// A field left out.
        case removed
        /// A field holding arrays nested thousands deep.
        case deeplyNested
        /// A key given twice with different values.
        case duplicateKey
        /// A date field holding a time no subscription can have, or no number at all.
        case absurdDate
        /// A body padded to sizes up to past the client's cap.
        case huge
    }

    var kind: Kind
    var body: Data
    var detail: String
    /// True when no reading of the body can be a valid answer: the job must fail the check.
    var certainlyInvalid: Bool

    var description: String { "\(kind) \(detail) (\(body.count) bytes)" }

    /// A field of an answer, as a path into the JSON.
    struct Field: Sendable, CustomStringConvertible {
        var path: [String]
        /// The decoder needs this field to read the answer: spoiling it can never give a valid answer.
        var required: Bool
        var description: String { path.joined(separator: ".") }
    }

    static let fields: [Field] = [
        Field(path: ["status"], required: true),
        Field(path: ["environment"], required: false),
        Field(path: ["latest_receipt"], required: false),
        Field(path: ["latest_receipt_info"], required: false),
        Field(path: ["latest_receipt_info", "0", "expires_date_ms"], required: true),
        Field(path: ["latest_receipt_info", "0", "purchase_date_ms"], required: true),
        Field(path: ["latest_receipt_info", "0", "product_id"], required: false),
        Field(path: ["latest_receipt_info", "0", "original_transaction_id"], required: false),
        Field(path: ["latest_receipt_info", "0", "transaction_id"], required: false),
        Field(path: ["latest_receipt_info", "0", "cancellation_date_ms"], required: true),
        Field(path: ["pending_renewal_info"], required: false),
        Field(path: ["pending_renewal_info", "0", "auto_renew_status"], required: false),
        Field(path: ["pending_renewal_info", "0", "grace_period_expires_date_ms"], required: true),
        Field(path: ["receipt"], required: false),
        Field(path: ["receipt", "bundle_id"], required: false),
    ]

    /// Values of the wrong type; the index says which, so shrinking gives a readable case.
    static var wrongTypes: [(name: String, value: Any, readableAsString: Bool)] {
        [
            ("true", true, false), ("false", false, false), ("{}", [String: Any](), false), ("[]", [Any](), false),
            ("null", NSNull(), false), ("[1]", [1], false), ("{\"a\":1}", ["a": 1], false),
            ("12345", 12345, true), ("-1", -1, true), ("1.5e300", 1.5e300, true), ("\"x\"", "x", true),
            ("\"\"", "", true),
        ]
    }

    /// Texts for date fields: before the App Store, past 2100, past Int64, not a number.
    static let absurdDates = [
        "-1", "0", "1", "1e300", "99999999999999999999", "9223372036854775807", "-9223372036854775808",
        "253402300800000", "4102444800001", "946684799999", "NaN", "Infinity", "", "1.7e12.5", "0x1F", "٣٤٥",
        "2026-13-45 99:99:99 Etc/GMT",
    ]

    static let notUTF8Sequences: [[UInt8]] = [
        [0xFF], [0xFE, 0xFF], [0xC3, 0x28], [0x80], [0xED, 0xA0, 0x80], [0xF8, 0x88, 0x80, 0x80, 0x80], [0xC0, 0xAF],
    ]

    /// Builds the garbage of `kind` from `seed` (a JSON object), steered by three numbers.
    static func make(kind: Kind, seed: Data, field fieldIndex: Int, choice: Int, fraction: Double) -> Garbage {
        let field = fields[fieldIndex % fields.count]
        switch kind {
        case .truncated:
            let cut = max(1, min(seed.count - 1, Int(Double(seed.count) * fraction)))
            return Garbage(
                kind: kind, body: seed.prefix(cut), detail: "cut at byte \(cut) of \(seed.count)",
                certainlyInvalid: true)

        case .notUTF8:
            let bytes = notUTF8Sequences[choice % notUTF8Sequences.count]
            if choice % 2 == 0 {
                // Right after the opening brace: outside any string.
                var body = seed
                body.insert(contentsOf: bytes, at: body.startIndex + 1)
                return Garbage(
                    kind: kind, body: body, detail: "\(hex(bytes)) after the opening brace", certainlyInvalid: true)
            }
            let marker = "__BYTES__"
            let body = replacing(
                marker, in: serialize(set(field, in: seed, to: "ab" + marker + "cd")), with: Data(bytes))
            return Garbage(
                kind: kind, body: body, detail: "\(hex(bytes)) inside \(field)", certainlyInvalid: field.required)

        case .retyped:
            let wrong = wrongTypes[choice % wrongTypes.count]
            // Numbers and strings are how Apple sends everything: only the other types are wrong for sure.
            // A null `x_ms` is read as absent and the decoder falls back to its twin `x` (by design,
            // AppleWireFormat.appleDate), which the seed carries with the same instant.
            let fallsBackToTwin = wrong.name == "null" && field.path.last?.hasSuffix("_ms") == true
            let invalid = field.required && !wrong.readableAsString && !fallsBackToTwin
            return Garbage(
                kind: kind, body: serialize(set(field, in: seed, to: wrong.value)), detail: "\(field) = \(wrong.name)",
                certainlyInvalid: invalid || (field.path == ["status"] && wrong.name != "12345" && wrong.name != "-1"))

        case .removed:
            return Garbage(
                kind: kind, body: serialize(set(field, in: seed, to: nil)), detail: "without \(field)",
                certainlyInvalid: field.path == ["status"])

        case .deeplyNested:
            let depth = [600, 5_000, 100_000][choice % 3]
            let marker = "__NEST__"
            let nested =
                Data(String(repeating: "[", count: depth).utf8) + Data("1".utf8)
                + Data(String(repeating: "]", count: depth).utf8)
            let body = replacing("\"\(marker)\"", in: serialize(set(field, in: seed, to: marker)), with: nested)
            return Garbage(
                kind: kind, body: body, detail: "\(field) nested \(depth) deep", certainlyInvalid: field.required)

        case .duplicateKey:
            let wrong = wrongTypes[choice % wrongTypes.count]
            let key = field.path.last ?? "status"
            let text = String(decoding: seed, as: UTF8.self)
            let value = String(decoding: serialize(["v": wrong.value]), as: UTF8.self).dropFirst(5).dropLast()
            let body = text.replacingOccurrences(
                of: "\"\(key)\":", with: "\"\(key)\":\(value),\"\(key)\":", options: [],
                range: text.range(of: "\"\(key)\":"))
            return Garbage(
                kind: kind, body: Data(body.utf8), detail: "\(key) given twice, first as \(wrong.name)",
                certainlyInvalid: false)

        case .absurdDate:
            let dateFields = fields.filter { $0.path.last?.hasSuffix("_ms") == true }
            let dateField = dateFields[fieldIndex % dateFields.count]
            let text = absurdDates[choice % absurdDates.count]
            return Garbage(
                kind: kind, body: serialize(set(dateField, in: seed, to: text)), detail: "\(dateField) = \"\(text)\"",
                certainlyInvalid: true)

        case .huge:
            let size = [64 << 10, 1 << 20, 9 << 20][choice % 3]
            var object = (try? JSONSerialization.jsonObject(with: seed)) as? [String: Any] ?? [:]
            object["padding"] = String(repeating: "x", count: size)
            return Garbage(
                kind: kind, body: serialize(object), detail: "padded with \(size) bytes",
                certainlyInvalid: size > 8 << 20)
        }
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02X", $0) }.joined(separator: " ") }

    static func serialize(_ object: Any) -> Data {
        (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
    }

    static func replacing(_ marker: String, in data: Data, with bytes: Data) -> Data {
        guard let range = data.firstRange(of: Data(marker.utf8)) else { return data }
        var result = data
        result.replaceSubrange(range, with: bytes)
        return result
    }

    /// `seed` with the value at `field` replaced (nil removes it). A path through a missing or
    /// empty array or object creates it, so every field can be spoiled whatever the scenario.
    static func set(_ field: Field, in seed: Data, to value: Any?) -> Any {
        let root = (try? JSONSerialization.jsonObject(with: seed)) ?? [String: Any]()
        return replace(root, path: field.path[...], value: value)
    }

    private static func replace(_ node: Any, path: ArraySlice<String>, value: Any?) -> Any {
        guard let key = path.first else { return value ?? NSNull() }
        let rest = path.dropFirst()
        if let index = Int(key) {
            var array = node as? [Any] ?? []
            if array.isEmpty { array = [[String: Any]()] }
            let position = min(index, array.count - 1)
            if rest.isEmpty, value == nil {
                array.remove(at: position)
            } else {
                array[position] = replace(array[position], path: rest, value: value)
            }
            return array
        }
        var object = node as? [String: Any] ?? [:]
        if rest.isEmpty, value == nil {
            object.removeValue(forKey: key)
        } else {
            object[key] = replace(object[key] ?? [String: Any](), path: rest, value: value)
        }
        return object
    }
}

@Suite("Garbage from Apple: property checks through the real client and job")
struct GarbageAnswerPropertyTests {
    static let scenarios: [Scenario] = [
        .renewal, .billingRetry, .gracePeriod, .refund, .voluntaryExpiry, .familyShared, .upgrade,
    ]

    /// Failure reasons the job names; anything else is a new reason docs/dashboards.md must list.
    static let namedReasons: Set<String> = [
        "invalid_answer", "unreadable_answer", "response_too_large", "environment_loop", "wrong_bundle",
        "unknown_products", "no_subscription", "insufficient_evidence",
    ]

    @Test(
        """
        Any spoiled answer: the job never crashes, a failed check leaves the subscription exactly as it was with \
        a named reason, and only an answer the decoder reads can change it
        """
    )
    func spoiledAnswers() async throws {
        try await JobHarness.with(maxAttempts: 1) { h in
            let counter = Counter()
            await propertyCheck(
                count: 120,
                input: Gen.int(in: 0...(Garbage.Kind.allCases.count - 1)), Gen.int(in: 0...99), Gen.int(in: 0...99),
                Gen.double(in: 0.02...0.98)
            ) { kindIndex, fieldIndex, choice, fraction in
                let n = counter.next()
                let kind = Garbage.Kind.allCases[kindIndex]
                let scenario = Self.scenarios[(fieldIndex + choice) % Self.scenarios.count]
                let user = "user-\(n)"
                let receipt = h.receipt("account-\(n)", scenario, daysAgo: 40)
                try await h.importReceipts([(user, receipt)])
                let only = RenewalRun.Command.backfill(BackfillSelector(userIDs: [user]))
                _ = try await h.run(only)
                let before = try await Self.state(h, user: user)

                let seed = try JSONEncoder().encode(receipt.response(at: h.state.now))
                let garbage = Garbage.make(
                    kind: kind, seed: seed, field: fieldIndex, choice: choice, fraction: fraction)
                h.state.script(account: receipt.account, .init(bytes: garbage.body))
                let outcome = try await h.run(only)
                h.state.script(account: receipt.account, nil)
                let after = try await Self.state(h, user: user)
                let failures = try await EvidenceRulesTests.failures(h, run: outcome)
                // The production decoder, in process, as the oracle of what can be read at all.
                let readable = (try? VerifyReceiptResponse(json: garbage.body)) != nil

                #expect(outcome.counts.checked == 1, "\(garbage): checked \(outcome.counts.checked)")
                if garbage.certainlyInvalid {
                    #expect(!failures.isEmpty, "\(garbage) was accepted")
                }
                if failures.isEmpty {
                    #expect(readable, "\(garbage): the job acted on an answer the decoder cannot read")
                } else {
                    #expect(
                        after == before, "\(garbage): a failed check changed the subscription: \(before) → \(after)")
                    for failure in failures {
                        let reason = failure.failure.reason.rawValue
                        #expect(
                            Self.namedReasons.contains(reason) || reason.hasPrefix("apple_status_")
                                || reason.hasPrefix("http_"),
                            "\(garbage): unnamed failure reason \(reason)")
                        #expect(
                            !failure.failure.message.contains(receipt.encoded),
                            "\(garbage): the message holds the receipt")
                    }
                }
                for expiry in after.subscriptions.compactMap(\.expiresAt) {
                    #expect(
                        (2000...2100).contains(Calendar(identifier: .gregorian).component(.year, from: expiry)),
                        "\(garbage): stored expiry \(expiry)")
                }
                counter.record(kind, failed: !failures.isEmpty)
            }
            print("figures[garbage answers]: \(counter.summary)")
            #expect(
                !h.logs.entries.contains { "\($0)".contains(JobHarness.secret) }, "the shared secret reached the logs")
        }
    }

    struct Observed: Equatable, CustomStringConvertible {
        var receipt: String?
        var status: ReceiptStatus
        var subscriptions: [FailureSafetyTests.Entitlement]
        var description: String {
            "\(status) \(subscriptions.map { "\($0.state)/\($0.expiresAt.map { "\($0)" } ?? "-")" })"
        }
    }

    static func state(_ h: JobHarness, user: String) async throws -> Observed {
        let stored = try #require(try await h.receipts().first { $0.userID == user })
        let rows = try await h.status(user: user).map(FailureSafetyTests.Entitlement.init)
        return Observed(receipt: stored.latestReceipt, status: stored.status, subscriptions: rows)
    }

    /// Cases seen per kind, and how many of them failed the check (printed as a figure).
    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var count = 0
        private var seen: [Garbage.Kind: (cases: Int, failed: Int)] = [:]

        func next() -> Int {
            lock.withLock {
                count += 1; return count
            }
        }

        func record(_ kind: Garbage.Kind, failed: Bool) {
            lock.withLock {
                let old = seen[kind] ?? (0, 0)
                seen[kind] = (old.cases + 1, old.failed + (failed ? 1 : 0))
            }
        }

        var summary: String {
            lock.withLock {
                Garbage.Kind.allCases.map { "\($0) \(seen[$0]?.failed ?? 0)/\(seen[$0]?.cases ?? 0) failed" }.joined(
                    separator: ", ")
            }
        }
    }
}
