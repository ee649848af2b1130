import BLE
import HCI
import Testing

private func hex(_ s: String) -> [UInt8] { [UInt8](hex: s.replacingOccurrences(of: " ", with: "")) ?? [] }
private let a = BluetoothAddress("F0:00:00:00:00:01", kind: .random)!
private let b = BluetoothAddress("F0:00:00:00:00:02", kind: .random)!

/// An `HCIHost` with a controller played by the test: what the host writes is collected as hex.
struct HostHarness {
    var host: HCIHost
    /// Every write, in order, as hex without spaces.
    var written: [String] = []
    /// Deadlines armed and not disarmed.
    var armed: [HCIHost.Deadline: Duration] = [:]

    init(acceptListSize: Int = 8, states: UInt64? = nil, features: UInt64? = nil, extended: Bool = false, skipReady: Bool = false,
         configure: (inout HCIHost.Configuration) -> Void = { _ in }) {
        var c = HCIHost.Configuration()
        configure(&c)
        host = HCIHost(c)
        guard !skipReady else { return }
        _ = on(.controllerReady(HCIHost.Capabilities(aclMaxLength: 27, aclPackets: 4, leFeatures: features,
                                                      supportedStates: states, acceptListSize: acceptListSize, extended: extended)))
    }

    @discardableResult
    mutating func on(_ event: HCIHost.Event) -> [HCIHost.Action] {
        let actions = host.handle(event)
        for action in actions {
            switch action {
            case .write(let bytes): written.append(bytes.hexString)
            case .arm(let d, let limit): armed[d] = limit
            case .disarm(let d): armed[d] = nil
            default: break
            }
        }
        return actions
    }

    /// Bytes from the controller (an H4 stream, spaces allowed).
    @discardableResult
    mutating func controller(_ text: String) -> [HCIHost.Action] { on(.received(hex(text))) }

    /// The writes since the last call (compare with hex written with spaces).
    mutating func take() -> [String] {
        defer { written = [] }
        return written
    }
}

private func connectedLinks(_ actions: [HCIHost.Action]) -> [(HCIHost.RequestID, HCIHost.LinkInfo)] {
    actions.compactMap { if case .connected(let r, let info) = $0 { return (r, info) } else { return nil } }
}

private func failures(_ actions: [HCIHost.Action]) -> [(HCIHost.RequestID, BLEError)] {
    actions.compactMap { if case .connectFailed(let r, let e) = $0 { return (r, e) } else { return nil } }
}

/// LE Create Connection as the host sends it by default (15–30 ms interval, 5 s supervision timeout).
private func createConnection(policy: UInt8, head: String) -> String {
    x("010d2019 6000 6000 \(policy == 0 ? "00" : "01") 01 \(head) 01 0c00 1800 0000 f401 0000 0000")
}

/// Hex as written in the tests (spaces for reading) as `take()` returns it.
private func x(_ s: String) -> String { s.replacingOccurrences(of: " ", with: "") }

private let wireA = "0100000000f0", wireB = "0200000000f0"
private let statusOK = "04 0f04 00 01"

@Suite struct HCIHostTests {
    @Test func twoConnectsBecomeOneAcceptListInitiationOnTheWire() throws {
        var h = HostHarness()
        h.on(.connect(1, a, timeout: .seconds(10)))
        #expect(h.take() == [createConnection(policy: 0, head: wireA)])
        h.controller("\(statusOK) 0d20")
        // A second device: cancel, put both in the list, one initiation with filter policy 1.
        h.on(.connect(2, b, timeout: .seconds(10)))
        #expect(h.take() == ["010e2000"])
        h.controller("04 0e04 01 0e20 00")
        h.controller("04 3e13 01 02 0000 00 01 \(wireA) 0000 0000 0000 00")
        #expect(h.take() == [x("01112007 01\(wireA)")])
        h.controller("04 0e04 01 1120 00")
        #expect(h.take() == [x("01112007 01\(wireB)")])
        h.controller("04 0e04 01 1120 00")
        #expect(h.take() == [createConnection(policy: 1, head: wireA)])
        h.controller("\(statusOK) 0d20")
        // B advertises first: its link is up, and A's turn goes on by address.
        let actions = h.controller("04 3e13 01 00 4100 00 01 \(wireB) 1800 0000 f401 00")
        let links = connectedLinks(actions)
        #expect(links.count == 1 && links.first?.0 == 2)
        #expect(links.first?.1.handle == 0x41 && links.first?.1.peer == b)
        #expect(h.take() == [createConnection(policy: 0, head: wireA)])
        #expect(h.host.connections.acceptListVerified)
    }

    @Test func aCompletionThatBeatsTheCancelOfAGoneCallerIsDisconnected() {
        var h = HostHarness()
        h.on(.connect(1, a, timeout: .seconds(10)))
        h.controller("\(statusOK) 0d20")
        _ = h.take()
        let cancelled = h.on(.cancelConnect(1))
        #expect(failures(cancelled).map { $0.1 } == [.cancelled])
        #expect(h.take() == ["010e2000"])
        // The connection completes before the cancel's Command Complete: nobody wants it. Its
        // Disconnect waits for the controller's room, which the cancel's answer gives back.
        h.controller("04 3e13 01 00 4000 00 01 \(wireA) 1800 0000 f401 00")
        #expect(h.take().isEmpty)
        h.controller("04 0e04 01 0e20 0c")
        #expect(h.take() == [x("01060403 4000 13")])
        h.controller("\(statusOK) 0604")
        let down = h.controller("04 0504 00 4000 16")
        #expect(!down.contains { if case .linkDown = $0 { return true } else { return false } }, "nobody held the orphan")
        #expect(h.host.linkCount == 0)
        #expect(h.host.statistics.orphanConnections == 1)
    }

    @Test func aCancelAcknowledgedFirstEndsWithItsConnectionCompleteAndALateOneIsDisconnected() {
        var h = HostHarness()
        h.on(.connect(1, a, timeout: .seconds(10)))
        h.controller("\(statusOK) 0d20")
        h.on(.cancelConnect(1))
        _ = h.take()
        h.controller("04 0e04 01 0e20 00")
        #expect(h.armed.keys.contains { if case .initiator(.cancelGuard) = $0 { return true } else { return false } })
        h.controller("04 3e13 01 02 0000 00 01 \(wireA) 0000 0000 0000 00")
        #expect(!h.armed.keys.contains { if case .initiator = $0 { return true } else { return false } })
        #expect(h.take().isEmpty)
        // Late: a success with nothing pending is dropped, always.
        h.controller("04 3e13 01 00 4200 00 01 \(wireA) 1800 0000 f401 00")
        #expect(h.take() == ["01060403420013"])
        #expect(h.host.statistics.unexpectedEvents >= 1)
    }

    @Test func aConnectDeadlineFailsTheCallerAndCancels() {
        var h = HostHarness()
        h.on(.connect(1, a, timeout: .milliseconds(300)))
        h.controller("\(statusOK) 0d20")
        _ = h.take()
        #expect(h.armed[.connect(1)] == .milliseconds(300))
        let expired = h.on(.deadline(.connect(1)))
        #expect(failures(expired).map { $0.1 } == [.timeout(operation: "connect to F0:00:00:00:00:01", limit: .milliseconds(300))])
        #expect(h.take() == ["010e2000"])
    }

    @Test func theScanStaysOnWhileConnectingWhereTheControllerCan() {
        var h = HostHarness(states: LESupportedStatesReturn.activeScanningAndInitiating)
        h.on(.scanWanted(true))
        #expect(h.take() == ["010b200701600060000100"])
        h.controller("04 0e04 01 0b20 00")
        #expect(h.take() == ["010c20020100"])
        h.controller("04 0e04 01 0c20 00")
        // Connecting does not touch the scan.
        h.on(.connect(1, a, timeout: .seconds(10)))
        #expect(h.take() == [createConnection(policy: 0, head: wireA)])
        #expect(h.host.isScanning)
    }

    @Test func elseTheScanKeepsItsSliceThenPausesForTheInitiationAndResumesAfter() {
        var h = HostHarness(states: 0)
        h.on(.scanWanted(true))
        h.controller("04 0e04 01 0b20 00")
        h.controller("04 0e04 01 0c20 00")
        _ = h.take()
        // Consumers wait for advertisements: the scan keeps the radio for its slice first.
        let connect = h.on(.connect(1, a, timeout: .seconds(10)))
        #expect(h.take().isEmpty)
        let slice = try! #require(connect.compactMap { action -> ConnectionInitiator.Timer? in
            if case .arm(.initiator(let t), _) = action, case .scanSlice = t { return t } else { return nil }
        }.first)
        let paused = h.on(.deadline(.initiator(slice)))
        #expect(h.take() == ["010c20020000"])
        #expect(paused.contains { if case .log(let l) = $0 { return l.contains("cannot scan while") } else { return false } })
        h.controller("04 0e04 01 0c20 00")
        #expect(h.take() == [createConnection(policy: 0, head: wireA)])
        h.controller("\(statusOK) 0d20")
        h.controller("04 3e13 01 00 4000 00 01 \(wireA) 1800 0000 f401 00")
        #expect(h.take() == ["010c20020100"])
    }

    @Test func linksAreTunedWhereTheControllerSupportsItAndARefusalIsNotRepeated() {
        var h = HostHarness(features: LEFeaturesReturn.dataLengthExtension | LEFeaturesReturn.twoMegabitPHY)
        h.on(.connect(1, a, timeout: .seconds(10)))
        h.controller("\(statusOK) 0d20")
        _ = h.take()
        h.controller("04 3e13 01 00 4000 00 01 \(wireA) 1800 0000 f401 00")
        #expect(h.take() == [x("01222006 4000 fb00 4808")])
        // Data length refused as unknown: not asked again. PHY goes next.
        h.controller("04 0e06 01 2220 01 4000")
        #expect(h.take() == [x("01322007 4000 00 02 02 0000")])
        h.controller("\(statusOK) 3220")
        h.controller("04 3e06 0c 00 4000 02 02")
        h.on(.connect(2, b, timeout: .seconds(10)))
        h.controller("\(statusOK) 0d20")
        _ = h.take()
        h.controller("04 3e13 01 00 4100 00 01 \(wireB) 1800 0000 f401 00")
        #expect(h.take() == [x("01322007 4100 00 02 02 0000")])
    }

    @Test func attIsRoutedToItsLinkAndSignallingIsAnswered() {
        var h = HostHarness()
        h.on(.connect(1, a, timeout: .seconds(10)))
        h.controller("\(statusOK) 0d20")
        let up = h.controller("04 3e13 01 00 4000 00 01 \(wireA) 1800 0000 f401 00")
        let link = connectedLinks(up).first?.1.id ?? 0
        _ = h.take()
        let att = h.controller("02 4020 0700 0300 0400 0b0102")
        #expect(att.contains(.att(link, hex("0b0102"))))
        // The device asks for 7.5–15 ms; the link's limits are the adapter's 15–30 ms: accepted, and the
        // link runs at the overlap, 15 ms (LE Connection Update 12–12).
        h.controller("02 4020 1000 0c00 0500 12 07 0800 0600 0c00 0000 f401")
        #expect(h.take() == [x("02 4000 0a00 0600 0500 13 07 0200 0000"),
                             x("01 1320 0e 4000 0c00 0c00 0000 f401 0000 0000")])
        // 100–200 ms misses the link's range: refused (result 0x0001), nothing asked of the controller.
        h.controller("02 4020 1000 0c00 0500 12 08 0800 5000 a000 0000 f401")
        #expect(h.take() == [x("02 4000 0a00 0600 0500 13 08 0200 0100")])
        #expect(h.host.statistics.parameterRequestsAccepted == 1 && h.host.statistics.parameterRequestsRefused == 1)
    }

    @Test func connectionLimitExceededLowersTheSlots() {
        var h = HostHarness { $0.initiator.slots = 4 }
        h.on(.connect(1, a, timeout: .seconds(10)))
        h.controller("\(statusOK) 0d20")
        let refused = h.controller("04 3e13 01 09 0000 00 01 \(wireA) 0000 0000 0000 00")
        #expect(refused.contains(.slots(1)))
        #expect(failures(refused).count == 1)
        #expect(h.host.slots == 1)
    }
}
