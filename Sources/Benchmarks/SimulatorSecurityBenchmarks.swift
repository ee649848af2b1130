import BLE
import BLESecurity
import BLESimulator
import Foundation

/// Pairing's cost on a paced simulated link, for `provision bench security`: each device of a one-model
/// fleet is connected (paced at `interval`) and secured; the wall time of the securing is what a radio
/// adds to a device (one connection event per turn of the exchange), the crypto included.
public enum SimulatorSecurityBenchmarks {
    public struct Result: Sendable, CustomStringConvertible {
        public var method: String
        public var devices: Int
        public var interval: Duration
        /// Mean wall time of one pairing (connect excluded), milliseconds.
        public var pairingMs: Double
        /// Mean wall time of one encryption with the bond the pairing made (a second link), milliseconds.
        public var bondedMs: Double

        public var description: String {
            "paced \(method), connection interval \(Double(interval.components.attoseconds) / 1e15 + Double(interval.components.seconds) * 1000) ms: \(devices) devices, \(String(format: "%.1f", pairingMs)) ms per pairing, "
                + "\(String(format: "%.1f", bondedMs)) ms per encryption with the stored bond"
        }
    }

    /// `model` must have a Security Manager; `passkey` (six digits) is every device's, or nil for Just Works.
    public static func paced(model: DeviceModel, interval: Duration, devices: Int, passkey: String?) async throws -> Result {
        let specs = (1...max(1, devices)).map { SimulatedDeviceSpec(id: "SB-\($0)", variables: ["passkey": passkey ?? "000000"]) }
        let path = NSTemporaryDirectory() + "provision-bench-bonds-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = try BondStore(path: path)
        let central = try SimulatedCentral(model: model, devices: specs,
                                           options: SimulatorOptions(seed: 7, latencyScale: 1, connectionInterval: interval, bonds: store))
        defer { Task { await central.close() } }
        let request = SecurityRequest(level: passkey == nil ? .encrypted : .authenticated, passkey: passkey.flatMap(Passkey.init))
        let clock = ContinuousClock()
        var pairing = Duration.zero, bonded = Duration.zero
        for spec in specs {
            guard let address = central.address(of: spec.id) else { continue }
            for round in 0..<2 {
                let link = try await central.connect(to: address, options: ConnectOptions(timeout: .seconds(30)))
                let start = clock.now
                _ = try await link.secure(request)
                if round == 0 { pairing += clock.now - start } else { bonded += clock.now - start }
                await link.disconnect()
            }
        }
        func ms(_ d: Duration) -> Double {
            (Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15) / Double(specs.count)
        }
        return Result(method: passkey == nil ? "Just Works" : "Passkey Entry", devices: specs.count, interval: interval,
                      pairingMs: ms(pairing), bondedMs: ms(bonded))
    }
}
