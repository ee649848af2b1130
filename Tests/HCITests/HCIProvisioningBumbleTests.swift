import TestSupport
import BLE
import Foundation
import HCI
import Testing

/// The sensor-v2 provisioning sequence (docs/devices/sensor-v2.md) in raw ATT over one link.
/// Returns the number of ATT request/response round trips it took.
func provisionSensorV2(_ link: any Link, id: String, config: [UInt8], blob: [UInt8]) async throws -> Int {
    let att = RawATT(link)
    func request(_ pdu: [UInt8]) async throws -> [UInt8] { try await att.request(pdu) }
    let mtuResponse = try await request([0x02, 0xF7, 0x00])
    guard mtuResponse.count == 3, mtuResponse[0] == 0x03 else { throw BLEError.protocolError("MTU \(mtuResponse.hexString)") }
    let mtu = min(247, Int(mtuResponse[1]) | Int(mtuResponse[2]) << 8)
    let chars = try await att.characteristics()
    func handle(_ uuid: UInt16) throws -> UInt16 {
        guard let h = chars.first(where: { $0.uuid == uuid })?.handle else { throw BLEError.attributeNotFound(String(uuid, radix: 16)) }
        return h
    }
    let serial = try await request([0x0A] + le16(try handle(0x2A25)))
    guard serial == [0x0B] + Array(id.utf8) else { throw BLEError.protocolError("serial \(serial.hexString)") }
    let firmware = try await request([0x0A] + le16(try handle(0x2A26)))
    guard firmware.first == 0x0B, String(decoding: firmware.dropFirst(), as: UTF8.self).hasPrefix("2.") else {
        throw BLEError.protocolError("unsupported firmware \(firmware.hexString)")
    }
    let fff1 = try handle(0xFFF1), fff3 = try handle(0xFFF3), fff4 = try handle(0xFFF4), fff2 = try handle(0xFFF2)
    guard try await request([0x12] + le16(fff3 + 1) + [0x01, 0x00]) == [0x13] else { throw BLEError.protocolError("CCCD") }
    func command(_ bytes: [UInt8]) async throws {
        guard try await request([0x12] + le16(fff1) + bytes) == [0x13] else { throw BLEError.protocolError("write") }
        let ack = try await att.next()
        guard ack == [0x1B] + le16(fff3) + [bytes[0], 0x00] else { throw BLEError.protocolError("ack \(ack.hexString)") }
    }
    try await command([0x01] + config)
    let length = UInt32(blob.count)
    try await command([0x03] + (0..<4).map { UInt8(truncatingIfNeeded: length >> (8 * $0)) })
    var offset = 0
    while offset < blob.count {
        let end = min(blob.count, offset + mtu - 3)
        try await att.bearer.send([0x52] + le16(fff4) + Array(blob[offset..<end]))
        offset = end
    }
    try await command([0x04])
    try await command([0x02])
    guard try await request([0x0A] + le16(fff2)) == [0x0B, 0x02] else { throw BLEError.protocolError("state") }
    await link.disconnect()
    return await att.inbox.requests
}

@Suite("Provisioning a fleet over the HCI adapter", .serialized,
       .enabled(if: BumbleFleet.available, "needs Python with bumble: make venv, or set PROVISION_PYTHON"))
struct HCIProvisioningBumbleTests {
    @Test(arguments: [1, 4, 16])
    func sixteenDevicesAreProvisionedAndTheDeviceSideAgrees(concurrency: Int) async throws {
        try await BumbleFleet.with(["--devices", "16"]) { fleet in
            let adapter = try await HCIAdapter.open(spec: fleet.spec, options: HCIAdapter.Options(connectionSlots: 16))
            let blob = (0..<2048).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            let started = ContinuousClock.now
            let roundTrips = try await withThrowingTaskGroup(of: Int.self) { group in
                var pending = fleet.devices[...]
                var total = 0
                func launch() throws {
                    guard let device = pending.popFirst() else { return }
                    let address = try #require(BluetoothAddress(device.address, kind: .random))
                    group.addTask {
                        let link = try await adapter.connect(to: address, options: ConnectOptions(timeout: .seconds(10)))
                        return try await provisionSensorV2(link, id: device.id, config: Array(device.id.utf8), blob: blob)
                    }
                }
                for _ in 0..<concurrency { try launch() }
                while let n = try await group.next() {
                    total += n
                    try launch()
                }
                return total
            }
            let elapsed = ContinuousClock.now - started
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            print("{\"measurement\":\"hci-provision\",\"devices\":\(fleet.devices.count),\"concurrency\":\(concurrency),\"seconds\":\(String(format: "%.2f", seconds)),\"devices_per_minute\":\(String(format: "%.1f", Double(fleet.devices.count) / seconds * 60)),\"att_round_trips_per_device\":\(roundTrips / fleet.devices.count)}")
            for device in fleet.devices {
                let state = try fleet.state(device.id)
                #expect(state["state"] as? Int == 2, "\(device.id)")
                #expect(state["config"] as? String == Array(device.id.utf8).hexString)
                #expect(state["blob_bytes"] as? Int == 2048)
                #expect(state["blob_sha256"] as? String == sha256Hex(blob))
                #expect(state["commits"] as? Int == 1)
            }
            await adapter.close()
        }
    }
}
