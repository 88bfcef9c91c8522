#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Files that hold customers' data (the SQLite database, reports, metrics) are created readable and
/// writable by their owner only: mode 0600, narrowed further by a stricter umask. An existing file keeps
/// the mode its operator gave it.
public enum OwnerOnlyFile {
    /// The mode new files get before the umask applies.
    public static let mode: mode_t = 0o600

    /// Creates `path` when it does not exist (owner-only); true when the file exists afterwards.
    /// With `truncate`, an existing file is emptied.
    @discardableResult
    public static func create(atPath path: String, truncate: Bool = false) -> Bool {
        let flags = O_WRONLY | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : 0)
        let descriptor = open(path, flags, mode)
        guard descriptor >= 0 else { return false }
        close(descriptor)
        return true
    }
}
