import Foundation
import RenewalCore
import RenewalStorage

/// One line as read: its bytes (not yet known to be UTF-8), or only its length when it is too long to keep.
enum ImportLineBytes {
    case line(Data)
    case tooLong(Int)
}

/// Reads newline-separated lines from a file handle in chunks (flat memory). A line longer than
/// `maximumLineBytes` is skipped to its end and reported by length, so one bad line never stops the import.
/// The reads run on a thread of their own: a slow disk or a pipe that waits for its writer never
/// holds one of the event loops the program's tasks run on.
struct LineReader {
    let handle: FileHandle
    private let reads = BlockingCallQueue(label: "renewal.import-read")
    static let maximumLineBytes = 16 << 20
    /// Bytes read and not yet returned, from `start`; the buffer is compacted before each read, so
    /// a long line is appended to, never copied again.
    private var buffer = Data()
    private var start = 0
    /// Where to look for the next newline: bytes before it have none.
    private var scanned = 0
    private var finished = false
    /// Bytes of the current over-long line already thrown away.
    private var skipped = 0
    /// Whether the start of the input is still to be looked at for a byte order mark.
    private var atStart = true
    /// The UTF-8 byte order mark some editors and exports put before the first line: not part of it.
    static let byteOrderMark: [UInt8] = [0xEF, 0xBB, 0xBF]

    init(handle: FileHandle) {
        self.handle = handle
    }

    mutating func next() async throws -> ImportLineBytes? {
        while atStart {
            if buffer.count < Self.byteOrderMark.count, !finished {
                try await read()
                continue
            }
            atStart = false
            if buffer.prefix(Self.byteOrderMark.count).elementsEqual(Self.byteOrderMark) {
                start = Self.byteOrderMark.count
                scanned = start
            }
        }
        while true {
            let found = buffer.withUnsafeBytes { bytes -> Int? in
                guard scanned < bytes.count, let base = bytes.baseAddress,
                    let hit = memchr(base + scanned, 0x0A, bytes.count - scanned)
                else { return nil }
                return base.distance(to: UnsafeRawPointer(hit))
            }
            if let newline = found {
                defer {
                    start = newline + 1
                    scanned = start
                    skipped = 0
                }
                return skipped > 0 ? .tooLong(skipped + newline - start) : .line(buffer.subdata(in: start..<newline))
            }
            scanned = buffer.count
            if finished {
                defer {
                    start = buffer.count
                    scanned = start
                    skipped = 0
                }
                if skipped > 0 { return .tooLong(skipped + buffer.count - start) }
                return start < buffer.count ? .line(buffer.subdata(in: start..<buffer.count)) : nil
            }
            if skipped > 0 || buffer.count - start > Self.maximumLineBytes {
                // Over the limit: drop what is held of this line and read on to its end.
                skipped += buffer.count - start
                buffer.removeAll(keepingCapacity: true)
            } else if start > 0 {
                buffer.removeSubrange(0..<start)
            }
            start = 0
            scanned = buffer.count
            try await read()
        }
    }

    /// Appends the next chunk of the input to the buffer, or marks the input finished.
    private mutating func read() async throws {
        let handle = handle
        let chunk = try await reads.run { try handle.read(upToCount: 1 << 20) ?? Data() }
        if chunk.isEmpty {
            finished = true
        } else {
            buffer.append(chunk)
        }
    }
}
