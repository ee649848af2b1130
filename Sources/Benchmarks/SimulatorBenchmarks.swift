import BLE
import BLESimulator
import Foundation

/// Throughput and memory of the simulator itself (raw ATT PDUs, zero latency): the numbers in
/// docs/benchmarks.md, and what `provision bench` prints.
public enum SimulatorBenchmarks {
    /// What one benchmark run measured.
    public struct Result: Sendable, Codable, Equatable {
        /// Read Request/Response round trips per second on one connection.
        public var readsPerSecondOneLink: Double
        /// Write Commands (20-byte blob chunks) per second on one connection, credit-paced.
        public var writeCommandsPerSecondOneLink: Double
        /// Read round trips per second summed over `connections` concurrent links.
        public var readsPerSecondAllLinks: Double
        public var connections: Int
        /// Time to establish `connections` links (serialized connects, zero latency), seconds.
        public var connectSeconds: Double
        /// Resident memory per connected device (link + server + serving task), bytes; nil off Linux.
        public var bytesPerConnectedDevice: Double?
        /// Resident memory per idle device of the fleet, bytes; nil off Linux.
        public var bytesPerIdleDevice: Double?
        public var fleetSize: Int
    }

    /// Runs the benchmark and returns a short report.
    public static func run(model: DeviceModel, fleetSize: Int = 10_000, connections: Int = 1_000,
                           operations: Int = 100_000) async -> String {
        do {
            let r = try await measure(model: model, fleetSize: fleetSize, connections: connections, operations: operations)
            return report(r)
        } catch {
            return "simulator benchmark failed: \(error)"
        }
    }

    public static func report(_ r: Result) -> String {
        func n(_ v: Double) -> String { String(Int(v.rounded())) }
        var lines = [
            "simulator (zero latency, raw ATT PDUs, model over in-memory links)",
            "  1 link:      \(n(r.readsPerSecondOneLink)) read round trips/s, \(n(r.writeCommandsPerSecondOneLink)) write commands/s",
            "  \(r.connections) links:  \(n(r.readsPerSecondAllLinks)) read round trips/s in total; connecting them took \(String(format: "%.2f", r.connectSeconds)) s",
        ]
        if let c = r.bytesPerConnectedDevice { lines.append("  memory:      \(n(c / 1024)) KiB per connected device (RSS delta)") }
        if let i = r.bytesPerIdleDevice { lines.append("               \(n(i)) bytes per idle device in a fleet of \(r.fleetSize) (RSS delta)") }
        return lines.joined(separator: "\n")
    }

    public static func measure(model: DeviceModel, fleetSize: Int, connections: Int, operations: Int) async throws -> Result {
        let fleet = max(fleetSize, connections, 1)
        let rssStart = residentBytes()
        let specs = (0..<fleet).map { SimulatedDeviceSpec(id: "BENCH-\($0)") }
        let central = try SimulatedCentral(model: model, devices: specs,
                                           options: SimulatorOptions(id: "sim-bench", seed: 1, latencyScale: 0,
                                                                     connectionSlots: max(connections, 1)))
        let rssFleet = residentBytes()
        do {
            let r = try await measure(central, fleet: fleet, connections: connections, operations: operations, model: model)
            await central.close()
            guard let a = rssStart, let b = rssFleet, let c = r.rssConnected else { return r.result }
            var result = r.result
            result.bytesPerIdleDevice = Double(b - a) / Double(fleet)
            result.bytesPerConnectedDevice = connections > 0 ? Double(c - b) / Double(connections) : nil
            return result
        } catch {
            await central.close()
            throw error
        }
    }

    private static func measure(_ central: SimulatedCentral, fleet: Int, connections: Int, operations: Int,
                                model: DeviceModel) async throws -> (result: Result, rssConnected: Int?) {

        // One link: sequential read round trips, then a stream of write commands.
        let db = DeviceConnection.database(for: central.devices[0])
        // The first readable characteristic value.
        let serialHandle = db.attributes.first { a in
            if case .value(let p) = a.role { return p.contains(.read) }
            return false
        }?.handle ?? 1
        let blobHandle = model.behaviour?.blob.flatMap { db.valueHandle(service: $0.service, characteristic: $0.characteristic) }
        let one = try await central.connect(to: central.devices[0].address, options: ConnectOptions())
        var it = one.bearer.incoming.makeAsyncIterator()
        let read = ATTPDU.readRequest(.init(handle: serialHandle)).bytes
        let clock = ContinuousClock()
        let t1 = clock.now
        for _ in 0..<operations {
            try await one.bearer.send(read)
            guard await it.next() != nil else { throw BLEError.disconnected(.supervisionTimeout) }
        }
        let readsOne = Double(operations) / seconds(clock.now - t1)
        var writesOne = 0.0
        if let blobHandle {
            let chunk = ATTPDU.writeCommand(.init(handle: blobHandle, value: [UInt8](repeating: 0xA5, count: 20))).bytes
            let t2 = clock.now
            for _ in 0..<operations { try await one.bearer.send(chunk) }
            // A read round trip after the last command: every command has been handled by then.
            try await one.bearer.send(read)
            _ = await it.next()
            writesOne = Double(operations) / seconds(clock.now - t2)
        }
        await one.disconnect()
        _ = await one.waitForDisconnect()

        // Many links: connect them all, hold them, then reads on every link at once.
        let devices = Array(central.devices.prefix(connections))
        let t3 = clock.now
        var links: [any Link] = []
        for d in devices { links.append(try await central.connect(to: d.address, options: ConnectOptions())) }
        let connectSeconds = seconds(clock.now - t3)
        let rssConnected = residentBytes()
        let perLink = max(1, operations / max(1, connections))
        let t4 = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for link in links {
                group.addTask {
                    var it = link.bearer.incoming.makeAsyncIterator()
                    for _ in 0..<perLink {
                        try await link.bearer.send(read)
                        guard await it.next() != nil else { throw BLEError.disconnected(.supervisionTimeout) }
                    }
                }
            }
            try await group.waitForAll()
        }
        let readsAll = Double(perLink * links.count) / seconds(clock.now - t4)
        for l in links { await l.disconnect() }

        let result = Result(readsPerSecondOneLink: readsOne, writeCommandsPerSecondOneLink: writesOne,
                            readsPerSecondAllLinks: readsAll, connections: connections, connectSeconds: connectSeconds,
                            bytesPerConnectedDevice: nil, bytesPerIdleDevice: nil, fleetSize: fleet)
        return (result, rssConnected)
    }

    private static func seconds(_ d: Duration) -> Double {
        let (s, atto) = d.components
        return max(1e-9, Double(s) + Double(atto) * 1e-18)
    }

    /// Resident set size from /proc/self/statm (Linux), else nil.
    static func residentBytes() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

/// The least makespan a run on the paced simulator can have (`provision bench latency
/// --connection-interval`): what round trips × latency, the concurrency and the adapter's one-at-a-time
/// connects allow. docs/benchmarks.md explains each term.
///
/// - A round trip costs two connection intervals: the request waits for the next connection event, and
///   the response (sent when the request arrives, at an event) for the one after.
/// - A connect waits for the device's next advertising event: on average half the advertising interval
///   (the interval is drawn per device from the model's range, its phase is unrelated to the moment the
///   adapter asks). The adapter connects one device at a time, so N devices need N such waits in turn.
/// - An awaited acknowledgement arrives the model's ack latency after the write reached the device,
///   at the next connection event: on average `E[I·⌈d/I⌉]` after the write's event instead of the `I`
///   a response takes.
public struct PacedLatencyBound: Sendable, Equatable {
    public var devices: Int
    public var concurrency: Int
    public var connectionInterval: Duration
    /// ATT round trips per device (measured: the run's report).
    public var roundTripsPerDevice: Double
    /// Writes per device whose acknowledgement (a notification) is awaited.
    public var acknowledgementsPerDevice: Int
    public var advertisingInterval: LatencyRange
    public var ackLatency: LatencyRange

    public init(devices: Int, concurrency: Int, connectionInterval: Duration, roundTripsPerDevice: Double,
                acknowledgementsPerDevice: Int, model: DeviceModel) {
        self.devices = devices
        self.concurrency = max(1, concurrency)
        self.connectionInterval = connectionInterval
        self.roundTripsPerDevice = roundTripsPerDevice
        self.acknowledgementsPerDevice = acknowledgementsPerDevice
        advertisingInterval = model.advertising.interval
        ackLatency = model.latency.ack
    }

    /// Two connection intervals.
    public var perRoundTrip: Double { 2 * Self.seconds(connectionInterval) }
    /// The mean wait for a device's next advertising event.
    public var advertisingWait: Double { (Self.seconds(advertisingInterval.lower) + Self.seconds(advertisingInterval.upper)) / 4 }
    /// What an awaited acknowledgement adds to its write's round trip, on average.
    public var acknowledgementWait: Double {
        let i = Self.seconds(connectionInterval)
        let lo = Self.seconds(ackLatency.lower), hi = Self.seconds(ackLatency.upper)
        let samples = 1_000
        var sum = 0.0
        for k in 0..<samples {
            let d = hi > lo ? lo + (hi - lo) * (Double(k) + 0.5) / Double(samples) : lo
            sum += i * max(1, (d / i).rounded(.up))
        }
        return sum / Double(samples) - i
    }
    /// One device alone: its connect, its round trips, its acknowledgements.
    public var perDevice: Double {
        advertisingWait + roundTripsPerDevice * perRoundTrip + Double(acknowledgementsPerDevice) * acknowledgementWait
    }
    /// Devices in waves of `concurrency`.
    public var concurrencyBound: Double { Double(devices) / Double(concurrency) * perDevice }
    /// The adapter's connects one after another.
    public var serialConnectBound: Double { Double(devices) * advertisingWait }
    public var bound: Double { max(concurrencyBound, serialConnectBound) }

    static func seconds(_ d: Duration) -> Double {
        let (s, atto) = d.components
        return Double(s) + Double(atto) * 1e-18
    }
}
