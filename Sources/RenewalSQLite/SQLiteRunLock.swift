import Foundation
import RenewalStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// An exclusive (or shared) `flock` on a lock file next to the database. `flock` locks belong to the
/// open file, so two stores in one process exclude each other too, and the kernel drops the lock with
/// the process.
struct SQLiteRunLock: Sendable {
    private let descriptor: Int32

    /// Takes the lock without waiting and writes who holds it into the file.
    static func acquire(path: String, owner: String) throws -> SQLiteRunLock {
        try acquire(path: path, owner: owner) { .locked($0) }
    }

    /// Takes the lock on `path` without waiting: exclusively with an `owner`, whose holder is written
    /// into the file; shared without one (its holders write nothing). Another process's lock in the way
    /// throws `refusal` of the holder as the file describes it.
    static func acquire(
        path: String, owner: String?, refusal: (String) -> SubscriptionStoreError
    ) throws -> SQLiteRunLock {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, OwnerOnlyFile.mode)
        guard descriptor >= 0 else {
            throw SubscriptionStoreError.unavailable(
                "cannot open the run lock file \(path): \(errnoText()). Make the database's directory (or that file) "
                    + "writable by the user running renewal.")
        }
        guard flock(descriptor, (owner == nil ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0 else {
            let code = errno
            let holder = holderDescription(descriptor)
            close(descriptor)
            if code == EWOULDBLOCK { throw refusal(holder) }
            throw SubscriptionStoreError.unavailable("cannot lock \(path): \(String(cString: strerror(code)))")
        }
        guard let owner else { return SQLiteRunLock(descriptor: descriptor) }
        let since = ISO8601DateFormatter().string(from: Date())
        let text = "\(getpid())\n\(hostName())\n\(since)\n\(owner)\n"
        _ = ftruncate(descriptor, 0)
        _ = text.withCString { pwrite(descriptor, $0, strlen($0), 0) }
        return SQLiteRunLock(descriptor: descriptor)
    }

    /// Unlocks and closes the file (which stays, so its path is stable for the next run).
    func release() {
        _ = flock(descriptor, LOCK_UN)
        close(descriptor)
    }

    /// "held by pid N on HOST since T", from what the holder wrote.
    private static func holderDescription(_ descriptor: Int32) -> String {
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return "held by another process" }
        let lines = String(decoding: buffer.prefix(count), as: UTF8.self).split(separator: "\n").map(String.init)
        guard lines.count >= 3 else { return "held by another process" }
        return "held by pid \(lines[0]) on \(lines[1]) since \(lines[2])"
    }

    private static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "unknown-host" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func errnoText() -> String {
        String(cString: strerror(errno))
    }
}
