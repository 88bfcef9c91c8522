#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A file-size limit (`ulimit -f`, a container's limit) must not kill the job mid-write.
enum FileSizeLimit {
    /// Ignores SIGXFSZ, whose default action kills the process (with a core dump) when a write
    /// passes `RLIMIT_FSIZE`. Ignored, the write fails with EFBIG instead: SQLite reports it, the
    /// transaction rolls back, and the run exits with a message naming the database. Idempotent;
    /// called before any database or report file is opened.
    static func ignoreSignal() {
        _ = signal(SIGXFSZ, SIG_IGN)
    }
}
