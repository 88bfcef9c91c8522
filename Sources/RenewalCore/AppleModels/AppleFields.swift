import Foundation

/// Why a verifyReceipt answer could not be read.
public enum AppleAnswerError: Error, Sendable, Hashable {
    /// Not JSON, or JSON without a numeric `status`: nothing in it can be taken as Apple's word.
    case notJSON(String)
    /// JSON with a status, but a field the job needs is unreadable; `path` names it
    /// (`latest_receipt_info[0].expires_date_ms`).
    case unreadableField(path: String, detail: String)
}

/// The fields one kind of Apple object is read for: each case names a member.
protocol AppleField: RawRepresentable<Int>, CaseIterable {
    var key: String { get }
    /// `JSONKeys(allCases.map(\.key))`, prepared once.
    static var keys: JSONKeys { get }
}

/// The used members of one object of an Apple answer, found in one pass, read in Apple's loose
/// shapes: numbers and flags as strings or JSON numbers, dates as `x_ms`/`x` pairs.
struct AppleFields<Field: AppleField> {
    let object: JSONValue
    let members: JSONMembers

    /// - Throws: `unreadableField` when `value` is not an object or gives a used member twice.
    init(_ value: JSONValue) throws(AppleAnswerError) {
        guard value.kind == .object else { throw .unreadableField(path: value.path, detail: "unexpected type") }
        object = value
        do throws(JSONMemberError) {
            members = try value.members(Field.keys)
        } catch {
            guard case .duplicate(let name) = error else {
                throw .unreadableField(path: value.path, detail: "unreadable")
            }
            throw .unreadableField(path: Self.join(value.path, name), detail: "given twice")
        }
    }

    /// The member's value; nil when absent or `null`.
    subscript(_ field: Field) -> JSONValue? { members[field.rawValue] }

    private static func join(_ path: String, _ name: String) -> String { path.isEmpty ? name : path + "." + name }

    private func failure(_ field: Field, _ detail: String) -> AppleAnswerError {
        .unreadableField(path: Self.join(object.path, field.key), detail: detail)
    }

    /// A string field that may arrive as a JSON string, number or boolean.
    func string(_ field: Field) throws(AppleAnswerError) -> String? {
        guard let value = self[field] else { return nil }
        switch value.kind {
        case .string:
            guard let string = value.string else { throw failure(field, "not UTF-8") }
            return string
        case .number:
            if let integer = value.integer { return String(integer) }
            guard let double = value.numberText.flatMap(Double.init), double.isFinite else {
                throw failure(field, "a number out of range")
            }
            return String(double)
        case .true: return "true"
        case .false: return "false"
        case .object, .array, .null: throw failure(field, "unexpected type")
        }
    }

    /// A flag sent as "true"/"false", "1"/"0", a JSON boolean or a JSON integer.
    func bool(_ field: Field) throws(AppleAnswerError) -> Bool? {
        guard let value = self[field] else { return nil }
        switch value.kind {
        case .true: return true
        case .false: return false
        case .number:
            guard let integer = value.integer else { throw failure(field, "Expected a boolean flag for \(field.key).") }
            return integer != 0
        case .string:
            switch value.string?.lowercased() {
            case "true", "1": return true
            case "false", "0", "": return false
            default: throw failure(field, "Expected a boolean flag for \(field.key).")
            }
        case .object, .array, .null: throw failure(field, "unexpected type")
        }
    }

    /// A date sent as a pair: `milliseconds` (`x_ms`, preferred, as Apple advises), or `text`
    /// (`x`) holding either milliseconds (iOS 6 answers) or `yyyy-MM-dd HH:mm:ss Etc/GMT`. A null
    /// `x_ms` falls back to `x`; an unreadable one fails (naming it) rather than guess.
    func date(_ milliseconds: Field, or text: Field) throws(AppleAnswerError) -> Date? {
        if let value = try string(milliseconds) {
            guard let date = AppleDateFormat.date(milliseconds: value), AppleDateFormat.plausible.contains(date) else {
                throw failure(
                    milliseconds, "Expected milliseconds since 1970, between 2000 and 2100, for \(milliseconds.key).")
            }
            return date
        }
        guard let value = try string(text) else { return nil }
        if let date = AppleDateFormat.date(milliseconds: value) ?? AppleDateFormat.date(gmt: value),
            AppleDateFormat.plausible.contains(date)
        {
            return date
        }
        throw failure(
            text,
            "Unreadable date for \(text.key) (milliseconds or yyyy-MM-dd HH:mm:ss Etc/GMT, between 2000 and 2100).")
    }

    /// An array of objects, each read by `read`; absent or `null` is empty.
    func array<Element>(_ field: Field, _ read: (JSONValue) throws(AppleAnswerError) -> Element)
        throws(AppleAnswerError) -> [Element]
    {
        guard let value = self[field] else { return [] }
        guard value.kind == .array else { throw failure(field, "unexpected type") }
        var result: [Element] = []
        for element in value.elements { result.append(try read(element)) }
        return result
    }
}

extension AppleField {
    static func makeKeys() -> JSONKeys { JSONKeys(allCases.map(\.key)) }
}
