import Testing

@testable import RenewalJob

@Suite("Jitter: backoff jitter without a system call per value")
struct JitterTests {
    @Test("values lie in 0..<1, spread over the whole interval, and differ between seeds")
    func valuesAreUniformEnough() {
        let jitter = Jitter(seed: 42)
        let values = (0..<20_000).map { _ in jitter.next() }
        #expect(values.allSatisfy { $0 >= 0 && $0 < 1 })
        // Ten equal buckets each get close to a tenth (a generator stuck on one value, or one using only
        // a few bits, fails here).
        var buckets = [Int](repeating: 0, count: 10)
        for value in values { buckets[Int(value * 10)] += 1 }
        #expect(buckets.allSatisfy { (1_800...2_200).contains($0) }, "buckets: \(buckets)")
        let mean = values.reduce(0, +) / Double(values.count)
        #expect(abs(mean - 0.5) < 0.01)
        let other = Jitter(seed: 43)
        #expect((0..<8).map { _ in other.next() } != Array(values.prefix(8)))
        #expect(Set(values).count == values.count)
    }
}
