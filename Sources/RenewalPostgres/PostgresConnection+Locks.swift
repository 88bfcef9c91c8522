import Foundation
import RenewalSQL
import RenewalStorage

/// The session-level advisory locks a connection holds: a worker's liveness lock, the named task
/// locks, and the lock that keeps writers and `renewal copy-database` apart. Each is keyed by the
/// schema as well, so deployments in separate schemas of one database never meet; each goes with
/// the session, so a killed holder frees it.
extension PostgresConnection {
    // MARK: - Worker liveness

    /// Takes `owner`'s liveness lock (a session-level advisory lock keyed by a 64-bit hash of the
    /// schema and the id, so deployments in separate schemas of one database never meet) and keeps it for the session's
    /// life, taking it again after a reconnect.
    ///
    /// - Throws: `SubscriptionStoreError.locked` when another session holds it (the id is in use).
    func holdLiveness(of owner: String) throws {
        guard try tryLock(owner) else {
            throw SubscriptionStoreError.locked("worker id \(owner) is in use by another live session")
        }
        livenessOwner = owner
    }

    /// Releases the liveness lock taken by `holdLiveness(of:)`.
    func releaseLiveness() {
        guard let owner = livenessOwner else { return }
        livenessOwner = nil
        unlock(owner)
    }

    /// Whether some session holds `owner`'s liveness lock. The probe takes the lock when it is free
    /// and gives it straight back; a dead worker's session is gone, and its lock with it.
    func livenessIsHeld(by owner: String) throws -> Bool {
        guard try tryLock(owner) else { return true }
        unlock(owner)
        return false
    }

    /// Takes the session-level advisory lock keyed by the schema and `name`, if no session holds it.
    func tryLock(_ name: String) throws -> Bool {
        let rows = try execute(
            "SELECT pg_try_advisory_lock(hashtextextended(current_schema() || '/' || $1, 0)) AS taken", [.text(name)])
        return rows.first?["taken"] == .int64(1)
    }

    /// Gives back the lock `tryLock(_:)` took (a lost session has given it back already).
    func unlock(_ name: String) {
        _ = try? execute("SELECT pg_advisory_unlock(hashtextextended(current_schema() || '/' || $1, 0))", [.text(name)])
    }

    // MARK: - Writers and copies

    /// The name of the lock every writer holds shared and `renewal copy-database` exclusively.
    static let copyLockName = "renewal.copy-database"

    /// Takes the writers' lock shared (with every other writer) for this session.
    ///
    /// - Throws: `SubscriptionStoreError.copying` while `renewal copy-database` holds it exclusively.
    func holdWriterLock() throws {
        guard try tryLockShared(Self.copyLockName) else {
            let holder = (try? copyHolder()) ?? "held by another session"
            throw SubscriptionStoreError.copying("PostgreSQL session \(holder)")
        }
        writerLocks += 1
    }

    /// Gives back one hold taken by `holdWriterLock()`.
    func releaseWriterLock() {
        guard writerLocks > 0 else { return }
        writerLocks -= 1
        _ = try? execute(
            "SELECT pg_advisory_unlock_shared(hashtextextended(current_schema() || '/' || $1, 0))",
            [.text(Self.copyLockName)])
    }

    /// Takes the writers' lock exclusively (`renewal copy-database`), if no session holds it at all.
    func tryCopyLock() throws -> Bool {
        try tryLock(Self.copyLockName)
    }

    /// Gives back the lock `tryCopyLock()` took.
    func releaseCopyLock() {
        unlock(Self.copyLockName)
    }

    /// After a reconnect: the old session's shared holds went with it. A copy that began meanwhile
    /// keeps this session from writing: the connection stays broken (each use tries again) until the
    /// copy ends, so nothing is written behind the copy's back.
    func takeBackWriterLocks() throws {
        let holds = writerLocks
        writerLocks = 0
        for _ in 0..<holds {
            do {
                try holdWriterLock()
            } catch {
                while writerLocks > 0 { releaseWriterLock() }
                writerLocks = holds
                isBroken = true
                throw error
            }
        }
    }

    /// After a reconnect: takes back the liveness lock the old session held. A probe holds it for an
    /// instant at most.
    func takeBackLiveness() throws {
        guard let owner = livenessOwner else { return }
        var taken = try tryLock(owner)
        for _ in 0..<20 where !taken {
            usleep(50_000)
            taken = try tryLock(owner)
        }
        guard taken else {
            livenessOwner = nil
            throw lostConnection(detail: "could not take back this worker's liveness lock after reconnecting")
        }
    }

    /// Takes the shared session-level advisory lock keyed by the schema and `name`, unless a session
    /// holds it exclusively.
    private func tryLockShared(_ name: String) throws -> Bool {
        let rows = try execute(
            "SELECT pg_try_advisory_lock_shared(hashtextextended(current_schema() || '/' || $1, 0)) AS taken",
            [.text(name)])
        return rows.first?["taken"] == .int64(1)
    }

    /// The pid, client address and start of the session that holds the copy's lock, for messages.
    private func copyHolder() throws -> String {
        let rows = try execute(
            """
            SELECT 'pid ' || a.pid || ' from ' || COALESCE(host(a.client_addr), 'a local socket') || ' since '
                || to_char(a.backend_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS holder
            FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE l.locktype = 'advisory' AND l.granted AND l.mode = 'ExclusiveLock' AND l.objsubid = 1
                AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND ((l.classid::bigint << 32) | l.objid::bigint)
                    = hashtextextended(current_schema() || '/' || $1, 0)
            LIMIT 1
            """, [.text(Self.copyLockName)])
        guard case .text(let holder)? = rows.first?["holder"] else { return "held by another session" }
        return holder
    }
}
