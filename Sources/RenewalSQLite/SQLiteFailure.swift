import CSQLite
import Foundation
import RenewalStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A failed SQLite call, classified into the `SubscriptionStoreError` an operator can act on.
///
/// Every message names the database file and the fix. SQLite's own message names tables,
/// columns and constraints, never a bound value, so it is safe to quote.
struct SQLiteFailure: Sendable, Equatable {
    /// The (extended) result code.
    var code: Int32
    /// `sqlite3_errmsg` or `sqlite3_errstr`.
    var message: String
    /// `sqlite3_system_errno`: the OS error behind an I/O failure (EFBIG, ENOSPC, EACCES…), or 0.
    var systemError: Int32

    /// - `SQLITE_BUSY`/`SQLITE_LOCKED`: `.busy` (another process holds a write transaction).
    /// - `SQLITE_READONLY`, `SQLITE_PERM`, `SQLITE_CANTOPEN`, `SQLITE_AUTH`: `.unavailable` (fix
    ///   permissions or the path).
    /// - `SQLITE_FULL`, and `SQLITE_IOERR` caused by EFBIG/ENOSPC/EDQUOT: `.unavailable`, disk full.
    /// - other `SQLITE_IOERR`, `SQLITE_NOTADB`, `SQLITE_CORRUPT`: `.unavailable`.
    /// - anything else (constraints, SQL errors): `.query`.
    func error(path: String, action: String) -> SubscriptionStoreError {
        let file = "SQLite database \(path)"
        let reason = systemError != 0 ? "\(message); \(String(cString: strerror(systemError)))" : message
        switch code & 0xff {
        case SQLITE_BUSY, SQLITE_LOCKED:
            return .busy(
                "\(file) is locked by another process holding a write transaction (\(action), waited "
                    + "\(SQLiteDatabase.busyTimeoutMilliseconds / 1000) s: \(message)). End or commit that process's "
                    + "transaction (`fuser \(path)` shows who has it open) and run again.")
        case SQLITE_READONLY, SQLITE_PERM, SQLITE_AUTH:
            return .unavailable(
                "\(file) is read-only for this process (\(action): \(reason)). Make the file and its directory "
                    + "writable by the user running renewal (chown/chmod, or remount read-write), or point "
                    + "--database / RENEWAL_DATABASE at a writable copy.")
        case SQLITE_CANTOPEN:
            return .unavailable(
                "cannot open \(file) or its -wal/-shm files (\(action): \(reason)). Check that the path exists and "
                    + "that the file and its directory are readable and writable by the user running renewal.")
        case SQLITE_FULL:
            return diskFull(file, action: action, reason: reason)
        case SQLITE_IOERR where [EFBIG, ENOSPC, EDQUOT].contains(systemError):
            return diskFull(file, action: action, reason: reason)
        case SQLITE_IOERR where Self.growingCodes.contains(code):
            // SQLite's own errno is unreliable here (it reads the thread's errno after cleanup), so
            // look at what makes a write that grows a file fail: a file-size limit or a full disk.
            if let space = Self.spaceProblem(directory: (path as NSString).deletingLastPathComponent) {
                return diskFull(file, action: action, reason: "\(reason); \(space)")
            }
            return ioError(file, action: action, reason: reason)
        case SQLITE_IOERR:
            return ioError(file, action: action, reason: reason)
        case SQLITE_NOTADB, SQLITE_CORRUPT:
            return .unavailable(
                "\(file) is not a SQLite database or is damaged (\(action): \(message)). Check the path, or restore "
                    + "the file from a backup.")
        default:
            return .query("\(file), \(action): \(message)")
        }
    }

    /// Extended I/O codes of writes that may grow a file (the database, its -wal or its -shm).
    /// (Swift does not import these macros: `SQLITE_IOERR | (n << 8)`.)
    static let growingCodes: Set<Int32> = [3, 4, 6, 19, 21].reduce(into: []) { codes, n in
        codes.insert(SQLITE_IOERR | (n << 8))
    }
    // WRITE 3, FSYNC 4, TRUNCATE 6, SHMSIZE 19, SHMMAP 21

    /// "a file-size limit of N bytes applies (ulimit -f)" or "M bytes free on the disk", when
    /// either explains a failed write; nil otherwise.
    static func spaceProblem(directory: String) -> String? {
        var limit = rlimit()
        if Self.fileSizeLimit(&limit) == 0, limit.rlim_cur != rlim_t.max {
            return "a file-size limit of \(limit.rlim_cur) bytes applies (ulimit -f)"
        }
        var disk = statvfs()
        if statvfs(directory.isEmpty ? "." : directory, &disk) == 0 {
            let free = UInt64(disk.f_bavail) * UInt64(disk.f_frsize)
            if free < 8 * 1024 * 1024 { return "\(free) bytes free on the disk" }
        }
        return nil
    }

    private static func fileSizeLimit(_ limit: inout rlimit) -> Int32 {
        #if canImport(Glibc)
            getrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &limit)
        #else
            getrlimit(RLIMIT_FSIZE, &limit)
        #endif
    }

    private func ioError(_ file: String, action: String, reason: String) -> SubscriptionStoreError {
        .unavailable(
            """
            I/O error on \(file) (\(action): \(reason), code \(code)). Check the disk and the file system it is \
            on, then run again.
            """
        )
    }

    private func diskFull(_ file: String, action: String, reason: String) -> SubscriptionStoreError {
        .unavailable(
            "no space left to write \(file) (\(action): \(reason)): the disk is full or a file-size limit "
                + "(ulimit -f) was reached. Free space or raise the limit, then run again; the transaction in "
                + "progress was rolled back.")
    }
}
