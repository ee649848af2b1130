import BLE
import BLESecurity
import BLESimulator
import Benchmarks
import Engine
import Foundation
import LineDatabase
import LineStore
import PostgresClient
import Support
import Workflow
#if canImport(Glibc)
import Glibc
#endif

/// `provision bench`: the engine's speed and memory on the simulated fleet, measured the way
/// docs/benchmarks.md records them.
///
/// - `throughput`: N devices (default 10,000), zero latency, the full workflow, concurrency 256, journal
///   on with fsync: devices per second and peak memory.
/// - `latency`: N devices (default 1,000) with the model's realistic latencies: the run's wall time
///   against the lower bound the latencies and the concurrency allow: the larger of N / C × the
///   uncontended device time (measured first by running devices one at a time) and N × the model's
///   mean connect latency (the adapter makes one connection at a time).
public struct BenchCommand: Command {
    public init() {}

    public let name = "bench"
    public let summary = "measure throughput and latency overhead on the simulated fleet"
    public let discussion = """
        Scenarios: throughput (default 10000 devices, zero latency, concurrency 256, journal with fsync),
        latency (default 1000 devices, model latencies, concurrency 64), or all. Results go to stdout as
        text and, with --json, as one JSON object per scenario. `security`: pairing's cost per device —
        CPU and wall time of whole pairings in process (--devices pairings of each kind, default 200), and
        on paced simulated links (--connection-interval, default 30ms; 10 devices each, fewer with a smaller --devices): a pairing, then an
        encryption with the bond it made.
        line (--line URL or PROVISION_LINE; not part of all): the run store's cost per device, driven
        through the same RunStore protocol on a file journal (fsync) and on the line database: one
        station each, then --stations stations on the line (default 8) for claims and outcomes per
        second; --devices (default 2000) per measurement, --concurrency devices in flight per station
        (default 16), --work the simulated radio time around the intent (default 50ms). Each line
        measurement is a run of its own (bench-…) on the line.
        """
    public let positionals = [PositionalSpec("SCENARIO", help: "throughput, latency, security, line or all (default all)", isOptional: true,
                                                   choices: ["throughput", "latency", "security", "ble", "sim", "line", "all"])]
    public let options = [
        OptionSpec("devices", short: "n", kind: .value("N"), help: "number of devices"),
        OptionSpec("concurrency", short: "c", kind: .value("N"), help: "devices in flight"),
        OptionSpec("workflow", kind: .value("FILE"), help: "workflow (default workflows/sensor-v2.yaml)"),
        OptionSpec("model", kind: .value("FILE"), help: "device model (default inventory/models/sensor-v2.yaml)"),
        OptionSpec("no-fsync", kind: .flag, help: "journal without fsync (to see what durability costs)"),
        OptionSpec("connection-interval", kind: .value("DURATION"),
                   help: "latency: pace the simulated links (every PDU waits for a connection event) and print the bound"),
        OptionSpec("json", kind: .flag, help: "print results as JSON lines"),
        LineOption.spec,
        OptionSpec("stations", kind: .value("N"), help: "line: stations on the line at once (default 8)"),
        OptionSpec("work", kind: .value("DURATION"), help: "line: device work before the intent and again before the outcome (default 50ms)"),
    ]

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        let out = context.output
        let scenario = arguments.positionals.first ?? "all"
        guard ["throughput", "latency", "ble", "sim", "security", "line", "all"].contains(scenario) else {
            out.err("error: unknown scenario `\(scenario)` (throughput, latency, security, line, ble, sim, all)")
            return ExitCode.invalidInput
        }
        let workflowPath = arguments.value("workflow") ?? "workflows/sensor-v2.yaml"
        let modelPath = arguments.value("model")
            ?? (scenario == "security" ? "inventory/models/sensor-v2-secure.yaml" : "inventory/models/sensor-v2.yaml")
        func count(_ name: String, _ range: ClosedRange<Int>) -> Swift.Result<Int?, UsageError> {
            guard let text = arguments.value(name) else { return .success(nil) }
            guard let n = Int(text), range.contains(n) else {
                return .failure(UsageError("`--\(name)` must be a whole number from \(range.lowerBound) to \(range.upperBound), not `\(text)`"))
            }
            return .success(n)
        }
        let devicesArg: Int?, concurrencyArg: Int?
        switch (count("devices", 1...1_000_000), count("concurrency", 1...10_000)) {
        case (.success(let d), .success(let c)):
            devicesArg = d
            concurrencyArg = c
        case (.failure(let e), _), (_, .failure(let e)):
            out.err("error: \(e.message)")
            out.err("usage: \(usage)")
            return ExitCode.invalidInput
        }
        // A measurement of a run in which devices failed measures the failures: it is an error (exit 1),
        // printed after the numbers.
        var incomplete: [String] = []
        var interval: Duration?
        if let text = arguments.value("connection-interval") {
            guard case .success(let d) = DurationText.parse(text), d >= .microseconds(7_500) else {
                out.err("error: --connection-interval needs a duration of at least 7.5ms, e.g. 30ms")
                return ExitCode.invalidInput
            }
            interval = d
        }
        do {
            if scenario == "throughput" || scenario == "all" {
                let r = try await Self.throughput(devices: devicesArg ?? 10_000, concurrency: concurrencyArg ?? 256,
                                                  workflowPath: workflowPath, modelPath: modelPath, fsync: !arguments.flag("no-fsync"))
                out.out(arguments.flag("json") ? r.json : r.text)
                if let problem = r.problem { incomplete.append("throughput: \(problem)") }
            }
            if scenario == "latency" || scenario == "all" {
                let r = try await Self.latency(devices: devicesArg ?? 1_000, concurrency: concurrencyArg ?? 64,
                                               workflowPath: workflowPath, modelPath: modelPath, connectionInterval: interval)
                out.out(arguments.flag("json") ? r.json : r.text)
                if let problem = r.problem { incomplete.append("latency: \(problem)") }
            }
            // The layers underneath, for reading the engine's numbers against them.
            if scenario == "ble" {
                // ATT operations through Session -> GATT client -> ATT client -> in-memory link -> ATTServer.
                for connections in [1, 1_000] {
                    let r = try await BLEBenchmarks.attOpsPerSecond(connections: connections,
                                                                   readsPerConnection: max(1, (devicesArg ?? 100_000) / connections))
                    out.out("ble: \(r)")
                }
            }
            if scenario == "security" {
                try await Self.security(pairings: devicesArg ?? 200, interval: interval ?? .milliseconds(30), modelPath: modelPath,
                                        output: out, json: arguments.flag("json"))
            }
            if scenario == "line" {
                let cs: ConnectionString
                switch LineOption.connectionString(arguments, context) {
                case nil: throw BenchError(description: "`bench line` needs the line: `--line URL` or PROVISION_LINE", isInput: true)
                case .failure(let e)?: throw BenchError(description: e.message, isInput: true)
                case .success(let c)?: cs = c
                }
                var stations = 8
                if let t = arguments.value("stations") {
                    guard let n = Int(t), (1...64).contains(n) else { throw BenchError(description: "`--stations` must be 1 to 64, not `\(t)`", isInput: true) }
                    stations = n
                }
                var work: Duration = .milliseconds(50)
                if let t = arguments.value("work") {
                    guard case .success(let d) = DurationText.parse(t) else { throw BenchError(description: "`--work` must be a duration (50ms), not `\(t)`", isInput: true) }
                    work = d
                }
                for r in try await Self.line(cs, devices: devicesArg ?? 2_000, stations: stations, inFlight: concurrencyArg ?? 16, work: work) {
                    out.out(arguments.flag("json") ? String(decoding: (try? JSONEncoder().encode(r)) ?? Data(), as: UTF8.self) : r.description)
                }
            }
            if scenario == "sim" {
                let model: DeviceModel
                do { model = try DeviceModel.load(path: modelPath) } catch { throw BenchError(description: "\(error)", isInput: true) }
                out.out(await SimulatorBenchmarks.run(model: model, fleetSize: devicesArg ?? 10_000, connections: 1_000, operations: 100_000))
            }
        } catch let e as BenchError where e.isInput {
            out.err(escaping: "error: \(e.description)")
            return ExitCode.invalidInput
        } catch {
            out.err(escaping: "error: \(error)")
            return ExitCode.environment
        }
        for problem in incomplete { out.err("error: \(problem); these numbers do not measure a clean run") }
        return incomplete.isEmpty ? ExitCode.success : ExitCode.someDevicesFailed
    }

    /// `bench security`: whole pairings in process (both sides' crypto and machines), then pairings and
    /// bonded encryptions on paced simulated links.
    /// `modelPath`: a model with a Security Manager that displays its passkey (sensor-v2-secure).
    static func security(pairings: Int, interval: Duration, modelPath: String, output out: Output, json: Bool) async throws {
        for exchange in SecurityBenchmarks.Exchange.allCases {
            let r: SecurityBenchmarks.Result
            do { r = try SecurityBenchmarks.pairings(exchange, count: pairings) } catch { throw BenchError(description: "\(error)", isInput: false) }
            if json {
                let perMs = { (total: Double) in total / Double(max(1, r.pairings)) * 1000 }
                out.out("{\"scenario\":\"security\",\"exchange\":\"\(r.exchange.rawValue)\",\"pairings\":\(r.pairings),"
                        + "\"cpu_ms\":\(String(format: "%.3f", perMs(r.cpuSeconds))),\"wall_ms\":\(String(format: "%.3f", perMs(r.seconds))),"
                        + "\"pdus\":\(r.pdus),\"turns\":\(r.turns)}")
            } else {
                out.out("security: \(r)")
            }
        }
        var model: DeviceModel
        do { model = try DeviceModel.load(path: modelPath) } catch { throw BenchError(description: "\(error)", isInput: true) }
        guard model.security != nil else {
            throw BenchError(description: "\(modelPath): the model has no `security:` section (no Security Manager to pair with)", isInput: true)
        }
        for passkey in [nil, "123456"] as [String?] {
            if passkey == nil {
                model.security?.io = .noInputNoOutput
                model.security?.requireMITM = false
            } else if let original = try? DeviceModel.load(path: modelPath) {
                model = original
            }
            let r = try await SimulatorSecurityBenchmarks.paced(model: model, interval: interval, devices: min(10, pairings), passkey: passkey)
            if json {
                out.out("{\"scenario\":\"security-paced\",\"method\":\"\(r.method)\",\"interval\":\"\(DurationText.format(interval))\","
                        + "\"pairing_ms\":\(String(format: "%.1f", r.pairingMs)),\"bonded_ms\":\(String(format: "%.1f", r.bondedMs))}")
            } else {
                out.out("security: \(r)")
            }
        }
    }

    /// The run store's cost per device: a file journal and the line, one station each, then `stations`
    /// stations on the line.
    static func line(_ cs: ConnectionString, devices: Int, stations: Int, inFlight: Int, work: Duration) async throws -> [StoreBenchmark.Result] {
        let dir = NSTemporaryDirectory() + "provision-bench-line-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let ids = (0..<devices).map { String(format: "BENCH-%06d", $0) }
        var results: [StoreBenchmark.Result] = []
        let journal = try FileJournal(path: dir + "/bench.journal", fsync: true)
        results.append(try await StoreBenchmark.run(name: "file journal (fsync)", stores: [journal], devices: ids, inFlight: inFlight, work: work))
        for count in [1, stations] {
            let runID = "bench-\(UUID().uuidString.prefix(8).lowercased())"
            let run = LineRun(id: runID, workflow: LineFile(name: "bench", path: "bench.yaml", sha256: String(repeating: "0", count: 64)),
                              inventory: LineFile(path: "bench-inventory.yaml", sha256: String(repeating: "1", count: 64)),
                              options: ["benchmark": "line"], toolVersion: ProvisionCLI.version)
            let stores: [any RunStore] = (0..<count).map { s in
                var settings = LineRunStore.Settings(
                    connectionString: cs, run: run,
                    station: LineStationInfo.thisProcess(name: "bench-\(s)", adapters: ["bench"], toolVersion: ProvisionCLI.version),
                    devices: ids, spoolPath: dir + "/bench-\(s).spool", policy: ClaimPolicy(heardOnly: false, idleLimit: nil))
                settings.lease = .seconds(60)
                settings.timeout = .seconds(60)
                return LineRunStore(settings)
            }
            // Join one station first: the run and its devices exist before the others join.
            _ = try await stores[0].open(.start)
            results.append(try await StoreBenchmark.run(name: "line database (\(runID))", stores: stores, devices: ids, inFlight: inFlight, work: work))
        }
        return results
    }

    struct Result {
        /// Set when the measured run was not clean (devices failed).
        var problem: String?
        var fields: [(String, String)]
        var text: String { fields.map { "\($0.0): \($0.1)" }.joined(separator: "\n") + "\n" }
        var json: String { "{" + fields.map { "\"\($0.0)\": \"\($0.1)\"" }.joined(separator: ", ") + "}" }
    }

    /// CPU time (user + system) this process used so far, in seconds.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// Peak resident memory of this process so far, in MiB.
    static func peakRSSMiB() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_maxrss) / 1024
    }

    /// A temporary line of `count` devices using the model at `modelPath`.
    static func makeLine(count: Int, modelPath: String) throws -> (dir: String, inventory: String) {
        let dir = NSTemporaryDirectory() + "provision-bench-\(getpid())-\(count)-\(UInt32.random(in: 0...UInt32.max))"
        let fm = FileManager.default
        try fm.createDirectory(atPath: dir + "/blobs", withIntermediateDirectories: true)
        let model = URL(fileURLWithPath: modelPath, relativeTo: URL(fileURLWithPath: fm.currentDirectoryPath)).standardizedFileURL.path
        var seed: UInt64 = 0xBE4C
        for (i, size) in [1024, 2048, 3072, 4096].enumerated() {
            var bytes = [UInt8](repeating: 0, count: size)
            for k in 0..<size {
                seed = seed &* 6364136223846793005 &+ 1442695040888963407
                bytes[k] = UInt8(truncatingIfNeeded: seed >> 33)
            }
            try Data(bytes).write(to: URL(fileURLWithPath: dir + "/blobs/blob-\(i).bin"))
        }
        var text = "simulator: { model: \"\(model)\" }\ndevices:\n"
        text.reserveCapacity(count * 140)
        for i in 1...count {
            let hi = (i >> 16) & 0xFF, mid = (i >> 8) & 0xFF, lo = i & 0xFF
            text += "  - { id: SN-\(i), name: SNS-\(i), address: \"C0:5E:00:\(hex2(hi)):\(hex2(mid)):\(hex2(lo))\", vars: { config: \"0a0b\(hex2(mid))\(hex2(lo))\", blob: blobs/blob-\(i % 4).bin } }\n"
        }
        let path = dir + "/inventory.yaml"
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return (dir, path)
    }

    static func hex2(_ v: Int) -> String {
        let s = String(v, radix: 16, uppercase: true)
        return s.count == 1 ? "0" + s : s
    }

    struct BenchError: Error, CustomStringConvertible {
        var description: String
        /// The workflow or the model is wrong (exit 2), rather than the environment (exit 3).
        var isInput = false
    }

    /// "3 of 1000 devices did not succeed (verify_failed 3)", or nil when all did.
    static func problem(_ report: RunResult, expected: Int) -> String? {
        let ok = report.summary.outcomes[.succeeded]
        guard ok < expected else { return nil }
        let kinds = report.summary.errors.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        return "\(expected - ok) of \(expected) devices did not succeed" + (kinds.isEmpty ? "" : " (\(kinds))")
    }

    static func load(workflowPath: String, inventoryPath: String, limit: String? = nil) throws -> ValidationResult {
        let r = Validator.validate(workflowPath: workflowPath, inventoryPath: inventoryPath, limit: limit)
        guard r.isValid else {
            throw BenchError(description: r.errors.prefix(3).map { "\($0.path):\($0.line):\($0.column): \($0.message)" }.joined(separator: "\n"),
                             isInput: true)
        }
        return r
    }

    static func runLine(_ r: ValidationResult, devices: [InventoryDevice], dir: String, name: String, concurrency: Int,
                        latency: Double, fsync: Bool, connectionInterval: Duration? = nil) async throws -> (RunResult, Duration) {
        guard let workflow = r.workflow, let inventory = r.inventory else { throw BenchError(description: "invalid input") }
        let sim: SimulatedCentral
        do {
            sim = try AdapterFactory.simulator(inventory: inventory, seed: 1, latencyScale: latency, statePath: nil,
                                               connectionInterval: connectionInterval)
        } catch let e as AdapterFactory.InputError {
            throw BenchError(description: e.message, isInput: true)
        }
        var options = RunOptions(reportPath: dir + "/\(name).json")
        options.concurrency = concurrency
        let clock = ContinuousClock()
        let start = clock.now
        let store = try await OpenedRunStore.fileJournal(path: dir + "/\(name).journal", fsync: fsync, resume: false)
        let report: RunResult
        do {
            report = try await Runner.run(workflow: workflow, inventory: inventory, devices: devices, adapters: [sim], store: store, options: options)
        } catch {
            await store.store.close()
            await sim.close()
            throw error
        }
        await store.store.close()
        let wall = clock.now - start
        await sim.close()
        return (report, wall)
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    static func throughput(devices: Int, concurrency: Int, workflowPath: String, modelPath: String, fsync: Bool) async throws -> Result {
        let line = try makeLine(count: devices, modelPath: modelPath)
        defer { try? FileManager.default.removeItem(atPath: line.dir) }
        let clock = ContinuousClock()
        let validateStart = clock.now
        let r = try load(workflowPath: workflowPath, inventoryPath: line.inventory)
        let validate = clock.now - validateStart
        let runCPUStart = cpuSeconds()
        let (report, wall) = try await runLine(r, devices: r.selectedDevices, dir: line.dir, name: "throughput",
                                               concurrency: concurrency, latency: 0, fsync: fsync)
        let runCPU = cpuSeconds() - runCPUStart
        let ok = report.summary.outcomes[.succeeded]
        let perSecond = Double(ok) / seconds(wall)
        return Result(problem: problem(report, expected: devices), fields: [
            ("scenario", "throughput"),
            ("devices", "\(devices)"), ("succeeded", "\(ok)"), ("concurrency", "\(concurrency)"),
            ("journal", fsync ? "fsync (group commit)" : "no fsync"),
            ("validate_s", String(format: "%.3f", seconds(validate))),
            ("run_wall_s", String(format: "%.3f", seconds(wall))),
            ("devices_per_s", String(format: "%.0f", perSecond)),
            // The compared figure: CPU (user + system) per device, the whole process (making the
            // inventory, validating it, setting up the fleet, the run, the report); it travels between
            // machines better than devices/s, which depends on the cores and on what else runs.
            ("cpu_ms_per_device", String(format: "%.3f", cpuSeconds() * 1000 / Double(max(1, devices)))),
            ("run_cpu_ms_per_device", String(format: "%.3f", runCPU * 1000 / Double(max(1, devices)))),
            ("att_round_trips_per_device", String(format: "%.1f", report.summary.attRoundTripsPerDevice ?? 0)),
            ("peak_rss_mib", String(format: "%.1f", peakRSSMiB())),
            ("target", "≤ 0.4 ms CPU per device, ≤ 200 MiB"),
        ])
    }

    static func latency(devices: Int, concurrency: Int, workflowPath: String, modelPath: String,
                        connectionInterval: Duration? = nil) async throws -> Result {
        let line = try makeLine(count: devices, modelPath: modelPath)
        defer { try? FileManager.default.removeItem(atPath: line.dir) }
        let r = try load(workflowPath: workflowPath, inventoryPath: line.inventory)
        // The uncontended device time: devices one at a time, same latencies.
        let sampleCount = min(24, devices)
        let sample = Array(r.selectedDevices.suffix(sampleCount))
        let (baseline, baselineWall) = try await runLine(r, devices: sample, dir: line.dir, name: "baseline", concurrency: 1,
                                                         latency: 1, fsync: true, connectionInterval: connectionInterval)
        let perDevice = seconds(baselineWall) / Double(sampleCount)
        let (report, wall) = try await runLine(r, devices: r.selectedDevices, dir: line.dir, name: "latency",
                                               concurrency: concurrency, latency: 1, fsync: true, connectionInterval: connectionInterval)
        if let connectionInterval {
            return try paced(report, reportPath: line.dir + "/latency.json", wall: wall, perDevice: perDevice, devices: devices,
                             concurrency: concurrency, interval: connectionInterval, workflow: r.workflow, modelPath: modelPath)
        }
        // Two bounds: devices in waves of `concurrency`, each taking the uncontended time; and the
        // adapter's connects one after another (a controller has one LE Create Connection pending at a
        // time, and the simulator models that), each taking the model's mean connect latency. The run
        // cannot beat the larger.
        let concurrencyBound = Double(devices) / Double(concurrency) * perDevice
        let connect: LatencyRange
        do { connect = try DeviceModel.load(path: modelPath).latency.connect } catch { throw BenchError(description: "\(error)", isInput: true) }
        let meanConnect = (seconds(connect.lower) + seconds(connect.upper)) / 2
        let connectBound = Double(devices) * meanConnect
        let bound = max(concurrencyBound, connectBound)
        let overhead = (seconds(wall) / bound - 1) * 100
        return Result(problem: problem(baseline, expected: sampleCount).map { "the uncontended sample: \($0)" } ?? problem(report, expected: devices),
                      fields: [
            ("scenario", "latency"),
            ("devices", "\(devices)"), ("succeeded", "\(report.summary.outcomes[.succeeded])"),
            ("concurrency", "\(concurrency)"),
            ("uncontended_device_s", String(format: "%.4f", perDevice)),
            ("baseline_succeeded", "\(baseline.summary.outcomes[.succeeded])/\(sampleCount)"),
            ("concurrency_bound_s", String(format: "%.3f", concurrencyBound)),
            ("serial_connect_bound_s", String(format: "%.3f", connectBound)),
            ("lower_bound_s", String(format: "%.3f", bound)),
            ("run_wall_s", String(format: "%.3f", seconds(wall))),
            ("over_lower_bound_percent", String(format: "%.1f", overhead)),
            ("over_concurrency_bound_percent", String(format: "%.1f", (seconds(wall) / concurrencyBound - 1) * 100)),
            ("peak_rss_mib", String(format: "%.1f", peakRSSMiB())),
            ("target", "within 5 % of the lower bound"),
        ])
    }

    /// The paced scenario's figures: the bound from round trips × latency, the concurrency and the
    /// adapter's serial connects (`PacedLatencyBound`), against the measured makespan.
    static func paced(_ result: RunResult, reportPath: String, wall: Duration, perDevice: Double, devices: Int, concurrency: Int,
                      interval: Duration, workflow: Workflow?, modelPath: String) throws -> Result {
        let acks = workflow?.steps.filter { if case .await(let a) = $0.kind { return a.trigger != nil } else { return false } }.count ?? 0
        // The devices' round trips, from the report on disk (a run's records are not kept in memory).
        let report = try RunReport.read(from: reportPath)
        let trips = report.devices.filter { $0.outcome == .succeeded }.compactMap(\.attRoundTrips)
        let b = PacedLatencyBound(devices: devices, concurrency: concurrency, connectionInterval: interval,
                                  roundTripsPerDevice: result.summary.attRoundTripsPerDevice ?? 0, acknowledgementsPerDevice: acks,
                                  model: try DeviceModel.load(path: modelPath))
        func f(_ v: Double) -> String { String(format: "%.3f", v) }
        return Result(fields: [
            ("scenario", "latency (paced)"),
            ("devices", "\(devices)"), ("succeeded", "\(result.summary.outcomes[.succeeded])"), ("concurrency", "\(concurrency)"),
            ("connection_interval_ms", f(seconds(interval) * 1000)),
            ("att_round_trips_per_device", String(format: "%.1f", b.roundTripsPerDevice)),
            ("att_round_trips_first_max_later", "\(trips.max() ?? 0) / \(trips.min() ?? 0)"),
            ("per_round_trip_ms", f(b.perRoundTrip * 1000)),
            ("round_trips_x_latency_s", f(b.roundTripsPerDevice * b.perRoundTrip)),
            ("acks_per_device", "\(acks)"), ("ack_wait_s", f(b.acknowledgementWait)),
            ("advertising_wait_s", f(b.advertisingWait)),
            ("device_bound_s", f(b.perDevice)), ("uncontended_device_s", f(perDevice)),
            ("concurrency_bound_s", f(b.concurrencyBound)),
            ("serial_connect_bound_s", f(b.serialConnectBound)),
            ("lower_bound_s", f(b.bound)),
            ("run_wall_s", f(seconds(wall))),
            ("makespan_over_bound", String(format: "%.2f", seconds(wall) / b.bound)),
            ("peak_rss_mib", String(format: "%.1f", peakRSSMiB())),
            ("target", "makespan within 1.2x the bound"),
        ])
    }
}
