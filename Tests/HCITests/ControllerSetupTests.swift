import Foundation
import BLE
import BLESecurity
import HCI
import Testing

private func hex(_ s: String) -> [UInt8] { [UInt8](hex: s.replacingOccurrences(of: " ", with: "")) ?? [] }
private func x(_ s: String) -> String { s.replacingOccurrences(of: " ", with: "") }

/// A controller's answers, step by step, to the setup machine: each `expect` checks the command the
/// machine sends (golden bytes, without the H4 indicator) and feeds the answer.
private struct SetupDriver {
    var setup: ControllerSetup
    var pending: (ControllerSetup.Step, String)?
    var logs: [String] = []
    var flushed = 0
    var result: ControllerSetup.Action?

    init(_ configuration: ControllerSetup.Configuration) {
        setup = ControllerSetup(configuration)
        take(setup.start())
    }

    mutating func take(_ actions: [ControllerSetup.Action]) {
        pending = nil
        for a in actions {
            switch a {
            case .send(let step, let packet, _): pending = (step, packet.bytes.hexString)
            case .flushInput: flushed += 1
            case .log(let t): logs.append(t)
            case .done, .failed: result = a
            }
        }
    }

    /// The machine sent `command`; the controller answers with `outcome`.
    mutating func expect(_ command: String, _ outcome: HCICommandFlow.Outcome, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(pending?.1 == x(command), sourceLocation: sourceLocation)
        guard let (step, _) = pending else { return }
        take(setup.finished(step, outcome))
    }

    var profile: ControllerSetup.Profile? {
        if case .done(let p)? = result { return p }
        return nil
    }
}

private func complete(_ s: String) -> HCICommandFlow.Outcome { .complete(hex(s)) }

/// Supported commands: LE Read Buffer Size v2 (41.5), LE Set Default PHY (35.5), LE Set PHY (35.6), LE Set
/// Data Length (33.6), LE Write Suggested Default Data Length (34.0), Read RSSI (15.5), Remote Connection
/// Parameter Request Reply (33.4).
private let commandsHex = SupportedCommands.with([(41, 5), (35, 5), (35, 6), (33, 6), (34, 0), (15, 5), (33, 4)]).octets.hexString
private let zephyrStatic = BluetoothAddress("C4:5A:00:00:00:01", kind: .random)!
private let identityRoot = "00112233445566778899aabbccddeeff"
private let fresh = BluetoothAddress("D1:11:22:33:44:55", kind: .random)!

/// The answers of a controller from Reset to LE Set Event Mask: `company` in Read Local Version
/// Information, its supported commands (nil: it does not say), its BD_ADDR, and LE Read Buffer Size v2
/// (251 × 10) when its commands say so, else v1 (27 × 4).
private func prelude(_ d: inout SetupDriver, company: String, commands: String?, bdaddr: String) {
    d.expect("03 0c 00", complete("00"))
    d.expect("01 10 00", complete("00 0b 0000 0b \(company) 0000"))
    d.expect("02 10 00", commands.map { complete("00 \($0)") } ?? complete("01"))
    d.expect("09 10 00", complete("00 \(bdaddr)"))
    if let c = commands, SupportedCommands(octets: hex(c)).leReadBufferSizeV2 {
        d.expect("60 20 00", complete("00 fb00 0a 0000 00"))
    } else {
        d.expect("02 20 00", complete("00 1b00 04"))
    }
    d.expect("01 0c 08 9080000200800020", complete("00"))
    d.expect("01 20 08 6f1a000000000000", complete("00"))
}

/// The answers of a controller from LE Set Random Address to the end (features DLE and 2M, both
/// probes understood, RSSI read), checking every command.
private func finishCommon(_ d: inout SetupDriver, randomAddress: String) {
    d.expect("05 20 06 \(randomAddress)", complete("00"))
    d.expect("03 20 00", complete("00 2001000000000000"))
    d.expect("1c 20 00", complete("00 0000c00000000000"))
    d.expect("0f 20 00", complete("00 08"))
    d.expect("10 20 00", complete("00"))
    d.expect("24 20 04 fb00 4808", complete("00"))
    d.expect("22 20 06 ff0e fb00 4808", complete("02 ff0e"))
    d.expect("31 20 03 00 02 02", complete("00"))
    d.expect("32 20 07 ff0e 00 02 02 0000", .status(.unknownConnectionIdentifier))
    d.expect("05 14 02 ff0e", complete("02 ff0e 00"))
}

@Suite struct ControllerSetupTests {
    @Test func aZephyrControllerIsTheStationItsStaticAddressSays() throws {
        var c = ControllerSetup.Configuration(identity: .init(fresh: fresh))
        c.resetAttempts = 1
        var d = SetupDriver(c)
        // Manufacturer 0x05F1 (the Linux Foundation: Zephyr), BD_ADDR zero, LE Read Buffer Size v2: 251 × 10.
        prelude(&d, company: "f105", commands: commandsHex, bdaddr: "000000000000")
        // Zephyr's vendor commands: Read Supported Commands (bit 8: Read Static Addresses), then that.
        d.expect("02 fc 00", complete("00 0301\(String(repeating: "00", count: 62))"))
        d.expect("09 fc 00", complete("00 01 010000005ac4 \(identityRoot)"))
        finishCommon(&d, randomAddress: "010000005ac4")
        let p = try #require(d.profile)
        #expect(p.zephyr)
        #expect(p.identity == StationIdentity(address: zephyrStatic, source: .controller,
                                              identityRoot: Key128(littleEndian: hex(identityRoot))))
        #expect(p.identity.irk != nil && p.identity.irk != p.identity.identityRoot)
        #expect(p.capabilities.aclMaxLength == 251 && p.capabilities.aclPackets == 10)
        #expect(p.capabilities.readsRSSI && p.capabilities.acceptListSize == 8 && !p.capabilities.extended)
    }

    @Test func aControllerWithoutAnAddressIsTheStationKeptWithTheBondsOrANewOne() throws {
        let stored = BluetoothAddress("E2:00:00:00:00:07", kind: .random)!
        for (inputs, want) in [(ControllerSetup.IdentityInputs(stored: stored, canStore: true, fresh: fresh), StationIdentity(address: stored, source: .stored)),
                               (ControllerSetup.IdentityInputs(canStore: true, fresh: fresh), StationIdentity(address: fresh, source: .generated)),
                               (ControllerSetup.IdentityInputs(canStore: false, fresh: fresh), StationIdentity(address: fresh, source: .ephemeral))] {
            var d = SetupDriver(ControllerSetup.Configuration(identity: inputs))
            // Not Zephyr (manufacturer 0x0002), BD_ADDR zero, no supported commands: LE Read Buffer Size v1.
            prelude(&d, company: "0200", commands: nil, bdaddr: "000000000000")
            finishCommon(&d, randomAddress: want.address.bytes.hexString)
            #expect(d.profile?.identity == want)
        }
    }

    @Test func addressInTheSpecWinsAndAPublicAddressGivesADerivedOne() throws {
        let configured = BluetoothAddress("C0:FF:EE:00:00:01", kind: .random)!
        var d = SetupDriver(ControllerSetup.Configuration(identity: .init(configured: configured, fresh: fresh)))
        // Zephyr, but `address=` is given: no vendor commands.
        prelude(&d, company: "f105", commands: nil, bdaddr: "000000000000")
        finishCommon(&d, randomAddress: "010000eeffc0")
        #expect(d.profile?.identity == StationIdentity(address: configured, source: .configured))

        let bdaddr = BluetoothAddress(value: 0x00AA_0000_0001)
        var p = SetupDriver(ControllerSetup.Configuration(identity: .init(canStore: true, fresh: fresh)))
        prelude(&p, company: "0200", commands: nil, bdaddr: bdaddr.bytes.hexString)
        let derived = try #require(StationIdentity.derived(from: bdaddr))
        finishCommon(&p, randomAddress: derived.bytes.hexString)
        #expect(p.profile?.identity == StationIdentity(address: derived, source: .publicAddress))
    }

    @Test func bringingItUpAgainKeepsTheIdentityAndAsksNoVendorCommand() throws {
        var c = ControllerSetup.Configuration(identity: .init(fresh: fresh))
        c.identity.pinned = StationIdentity(address: zephyrStatic, source: .controller)
        var d = SetupDriver(c)
        prelude(&d, company: "f105", commands: commandsHex, bdaddr: "000000000000")
        finishCommon(&d, randomAddress: "010000005ac4")
        #expect(d.profile?.identity.address == zephyrStatic)
    }

    @Test func aResetWithoutAnswerIsTriedAgainAfterFlushingTheInput() {
        var c = ControllerSetup.Configuration(identity: .init(fresh: fresh))
        c.resetAttempts = 3
        var d = SetupDriver(c)
        d.expect("03 0c 00", .timedOut)
        #expect(d.flushed == 1)
        d.expect("03 0c 00", .timedOut)
        d.expect("03 0c 00", .timedOut)
        guard case .failed(let why)? = d.result else {
            Issue.record("bring-up did not fail")
            return
        }
        #expect(why.contains("Reset") && why.contains("timed out"))
        #expect(d.flushed == 2)
    }

    @Test func aControllerThatRefusesARequiredCommandFailsBringUpWithItsName() {
        var d = SetupDriver(ControllerSetup.Configuration(identity: .init(fresh: fresh)))
        d.expect("03 0c 00", complete("00"))
        d.expect("01 10 00", complete("00 09 0000 09 0200 0000"))
        d.expect("02 10 00", .timedOut)
        d.expect("09 10 00", complete("00 000000000000"))
        // No LE buffers: the shared ones, which are none either.
        d.expect("02 20 00", complete("00 0000 00"))
        d.expect("05 10 00", complete("00 0000 00 0000 0000"))
        guard case .failed(let why)? = d.result else {
            Issue.record("bring-up did not fail")
            return
        }
        #expect(why.contains("no ACL buffers"))
    }

    @Test func extendedScanningIsUsedWhereTheControllerHasIt() throws {
        let commands = SupportedCommands.with([(37, 5), (37, 6), (37, 7), (15, 5)]).octets.hexString
        var d = SetupDriver(ControllerSetup.Configuration(identity: .init(canStore: true, fresh: fresh)))
        prelude(&d, company: "0200", commands: commands, bdaddr: "01000000aa00")
        let derived = try #require(StationIdentity.derived(from: BluetoothAddress(value: 0x00AA_0000_0001)))
        d.expect("05 20 06 \(derived.bytes.hexString)", complete("00"))
        // Extended advertising (bit 12), no DLE, no 2M.
        d.expect("03 20 00", complete("00 0010000000000000"))
        d.expect("1c 20 00", .timedOut)
        d.expect("0f 20 00", .timedOut)
        d.expect("05 14 02 ff0e", complete("02 ff0e 00"))
        #expect(d.profile?.capabilities.extended == true)
    }
}

@Suite struct StationIdentityTests {
    @Test func theChoiceFollowsTheOrderAndWarnsOnlyForAnAddressOfItsOwn() {
        let configured = BluetoothAddress("C0:00:00:00:00:01", kind: .random)!
        let entry = ZephyrStaticAddressesReturn.Entry(address: zephyrStatic, identityRoot: hex(identityRoot))
        let bdaddr = BluetoothAddress(value: 0x00AA_0000_0001)
        let stored = BluetoothAddress("E0:00:00:00:00:02", kind: .random)!
        func pick(_ c: StationIdentity.Candidates) -> StationIdentity.Source { StationIdentity.choose(c).source }
        #expect(pick(.init(configured: configured, controllerStatic: entry, publicAddress: bdaddr, stored: stored, canStore: true, fresh: fresh)) == .configured)
        #expect(pick(.init(controllerStatic: entry, publicAddress: bdaddr, stored: stored, canStore: true, fresh: fresh)) == .controller)
        #expect(pick(.init(publicAddress: bdaddr, stored: stored, canStore: true, fresh: fresh)) == .publicAddress)
        #expect(pick(.init(publicAddress: BluetoothAddress(value: 0), stored: stored, canStore: true, fresh: fresh)) == .stored)
        #expect(pick(.init(publicAddress: BluetoothAddress(value: 0), canStore: true, fresh: fresh)) == .generated)
        #expect(pick(.init(canStore: false, fresh: fresh)) == .ephemeral)
        // A stored entry that is no valid static address is not used.
        #expect(pick(.init(stored: BluetoothAddress("40:00:00:00:00:01", kind: .random)!, canStore: true, fresh: fresh)) == .generated)
        // An identity root of zeros is no identity root.
        let zeros = ZephyrStaticAddressesReturn.Entry(address: zephyrStatic, identityRoot: [UInt8](repeating: 0, count: 16))
        #expect(StationIdentity.choose(.init(controllerStatic: zeros, fresh: fresh)).identityRoot == nil)

        let generated = StationIdentity(address: fresh, source: .generated)
        #expect(generated.warning(adapter: "hci:serial:/dev/ttyACM0")?.contains("hci:serial:/dev/ttyACM0") == true)
        #expect(StationIdentity(address: fresh, source: .ephemeral).warning(adapter: "x")?.contains("--bonds") == true)
        #expect(StationIdentity(address: zephyrStatic, source: .controller).warning(adapter: "x") == nil)
    }

    @Test func aNewStaticAddressHasItsTopBitsSetAndIsNeverAllZerosOrOnes() {
        #expect(StationIdentity.staticAddress(random: 0).isValidStaticAddress)
        #expect(StationIdentity.staticAddress(random: .max).isValidStaticAddress)
        #expect(StationIdentity.staticAddress(random: 0x1234_5678_9ABC).value == 0xD234_5678_9ABC)
        #expect(!BluetoothAddress("C0:00:00:00:00:00")!.isValidStaticAddress)
        #expect(!BluetoothAddress("7F:00:00:00:00:01")!.isValidStaticAddress)
    }

    @Test func theIRKDerivesFromTheIdentityRootAsD1() throws {
        // d1(IR, 1, 0) = e(IR, 0x…0001) (Vol 3 Part H 2.4.2.1, B.2.1).
        let ir = try #require(Key128(littleEndian: hex(identityRoot)))
        let identity = StationIdentity(address: zephyrStatic, source: .controller, identityRoot: ir)
        #expect(identity.irk == Key128(try SMPCrypto.e(ir.value, 1)))
        #expect(StationIdentity(address: zephyrStatic, source: .controller).irk == nil)
    }

    @Test func aGeneratedIdentityIsKeptWithTheBondsAcrossStores() async throws {
        let path = "/tmp/provision-bonds-identity-\(UInt64.random(in: 0...UInt64.max)).json"
        defer { unlink(path); unlink(path + ".lock") }
        let store = try BondStore(path: path)
        #expect(store.stationIdentity(adapter: "hci:serial:/dev/ttyACM0") == nil)
        try await store.saveStationIdentity(fresh, adapter: "hci:serial:/dev/ttyACM0")
        let again = try BondStore(path: path)
        #expect(again.stationIdentity(adapter: "hci:serial:/dev/ttyACM0") == fresh)
        #expect(again.stationIdentity(adapter: "hci:serial:/dev/ttyACM1") == nil)
    }
}
