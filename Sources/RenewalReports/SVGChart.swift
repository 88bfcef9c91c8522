import Foundation
import RenewalCore
import RenewalStorage

/// Inline SVG charts with no script and no external resource.
enum SVGChart {
    static let palette = ["#2f6fb0", "#d9822b", "#3c9a5f", "#b8473f", "#7a5aa6", "#8c6d3f", "#c75d9d", "#6b7781"]

    /// Horizontal bars, one per label, longest first as given.
    static func bars(id: String, _ rows: [(label: String, value: Int)]) -> String {
        let labelWidth = 190.0, barWidth = 520.0, rowHeight = 24.0
        let height = max(1, Double(rows.count)) * rowHeight + 10
        let maximum = Double(max(1, rows.map(\.value).max() ?? 1))
        var svg =
            """
            <svg class=\"chart\" id=\"\(id)\" xmlns=\"http://www.w3.org/2000/svg\" \
            width=\"\(Int(labelWidth + barWidth + 70))\" height=\"\(Int(height))\" role=\"img\" \
            aria-label=\"\(id)\">\n
            """
        if rows.isEmpty {
            svg += "<text x=\"4\" y=\"18\">nothing to draw</text>\n"
        }
        for (index, row) in rows.enumerated() {
            let y = Double(index) * rowHeight + 4
            let width = max(2, barWidth * Double(row.value) / maximum)
            svg +=
                """
                <text x=\"\(Int(labelWidth - 8))\" y=\"\(Int(y + 15))\" \
                text-anchor=\"end\">\(HTMLPage.escape(row.label))</text>
                """
            svg +=
                """
                <rect class=\"mark\" x=\"\(Int(labelWidth))\" y=\"\(Int(y))\" \
                width=\"\(String(format: "%.1f", width))\" height=\"\(Int(rowHeight - 6))\" \
                fill=\"\(palette[0])\"><title>\(HTMLPage.escape(row.label)): \(row.value)</title></rect>
                """
            svg +=
                """
                <text x=\"\(String(format: "%.1f", labelWidth + width + 6))\" \
                y=\"\(Int(y + 15))\">\(row.value)</text>\n
                """
        }
        return svg + "</svg>\n"
    }

    /// One line per series over the x labels, with a legend.
    static func lines(id: String, series: [(name: String, values: [Int])], xLabels: [String]) -> String {
        let width = 860.0, height = 260.0, left = 50.0, right = 290.0, top = 12.0, bottom = 30.0
        let plotWidth = width - left - right, plotHeight = height - top - bottom
        let maximum = Double(max(1, series.flatMap(\.values).max() ?? 1))
        var svg =
            """
            <svg class=\"chart\" id=\"\(id)\" xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" \
            height=\"\(Int(height))\" role=\"img\" aria-label=\"\(id)\">\n
            """
        svg +=
            """
            <line x1=\"\(Int(left))\" y1=\"\(Int(top + plotHeight))\" x2=\"\(Int(left + plotWidth))\" \
            y2=\"\(Int(top + plotHeight))\" stroke=\"#8a939c\"/>
            """
        svg +=
            """
            <line x1=\"\(Int(left))\" y1=\"\(Int(top))\" x2=\"\(Int(left))\" y2=\"\(Int(top + plotHeight))\" \
            stroke=\"#8a939c\"/>\n
            """
        svg += "<text x=\"\(Int(left - 6))\" y=\"\(Int(top + 10))\" text-anchor=\"end\">\(Int(maximum))</text>"
        svg += "<text x=\"\(Int(left - 6))\" y=\"\(Int(top + plotHeight))\" text-anchor=\"end\">0</text>\n"
        if let first = xLabels.first {
            svg +=
                """
                <text x=\"\(Int(left))\" \
                y=\"\(Int(height - 8))\">\(HTMLPage.escape(String(first.prefix(10))))</text>
                """
        }
        if xLabels.count > 1, let last = xLabels.last {
            svg +=
                """
                <text x=\"\(Int(left + plotWidth))\" y=\"\(Int(height - 8))\" \
                text-anchor=\"end\">\(HTMLPage.escape(String(last.prefix(10))))</text>\n
                """
        }
        if series.isEmpty { svg += "<text x=\"\(Int(left + 10))\" y=\"\(Int(top + 20))\">nothing to draw</text>\n" }
        let step = xLabels.count > 1 ? plotWidth / Double(xLabels.count - 1) : 0
        for (index, line) in series.prefix(palette.count).enumerated() {
            let color = palette[index % palette.count]
            let points = line.values.enumerated().map { position, value in
                let x = left + (xLabels.count > 1 ? Double(position) * step : plotWidth / 2)
                let y = top + plotHeight - plotHeight * Double(value) / maximum
                return String(format: "%.1f,%.1f", x, y)
            }
            svg +=
                "<polyline class=\"mark\" fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\" "
                + "points=\"\(points.joined(separator: " "))\">"
                + "<title>\(HTMLPage.escape(line.name))</title></polyline>"
            for point in points where line.values.count == 1 {
                let xy = point.split(separator: ",")
                svg += "<circle cx=\"\(xy[0])\" cy=\"\(xy[1])\" r=\"3\" fill=\"\(color)\"/>"
            }
            let legendY = top + 14 + Double(index) * 18
            svg +=
                """
                <rect x=\"\(Int(width - right + 12))\" y=\"\(Int(legendY - 9))\" width=\"10\" height=\"10\" \
                fill=\"\(color)\"/>
                """
            svg +=
                "<text x=\"\(Int(width - right + 28))\" y=\"\(Int(legendY))\">"
                + HTMLPage.escape(line.name.count > 36 ? "…" + line.name.suffix(35) : line.name)
                + " (\(line.values.last ?? 0))</text>\n"
        }
        return svg + "</svg>\n"
    }
}

extension SVGChart {
    /// Stacked bars per x label around a zero line: each series' positive values stack up from it and
    /// negative ones down (MRR gained and lost each day), with a legend; `net`, when given, is drawn as a
    /// line through each label's value with a dot at each (the day's net, which the stacks do not show).
    static func divergingBars(
        id: String, series: [(name: String, values: [Double])], xLabels: [String], net: [Double]? = nil
    ) -> String {
        let width = 860.0, height = 280.0, left = 60.0, right = 250.0, top = 12.0, bottom = 30.0
        let plotWidth = width - left - right, plotHeight = height - top - bottom
        let indices = xLabels.indices
        let ups = indices.map { i in series.reduce(0.0) { $0 + max(0, $1.values[safe: i] ?? 0) } }
        let downs = indices.map { i in series.reduce(0.0) { $0 + min(0, $1.values[safe: i] ?? 0) } }
        let high = max(ups.max() ?? 0, net?.max() ?? 0, 1), low = min(downs.min() ?? 0, net?.min() ?? 0, 0)
        let scale = plotHeight / (high - low)
        let zero = top + high * scale
        func y(_ value: Double) -> String { String(format: "%.1f", zero - value * scale) }
        var svg =
            """
            <svg class=\"chart\" id=\"\(id)\" xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" \
            height=\"\(Int(height))\" role=\"img\" aria-label=\"\(id)\">\n
            """
        svg +=
            "<line x1=\"\(Int(left))\" y1=\"\(y(0))\" x2=\"\(Int(left + plotWidth))\" y2=\"\(y(0))\" stroke=\"#8a939c\"/>"
        svg += "<text x=\"\(Int(left - 6))\" y=\"\(Int(top + 10))\" text-anchor=\"end\">\(Int(high.rounded()))</text>"
        svg += "<text x=\"\(Int(left - 6))\" y=\"\(y(0))\" text-anchor=\"end\">0</text>"
        if low < 0 {
            svg +=
                "<text x=\"\(Int(left - 6))\" y=\"\(Int(top + plotHeight))\" text-anchor=\"end\">\(Int(low.rounded()))</text>"
        }
        if let first = xLabels.first {
            svg += "<text x=\"\(Int(left))\" y=\"\(Int(height - 8))\">\(HTMLPage.escape(first))</text>"
        }
        if xLabels.count > 1, let last = xLabels.last {
            svg +=
                "<text x=\"\(Int(left + plotWidth))\" y=\"\(Int(height - 8))\" text-anchor=\"end\">"
                + "\(HTMLPage.escape(last))</text>"
        }
        svg += "\n"
        if xLabels.isEmpty { svg += "<text x=\"\(Int(left + 10))\" y=\"\(Int(top + 20))\">nothing to draw</text>\n" }
        let slot = plotWidth / Double(max(xLabels.count, 1))
        let barWidth = max(1, slot * 0.7)
        for (i, label) in xLabels.enumerated() {
            var up = 0.0, down = 0.0
            let x = String(format: "%.1f", left + Double(i) * slot + (slot - barWidth) / 2)
            for (index, line) in series.prefix(palette.count).enumerated() {
                let value = line.values[safe: i] ?? 0
                guard value != 0 else { continue }
                let from = value > 0 ? up : down
                let to = from + value
                if value > 0 { up = to } else { down = to }
                let rectTop = zero - max(from, to) * scale
                svg +=
                    "<rect class=\"mark\" x=\"\(x)\" y=\"\(String(format: "%.1f", rectTop))\" "
                    + "width=\"\(String(format: "%.1f", barWidth))\" "
                    + "height=\"\(String(format: "%.1f", max(0.5, abs(value) * scale)))\" fill=\"\(palette[index])\">"
                    + "<title>\(HTMLPage.escape(label)) \(HTMLPage.escape(line.name)): "
                    + "\(String(format: "%.2f", value))</title></rect>"
            }
        }
        for (index, line) in series.prefix(palette.count).enumerated() {
            let legendY = top + 14 + Double(index) * 18
            svg +=
                "<rect x=\"\(Int(width - right + 12))\" y=\"\(Int(legendY - 9))\" width=\"10\" height=\"10\" "
                + "fill=\"\(palette[index])\"/><text x=\"\(Int(width - right + 28))\" y=\"\(Int(legendY))\">"
                + "\(HTMLPage.escape(line.name)) (\(String(format: "%.2f", line.values.reduce(0, +))))</text>\n"
        }
        if let net, !xLabels.isEmpty {
            let xs = xLabels.indices.map { left + (Double($0) + 0.5) * slot }
            let legend = (x: width - right + 12, y: top + 14 + Double(min(series.count, palette.count)) * 18)
            svg += netLine(net, xs: xs, labels: xLabels, y: { zero - $0 * scale }, legend: legend)
        }
        return svg + "</svg>\n"
    }
}

extension SVGChart {
    /// The net of each label as a dark line with a dot per label (its value in the dot's title), and its
    /// legend entry at `legend`.
    fileprivate static func netLine(
        _ values: [Double], xs: [Double], labels: [String], y: (Double) -> Double, legend: (x: Double, y: Double)
    ) -> String {
        let color = "#1f2328"
        let points = zip(xs, values).map { String(format: "%.1f,%.1f", $0, y($1)) }
        var svg =
            "<polyline class=\"mark net\" fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\" "
            + "points=\"\(points.joined(separator: " "))\"><title>net</title></polyline>"
        for (index, (x, value)) in zip(xs, values).enumerated() {
            svg +=
                "<circle cx=\"\(String(format: "%.1f", x))\" cy=\"\(String(format: "%.1f", y(value)))\" r=\"2.5\" "
                + "fill=\"\(color)\"><title>\(HTMLPage.escape(labels[safe: index] ?? "")) net: "
                + "\(String(format: "%.2f", value))</title></circle>"
        }
        return svg
            + "<rect x=\"\(Int(legend.x))\" y=\"\(Int(legend.y - 5))\" width=\"10\" height=\"2\" fill=\"\(color)\"/>"
            + "<text x=\"\(Int(legend.x + 16))\" y=\"\(Int(legend.y))\">net "
            + "(\(String(format: "%.2f", values.reduce(0, +))))</text>\n"
    }
}

extension Array {
    fileprivate subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
