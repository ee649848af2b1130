import BLE
import HCI
import Testing

private func hex(_ s: String) -> [UInt8] { [UInt8](hex: s.replacingOccurrences(of: " ", with: "")) ?? [] }
private func x(_ s: String) -> String { s.replacingOccurrences(of: " ", with: "") }
private let a = BluetoothAddress("F0:00:00:00:00:01", kind: .random)!
private let b = BluetoothAddress("F0:00:00:00:00:02", kind: .random)!
private let wireA = "0100000000f0", wireB = "0200000000f0"
private let both = LEFeaturesReturn.dataLengthExtension | LEFeaturesReturn.twoMegabitPHY

@Suite struct LinkTuningTests {
    private let defaults = ConnectionInitiator.Parameters()   // 15–30 ms, latency 0, 5 s

    @Test func theWorkflowsWishesGoOverTheAdaptersDefaultsWithinWhatTheControllerCan() {
        let able = LinkTuning.Abilities(dataLength: true, twoMegabitPHY: true)
        let plain = LinkTuning.target(defaults: defaults, defaultDataLength: 251, defaultPHY: .le2M, abilities: able, preferences: nil)
        #expect(plain == LinkTuning.Target(intervalMin: 0x0C, intervalMax: 0x18, latency: 0, supervisionTimeout: 0x01F4, dataLength: 251, phy: .le2M))
        let asked = LinkPreferences(interval: .microseconds(7500) ... .milliseconds(15), latency: 2, supervisionTimeout: .milliseconds(100),
                                    phy: .le1M, dataLength: 100)
        let t = LinkTuning.target(defaults: defaults, defaultDataLength: 251, defaultPHY: .le2M, abilities: able, preferences: asked)
        // The timeout is raised above (1 + latency) × interval × 2 = 90 ms: 100 ms is enough here.
        #expect(t == LinkTuning.Target(intervalMin: 6, intervalMax: 12, latency: 2, supervisionTimeout: 10, dataLength: 100, phy: nil))
        let long = LinkPreferences(interval: .milliseconds(400) ... .milliseconds(400), latency: 4, supervisionTimeout: .milliseconds(100))
        #expect(LinkTuning.target(defaults: defaults, defaultDataLength: nil, defaultPHY: nil, abilities: able, preferences: long).supervisionTimeout == 401)
        // What the controller cannot do is not asked.
        let unable = LinkTuning.target(defaults: defaults, defaultDataLength: 251, defaultPHY: .le2M,
                                       abilities: .init(dataLength: false, twoMegabitPHY: false),
                                       preferences: LinkPreferences(phy: .leCoded, dataLength: 251))
        #expect(unable.dataLength == nil && unable.phy == nil)
    }

    @Test func aPeersRequestIsAnsweredWithinTheLinksLimits() {
        let t = LinkTuning.Target(intervalMin: 6, intervalMax: 12, latency: 0, supervisionTimeout: 400)
        // 10–30 ms meets 7.5–15 ms: the link runs at 10–15 ms, with no latency (the station allows none).
        let overlap = ConnectionParameterUpdateRequest(intervalMin: 8, intervalMax: 24, latency: 4, timeout: 400)
        #expect(LinkTuning.answer(overlap, target: t) == ConnectionParameterUpdateRequest(intervalMin: 8, intervalMax: 12, latency: 0, timeout: 400))
        // 30–50 ms misses it; an invalid request is refused whatever the limits.
        #expect(LinkTuning.answer(ConnectionParameterUpdateRequest(intervalMin: 24, intervalMax: 40, latency: 0, timeout: 400), target: t) == nil)
        #expect(LinkTuning.answer(ConnectionParameterUpdateRequest(intervalMin: 6, intervalMax: 12, latency: 0, timeout: 5), target: t) == nil)
        // A timeout too short for the chosen values is raised.
        let short = ConnectionParameterUpdateRequest(intervalMin: 6, intervalMax: 12, latency: 0, timeout: 10)
        #expect(LinkTuning.answer(short, target: t)?.timeout == 10)
        #expect(LinkTuning.minimumTimeout(intervalMax: 3200, latency: 0) == 801)
        #expect(LinkTuning.minimumTimeout(intervalMax: 3200, latency: 499) == 3200)
    }
}

@Suite struct HCIHostLinkTests {
    @Test func aConnectWithItsOwnLinkSettingsGetsThemOnTheWire() {
        var h = HostHarness(features: both)
        let wants = LinkPreferences(interval: .microseconds(7500) ... .milliseconds(15), phy: .le2M, dataLength: 200)
        h.on(.connect(1, a, timeout: .seconds(10), link: wants))
        // LE Create Connection with 7.5–15 ms (6–12), the adapter's latency and timeout.
        #expect(h.take() == [x("010d2019 6000 6000 00 01 \(wireA) 01 0600 0c00 0000 f401 0000 0000")])
        h.controller("04 0f04 00 01 0d20")
        let up = h.controller("04 3e13 01 00 4000 00 01 \(wireA) 0600 0000 f401 00")
        let info = up.compactMap { if case .connected(_, let i) = $0 { return i } else { return nil } }.first
        #expect(info?.parameters == LinkParameters(interval: .microseconds(7500), latency: 0, supervisionTimeout: .seconds(5)))
        // 200 octets (TX_Time (200 + 14) × 8 µs = 1712 µs), then LE 2M; the interval is in range: no update.
        #expect(h.take() == [x("01222006 4000 c800 b006")])
        h.controller("04 0e06 01 2220 00 4000")
        #expect(h.take() == [x("01322007 4000 00 02 02 0000")])
        h.controller("04 0f04 00 01 3220")
        #expect(h.take().isEmpty)
    }

    @Test func aConnectionOutsideTheLinksRangeIsUpdatedAndWhatTheLinkGetsIsReported() throws {
        var h = HostHarness()
        let wants = LinkPreferences(interval: .microseconds(7500) ... .microseconds(7500))
        h.on(.connect(1, a, timeout: .seconds(10)))
        h.on(.connect(2, b, timeout: .seconds(10), link: wants))
        _ = h.take()
        // B is connected through an initiation A headed (15–30 ms): at 30 ms, it is updated to 7.5 ms.
        h.controller("04 0f04 00 01 0d20")
        h.controller("04 0e04 01 0e20 00")
        h.controller("04 3e13 01 02 0000 00 01 \(wireA) 0000 0000 0000 00")
        h.controller("04 0e04 01 1120 00")
        h.controller("04 0e04 01 1120 00")
        h.controller("04 0f04 00 01 0d20")
        _ = h.take()
        let up = h.controller("04 3e13 01 00 4100 00 01 \(wireB) 1800 0000 f401 00")
        let link = try #require(up.compactMap { if case .connected(2, let i) = $0 { return i.id } else { return nil } }.first)
        #expect(h.take().first == x("01 1320 0e 4100 0600 0600 0000 f401 0000 0000"))
        h.controller("04 0f04 00 01 1320")
        // The controller's reports change what the link got.
        let updated = h.controller("04 3e0a 03 00 4100 0600 0000 f401")
        #expect(updated.contains(.linkParameters(link, LinkParameters(interval: .microseconds(7500), latency: 0, supervisionTimeout: .seconds(5)))))
        let longer = h.controller("04 3e0b 07 4100 fb00 4808 fb00 4808")
        #expect(longer.contains(.linkParameters(link, LinkParameters(interval: .microseconds(7500), latency: 0, supervisionTimeout: .seconds(5),
                                                                      txOctets: 251, rxOctets: 251))))
        let faster = h.controller("04 3e06 0c 00 4100 02 02")
        #expect(faster.contains(.linkParameters(link, LinkParameters(interval: .microseconds(7500), latency: 0, supervisionTimeout: .seconds(5),
                                                                      txPHY: .le2M, rxPHY: .le2M, txOctets: 251, rxOctets: 251))))
        #expect(h.host.parameters(of: link)?.txPHY == .le2M)
    }

    @Test func aPeersLinkLayerRequestIsAnsweredWithinLimitsOrRefused() {
        var h = HostHarness()
        h.on(.connect(1, a, timeout: .seconds(10)))
        h.controller("04 0f04 00 01 0d20")
        h.controller("04 3e13 01 00 4000 00 01 \(wireA) 1800 0000 f401 00")
        _ = h.take()
        // LE Remote Connection Parameter Request for 20–40 ms, latency 0, 4 s: the link allows 15–30 ms.
        h.controller("04 3e0b 06 4000 1000 2000 0000 9001")
        #expect(h.take() == [x("0120200e 4000 1000 1800 0000 9001 0000 0000")])
        h.controller("04 0e06 01 2020 00 4000")
        // 50–100 ms: refused with Unacceptable Connection Parameters.
        h.controller("04 3e0b 06 4000 2800 5000 0000 9001")
        #expect(h.take() == [x("01212003 4000 3b")])
        #expect(h.host.statistics.parameterRequestsAccepted == 1 && h.host.statistics.parameterRequestsRefused == 1)
    }

    @Test func aControllerWithExtendedCommandsScansAndConnectsWithThem() {
        var h = HostHarness(states: LESupportedStatesReturn.activeScanningAndInitiating, features: both, extended: true)
        h.on(.scanWanted(true))
        // LE Set Extended Scan Parameters on LE 1M (active, 60 ms / 60 ms), then enable.
        #expect(h.take() == [x("01412008 01 00 01 01 6000 6000")])
        h.controller("04 0e04 01 4120 00")
        #expect(h.take() == [x("01422006 01 00 0000 0000")])
        h.controller("04 0e04 01 4220 00")
        // LE Extended Create Connection: scanning LE 1M, parameters for LE 1M and LE 2M.
        h.on(.connect(1, a, timeout: .seconds(10)))
        #expect(h.take() == [x("0143202a 00 01 01 \(wireA) 03 6000 6000 0c00 1800 0000 f401 0000 0000 6000 6000 0c00 1800 0000 f401 0000 0000")])
        h.controller("04 0f04 00 01 4320")
        let up = h.controller("04 3e1f 0a 00 4000 00 01 \(wireA) 000000000000 000000000000 1800 0000 f401 00")
        #expect(up.contains { if case .connected(1, _) = $0 { return true } else { return false } })
    }

    @Test func creditsGoToTheLinksWithFewestPacketsOutSoSixteenBusyLinksShare() {
        var acl = ACLFlowControl(maxFragment: 27, credits: 8)
        // Link 0 sends first and takes every credit with a long frame; fifteen more links then queue.
        var sent: [UInt16: Int] = [:]
        func count(_ actions: [ACLFlowControl.Action]) {
            for case .transmit(let p) in actions { sent[p.handle, default: 0] += 1 }
        }
        count(acl.enqueue(token: 1, handle: 0, frame: [UInt8](repeating: 0, count: 27 * 40)))
        for h in UInt16(1)...15 { count(acl.enqueue(token: UInt64(100 + h), handle: h, frame: [UInt8](repeating: 1, count: 27 * 4))) }
        #expect(sent == [0: 8])
        // As link 0's packets complete one by one, each credit goes to a link with none out.
        for _ in 0..<8 { count(acl.completed(handle: 0, count: 1).actions) }
        #expect(sent[0] == 8)
        #expect((1...15).filter { sent[UInt16($0)] == 1 }.count == 8)
        // Completions from everyone: every busy link gets a share, none more than one ahead of another.
        for round in 0..<3 {
            for h in UInt16(0)...15 where acl.inFlight(h) > 0 { count(acl.completed(handle: h, count: acl.inFlight(h)).actions) }
            let counts = (1...15).map { sent[UInt16($0)] ?? 0 }
            #expect(counts.max()! - counts.min()! <= 1, "round \(round): \(counts)")
        }
    }
}
