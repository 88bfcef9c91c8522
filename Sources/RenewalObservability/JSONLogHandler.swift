import Foundation
import Logging
import RenewalCore

/// `--log-format`.
package enum LogFormat: String {
    case text
    case json
}

/// One JSON object per line on standard error: `timestamp` (RFC 3339 UTC), `level`, `message`,
/// `label`, `source` and `metadata` (an object of strings, arrays and objects as logged). Lines are
/// written whole with one `write` each, so concurrent entries never interleave.
package struct JSONLogHandler: LogHandler {
    package var logLevel: Logger.Level = .info
    package var metadata: Logger.Metadata = [:]
    package let label: String

    package init(label: String) {
        self.label = label
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        var object: [String: Any] = [
            "timestamp": Timestamp.string(Date()),
            "level": event.level.rawValue,
            "message": "\(event.message)",
            "label": label,
            "source": event.source,
        ]
        if !merged.isEmpty { object["metadata"] = merged.mapValues(Self.plain) }
        guard
            var line = try? JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return }
        line.append(0x0A)
        line.withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress else { return }
            var offset = 0
            while offset < bytes.count {
                let written = Foundation.write(STDERR_FILENO, base + offset, bytes.count - offset)
                if written <= 0 { return }
                offset += written
            }
        }
    }

    package static func plain(_ value: Logger.MetadataValue) -> Any {
        switch value {
        case .string(let text): return text
        case .stringConvertible(let value): return value.description
        case .array(let values): return values.map(plain)
        case .dictionary(let values): return values.mapValues(plain)
        }
    }
}
