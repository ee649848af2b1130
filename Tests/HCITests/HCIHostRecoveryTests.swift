import BLE
import HCI
import Testing

private func hex(_ s: String) -> [UInt8] { [UInt8](hex: s.replacingOccurrences(of: " ", with: "")) ?? [] }
private func x(_ s: String) -> String { s.replacingOccurrences(of: " ", with: "") }
private let a = BluetoothAddress("F0:00:00:00:00:01", kind: .random)!
private let b = BluetoothAddress("F0:00:00:00:00:02", kind: .random)!
private let wireA = "0100000000f0", wireB = "0200000000f0"
private let fresh = BluetoothAddress("D1:11:22:33:44:55", kind: .random)!

/// A host brought up through `.start` by a scripted controller: a plain controller (manufacturer
/// 0x0002, BD_ADDR zero, 27-byte buffers, DLE and 2M, an 8-entry Filter Accept List, Read RSSI).
struct SetupHarness {
    var h: HostHarness
    var profiles: [ControllerSetup.Profile] = []
    var failures: [BLEError] = []
    var linksDown: [(HCIHost.LinkID, DisconnectReason)] = []
    var reopens = 0

    init(resynchronise: Bool = false, configure: (inout HCIHost.Configuration) -> Void = { _ in }) {
        h = HostHarness(skipReady: true) { c in
            c.resynchronise = resynchronise
            configure(&c)
        }
        bringUp(.start(ControllerSetup.Configuration(identity: .init(canStore: true, fresh: fresh))))
    }

    /// The controller's answer to a command it was sent (by opcode, as written).
    static func answer(_ command: String) -> String? {
        let opcode = String(command.dropFirst(2).prefix(4))
        let p: String
        switch opcode {
        case "030c": p = "00"                                          // Reset
        case "0110": p = "00 09 0000 09 0200 0000"                     // version: not Zephyr
        case "0210": p = "01"                                          // supported commands: unknown
        case "0910": p = "00 000000000000"                             // BD_ADDR zero
        case "0220": p = "00 1b00 04"                                  // LE buffers 27 × 4
        case "010c", "0120", "0520", "1020", "2420", "3120": p = "00"
        case "0320": p = "00 2001000000000000"                         // DLE, 2M
        case "1c20": p = "00 0000000000000000"
        case "0f20": p = "00 08"
        case "2220": p = "02 ff0e"                                     // probes: the command is known
        case "3220": return "04 0f04 02 01 3220"
        case "0514": p = "02 ff0e 00"
        default: return nil
        }
        return "04 0e\(String(format: "%02x", 3 + hex(p).count)) 01 \(opcode) \(p)"
    }

    /// Feeds `event` and answers bring-up's commands until the controller is up (or bring-up fails).
    mutating func bringUp(_ event: HCIHost.Event) {
        var actions = record(h.on(event))
        for _ in 0..<64 {
            guard !actions.contains(where: { if case .controllerUp = $0 { return true } else { return false } }),
                  failures.isEmpty else { return }
            guard let command = h.written.last(where: { $0.hasPrefix("01") }), let answer = Self.answer(command) else { return }
            h.written = []
            actions = record(h.controller(answer))
        }
    }

    @discardableResult
    mutating func record(_ actions: [HCIHost.Action]) -> [HCIHost.Action] {
        for action in actions {
            switch action {
            case .controllerUp(let p): profiles.append(p)
            case .failure(let e): failures.append(e)
            case .linkDown(let id, let reason): linksDown.append((id, reason))
            case .reopenTransport: reopens += 1
            default: break
            }
        }
        return actions
    }

    mutating func on(_ event: HCIHost.Event) -> [HCIHost.Action] { record(h.on(event)) }
    mutating func controller(_ text: String) -> [HCIHost.Action] { record(h.controller(text)) }

    /// Connects request `id` to `peer` (by address, filter policy 0) as handle `handle`.
    mutating func connect(_ id: UInt64, _ peer: String, handle: String) -> HCIHost.LinkID? {
        _ = on(.connect(id, id == 1 ? a : b, timeout: .seconds(30)))
        _ = controller("04 0f04 00 01 0d20")
        let up = controller("04 3e13 01 00 \(handle) 00 01 \(peer) 1800 0000 f401 00")
        _ = h.take()
        return up.compactMap { if case .connected(_, let info) = $0 { return info.id } else { return nil } }.first
    }
}

@Suite struct HCIHostRecoveryTests {
    @Test func aHardwareErrorDropsTheLinksAndBringsTheControllerUpAgainAsTheSameStation() throws {
        var s = SetupHarness()
        let identity = try #require(s.profiles.first?.identity)
        #expect(identity == StationIdentity(address: fresh, source: .generated))
        let connected = s.connect(1, wireA, handle: "4000")
        let link = try #require(connected)
        // A send partly with the controller (6 fragments, 4 credits), and another device waiting to connect.
        _ = s.on(.send(7, link, .att, [UInt8](repeating: 0x52, count: 150)))
        _ = s.on(.connect(2, b, timeout: .seconds(30)))
        _ = s.h.take()
        let down = s.controller("04 1001 01")
        // Its link is down with a reason that says why (retryable: a disconnection), the send fails,
        // and the controller is reset first of all.
        #expect(s.linksDown.map(\.0) == [link])
        #expect(s.linksDown.first?.1.text.contains("hardware error 0x1") == true)
        #expect(down.contains(.sendFailed(7, .disconnected(s.linksDown[0].1))))
        #expect(down.contains { if case .controllerDown = $0 { return true } else { return false } })
        #expect(s.h.written.last == "01030c00")
        #expect(s.failures.isEmpty)
        // Brought up again: the same identity (LE Set Random Address with it), no new one chosen.
        s.bringUp(.received([]))
        #expect(s.profiles.count == 2 && s.profiles[1].identity == identity)
        // The waiting connect goes to the new controller.
        #expect(s.h.written.contains(x("010d2019 6000 6000 00 01 \(wireB) 01 0c00 1800 0000 f401 0000 0000")))
        #expect(s.h.host.statistics.reinitialisations == 1)
    }

    @Test func devicesWaitingInTheFilterAcceptListAreAddedAgainAfterTheReset() throws {
        var s = SetupHarness()
        _ = s.on(.connect(1, a, timeout: .seconds(30)))
        _ = s.controller("04 0f04 00 01 0d20")
        _ = s.on(.connect(2, b, timeout: .seconds(30)))
        _ = s.controller("04 0e04 01 0e20 00")
        _ = s.controller("04 3e13 01 02 0000 00 01 \(wireA) 0000 0000 0000 00")
        _ = s.controller("04 0e04 01 1120 00")
        _ = s.controller("04 0e04 01 1120 00")
        _ = s.controller("04 0f04 00 01 0d20")
        _ = s.h.take()
        // The controller resets while both wait in its list: the list is gone with it.
        _ = s.controller("04 1001 02")
        s.bringUp(.received([]))
        // Built again from scratch: both added (the list the host keeps started over), one initiation.
        #expect(s.h.take() == [x("01112007 01\(wireA)")])
        _ = s.controller("04 0e04 01 1120 00")
        #expect(s.h.take() == [x("01112007 01\(wireB)")])
        _ = s.controller("04 0e04 01 1120 00")
        #expect(s.h.take() == [x("010d2019 6000 6000 01 01 \(wireA) 01 0c00 1800 0000 f401 0000 0000")])
    }

    @Test func aUARTThatLostSyncIsResetAndTheDecoderFindsTheNextPacket() throws {
        var s = SetupHarness(resynchronise: true)
        let connected = s.connect(1, wireA, handle: "4000")
        let link = try #require(connected)
        // A byte lost in a Disconnection Complete: what is left makes no sense as a packet.
        _ = s.controller("04 0504 00 40 13 04 0e04 01 0000 00")
        #expect(s.linksDown.map(\.0) == [link])
        #expect(s.linksDown.first?.1.text.contains("lost sync") == true)
        #expect(s.h.written.last == "01030c00")
        // Garbage before the Reset's answer (not yet in step again) is only skipped.
        s.h.written = []
        _ = s.controller("13 37")
        #expect(s.h.written.isEmpty)
        s.h.written = ["01030c00"]
        s.bringUp(.received([]))
        #expect(s.profiles.count == 2)
        #expect(s.h.host.statistics.reinitialisations == 1)
    }

    @Test func withoutResynchronisingBytesThatAreNoPacketAreOnlySkipped() throws {
        var s = SetupHarness(resynchronise: false)
        #expect(s.connect(1, wireA, handle: "4000") != nil)
        _ = s.controller("13 37 ff")
        #expect(s.linksDown.isEmpty && s.h.host.statistics.discardedH4Bytes == 3)
    }

    @Test func aTransportThatWentAwayIsReopenedUntilItComesBackOrTheAttemptsRunOut() throws {
        var s = SetupHarness { $0.reopenAttempts = 3 }
        let connected = s.connect(1, wireA, handle: "4000")
        let link = try #require(connected)
        _ = s.on(.connect(2, b, timeout: .seconds(30)))
        _ = s.on(.transportLost("the controller closed the connection"))
        #expect(s.linksDown.map(\.0) == [link])
        #expect(s.h.armed[.reopen] == .milliseconds(100))
        _ = s.on(.deadline(.reopen))
        #expect(s.reopens == 1)
        _ = s.on(.transportReopenFailed("connection refused"))
        #expect(s.h.armed[.reopen] == .milliseconds(250))
        _ = s.on(.deadline(.reopen))
        s.h.written = []
        s.bringUp(.transportReopened)
        #expect(s.profiles.count == 2 && s.profiles[1].identity == s.profiles[0].identity)
        #expect(s.h.written.contains(x("010d2019 6000 6000 00 01 \(wireB) 01 0c00 1800 0000 f401 0000 0000")))

        // Gone for good: after the attempts, the adapter fails.
        _ = s.on(.transportLost("gone"))
        for _ in 0..<3 {
            _ = s.on(.deadline(.reopen))
            _ = s.on(.transportReopenFailed("no such device"))
        }
        #expect(s.failures.count == 1)
        #expect("\(s.failures[0])".contains("did not come back after 3 attempts"))
    }

    @Test func aControllerThatKeepsResettingFailsTheAdapter() {
        var s = SetupHarness()
        for code in 1...4 {
            _ = s.controller("04 1001 0\(code)")
        }
        #expect(s.failures.count == 1)
        #expect("\(s.failures[0])".contains("without coming up in between"))
    }
}
