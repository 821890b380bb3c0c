// The drawing code of the report's SVG charts, written by hand (no plotting library): a canvas
// of SVG elements, value axes (log decades or linear steps), a legend, a log–log line chart and
// a grouped horizontal bar chart. Report.swift says what each chart shows.

import Foundation

/// A coordinate or length as the charts write it: one decimal.
func coordinate(_ v: Double) -> String { String(format: "%.1f", v) }

/// `text` made safe inside SVG character data and attribute values.
func escapeXML(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
        .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
}

/// A chart's SVG document under construction: a white page with a bold title, then elements in
/// the order they are drawn (later ones on top).
struct SVGCanvas {
    let width: Double
    let height: Double
    private var body: String

    init(width: Double, height: Double, title: String, titleCenter: Double) {
        self.width = width
        self.height = height
        body = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" viewBox="0 0 \(Int(width)) \(Int(height))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <text x="\(coordinate(titleCenter))" y="24" text-anchor="middle" font-size="15" font-weight="bold">\(escapeXML(title))</text>

            """
    }

    /// The finished document.
    var svg: String { body + "</svg>\n" }

    mutating func line(
        _ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double, stroke: String, width: Double? = nil,
        dash: String? = nil
    ) {
        body +=
            "<line x1=\"\(coordinate(x1))\" y1=\"\(coordinate(y1))\" x2=\"\(coordinate(x2))\" y2=\"\(coordinate(y2))\" stroke=\"\(stroke)\""
            + (width.map { " stroke-width=\"\($0)\"" } ?? "") + (dash.map { " stroke-dasharray=\"\($0)\"" } ?? "")
            + "/>\n"
    }

    /// Text at (x, y), its baseline at y. `halo` draws a white outline under the glyphs so that
    /// a value label stays legible where a line or gridline crosses it.
    mutating func text(
        _ text: String, x: Double, y: Double, anchor: String? = nil, size: Double? = nil, fill: String? = nil,
        bold: Bool = false, halo: Bool = false
    ) {
        body +=
            "<text x=\"\(coordinate(x))\" y=\"\(coordinate(y))\""
            + (anchor.map { " text-anchor=\"\($0)\"" } ?? "")
            + (fill.map { " fill=\"\($0)\"" } ?? "")
            + (size.map { " font-size=\"\(Int($0))\"" } ?? "")
            + (bold ? " font-weight=\"bold\"" : "")
            + (halo ? " stroke=\"white\" stroke-width=\"3\" stroke-linejoin=\"round\" paint-order=\"stroke\"" : "")
            + ">\(escapeXML(text))</text>\n"
    }

    /// Text rotated a quarter turn counter-clockwise, centred on (x, y): a vertical axis title.
    mutating func verticalText(_ text: String, x: Double, y: Double) {
        body +=
            "<text transform=\"translate(\(coordinate(x)) \(coordinate(y))) rotate(-90)\" text-anchor=\"middle\">\(escapeXML(text))</text>\n"
    }

    mutating func rect(
        x: Double, y: Double, width: Double, height: Double, fill: String, fillOpacity: Double? = nil,
        stroke: String? = nil
    ) {
        body +=
            "<rect x=\"\(coordinate(x))\" y=\"\(coordinate(y))\" width=\"\(coordinate(width))\" height=\"\(coordinate(height))\" fill=\"\(fill)\""
            + (fillOpacity.map { " fill-opacity=\"\($0)\"" } ?? "") + (stroke.map { " stroke=\"\($0)\"" } ?? "")
            + "/>\n"
    }

    mutating func polyline(_ points: [(x: Double, y: Double)], stroke: String, width: Double, dash: String?) {
        body +=
            "<polyline fill=\"none\" stroke=\"\(stroke)\" stroke-width=\"\(width)\""
            + (dash.map { " stroke-dasharray=\"\($0)\"" } ?? "")
            + " points=\"\(points.map { "\(coordinate($0.x)),\(coordinate($0.y))" }.joined(separator: " "))\"/>\n"
    }

    mutating func circle(x: Double, y: Double, radius: Double, fill: String) {
        body += "<circle cx=\"\(coordinate(x))\" cy=\"\(coordinate(y))\" r=\"\(Int(radius))\" fill=\"\(fill)\"/>\n"
    }

    /// The plot's frame and its two axis titles: the horizontal one centred under the plot, the
    /// vertical one rotated along its left edge.
    mutating func frame(_ plot: PlotArea, xTitle: String, yTitle: String?) {
        rect(x: plot.left, y: plot.top, width: plot.width, height: plot.height, fill: "none", stroke: "#333")
        text(xTitle, x: plot.left + plot.width / 2, y: height - 18, anchor: "middle")
        if let yTitle { verticalText(yTitle, x: 20, y: plot.top + plot.height / 2) }
    }

    /// One legend entry per row from (x, y) down, each a sample (a line, or a bar's swatch) and
    /// its title; returns the y below the last row.
    mutating func legend(_ entries: [LegendEntry], x: Double, y: Double) -> Double {
        var y = y
        for entry in entries {
            switch entry.sample {
            case .line(let color, let dash):
                line(x, y, x + 24, y, stroke: color, width: 2.5, dash: dash)
            case .swatch(let color, let opacity):
                rect(x: x, y: y - 6, width: 24, height: 12, fill: color, fillOpacity: opacity, stroke: color)
            }
            text(entry.title, x: x + 30, y: y + 4)
            y += 22
        }
        return y
    }

    /// Small grey lines of explanation, one under the other from (x, y).
    mutating func notes(_ lines: [String], x: Double, y: Double) {
        for (i, line) in lines.enumerated() {
            text(line, x: x, y: y + Double(i) * 15, size: 10, fill: "#555")
        }
    }
}

/// A legend row: what the sample looks like, and its title.
struct LegendEntry {
    enum Sample {
        /// A line of this colour and dash pattern (`nil`: solid).
        case line(color: String, dash: String?)
        /// A filled box, as a bar of that colour and opacity is drawn.
        case swatch(color: String, opacity: Double)
    }
    let sample: Sample
    let title: String
}

/// The rectangle the data is drawn in, in canvas pixels.
struct PlotArea {
    let left: Double
    let top: Double
    let width: Double
    let height: Double
    var right: Double { left + width }
    var bottom: Double { top + height }
}

/// A value axis: the range it shows, where a value falls in it (0 at its low end, 1 at its high
/// end), and its gridlines: labelled major ones and unlabelled minor ones.
struct ValueAxis {
    enum Scale { case log, linear }
    let scale: Scale
    /// The ends of the axis: values for a linear axis, exponents of 10 for a log axis.
    let lower: Double
    let upper: Double
    /// Major gridlines, labelled.
    let major: [Double]
    /// Minor gridlines, lighter and unlabelled.
    let minor: [Double]

    /// Whole decades from the one below the smallest value to the one above the largest (at
    /// least one decade), with minor lines at 2× and 5× each decade; `nil` without a positive value.
    static func log(covering values: [Double]) -> ValueAxis? {
        let positive = values.filter { $0 > 0 && $0.isFinite }
        guard let lo = positive.min(), let hi = positive.max() else { return nil }
        let lower = floor(log10(lo)), upper = max(lower + 1, ceil(log10(hi)))
        let decades = (Int(lower)...Int(upper)).map { pow(10, Double($0)) }
        return ValueAxis(
            scale: .log, lower: lower, upper: upper, major: decades,
            minor: decades.dropLast().flatMap { [$0 * 2, $0 * 5] })
    }

    /// From 0 to the first multiple of a round step (1, 2 or 5 × 10^k, at most eight steps)
    /// at or above the largest value; `nil` without a positive value.
    static func linear(covering values: [Double]) -> ValueAxis? {
        guard let hi = values.filter({ $0.isFinite }).max(), hi > 0 else { return nil }
        let magnitude = pow(10, floor(log10(hi / 5)))
        let step = [1.0, 2, 5, 10].map { $0 * magnitude }.first { hi / $0 <= 8 } ?? 10 * magnitude
        let steps = Int((hi / step).rounded(.up))
        return ValueAxis(
            scale: .linear, lower: 0, upper: Double(steps) * step, major: (0...steps).map { Double($0) * step },
            minor: [])
    }

    /// Where `v` falls along the axis, 0 at its low end and 1 at its high end.
    func fraction(_ v: Double) -> Double {
        switch scale {
        case .log: return (log10(v) - lower) / (upper - lower)
        case .linear: return (v - lower) / (upper - lower)
        }
    }
}

/// The baselines of value labels at one x once labels that would overlap are moved apart.
///
/// `wanted` are the baselines the labels would have (any order). Labels keep their order; labels
/// closer than `spacing` form a run `spacing` apart centred on their wanted baselines' mean,
/// kept within `minimum...maximum` where there is room.
func spreadLabels(_ wanted: [Double], spacing: Double, minimum: Double, maximum: Double) -> [Double] {
    let order = wanted.indices.sorted { wanted[$0] < wanted[$1] }
    /// A run of labels: its first baseline, how many, and the sum of their wanted baselines.
    var runs: [(first: Double, count: Int, sum: Double)] = []
    func placed(_ count: Int, _ sum: Double) -> Double {
        let centred = sum / Double(count) - Double(count - 1) * spacing / 2
        return max(minimum, min(centred, maximum - Double(count - 1) * spacing))
    }
    for index in order {
        var run = (first: placed(1, wanted[index]), count: 1, sum: wanted[index])
        while let previous = runs.last, run.first < previous.first + Double(previous.count) * spacing {
            runs.removeLast()
            let count = previous.count + run.count, sum = previous.sum + run.sum
            run = (first: placed(count, sum), count: count, sum: sum)
        }
        runs.append(run)
    }
    var result = wanted
    var rank = 0
    for run in runs {
        for k in 0..<run.count {
            result[order[rank]] = run.first + Double(k) * spacing
            rank += 1
        }
    }
    return result
}

/// One line of a ``LogLogChart``: its legend title, colour, dash pattern (`nil`: solid) and
/// points (x, y), both positive.
struct LineSeries {
    let title: String
    let color: String
    let dash: String?
    let points: [(x: Double, y: Double)]
}

/// A line chart with log scales on both axes: decades as major gridlines, every point marked
/// and labelled with its value, the legend and notes to the right of the plot.
struct LogLogChart {
    var title: String
    var xTitle: String
    var yTitle: String
    var series: [LineSeries]
    /// Lines of small print under the legend.
    var notes: [String]
    /// The label of a decade on the x axis.
    var xLabel: (Double) -> String
    /// The label of a decade on the y axis and of every point.
    var yLabel: (Double) -> String

    /// The chart's SVG text; an empty 10 × 10 document when no series has a point.
    func svg() -> String {
        let points = series.flatMap(\.points).filter { $0.x > 0 && $0.y > 0 }
        guard let xAxis = ValueAxis.log(covering: points.map(\.x)), let yAxis = ValueAxis.log(covering: points.map(\.y))
        else {
            return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\"/>\n"
        }
        // Room right of the plot for the value labels of points on its right edge, then the legend.
        let plot = PlotArea(left: 80, top: 50, width: 450, height: 350)
        let legendX = plot.right + 72
        var canvas = SVGCanvas(
            width: legendX + 250, height: plot.bottom + 60, title: title, titleCenter: plot.left + plot.width / 2)
        func x(_ v: Double) -> Double { plot.left + xAxis.fraction(v) * plot.width }
        func y(_ v: Double) -> Double { plot.bottom - yAxis.fraction(v) * plot.height }
        for v in yAxis.minor { canvas.line(plot.left, y(v), plot.right, y(v), stroke: "#eee") }
        for v in yAxis.major {
            canvas.line(plot.left, y(v), plot.right, y(v), stroke: "#ccc")
            canvas.text(yLabel(v), x: plot.left - 8, y: y(v) + 4, anchor: "end")
        }
        for v in xAxis.major {
            canvas.line(x(v), plot.top, x(v), plot.bottom, stroke: "#ccc")
            canvas.text(xLabel(v), x: x(v), y: plot.bottom + 18, anchor: "middle")
        }
        canvas.frame(plot, xTitle: xTitle, yTitle: yTitle)
        let drawn = series.map { s in (s, s.points.filter { $0.x > 0 && $0.y > 0 }) }.filter { !$0.1.isEmpty }
        for (s, points) in drawn {
            canvas.polyline(points.map { (x: x($0.x), y: y($0.y)) }, stroke: s.color, width: 2.5, dash: s.dash)
            for p in points { canvas.circle(x: x(p.x), y: y(p.y), radius: 4, fill: s.color) }
        }
        // Value labels last, above every line, where their own line does not pass: right of
        // the last N's points (in the margin); elsewhere left of the point if a segment comes
        // in from the left, else right, and above the point if that segment runs below it,
        // else below. Labels at one x that would overlap are moved apart.
        let labels = drawn.flatMap { s, points in
            points.indices.map { i in
                // The neighbouring point a label must keep clear of: the previous one, or
                // for the first point the next.
                (
                    x: points[i].x, y: points[i].y, color: s.color,
                    neighbour: i > 0 ? points[i - 1] : i + 1 < points.count ? points[i + 1] : nil
                )
            }
        }
        let lastColumn = labels.map(\.x).max()
        for column in Set(labels.map(\.x)).sorted() {
            let here = labels.filter { $0.x == column }
            let placements: [(dx: Double, dy: Double, anchor: String?)] = here.map { label in
                guard column != lastColumn, let neighbour = label.neighbour else { return (7, 4, nil) }
                let above = neighbour.y <= label.y
                return neighbour.x < column ? (-7, above ? -7 : 16, "end") : (7, above ? -7 : 16, nil)
            }
            let baselines = spreadLabels(
                zip(here, placements).map { y($0.y) + $1.dy }, spacing: 13, minimum: plot.top + 12,
                maximum: plot.bottom - 4)
            for ((label, placement), baseline) in zip(zip(here, placements), baselines) {
                canvas.text(
                    yLabel(label.y), x: x(column) + placement.dx, y: baseline, anchor: placement.anchor, size: 11,
                    fill: label.color, halo: true)
            }
        }
        let below = canvas.legend(
            drawn.map { LegendEntry(sample: .line(color: $0.0.color, dash: $0.0.dash), title: $0.0.title) }, x: legendX,
            y: plot.top + 10)
        canvas.notes(notes, x: legendX, y: below + 20)
        return canvas.svg
    }
}

/// One bar of a ``BarChart``: its label left of the bar, its value, and the index of its style
/// in ``BarChart/styles``.
struct Bar {
    let label: String
    let value: Double
    let style: Int
}

/// Bars under a bold heading, all of one colour.
struct BarGroup {
    let title: String
    let color: String
    let bars: [Bar]
}

/// Horizontal bars in groups on a linear value axis from 0, each labelled left with its name and
/// right with its value; a legend of the bar styles (the opacity of the group's colour) and
/// notes to the right of the plot.
struct BarChart {
    var title: String
    var valueTitle: String
    var groups: [BarGroup]
    /// The legend title and fill opacity of each style.
    var styles: [(title: String, opacity: Double)]
    var notes: [String]
    /// The label at the end of a bar (gridlines are labelled with their round value).
    var valueLabel: (Double) -> String

    /// The chart's SVG text; an empty 10 × 10 document without a positive value.
    func svg() -> String {
        let groups = self.groups.map {
            BarGroup(title: $0.title, color: $0.color, bars: $0.bars.filter { $0.value.isFinite && $0.value >= 0 })
        }.filter { !$0.bars.isEmpty }
        guard let axis = ValueAxis.linear(covering: groups.flatMap { $0.bars.map(\.value) }) else {
            return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\"/>\n"
        }
        let heading = 24.0, pitch = 19.0, barHeight = 13.0
        let contentHeight = groups.reduce(0.0) { $0 + heading + Double($1.bars.count) * pitch } + 6
        // Bar labels right-aligned against the plot's left edge; room right of the plot for
        // the value of the longest bar, then the legend.
        let plot = PlotArea(left: 290, top: 50, width: 400, height: contentHeight)
        let legendX = plot.right + 60
        var canvas = SVGCanvas(
            width: legendX + 250, height: plot.bottom + 60, title: title, titleCenter: (legendX + 250) / 2)
        func x(_ v: Double) -> Double { plot.left + axis.fraction(v) * plot.width }
        for v in axis.major {
            canvas.line(x(v), plot.top, x(v), plot.bottom, stroke: "#ccc")
            canvas.text(String(format: "%g", v), x: x(v), y: plot.bottom + 18, anchor: "middle")
        }
        canvas.frame(plot, xTitle: valueTitle, yTitle: nil)
        var top = plot.top
        for group in groups {
            canvas.text(group.title, x: 12, y: top + heading - 7, fill: group.color, bold: true)
            top += heading
            for bar in group.bars {
                let opacity = styles.indices.contains(bar.style) ? styles[bar.style].opacity : 1
                canvas.text(bar.label, x: plot.left - 8, y: top + pitch / 2 + 4, anchor: "end")
                canvas.rect(
                    x: plot.left, y: top + (pitch - barHeight) / 2, width: max(1, x(bar.value) - plot.left),
                    height: barHeight, fill: group.color, fillOpacity: opacity, stroke: group.color)
                canvas.text(valueLabel(bar.value), x: x(bar.value) + 5, y: top + pitch / 2 + 4, size: 11, halo: true)
                top += pitch
            }
        }
        let below = canvas.legend(
            styles.map { LegendEntry(sample: .swatch(color: "#555", opacity: $0.opacity), title: $0.title) },
            x: legendX, y: plot.top + 10)
        canvas.notes(notes, x: legendX, y: below + 20)
        return canvas.svg
    }
}
