import Engine
import Foundation
import LineDatabase
import LineStore
import PostgresClient

/// What a run store costs a device, measured the same way for every store: stations drive their stores
/// through the `RunStore` protocol (and `DeviceClaims` when the store offers it) exactly as the scheduler
/// and the device agents do — claim, `started`, work, `intent` (waited for), work, `outcome` (waited
/// for) — with `inFlight` devices at once per station, and the time each device waits for its store is
/// recorded: its share of the claim's round trip, the intent's wait and the outcome's wait.
///
/// `provision bench line` runs it on a file journal (fsync) and on a line database, so the two can be
/// compared on one machine with one command (docs/benchmarks.md).
public enum StoreBenchmark {
    /// Milliseconds at the 50th and 95th percentile, and the mean (the line database's own benchmark's).
    public typealias Percentiles = LineBenchmarks.Percentiles

    public struct Result: Sendable, Codable, CustomStringConvertible {
        public var store: String
        public var stations: Int
        public var devices: Int
        public var inFlight: Int
        public var workMs: Double
        public var seconds: Double
        /// Devices finished (outcome recorded) per second, all stations together.
        public var devicesPerSecond: Double
        /// Claims per second (devices handed out; 0 for a store without claims).
        public var claimsPerSecond: Double
        /// Per device: the time it waited for its store (claim share + intent + outcome).
        public var storeMs: Percentiles
        public var claimMs: Percentiles
        public var intentMs: Percentiles
        public var outcomeMs: Percentiles

        public var description: String {
            """
            \(store): \(stations) station(s) × \(inFlight) devices in flight, \(devices) devices, device work 2 × \(String(format: "%.0f", workMs)) ms
              \(String(format: "%.0f", devicesPerSecond)) outcomes/s, \(String(format: "%.0f", claimsPerSecond)) claims/s, \(String(format: "%.2f", seconds)) s
              store time per device: \(storeMs)
                claim (whole round trip): \(claimMs)
                intent: \(intentMs)
                outcome: \(outcomeMs)
            """
        }
    }

    /// One device's waits, in milliseconds.
    private struct Sample: Sendable {
        var claim: Double
        var claimShare: Double
        var intent: Double
        var outcome: Double
    }

    /// Drives one store per station. A store with claims gets its devices by claiming them (any device of
    /// the run, in inventory order, `claimBatch` at most at a time); a store without claims gets its own
    /// share of `devices` in order. Every store is opened (`.start`) and given a header first (outside the
    /// clock) and closed after.
    public static func run(name: String, stores: [any RunStore], devices: [String], inFlight: Int, work: Duration,
                           claimBatch: Int = 8) async throws -> Result {
        let header = JournalHeader(runId: "bench", workflow: FileRef(name: "bench", path: "bench.yaml", sha256: String(repeating: "0", count: 64)),
                                   inventory: FileRef(path: "bench-inventory.yaml", sha256: String(repeating: "1", count: 64)),
                                   adapters: ["bench"], options: [:], started: .now(), toolVersion: "bench", resumed: false)
        for store in stores {
            _ = try await store.open(.start)
            try await store.record(.header(header, at: header.started))
        }
        let start = ContinuousClock.now
        let samples = try await withThrowingTaskGroup(of: [Sample].self) { group in
            for (s, store) in stores.enumerated() {
                let mine = stride(from: s, to: devices.count, by: stores.count).map { devices[$0] }
                group.addTask { try await station(store, devices: mine, inFlight: inFlight, work: work, claimBatch: claimBatch) }
            }
            return try await group.reduce(into: [Sample]()) { $0 += $1 }
        }
        let elapsed = ContinuousClock.now - start
        for store in stores { await store.close() }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        let claimed = stores.contains { $0.claims != nil }
        return Result(store: name, stations: stores.count, devices: samples.count, inFlight: inFlight, workMs: work.milliseconds,
                      seconds: seconds, devicesPerSecond: Double(samples.count) / seconds,
                      claimsPerSecond: claimed ? Double(samples.count) / seconds : 0,
                      storeMs: Percentiles(samples.map { $0.claimShare + $0.intent + $0.outcome }),
                      claimMs: Percentiles(claimed ? samples.map(\.claim) : []), intentMs: Percentiles(samples.map(\.intent)),
                      outcomeMs: Percentiles(samples.map(\.outcome)))
    }

    /// One station: keeps `inFlight` devices going until it gets no more.
    private static func station(_ store: any RunStore, devices: [String], inFlight: Int, work: Duration,
                                claimBatch: Int) async throws -> [Sample] {
        var queue = devices[...]
        var samples: [Sample] = []
        try await withThrowingTaskGroup(of: Sample.self) { group in
            var running = 0
            var exhausted = false
            while true {
                let free = inFlight - running
                if !exhausted, free > 0, free >= min(claimBatch, inFlight) || running == 0 {
                    var next: [(device: String, attempt: Int)] = []
                    var claimMs = 0.0
                    if let claims = store.claims {
                        let t0 = ContinuousClock.now
                        next = try await claims.claim(among: nil, limit: min(free, claimBatch)).map { ($0.device, $0.attempt) }
                        claimMs = (ContinuousClock.now - t0).milliseconds
                        if next.isEmpty { exhausted = true }
                    } else {
                        next = queue.prefix(free).map { ($0, 1) }
                        queue = queue.dropFirst(next.count)
                        if queue.isEmpty { exhausted = true }
                    }
                    for (device, attempt) in next {
                        running += 1
                        let share = claimMs / Double(next.count)
                        let measured = claimMs
                        group.addTask {
                            try await store.record(.started(device: device, attempt: attempt, at: .now()))
                            if work > .zero { try await Task.sleep(for: work) }
                            let t1 = ContinuousClock.now
                            try await store.record(.intent(device: device, step: "commit", stepIndex: 11, at: .now()))
                            let intent = (ContinuousClock.now - t1).milliseconds
                            if work > .zero { try await Task.sleep(for: work) }
                            let t2 = ContinuousClock.now
                            try await store.record(.outcome(record(device, attempt: attempt), at: .now()))
                            return Sample(claim: measured, claimShare: share, intent: intent, outcome: (ContinuousClock.now - t2).milliseconds)
                        }
                    }
                    if !next.isEmpty { continue }
                }
                guard running > 0, let sample = try await group.next() else { break }
                running -= 1
                samples.append(sample)
            }
        }
        return samples
    }

    /// A device record the size of a sensor-v2 provisioning record (twelve steps, captured values).
    static func record(_ id: String, attempt: Int) -> DeviceRecord {
        var steps: [StepRecord] = []
        for i in 0..<12 {
            let start = Double(i * 12) + 0.25
            let duration = Double(10 + i) + 0.5
            steps.append(StepRecord(name: "step \(i)", kind: i == 0 ? "scan" : "write", outcome: .succeeded, attempts: 1,
                                    startMs: start, durationMs: duration))
        }
        return DeviceRecord(id: id, address: "C0:FF:EE:00:00:01", name: "SNS-\(id)", outcome: .succeeded, attempts: attempt, adapter: "bench",
                            rssi: -60, started: .now(), durationMs: 150.5,
                            captured: ["fw": "2.4.1", "serial": .string(id), "state": "02"], steps: steps, attRoundTrips: 14)
    }
}
