import BLE

#if canImport(Glibc)
import Glibc
#endif

/// Micro-benchmarks of the BLE core over in-memory links to `ATTServer` peripherals, for `provision bench`.
/// Numbers measure this host stack (ATT client, GATT client, Session), not a radio.
public enum BLEBenchmarks {
    /// What one run measured.
    public struct Result: Sendable, CustomStringConvertible {
        public var connections: Int
        public var operations: Int
        public var seconds: Double
        public var roundTrips: Int
        public var operationsPerSecond: Double { seconds > 0 ? Double(operations) / seconds : 0 }
        /// Resident memory added per connected session, in bytes (nil where unmeasurable).
        public var bytesPerSession: Int?

        public var description: String {
            var s = "\(connections) connection(s), \(operations) reads in \(String(format3(seconds))) s: "
                + "\(Int(operationsPerSecond)) ATT ops/s, \(roundTrips) round trips"
            if let b = bytesPerSession { s += ", \(b / 1024) KiB RSS per connected session" }
            return s
        }
    }

    /// Connects `connections` sessions to in-memory `sensor-v2`-like peripherals, then each reads a
    /// characteristic `readsPerConnection` times (one Read Request each, after a warm-up that resolves
    /// the handle), all connections at once. Also reports RSS growth per connected session.
    public static func attOpsPerSecond(connections: Int = 1, readsPerConnection: Int = 10_000) async throws -> Result {
        let central = BenchmarkCentral()
        let options = SessionOptions(reconnect: .disabled)
        let rssBefore = residentBytes()
        var sessions: [Session] = []
        sessions.reserveCapacity(connections)
        for i in 0..<connections {
            let s = Session(central: central, peer: BluetoothAddress(value: 0xB0_0000_0000 + UInt64(i)), options: options)
            try await s.connect()
            _ = try await s.read(service: BenchmarkCentral.service, characteristic: BenchmarkCentral.characteristic, timeout: .seconds(30))
            sessions.append(s)
        }
        let rssAfter = residentBytes()
        let before = await totalRoundTrips(sessions)
        let clock = ContinuousClock()
        let start = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for s in sessions {
                group.addTask {
                    for _ in 0..<readsPerConnection {
                        _ = try await s.read(service: BenchmarkCentral.service, characteristic: BenchmarkCentral.characteristic,
                                             timeout: .seconds(30))
                    }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = clock.now - start
        let after = await totalRoundTrips(sessions)
        for s in sessions { await s.disconnect() }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        var perSession: Int?
        if let a = rssBefore, let b = rssAfter, connections > 0 { perSession = max(0, b - a) / connections }
        return Result(connections: connections, operations: connections * readsPerConnection, seconds: seconds,
                      roundTrips: after - before, bytesPerSession: perSession)
    }

    private static func totalRoundTrips(_ sessions: [Session]) async -> Int {
        var n = 0
        for s in sessions { n += await s.roundTrips }
        return n
    }

    /// Resident set size from /proc/self/statm (Linux), nil elsewhere.
    static func residentBytes() -> Int? {
        #if canImport(Glibc)
        guard let f = fopen("/proc/self/statm", "r") else { return nil }
        defer { fclose(f) }
        var size = 0
        var resident = 0
        guard withUnsafeMutablePointer(to: &size, { sp in
            withUnsafeMutablePointer(to: &resident) { rp in
                withVaList([sp, rp]) { vfscanf(f, "%ld %ld", $0) }
            }
        }) == 2 else { return nil }
        return resident * Int(sysconf(Int32(_SC_PAGESIZE)))
        #else
        return nil
        #endif
    }
}

private func format3(_ v: Double) -> String {
    let scaled = (v * 1000).rounded() / 1000
    return "\(scaled)"
}

/// A `Central` whose every peer is an in-memory peripheral running `ATTServer` over a small database.
final class BenchmarkCentral: Central {
    let id = "bench"
    let connectionSlots = Int.max
    let isSimulated = true

    static let service = BluetoothUUID(0x180A)
    static let characteristic = BluetoothUUID(0x2A26)
    private static let database = GATTDatabase(services: [
        .init(uuid: BluetoothUUID(0x180A), characteristics: [
            .init(uuid: BluetoothUUID(0x2A29), properties: [.read], value: Array("Acme".utf8)),
            .init(uuid: BluetoothUUID(0x2A26), properties: [.read], value: Array("2.4.1".utf8)),
        ]),
        .init(uuid: BluetoothUUID(0xFFF0), characteristics: [
            .init(uuid: BluetoothUUID(0xFFF1), properties: [.write]),
            .init(uuid: BluetoothUUID(0xFFF3), properties: [.notify]),
        ]),
    ])

    func scan(_ filter: ScanFilter) -> AsyncThrowingStream<Advertisement, any Error> {
        AsyncThrowingStream { $0.finish() }
    }

    func connect(to peer: BluetoothAddress, options: ConnectOptions) async throws -> any Link {
        let link = InMemoryLink(peer: peer, adapterID: id)
        let device = link.device
        Task {
            var server = ATTServer(database: Self.database)
            for await pdu in device.incoming {
                let (response, _) = server.receive(pdu)
                if let response { device.send(response) }
                device.consumed()
            }
        }
        return link
    }

    func close() async {}
}
