/// Aligned columns for the tables the commands print: each value padded to its column's width, and a
/// value as wide as its column or wider followed by one space so the next column still reads apart.
public enum TextColumns {
    public static func line(_ values: [String], widths: [Int]) -> String {
        zip(values, widths).map { value, width in
            value.count >= width ? value + " " : value + String(repeating: " ", count: width - value.count)
        }.joined()
    }
}
