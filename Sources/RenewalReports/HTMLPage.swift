import Foundation
import RenewalCore

/// What every HTML page the job writes shares: escaping, table cells and rows, the head with its inline
/// style, and the closing script that records how a browser laid the page out.
enum HTMLPage {
    static func escape(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.count)
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&#39;"
            default: result.append(character)
            }
        }
        return result
    }

    /// One cell of a table on the page.
    enum Cell {
        /// Text, escaped; a whole number is right-aligned.
        case text(String)
        /// A figure such as an amount, escaped and right-aligned.
        case number(String)
        /// A time as a reader writes it (`2026-11-24 01:22 UTC`) on one line, the exact RFC 3339 value
        /// in its `datetime` and `title` (shown on hover); empty for nil.
        case time(Date?)

        var html: String {
            switch self {
            case .text(let text):
                return Int(text) != nil ? "<td class=\"n\">\(text)</td>" : "<td>\(HTMLPage.escape(text))</td>"
            case .number(let text):
                return "<td class=\"n\">\(HTMLPage.escape(text))</td>"
            case .time(let date):
                guard let date else { return "<td></td>" }
                let exact = Timestamp.string(date)
                return "<td><time datetime=\"\(exact)\" title=\"\(exact)\">\(HTMLPage.readable(date))</time></td>"
            }
        }
    }

    /// `2026-11-24 01:22 UTC`: to the minute, in UTC, as the page shows times.
    static func readable(_ date: Date) -> String {
        let exact = Timestamp.string(date)
        return exact.prefix(10) + " " + exact.dropFirst(11).prefix(5) + " UTC"
    }

    static func row(_ cells: [Cell]) -> String {
        "<tr>" + cells.map(\.html).joined() + "</tr>\n"
    }

    static func table(_ header: [String], _ rows: [[Cell]]) -> String {
        guard !rows.isEmpty else { return "<p class=\"note\">None.</p>\n" }
        var html = "<table><thead><tr>" + header.map { "<th>\(escape($0))</th>" }.joined() + "</tr></thead><tbody>\n"
        for row in rows { html += Self.row(row) }
        return html + "</tbody></table>\n"
    }

    static func head(title: String) -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(escape(title))</title>
        <style>
        body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto; max-width: 1100px; padding: 0 16px; color: #1d232a; }
        h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 32px; }
        .cards { display: flex; flex-wrap: wrap; gap: 12px; }
        .card { border: 1px solid #d8dde3; border-radius: 6px; padding: 8px 14px; min-width: 110px; }
        .card span { display: block; color: #5b6570; font-size: 12px; } .card strong { font-size: 18px; }
        table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
        th, td { border-bottom: 1px solid #e3e7eb; padding: 3px 10px; text-align: left; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
        svg.chart { display: block; margin: 8px 0; } .note { color: #5b6570; } time { white-space: nowrap; }
        svg text { font: 12px system-ui, sans-serif; fill: #1d232a; }
        </style></head><body>

        """
    }

    /// The closing script records what each chart drew (size and marks) in `data-charts`, and how
    /// many of the times shown broke over more than one line in `data-times`, so a headless browser's
    /// DOM dump shows the page laid out as meant; the page works without it.
    static let tail = """
        <script>
        (function () {
          var charts = Array.prototype.map.call(document.querySelectorAll('svg.chart'), function (svg) {
            var box = svg.getBoundingClientRect();
            return { id: svg.id, width: Math.round(box.width), height: Math.round(box.height), marks: svg.querySelectorAll('.mark').length };
          });
          document.body.setAttribute('data-charts', JSON.stringify(charts));
          var times = document.querySelectorAll('time');
          var wrapped = Array.prototype.filter.call(times, function (time) { return time.getClientRects().length > 1; }).length;
          document.body.setAttribute('data-times', JSON.stringify({ shown: times.length, wrapped: wrapped }));
        })();
        </script>
        </body></html>

        """
}
