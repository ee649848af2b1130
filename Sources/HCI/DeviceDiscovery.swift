import BLE

/// One device heard during a finite scan (what `provision scan` prints).
public struct DiscoveredDevice: Sendable, Equatable, Codable {
    /// `AA:BB:CC:DD:EE:FF`.
    public var address: String
    /// `public` or `random`.
    public var addressType: String
    public var name: String?
    /// Strongest RSSI heard, in dBm.
    public var rssi: Int
    /// Advertised service UUIDs, as printed by `BluetoothUUID` (e.g. `FFF0`).
    public var services: [String]
    public var connectable: Bool
    /// How many reports were heard.
    public var reports: Int
    /// Which adapter heard it.
    public var adapter: String
}

/// Finite scans over any `Central`.
public enum DeviceDiscovery {
    /// Scans for `duration` and returns every device heard (passing `filter`), strongest first.
    /// Throws when the adapter fails; honours task cancellation.
    public static func scan(on central: any Central, for duration: Duration,
                            filter: ScanFilter = ScanFilter()) async throws -> [DiscoveredDevice] {
        let found = try await withThrowingTaskGroup(of: [[UInt8]: DiscoveredDevice]?.self) { group in
            group.addTask {
                var found: [[UInt8]: DiscoveredDevice] = [:]
                for try await ad in central.scan(filter) {
                    var device = found[ad.address.bytes] ?? DiscoveredDevice(
                        address: ad.address.description, addressType: ad.address.kind == .public ? "public" : "random",
                        name: nil, rssi: ad.rssi, services: [], connectable: ad.connectable, reports: 0, adapter: ad.adapter)
                    device.reports += 1
                    device.rssi = max(device.rssi, ad.rssi)
                    if let name = ad.name { device.name = name }
                    for uuid in ad.data.serviceUUIDs.map(\.description) where !device.services.contains(uuid) {
                        device.services.append(uuid)
                    }
                    device.connectable = device.connectable || ad.connectable
                    found[ad.address.bytes] = device
                    if Task.isCancelled { break }
                }
                return found
            }
            group.addTask {
                try await Task.sleep(for: duration)
                return nil
            }
            var result: [[UInt8]: DiscoveredDevice] = [:]
            while let next = try await group.next() {
                if let devices = next {
                    result = devices
                } else {
                    group.cancelAll()
                }
            }
            return result
        }
        return found.values.sorted { ($0.rssi, $1.address) > ($1.rssi, $0.address) }
    }
}
