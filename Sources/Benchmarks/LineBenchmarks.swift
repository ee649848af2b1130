import Foundation
import LineDatabase
import PostgresClient
import Support

/// What the line database costs: stations claiming and finishing devices against one database, each
/// device doing claim → (work) → intent → (work) → outcome. With no device work (the default) the
/// database is saturated and the figure that matters is devices per second; with device work (a
/// simulated radio: `deviceWork` before the intent and again before the outcome) the stations offer a
/// realistic load and the figure that matters is the time each device waits for the database.
///
/// Each station has its own connection and keeps `inFlight` devices going: it claims `claimBatch`
/// devices at a time among those it hears (every device is heard by two neighbouring stations), and each
/// device records its intent and then its outcome through the station's group commit.
public enum LineBenchmarks {
    /// Milliseconds at the 50th and 95th percentile, and the mean.
    public struct Percentiles: Sendable, Codable, CustomStringConvertible {
        public var p50: Double
        public var p95: Double
        public var mean: Double

        public init(_ values: [Double]) {
            let sorted = values.sorted()
            // Nearest rank, the one percentile definition (`Percentile`).
            p50 = Percentile.of(sorted, percent: 50) ?? 0
            p95 = Percentile.of(sorted, percent: 95) ?? 0
            mean = sorted.isEmpty ? 0 : sorted.reduce(0, +) / Double(sorted.count)
        }

        public var description: String { String(format: "p50 %.2f ms, p95 %.2f ms, mean %.2f ms", p50, p95, mean) }
    }

    public struct Result: Sendable, CustomStringConvertible {
        public var stations: Int
        public var devices: Int
        public var inFlight: Int
        public var claimBatch: Int
        public var deviceWork: Duration
        public var writers: Int
        public var seconds: Double
        /// Devices claimed, announced and finished per second, all stations together.
        public var devicesPerSecond: Double
        /// Per device, the time spent waiting for the database: its share of its claim's round trip,
        /// plus the intent's and the outcome's group-commit waits.
        public var storeMs: Percentiles
        public var claimMs: Percentiles
        public var intentMs: Percentiles
        public var outcomeMs: Percentiles
        /// Requests (round trips) all stations sent, and the intents and outcomes per group commit.
        public var roundTrips: Int
        public var entriesPerBatch: Double

        public var description: String {
            """
            line: \(stations) stations, \(devices) devices, \(inFlight) in flight per station, claims of \(claimBatch), device work 2 × \(deviceWork), \(writers) writers per station
              \(String(format: "%.0f", devicesPerSecond)) devices/s (claim + intent + outcome) in \(String(format: "%.2f", seconds)) s; \
            \(roundTrips) round trips (\(String(format: "%.2f", Double(roundTrips) / Double(max(devices, 1)))) per device), \
            \(String(format: "%.1f", entriesPerBatch)) writes per group commit
              database time per device: \(storeMs)
                claim (whole round trip): \(claimMs)
                intent: \(intentMs)
                outcome: \(outcomeMs)
            """
        }
    }

    /// Runs the benchmark on a new run in the database behind `connectionString` (migrating it if needed).
    public static func run(_ connectionString: ConnectionString, stations: Int = 8, devices: Int = 2_000, inFlight: Int = 16,
                           claimBatch: Int = 8, deviceWork: Duration = .zero, writers: Int = 1,
                           timeout: Duration = .seconds(60)) async throws -> Result {
        let runID = "bench-\(UUID().uuidString.prefix(8))"
        let run = LineRun(id: runID, workflow: LineFile(name: "bench", path: "bench.yaml", sha256: String(repeating: "0", count: 64)),
                          inventory: LineFile(path: "bench-inventory.yaml", sha256: String(repeating: "1", count: 64)),
                          options: ["benchmark": "line"], toolVersion: "bench")
        let ids = (0..<devices).map { String(format: "BENCH-%06d", $0) }
        // Join every station before the clock starts (migration, run, inventory, registration).
        var joined: [LineStation] = []
        for s in 0..<stations {
            let info = LineStationInfo(id: "bench-\(s)/\(runID)", name: "bench-\(s)", host: "localhost", adapters: ["bench"], toolVersion: "bench")
            joined.append(try await LineStation.join(connectionString, run: run, station: info, devices: s == 0 ? ids : [],
                                                     lease: .seconds(60), timeout: timeout, writers: writers))
        }
        let record = sampleRecord
        let start = ContinuousClock.now
        let (samples, claimCalls) = try await withThrowingTaskGroup(of: ([Sample], Int).self) { group in
            for (s, station) in joined.enumerated() {
                // Devices j with j mod stations in {s, s+1}: every device heard by two stations.
                let heard = ids.indices.filter { $0 % stations == s || $0 % stations == (s + 1) % stations }.map { ids[$0] }
                group.addTask {
                    try await work(station: station, heard: heard, inFlight: inFlight, claimBatch: claimBatch, deviceWork: deviceWork, record: record)
                }
            }
            return try await group.reduce(into: ([Sample](), 0)) { total, station in
                total.0 += station.0
                total.1 += station.1
            }
        }
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        var batches = 0
        var entries = 0
        for station in joined {
            batches += await station.batchesWritten
            entries += await station.entriesWritten
            try await station.leave()
        }
        // Every station sent its claims and its group commits; joins and leaves are outside the clock.
        let roundTrips = batches + claimCalls
        return Result(stations: stations, devices: samples.count, inFlight: inFlight, claimBatch: claimBatch, deviceWork: deviceWork,
                      writers: writers, seconds: seconds,
                      devicesPerSecond: Double(samples.count) / seconds,
                      storeMs: Percentiles(samples.map { $0.claimShare + $0.intent + $0.outcome }),
                      claimMs: Percentiles(samples.map(\.claim)), intentMs: Percentiles(samples.map(\.intent)),
                      outcomeMs: Percentiles(samples.map(\.outcome)),
                      roundTrips: roundTrips, entriesPerBatch: Double(entries) / Double(max(batches, 1)))
    }

    /// One device's waits, in milliseconds.
    private struct Sample: Sendable {
        var claim: Double
        var claimShare: Double
        var intent: Double
        var outcome: Double
    }

    /// One station's loop; returns its devices' samples and how many claims it sent.
    private static func work(station: LineStation, heard: [String], inFlight: Int, claimBatch: Int, deviceWork: Duration,
                             record: String) async throws -> ([Sample], Int) {
        var remaining = heard[...]
        var samples: [Sample] = []
        var claimCalls = 0
        try await withThrowingTaskGroup(of: Sample.self) { group in
            var running = 0
            while true {
                // Claim in batches: when a whole batch fits, or when nothing is left in flight.
                let free = inFlight - running
                if !remaining.isEmpty, free >= min(claimBatch, inFlight) || running == 0 {
                    let window = Array(remaining.prefix(64))
                    let limit = min(claimBatch, free)
                    let t0 = ContinuousClock.now
                    let claims = try await station.claim(among: window, limit: limit)
                    claimCalls += 1
                    let claimMs = milliseconds(ContinuousClock.now - t0)
                    // Claims come in window order; devices passed over are another station's.
                    if claims.count < limit {
                        remaining = remaining.dropFirst(window.count)
                    } else if let last = claims.last, let i = window.firstIndex(of: last.device) {
                        remaining = remaining.dropFirst(i + 1)
                    }
                    for c in claims {
                        running += 1
                        group.addTask {
                            if deviceWork > .zero { try await Task.sleep(for: deviceWork) }
                            let t1 = ContinuousClock.now
                            try await station.recordIntent(LineIntent(device: c.device, attempt: c.attempt, stepIndex: 7, step: "set configuration"))
                            let intent = milliseconds(ContinuousClock.now - t1)
                            if deviceWork > .zero { try await Task.sleep(for: deviceWork) }
                            let t2 = ContinuousClock.now
                            try await station.recordOutcome(LineOutcome(device: c.device, attempt: c.attempt, outcome: .succeeded,
                                                                        firmware: "2.4.1", adapter: "bench", rssi: -60, started: Date(),
                                                                        finished: Date(), durationMs: 0, record: record))
                            let t3 = ContinuousClock.now
                            return Sample(claim: claimMs, claimShare: claimMs / Double(claims.count),
                                          intent: intent, outcome: milliseconds(t3 - t2))
                        }
                    }
                    if !claims.isEmpty || !remaining.isEmpty { continue }
                }
                guard running > 0, let sample = try await group.next() else { break }
                running -= 1
                samples.append(sample)
            }
        }
        return (samples, claimCalls)
    }

    private static func milliseconds(_ d: Duration) -> Double {
        Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) * 1e-15
    }

    /// A device record the size of a sensor-v2 provisioning record (about 1.6 KB of JSON).
    static let sampleRecord: String = {
        let steps = (0..<12).map { i in
            #"{"attempts":1,"duration_ms":\#(10 + i).5,"kind":"write","name":"step \#(i)","outcome":"succeeded","start_ms":\#(i * 12).25}"#
        }
        return #"{"adapter":"bench","address":"C0:FF:EE:00:00:01","attempts":1,"captured":{"fw":"2.4.1","serial":"BENCH"},"duration_ms":150.5,"id":"BENCH","name":"SENSOR-BENCH","outcome":"succeeded","rssi":-60,"started":"2026-11-30T21:00:00.000Z","steps":["#
            + steps.joined(separator: ",") + "]}"
    }()
}
