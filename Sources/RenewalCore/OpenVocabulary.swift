/// A vocabulary of short stable names that stays open: stored data may hold a name a newer version of
/// the job wrote, so a value is any string and the known names are the conforming type's static
/// members. Written as string literals in code; shown and coded as the bare string.
public protocol OpenVocabulary: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral,
    CustomStringConvertible
where RawValue == String {
    init(rawValue: String)
}

extension OpenVocabulary {
    public init(stringLiteral value: String) {
        self.init(rawValue: value)
    }

    public var description: String { rawValue }
}
