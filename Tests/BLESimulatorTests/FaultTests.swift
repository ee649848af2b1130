import BLE
import Testing
@testable import BLESimulator

@Suite(.timeLimit(.minutes(1)))
struct FaultTests {
    @Test func aDeviceThatNeverAdvertisesIsNeverSeenInAScanAndCannotBeConnected() async throws {
        let ids = (0..<12).map { "ADV-\($0)" }
        // The order of first advertisements depends on seed and id only: learn it from a clean fleet.
        let probe = try Fixtures.central(try ids.map { try Fixtures.spec($0) })
        let sentinel = try #require(probe.devices.last?.id)
        let central = try Fixtures.central(try ids.map { id in
            try Fixtures.spec(id, id == sentinel ? nil : "faults: { no_advertise: true }")
        })
        var seen: [String] = []
        for try await ad in central.scan(ScanFilter()) {
            seen.append(ad.name ?? "?")
            if ad.name == "SNS-\(sentinel)" { break }
        }
        #expect(seen == ["SNS-\(sentinel)"])
        let hidden = try #require(ids.first { $0 != sentinel })
        let address = try #require(central.address(of: hidden))
        await #expect(throws: BLEError.timeout(operation: "connect to \(address)", limit: .milliseconds(20))) {
            _ = try await central.connect(to: address, options: ConnectOptions(timeout: .milliseconds(20)))
        }
    }

    @Test func connectFailWithProbabilityOneAlwaysFails() async throws {
        let central = try Fixtures.central([try Fixtures.spec("CF-1", "faults: { connect_fail: 1 }")])
        let address = try #require(central.address(of: "CF-1"))
        for _ in 0..<3 {
            await #expect {
                _ = try await central.connect(to: address, options: ConnectOptions())
            } throws: { error in
                if case BLEError.connectFailed = error { return true }
                return false
            }
        }
        let d = try #require(central.dump(device: "CF-1"))
        #expect(d.connections == 0)
        #expect(d.connectAttempts == 3)
        #expect(d.faults == ["connect_fail": 3])
        #expect(central.activeLinkCount == 0)
    }

    @Test func connectTimeoutWithProbabilityOneTimesOutAtTheCallersDeadline() async throws {
        let central = try Fixtures.central([try Fixtures.spec("CT-1", "faults: { connect_timeout: 1 }")])
        let address = try #require(central.address(of: "CT-1"))
        await #expect(throws: BLEError.timeout(operation: "connect to \(address)", limit: .milliseconds(10))) {
            _ = try await central.connect(to: address, options: ConnectOptions(timeout: .milliseconds(10)))
        }
        #expect(central.dump(device: "CT-1")?.faults == ["connect_timeout": 1])
    }

    @Test func dropWithProbabilityOneDropsTheLinkOnTheFirstOperation() async throws {
        let central = try Fixtures.central([try Fixtures.spec("DR-1", "faults: { drop: 1 }")])
        var client = try await Fixtures.connect(central, "DR-1")
        await #expect(throws: BLEError.self) {
            _ = try await client.request(.exchangeMTURequest(.init(mtu: 247)))
        }
        #expect(await client.link.waitForDisconnect() == .supervisionTimeout)
        let d = try #require(central.dump(device: "DR-1"))
        #expect(d.faults == ["drop": 1])
        #expect(d.connections == 1)
    }

    @Test func whatWasWrittenBeforeADropStaysApplied() async throws {
        // With p = 0.3 per operation, write configs until the device drops the link; the configs acked
        // before the drop stay applied across reconnects.
        let central = try Fixtures.central([try Fixtures.spec("DR-2", "faults: { drop: 0.3 }")], seed: 7)
        var applied = 0
        var dropped = false
        for _ in 0..<20 where !dropped {
            var client = try await Fixtures.connect(central, "DR-2")
            client.assumeSensorV2Layout()
            do {
                _ = try await client.subscribe(0xFFF3)
                while true {
                    let r = try await client.controlChecked([0x01, UInt8(applied + 1)])
                    if r.ack == [0x01, 0x00] { applied += 1 }
                }
            } catch {
                dropped = applied > 0
                _ = await client.link.waitForDisconnect()
            }
        }
        #expect(dropped)
        let d = try #require(central.dump(device: "DR-2"))
        // The last acked config is applied (or the next one, when the drop struck the state read after
        // a write that had already been handled).
        #expect(d.config == [UInt8(applied)].hexString || d.config == [UInt8(applied + 1)].hexString)
        #expect(d.state == "01")
        #expect((d.faults["drop"] ?? 0) >= 1)
    }

    @Test func ackLossExecutesTheCommandButSendsNoAck() async throws {
        let central = try Fixtures.central([try Fixtures.spec("AL-1", "faults: { ack_loss: 1 }")])
        var client = try await Fixtures.connect(central, "AL-1")
        try await client.discover()
        _ = try await client.subscribe(0xFFF3)
        let r = try await client.controlChecked([0x01, 0xAA])
        #expect(r.ack == nil)
        #expect(r.state == 0x01)
        await client.link.disconnect()
        let d = try #require(central.dump(device: "AL-1"))
        #expect(d.config == "aa")
        #expect(d.commands == [SimulatorDump.Command(opcode: "01", status: "00")])
        #expect(d.faults == ["ack_loss": 1])
    }

    @Test func busyAckAnswersBusyAndDoesNotExecute() async throws {
        let central = try Fixtures.central([try Fixtures.spec("BA-1", "faults: { busy_ack: 1 }")])
        var client = try await Fixtures.connect(central, "BA-1")
        try await client.discover()
        _ = try await client.subscribe(0xFFF3)
        let r = try await client.controlChecked([0x01, 0xAA])
        #expect(r.ack == [0x01, 0x02])
        #expect(r.state == 0x00)
        await client.link.disconnect()
        let d = try #require(central.dump(device: "BA-1"))
        #expect(d.config == nil)
        #expect(d.commands == [SimulatorDump.Command(opcode: "01", status: "02")])
        #expect(d.faults == ["busy_ack": 1])
    }

    @Test func theNotifyWithoutDeclaringQuirkNotifiesWithoutPropertyOrCCCD() async throws {
        let central = try Fixtures.central([try Fixtures.spec("NU-1", "faults: { notify_undeclared: true }")])
        var client = try await Fixtures.connect(central, "NU-1")
        try await client.discover()
        let ack = try client.handle(0xFFF3)
        #expect(client.cccds[BluetoothUUID(0xFFF3)] == nil)
        // The characteristic declaration (just before the value) lists no notify property.
        let decl = try await client.request(.readRequest(.init(handle: ack - 1)))
        guard case .readResponse(let v) = decl else { Issue.record("declaration: \(decl)"); return }
        #expect(v.first.map { $0 & 0x10 } == 0)
        #expect(try client.handle(0xFFF4) == ack + 2)  // no CCCD between FFF3 and FFF4's declaration
        // Never subscribed, yet the ack arrives.
        let r = try await client.controlChecked([0x01, 0x01])
        #expect(r.ack == [0x01, 0x00])
        await client.link.disconnect()
    }

    @Test func theFullDiscoveryQuirkRefusesFindByTypeValue() async throws {
        let central = try Fixtures.central([
            try Fixtures.spec("FD-1", "faults: { full_discovery_only: true }"), try Fixtures.spec("FD-2"),
        ])
        let request = ATTPDU.findByTypeValueRequest(.init(range: .init(start: 1, end: 0xFFFF), type: 0x2800, value: [0xF0, 0xFF]))
        var quirky = try await Fixtures.connect(central, "FD-1")
        #expect(try await quirky.request(request)
                == .errorResponse(.init(requestOpcode: .findByTypeValueRequest, handle: 1, code: .requestNotSupported)))
        try await quirky.discover()
        #expect(try await quirky.read(0x2A25) == Array("FD-1".utf8))
        var normal = try await Fixtures.connect(central, "FD-2")
        guard case .findByTypeValueResponse(let found) = try await normal.request(request) else {
            Issue.record("FD-2 should answer Find By Type Value")
            return
        }
        #expect(found.ranges.count == 1)
    }

    @Test func theMTUCapLimitsTheExchangedMTU() async throws {
        let central = try Fixtures.central([try Fixtures.spec("MT-1", "faults: { mtu_cap: 23 }")])
        var client = try await Fixtures.connect(central, "MT-1")
        #expect(try await client.request(.exchangeMTURequest(.init(mtu: 247))) == .exchangeMTUResponse(.init(mtu: 23)))
        await client.link.disconnect()
    }

    @Test func oldFirmwareIsAPerDeviceOverride() async throws {
        let central = try Fixtures.central([try Fixtures.spec("FW-1", "firmware: \"1.9.0\""), try Fixtures.spec("FW-2")])
        var old = try await Fixtures.connect(central, "FW-1")
        try await old.discover()
        #expect(try await old.read(0x2A26) == Array("1.9.0".utf8))
        var current = try await Fixtures.connect(central, "FW-2")
        try await current.discover()
        #expect(try await current.read(0x2A26) == Array("2.4.1".utf8))
    }

    @Test func aDeviceTakesOneCentralAtATimeAndSlotsAreLimited() async throws {
        let central = try SimulatedCentral(model: try Fixtures.model(), devices: [try Fixtures.spec("S-1"), try Fixtures.spec("S-2")],
                                           options: SimulatorOptions(latencyScale: 0, connectionSlots: 1))
        let a = try #require(central.address(of: "S-1"))
        let b = try #require(central.address(of: "S-2"))
        let link = try await central.connect(to: a, options: ConnectOptions())
        await #expect(throws: BLEError.self) { _ = try await central.connect(to: a, options: ConnectOptions()) }
        await #expect(throws: BLEError.self) { _ = try await central.connect(to: b, options: ConnectOptions()) }
        await link.disconnect()
        _ = await link.waitForDisconnect()
        // The slot comes back once the device side has seen the link go.
        var stream = central.scan(ScanFilter(addresses: [a])).makeAsyncIterator()
        #expect(try await stream.next()?.address == a)
    }

    @Test func aDeviceWithLongUUIDsDeclaresSIGServicesIn128BitForm() async throws {
        let central = try Fixtures.central([try Fixtures.spec("LU-1", "faults: { long_uuids: true }"), try Fixtures.spec("LU-2")])
        var quirky = try await Fixtures.connect(central, "LU-1")
        var plain = try await Fixtures.connect(central, "LU-2")
        let short: [UInt8] = [0x0A, 0x18]
        let long = Array(BluetoothUUID(0x180A).uuid128.reversed())
        func find(_ c: inout RawATTClient, _ value: [UInt8]) async throws -> ATTOpcode {
            try await c.request(.findByTypeValueRequest(.init(range: .init(start: 1, end: 0xFFFF), type: 0x2800, value: value))).opcode
        }
        #expect(try await find(&quirky, short) == .errorResponse)
        #expect(try await find(&quirky, long) == .findByTypeValueResponse)
        #expect(try await find(&plain, short) == .findByTypeValueResponse)
        #expect(try await find(&plain, long) == .errorResponse)
        // The Database Hash differs (the declarations do), and is the same for devices of one layout.
        func hash(_ c: inout RawATTClient) async throws -> [UInt8] {
            let r = try await c.request(.readByTypeRequest(.init(range: .init(start: 1, end: 0xFFFF), type: .databaseHash)))
            guard case .readByTypeResponse(let t) = r, let e = t.entries.first else { return [] }
            return e.value
        }
        let h1 = try await hash(&quirky)
        let h2 = try await hash(&plain)
        #expect(h1.count == 16 && h2.count == 16 && h1 != h2)
        await quirky.link.disconnect()
        await plain.link.disconnect()
        let other = try Fixtures.central([try Fixtures.spec("LU-3")])
        var third = try await Fixtures.connect(other, "LU-3")
        #expect(try await hash(&third) == h2)
        await third.link.disconnect()
    }

    @Test func readMultipleVariableCanBeSwitchedOff() async throws {
        let central = try Fixtures.central([try Fixtures.spec("RM-1", "faults: { read_multiple_variable: false }"), try Fixtures.spec("RM-2")])
        var off = try await Fixtures.connect(central, "RM-1")
        var on = try await Fixtures.connect(central, "RM-2")
        let request = ATTPDU.readMultipleVariableRequest(.init(handles: [7, 9]))   // 2A25, 2A26
        #expect(try await off.request(request) == .errorResponse(.init(requestOpcode: .readMultipleVariableRequest, handle: 7, code: .requestNotSupported)))
        #expect(try await on.request(request) == .readMultipleVariableResponse(.init(tuples: [.init(Array("RM-2".utf8)), .init(Array("2.4.1".utf8))])))
        await off.link.disconnect()
        await on.link.disconnect()
    }
}
