import BLE
import Foundation
import Support
import Testing
@testable import BLESimulator

/// A device model's own check of a command (`crc:` on a command): the device executes a command whose
/// payload ends in the CRC of the bytes before it, on the payload without the CRC, and refuses one whose
/// CRC does not match (`01`), changing nothing — as the thermostat model (`inventory/models/thermostat.yaml`)
/// does with its configuration.
@Suite struct CommandCRCTests {
    static func thermostat() throws -> DeviceModel {
        try DeviceModel.load(path: Fixtures.root + "/inventory/models/thermostat.yaml")
    }

    /// `01` + interval (uint32 LE) + room (16 bytes, NUL-padded) + CRC-16/CCITT-FALSE of both, high byte first.
    static func config(interval: UInt32, room: String, crc override: [UInt8]? = nil) -> [UInt8] {
        let name = Array(room.utf8)
        let body = (0..<4).map { UInt8(truncatingIfNeeded: interval >> ($0 * 8)) } + name + [UInt8](repeating: 0, count: 16 - name.count)
        let crc = CRCAlgorithm.crc16CCITTFalse.checksum(body)
        return [0x01] + body + (override ?? [UInt8(crc >> 8), UInt8(crc & 0xFF)])
    }

    @Test func theThermostatModelDeclaresItsCRC() throws {
        let model = try Self.thermostat()
        let command = try #require(model.behaviour?.commands[0x01])
        #expect(command.crc == CommandBehaviour.CRCCheck(algorithm: .crc16CCITTFalse, bigEndian: true))
        #expect(command.length == 20...20)
        #expect(model.behaviour?.commands[0x02]?.crc == nil)
    }

    @Test func aMatchingCRCIsCheckedAndTakenOffBeforeTheCommandRuns() throws {
        let behaviour = try #require(try Self.thermostat().behaviour)
        var state = DeviceState(state: 0)
        let sent = Self.config(interval: 300, room: "Kitchen")
        #expect(state.apply(.control(sent, busy: false), behaviour: behaviour) == [0x01, 0x00])
        #expect(state.config == Array(sent[1...20]), "the configuration without its CRC")
        #expect(state.state == 0x01)
        #expect(state.commands.last?.reason == nil)
        #expect(state.apply(.control([0x02], busy: false), behaviour: behaviour) == [0x02, 0x00])
        #expect(state.commits == 1)
    }

    @Test func aWrongCRCIsRefusedAndChangesNothing() throws {
        let behaviour = try #require(try Self.thermostat().behaviour)
        var state = DeviceState(state: 0)
        let good = Self.config(interval: 300, room: "Kitchen")
        // The same CRC little-endian: the bytes are right, their order is not.
        let swapped = Self.config(interval: 300, room: "Kitchen", crc: [good[22], good[21]])
        #expect(state.apply(.control(swapped, busy: false), behaviour: behaviour) == [0x01, 0x01])
        #expect(state.config == nil && state.state == 0x00)
        let reason = try #require(state.commands.last?.reason)
        #expect(reason == "CRC-16/CCITT-FALSE \([good[22], good[21]].hexString) does not match \([good[21], good[22]].hexString), the CRC of the 20 bytes before it")
        // One bit of the body changed in transit: refused too.
        var damaged = good
        damaged[5] ^= 0x01
        #expect(state.apply(.control(damaged, busy: false), behaviour: behaviour) == [0x01, 0x01])
        // Too short to hold a CRC.
        #expect(state.apply(.control([0x01, 0xAA], busy: false), behaviour: behaviour) == [0x01, 0x01])
        #expect(state.commands.last?.reason == "1 byte, shorter than the 2-byte CRC-16/CCITT-FALSE")
        // Nothing was configured, so a commit is refused.
        #expect(state.apply(.control([0x02], busy: false), behaviour: behaviour) == [0x02, 0x01])
        #expect(state.config == nil && state.commits == 0)
        // A right CRC over a payload of the wrong length passes the check and meets the length rule.
        var long = Array(good[1...20]) + [0x00]
        let crc = CRCAlgorithm.crc16CCITTFalse.checksum(long)
        long = [0x01] + long + [UInt8(crc >> 8), UInt8(crc & 0xFF)]
        #expect(state.apply(.control(long, busy: false), behaviour: behaviour) == [0x01, 0x01])
        #expect(state.commands.last?.reason == nil)
    }

    @Test func aThirtyTwoBitCRCLittleEndian() throws {
        let check = CommandBehaviour.CRCCheck(algorithm: .crc32ISOHDLC, bigEndian: false)
        let payload = Array("123456789".utf8)
        #expect(try check.check(payload + [0x26, 0x39, 0xF4, 0xCB]).get() == payload)
        #expect(throws: CommandBehaviour.CRCCheck.Mismatch.self) { try check.check(payload + [0xCB, 0xF4, 0x39, 0x26]).get() }
        #expect(try check.check([0x00, 0x00, 0x00, 0x00]).get() == [], "an empty body's CRC-32 is 0")
    }

    @Test func theDumpSaysWhyACommandWasRefused() async throws {
        let model = try Self.thermostat()
        let spec = SimulatedDeviceSpec(id: "TH-1", name: "THERMO-1", overrides: nil)
        let central = try SimulatedCentral(model: model, devices: [spec], inventoryFile: "inv.yaml", options: SimulatorOptions(seed: 1, latencyScale: 0))
        var client = try await Fixtures.connect(central, "TH-1")
        try await client.discover()
        _ = try await client.subscribe(0xFFD2)
        let good = Self.config(interval: 60, room: "Hall")
        for (sent, ack) in [(Self.config(interval: 60, room: "Hall", crc: [0, 0]), [UInt8]([0x01, 0x01])), (good, [0x01, 0x00])] {
            #expect(try await client.write(0xFFD1, sent) == .writeResponse)
            #expect(try await client.notification()?.value == ack)
        }
        await client.link.disconnect()
        let d = try #require(central.dump(device: "TH-1"))
        #expect(d.config == Array(good[1...20]).hexString)
        #expect(d.commands.map(\.status) == ["01", "00"])
        #expect(d.commands[0].reason?.hasPrefix("CRC-16/CCITT-FALSE 0000 does not match") == true)
        #expect(d.commands[1].reason == nil)
        // A command without a reason is written as before: no `reason` key.
        let json = SimulatorDump(seed: 1, devices: [d]).json()
        #expect(json.components(separatedBy: "\"reason\"").count == 2)
    }

    @Test("a model's CRC mistakes are errors at their position", arguments: [
        ("crc: { algorithm: CRC-16/CCIT-FALSE, as: uint16be }", "unknown CRC `CRC-16/CCIT-FALSE`", "did you mean `CRC-16/CCITT-FALSE`?"),
        ("crc: { algorithm: CRC-16/CCITT-FALSE }", "`crc` needs `as`: how the device writes its CRC", "`uint16le` (low byte first) or `uint16be`"),
        ("crc: { as: uint16be }", "`crc` needs an `algorithm` (a catalogue name such as CRC-16/CCITT-FALSE)", nil),
        ("crc: { algorithm: CRC-32/ISO-HDLC, as: uint16be }", "CRC-32/ISO-HDLC is written as `uint32le` or `uint32be`, not `uint16be`", nil),
        ("crc: { algorithm: CRC-16/XMODEM, as: uint16be, over: all }", "unknown key `over` in crc", nil),
    ] as [(String, String, String?)])
    func crcMistakes(_ c: (yaml: String, message: String, hint: String?)) throws {
        let text = try String(contentsOfFile: Fixtures.root + "/inventory/models/thermostat.yaml", encoding: .utf8)
            .replacingOccurrences(of: "crc: { algorithm: CRC-16/CCITT-FALSE, as: uint16be }", with: c.yaml)
        do {
            _ = try DeviceModel.parse(Array(text.utf8), file: "thermostat.yaml")
            Issue.record("accepted: \(c.yaml)")
        } catch {
            #expect(error.message.hasPrefix(c.message), "\(error.message)")
            if let hint = c.hint { #expect(error.hint == hint) }
            #expect(error.mark?.line == 49, "on the command's line")
        }
    }
}
