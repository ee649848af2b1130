import BLE
import Foundation
import HCI
import Testing

/// Throughput of the HCI host against a fleet started by hand (docs/adapters.md), for
/// docs/benchmarks.md. Runs only when `PROVISION_HCI_BENCH_SPEC` names the adapter, e.g.
///
///     bumble_fleet.py --port 9000 --stations 2 --devices 16 --state-dir /tmp/fleet &
///     PROVISION_HCI_BENCH_SPEC=hci:tcp:127.0.0.1:9000 PROVISION_HCI_BENCH_DEVICES=16 \
///         swift test --filter HCIBenchmark
///
/// Prints one JSON line per concurrency (`PROVISION_HCI_BENCH_CONCURRENCY`, default `1,4,16`).
@Suite(.enabled(if: ProcessInfo.processInfo.environment["PROVISION_HCI_BENCH_SPEC"] != nil,
                "set PROVISION_HCI_BENCH_SPEC to run the benchmark"))
struct HCIBenchmarkTests {
    @Test func provisioningThroughputAtEachConcurrency() async throws {
        let env = ProcessInfo.processInfo.environment
        let spec = env["PROVISION_HCI_BENCH_SPEC"] ?? ""
        let count = Int(env["PROVISION_HCI_BENCH_DEVICES"] ?? "") ?? 16
        let levels = (env["PROVISION_HCI_BENCH_CONCURRENCY"] ?? "1,4,16").split(separator: ",").compactMap { Int($0) }
        let devices = (1...count).map { i in
            (id: String(format: "SN-%04d", i), address: BluetoothAddress(value: 0xF000_0000_0000 | UInt64(i), kind: .random))
        }
        let blob = (0..<2048).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let adapter = try await HCIAdapter.open(spec: spec, options: HCIAdapter.Options(connectionSlots: max(levels.max() ?? 1, 1)))
        for concurrency in levels {
            let started = ContinuousClock.now
            let (provisioned, roundTrips) = try await withThrowingTaskGroup(of: Int.self) { group in
                var pending = devices[...]
                var total = 0
                var finished = 0
                func launch() {
                    guard let device = pending.popFirst() else { return }
                    group.addTask {
                        let link = try await adapter.connect(to: device.address, options: ConnectOptions(timeout: .seconds(10)))
                        return try await provisionSensorV2(link, id: device.id, config: Array(device.id.utf8), blob: blob)
                    }
                }
                for _ in 0..<concurrency { launch() }
                while let n = try await group.next() {
                    total += n
                    finished += 1
                    launch()
                }
                return (finished, total)
            }
            // Each device ends provisioned: `provisionSensorV2` throws unless every ack came and the
            // committed state (02) reads back.
            #expect(provisioned == count, "provisioned at concurrency \(concurrency)")
            let elapsed = ContinuousClock.now - started
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            print("{\"measurement\":\"hci-provision\",\"devices\":\(count),\"concurrency\":\(concurrency),\"seconds\":\(String(format: "%.2f", seconds)),\"devices_per_minute\":\(String(format: "%.1f", Double(count) / seconds * 60)),\"att_round_trips_per_device\":\(roundTrips / count)}")
        }
        await adapter.close()
    }
}
