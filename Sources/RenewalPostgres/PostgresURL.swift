import CLibPQ
import Foundation
import RenewalStorage

/// Helpers for `postgres://` / `postgresql://` URLs: recognising them, checking them with libpq's own
/// parser, and keeping their password out of every message.
public enum PostgresURL {
    /// Whether `text` is a PostgreSQL connection URL (`postgres://` or `postgresql://`, any case).
    public static func isPostgresURL(_ text: String) -> Bool {
        let lowered = text.lowercased()
        return lowered.hasPrefix("postgres://") || lowered.hasPrefix("postgresql://")
    }

    /// `url` with the password (in the user part or a `password=` parameter) replaced by `***`.
    public static func redacted(_ url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url }
        let rest = url[schemeEnd.upperBound...]
        let queryStart = rest.firstIndex(of: "?") ?? rest.endIndex
        var result = String(url[..<schemeEnd.upperBound])
        let beforeQuery = rest[..<queryStart]
        if let at = beforeQuery.lastIndex(of: "@") {
            let userInfo = beforeQuery[..<at]
            if let colon = userInfo.firstIndex(of: ":") {
                result += userInfo[..<colon] + ":***"
            } else {
                result += userInfo
            }
            result += beforeQuery[at...]
        } else {
            result += beforeQuery
        }
        guard queryStart < rest.endIndex else { return result }
        let query = rest[rest.index(after: queryStart)...]
        let parameters = query.split(separator: "&", omittingEmptySubsequences: false).map { parameter in
            let key = parameter.split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
            return key.lowercased() == "password" ? "\(key)=***" : String(parameter)
        }
        return result + "?" + parameters.joined(separator: "&")
    }

    /// What libpq's parser finds wrong with `url` ("invalid PostgreSQL URL <redacted>: <reason>"),
    /// or nil when it parses. Values libpq checks only when connecting (port, `sslmode`) are
    /// reported by `PostgresDatabase.init(url:)` instead.
    public static func problem(with url: String) -> String? {
        do {
            try validate(url)
            return nil
        } catch SubscriptionStoreError.unavailable(let detail) {
            return detail
        } catch {
            return "invalid PostgreSQL URL \(redacted(url))"
        }
    }

    /// Checks `url` with libpq's parser (`PQconninfoParse`) without connecting.
    ///
    /// - Returns: the password the URL itself holds (for scrubbing messages), if any.
    /// - Throws: `SubscriptionStoreError.unavailable("invalid PostgreSQL URL …")` with libpq's reason,
    ///   the URL redacted.
    @discardableResult
    static func validate(_ url: String) throws -> String? {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(url, &error) else {
            let reason = error.map { PostgresConnection.message($0) } ?? "out of memory"
            if let error { PQfreemem(error) }
            let scrubbed = scrub(scrub(reason, password: rawPassword(url)), password: decodedPassword(url))
            throw SubscriptionStoreError.unavailable("invalid PostgreSQL URL \(redacted(url)): \(scrubbed)")
        }
        defer { PQconninfoFree(options) }
        var option = options
        while let keyword = option.pointee.keyword {
            if String(cString: keyword) == "password", let value = option.pointee.val {
                return String(cString: value)
            }
            option += 1
        }
        return nil
    }

    /// `message` with every occurrence of `password` replaced by `***`.
    static func scrub(_ message: String, password: String?) -> String {
        guard let password, !password.isEmpty else { return message }
        return message.replacingOccurrences(of: password, with: "***")
    }

    /// The password as written in the URL's user part (possibly percent-encoded).
    private static func rawPassword(_ url: String) -> String? {
        guard let schemeEnd = url.range(of: "://") else { return nil }
        let rest = url[schemeEnd.upperBound...]
        let beforeQuery = rest[..<(rest.firstIndex(of: "?") ?? rest.endIndex)]
        guard let at = beforeQuery.lastIndex(of: "@") else { return nil }
        let userInfo = beforeQuery[..<at]
        guard let colon = userInfo.firstIndex(of: ":") else { return nil }
        return String(userInfo[userInfo.index(after: colon)...])
    }

    private static func decodedPassword(_ url: String) -> String? {
        rawPassword(url)?.removingPercentEncoding
    }
}
