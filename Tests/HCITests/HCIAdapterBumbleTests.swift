import Digests
import AsyncSupport
import TestSupport
import BLE
import Foundation
import HCI
import Testing

/// PDUs received on a bearer, taken one at a time with a deadline.
actor PDUInbox {
    private let channel = PDUChannel()
    /// Requests sent through `RawATT.request`.
    private(set) var requests = 0

    func countRequest() { requests += 1 }

    func push(_ pdu: [UInt8]) { channel.send(pdu) }

    func finish() { channel.finish() }

    func next(timeout: Duration) async throws -> [UInt8] {
        let channel = self.channel
        switch await withTimeLimit(timeout, { await channel.receive() }) {
        case .finished(.success(let pdu?)): return pdu
        case .finished: throw BLEError.disconnected(.remoteUserTerminated)
        case .timedOut: throw BLEError.timeout(operation: "ATT PDU", limit: timeout)
        case .cancelled: throw BLEError.cancelled
        }
    }
}

/// Raw ATT over a bearer, just enough for the tests (the ATT client lives elsewhere).
struct RawATT {
    let bearer: any ATTBearer
    let inbox = PDUInbox()

    init(_ link: any Link) {
        bearer = link.bearer
        let incoming = link.bearer.incoming
        let inbox = self.inbox
        Task {
            for await pdu in incoming { await inbox.push(pdu) }
            await inbox.finish()
        }
    }

    /// Sends a request and returns the next PDU that is not a notification or indication.
    func request(_ pdu: [UInt8], timeout: Duration = .seconds(5)) async throws -> [UInt8] {
        await inbox.countRequest()
        try await bearer.send(pdu)
        while true {
            let next = try await self.next(timeout: timeout)
            if next.first != 0x1B && next.first != 0x1D { return next }
        }
    }

    func next(timeout: Duration = .seconds(5)) async throws -> [UInt8] {
        try await inbox.next(timeout: timeout)
    }

    /// Characteristic declarations: (value handle, uuid16).
    func characteristics() async throws -> [(handle: UInt16, uuid: UInt16)] {
        var out: [(UInt16, UInt16)] = []
        var start: UInt16 = 1
        while true {
            let rsp = try await request([0x08, UInt8(start & 0xFF), UInt8(start >> 8), 0xFF, 0xFF, 0x03, 0x28])
            if rsp.first == 0x01 { return out }
            guard rsp.first == 0x09, rsp.count >= 2 else { throw BLEError.protocolError("unexpected \(rsp.hexString)") }
            let length = Int(rsp[1])
            guard length == 7 else { return out }
            var i = 2
            var last: UInt16 = start
            while i + length <= rsp.count {
                let declaration = UInt16(rsp[i]) | UInt16(rsp[i + 1]) << 8
                let value = UInt16(rsp[i + 3]) | UInt16(rsp[i + 4]) << 8
                let uuid = UInt16(rsp[i + 5]) | UInt16(rsp[i + 6]) << 8
                out.append((value, uuid))
                last = declaration
                i += length
            }
            start = last + 1
        }
    }
}

func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }

@Suite("HCI adapter against Bumble", .serialized,
       .enabled(if: BumbleFleet.available, "needs Python with bumble: make venv, or set PROVISION_PYTHON"))
struct HCIAdapterBumbleTests {
    @Test func bringUpReadsTheControllerAndItsBuffers() async throws {
        try await BumbleFleet.with(["--devices", "1"]) { fleet in
            let adapter = try await HCIAdapter.open(spec: fleet.spec)
            let info = try #require(await adapter.info)
            #expect(info.publicAddress == BluetoothAddress("00:AA:00:00:00:01"))
            #expect(info.aclMaxLength == 27)
            #expect(info.aclPackets == 64)
            #expect(info.ownAddress.kind == .random)
            #expect(info.ownAddress.value >> 46 == 0b11)
            await adapter.close()
        }
    }

    @Test func scanFindsEveryAdvertisingDeviceWithNameAndService() async throws {
        try await BumbleFleet.with(["--devices", "5", "--silent", "5"]) { fleet in
            let adapter = try await HCIAdapter.open(spec: fleet.spec)
            let devices = try await DeviceDiscovery.scan(on: adapter, for: .seconds(2))
            let names = Set(devices.compactMap(\.name))
            #expect(names == ["SNS-0001", "SNS-0002", "SNS-0003", "SNS-0004"])
            for device in devices {
                #expect(device.services.contains(BluetoothUUID(0xFFF0).description))
                #expect(device.rssi == -50)
                #expect(device.addressType == "random")
            }
            // Two consumers share one controller scan; both see devices.
            let filter = ScanFilter(names: ["SNS-0002"], allowDuplicates: false)
            async let a = first(adapter.scan(filter))
            async let b = first(adapter.scan(ScanFilter(services: [BluetoothUUID(0xFFF0)])))
            let (x, y) = try await (a, b)
            #expect(x?.name == "SNS-0002")
            #expect(y?.data.serviceUUIDs.contains(BluetoothUUID(0xFFF0)) == true)
            await adapter.close()
        }
    }

    @Test func rawATTWritesReachThePeripheralAndItsAckComesBack() async throws {
        try await BumbleFleet.with(["--devices", "2"]) { fleet in
            let adapter = try await HCIAdapter.open(spec: fleet.spec)
            let device = fleet.devices[0]
            let address = try #require(BluetoothAddress(device.address, kind: .random))
            let link = try await adapter.connect(to: address, options: ConnectOptions(timeout: .seconds(5)))
            let att = RawATT(link)
            let mtu = try await att.request([0x02, 0xF7, 0x00])
            #expect(mtu.first == 0x03 && mtu.count == 3)
            let groups = try await att.request([0x10, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28])
            #expect(groups.first == 0x11)
            let chars = try await att.characteristics()
            let fff1 = try #require(chars.first { $0.uuid == 0xFFF1 }?.handle)
            let fff3 = try #require(chars.first { $0.uuid == 0xFFF3 }?.handle)
            let fff4 = try #require(chars.first { $0.uuid == 0xFFF4 }?.handle)
            // Subscribe (the CCCD follows the value), then configure.
            #expect(try await att.request([0x12] + le16(fff3 + 1) + [0x01, 0x00]) == [0x13])
            #expect(try await att.request([0x12] + le16(fff1) + [0x01, 0x0A, 0x0B, 0x0C]) == [0x13])
            #expect(try await att.next() == [0x1B] + le16(fff3) + [0x01, 0x00])
            var state = try fleet.state(device.id)
            #expect(state["config"] as? String == "0a0b0c")
            #expect(state["state"] as? Int == 1)

            // A 1000-byte blob without response, in MTU-3 chunks: fragmented to 27-byte ACL packets.
            let blob = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            #expect(try await att.request([0x12] + le16(fff1) + [0x03, 0xE8, 0x03, 0x00, 0x00]) == [0x13])
            #expect(try await att.next() == [0x1B] + le16(fff3) + [0x03, 0x00])
            var offset = 0
            while offset < blob.count {
                let end = min(blob.count, offset + 244)
                try await att.bearer.send([0x52] + le16(fff4) + Array(blob[offset..<end]))
                offset = end
            }
            #expect(try await att.request([0x12] + le16(fff1) + [0x04]) == [0x13])
            #expect(try await att.next() == [0x1B] + le16(fff3) + [0x04, 0x00])
            #expect(try await att.request([0x12] + le16(fff1) + [0x02]) == [0x13])
            #expect(try await att.next() == [0x1B] + le16(fff3) + [0x02, 0x00])
            state = try fleet.state(device.id)
            #expect(state["blob_bytes"] as? Int == 1000)
            #expect(state["blob_sha256"] as? String == sha256Hex(blob))
            #expect(state["state"] as? Int == 2)
            #expect(state["commits"] as? Int == 1)

            await link.disconnect()
            #expect(await link.waitForDisconnect() == .localHostTerminated)
            await #expect(throws: BLEError.self) { try await link.bearer.send([0x0A, 0x01, 0x00]) }
            await adapter.close()
        }
    }

    @Test func connectTimeoutToASilentDeviceCancelsAndTheNextConnectWorks() async throws {
        try await BumbleFleet.with(["--devices", "2", "--silent", "2"]) { fleet in
            // The adapter's log says when a connection is being created: the moment to cancel one.
            let (logLines, log) = AsyncStream<String>.makeStream()
            let adapter = try await HCIAdapter.open(spec: fleet.spec, options: HCIAdapter.Options(log: { log.yield($0) }))
            let silent = try #require(BluetoothAddress(fleet.devices[1].address, kind: .random))
            // The connect's own limit ended it (the error names it), not another wait.
            await #expect(throws: BLEError.timeout(operation: "connect to \(silent)", limit: .milliseconds(700))) {
                _ = try await adapter.connect(to: silent, options: ConnectOptions(timeout: .milliseconds(700)))
            }
            let good = try #require(BluetoothAddress(fleet.devices[0].address, kind: .random))
            let link = try await adapter.connect(to: good, options: ConnectOptions(timeout: .seconds(5)))
            let att = RawATT(link)
            #expect(try await att.request([0x02, 0xF7, 0x00]).first == 0x03)
            // Cancelling the connecting task also cancels cleanly.
            let task = Task { try await adapter.connect(to: silent, options: ConnectOptions(timeout: .seconds(30))) }
            // Cancel once the controller is creating it (the timed-out connect above logged the first).
            try await withDeadline(.seconds(10), operation: "the second connect to the silent device") {
                var creations = 0
                for await line in logLines where line.contains("creating a connection to \(silent)") {
                    creations += 1
                    if creations == 2 { return }
                }
            }
            task.cancel()
            await #expect(throws: BLEError.cancelled) { _ = try await task.value }
            #expect(try fleet.state(fleet.devices[0].id)["connections"] as? Int == 1)
            await adapter.close()
        }
    }

    @Test func severalLinksAtOnceEachExchangeATT() async throws {
        try await BumbleFleet.with(["--devices", "4"]) { fleet in
            let adapter = try await HCIAdapter.open(spec: fleet.spec)
            let links = try await withThrowingTaskGroup(of: (any Link).self) { group in
                for device in fleet.devices {
                    let address = try #require(BluetoothAddress(device.address, kind: .random))
                    group.addTask { try await adapter.connect(to: address, options: ConnectOptions(timeout: .seconds(10))) }
                }
                var links: [any Link] = []
                for try await link in group { links.append(link) }
                return links
            }
            #expect(links.count == 4)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for link in links {
                    group.addTask {
                        let att = RawATT(link)
                        let rsp = try await att.request([0x02, 0xF7, 0x00])
                        #expect(rsp.first == 0x03)
                        // Read the serial number by type (2A25).
                        let serial = try await att.request([0x08, 0x01, 0x00, 0xFF, 0xFF, 0x25, 0x2A])
                        #expect(serial.first == 0x09)
                    }
                }
                try await group.waitForAll()
            }
            for device in fleet.devices {
                #expect(try fleet.state(device.id)["connections"] as? Int == 1)
            }
            for link in links { await link.disconnect() }
            await adapter.close()
        }
    }

    @Test func aPeripheralThatDropsTheLinkGivesRemoteUserTerminated() async throws {
        try await BumbleFleet.with(["--devices", "1", "--drop-on-commit", "1"]) { fleet in
            let adapter = try await HCIAdapter.open(spec: fleet.spec)
            let address = try #require(BluetoothAddress(fleet.devices[0].address, kind: .random))
            let link = try await adapter.connect(to: address, options: ConnectOptions(timeout: .seconds(5)))
            let att = RawATT(link)
            let fff1 = try #require(try await att.characteristics().first { $0.uuid == 0xFFF1 }?.handle)
            #expect(try await att.request([0x12] + le16(fff1) + [0x02]) == [0x13])
            #expect(await link.waitForDisconnect() == .remoteUserTerminated)
            await #expect(throws: BLEError.self) { try await link.bearer.send([0x0A, 0x01, 0x00]) }
            let state = try fleet.state(fleet.devices[0].id)
            #expect(state["drops"] as? Int == 1)
            #expect(state["commits"] as? Int == 0)
            // The slot is free again and the device reconnects.
            let again = try await adapter.connect(to: address, options: ConnectOptions(timeout: .seconds(5)))
            await again.disconnect()
            await adapter.close()
        }
    }

    @Test func twoAdaptersHearTheSameFleetAndHoldLinksSideBySide() async throws {
        try await BumbleFleet.with(["--devices", "4", "--stations", "2"]) { fleet in
            let a = try await HCIAdapter.open(spec: "hci:tcp:127.0.0.1:\(fleet.ports[0])")
            let b = try await HCIAdapter.open(spec: "hci:tcp:127.0.0.1:\(fleet.ports[1])")
            let heardByA = try await DeviceDiscovery.scan(on: a, for: .seconds(1))
            let heardByB = try await DeviceDiscovery.scan(on: b, for: .seconds(1))
            #expect(heardByA.count == 4 && heardByB.count == 4)
            #expect(Set(heardByA.map(\.adapter)) == [a.id] && Set(heardByB.map(\.adapter)) == [b.id])
            let first = try #require(BluetoothAddress(fleet.devices[0].address, kind: .random))
            let second = try #require(BluetoothAddress(fleet.devices[1].address, kind: .random))
            async let linkA = a.connect(to: first, options: ConnectOptions(timeout: .seconds(5)))
            async let linkB = b.connect(to: second, options: ConnectOptions(timeout: .seconds(5)))
            let (la, lb) = try await (linkA, linkB)
            #expect(la.adapterID == a.id && lb.adapterID == b.id)
            #expect(try await RawATT(la).request([0x02, 0xF7, 0x00]).first == 0x03)
            #expect(try await RawATT(lb).request([0x02, 0xF7, 0x00]).first == 0x03)
            // Closing one adapter leaves the other's link up.
            await a.close()
            #expect(await la.waitForDisconnect() == .localHostTerminated)
            #expect((lb as? HCILink)?.disconnectReason == nil)
            await b.close()
        }
    }

    @Test func aDeadControllerEndsLinksAndScansWithTransportClosed() async throws {
        try await BumbleFleet.with(["--devices", "1"]) { fleet in
            // No attempt to reopen it (by default the adapter tries for about 30 s: `reopenAttempts`).
            var options = HCIAdapter.Options()
            options.reopenAttempts = 0
            let adapter = try await HCIAdapter.open(spec: fleet.spec, options: options)
            let address = try #require(BluetoothAddress(fleet.devices[0].address, kind: .random))
            let link = try await adapter.connect(to: address, options: ConnectOptions(timeout: .seconds(5)))
            #expect(adapter.outage == nil)
            await fleet.stop()
            #expect(await link.waitForDisconnect() == .transportClosed)
            #expect(adapter.outage != nil, "a failed adapter says why it is out")
            await #expect(throws: BLEError.self) {
                for try await _ in adapter.scan(ScanFilter()) {}
            }
            await #expect(throws: BLEError.self) {
                _ = try await adapter.connect(to: address, options: ConnectOptions(timeout: .seconds(1)))
            }
        }
    }
}

func first(_ stream: AsyncThrowingStream<Advertisement, any Error>) async throws -> Advertisement? {
    for try await ad in stream { return ad }
    return nil
}

/// The SHA-256 of `bytes` in hex, as the fleet's Python reports it (hashlib).
func sha256Hex(_ bytes: [UInt8]) -> String {
    SHA256.hexDigest(bytes)
}
