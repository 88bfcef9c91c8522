import Synchronization

/// Values in 0..<1 for backoff jitter, from a SplitMix64 generator seeded once by the system's. Every
/// receipt a run checks draws one for its decision; the system generator costs a `getrandom` system call
/// per value (half a percent of a run's CPU in the verify benchmark's profile), and jitter needs no
/// cryptographic randomness.
public final class Jitter: Sendable {
    private let state: Mutex<UInt64>

    public init(seed: UInt64 = UInt64.random(in: .min ... .max)) {
        state = Mutex(seed)
    }

    /// The next value, uniform in 0..<1 (53 random bits).
    public func next() -> Double {
        let bits = state.withLock { state -> UInt64 in
            state &+= 0x9E37_79B9_7F4A_7C15
            var mixed = state
            mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
            mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
            return mixed ^ (mixed >> 31)
        }
        return Double(bits >> 11) * 0x1.0p-53
    }

    /// The generator every run uses unless a test injects its own.
    public static let shared = Jitter()
}
