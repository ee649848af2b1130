import BLE
import BLESecurity
import HCI
import Testing

private func hex(_ s: String) -> [UInt8] { [UInt8](hex: s.replacingOccurrences(of: " ", with: "")) ?? [] }
private func x(_ s: String) -> String { s.replacingOccurrences(of: " ", with: "") }
private let device = BluetoothAddress("F0:00:00:00:00:01", kind: .random)!
private let station = BluetoothAddress("C1:02:03:04:05:06", kind: .random)!
private let statusOK = "04 0f04 00 01"

private func configuration(_ request: SecurityRequest?, bond: Bond? = nil) -> SMPCentralConfiguration {
    SMPCentralConfiguration(localAddress: station, peerAddress: device, request: request, storedBond: bond)
}

private func outcomes(_ actions: [HCISecurity.Action]) -> [(HCISecurity.RequestID?, SMPOutcome)] {
    actions.compactMap { if case .completed(_, let id, let o) = $0 { return (id, o) } else { return nil } }
}

private func failures(_ actions: [HCISecurity.Action]) -> [(HCISecurity.RequestID?, SMPFailure)] {
    actions.compactMap { if case .failed(_, let id, let f) = $0 { return (id, f) } else { return nil } }
}

private let storedBond = Bond(peer: device, ltk: Key128(0x1122_3344_5566_7788_99AA_BBCC_DDEE_FF00), keySize: 16,
                              authenticated: false, secureConnections: true)

@Suite struct HCISecurityTests {
    @Test func aStoredBondEncryptsWithoutPairingAndTheOutcomeSaysSo() {
        var s = HCISecurity()
        _ = s.handle(.attach(1, configuration(SecurityRequest(level: .encrypted), bond: storedBond)))
        #expect(s.handle(.secure(1, 10, SecurityRequest(level: .encrypted))) == [.enableEncryption(1, storedBond.encryptionKey)])
        let done = s.handle(.encryptionChanged(1, EncryptionChangeEvent(handle: 0x40, enabled: 1)))
        #expect(outcomes(done).map(\.0) == [10])
        #expect(outcomes(done).first?.1.securityOutcome == SecurityOutcome(security: storedBond.linkSecurity, bond: .used))
        #expect(s.security(of: 1).level == .encrypted)
    }

    @Test func pinOrKeyMissingIsABondLostAndPairingAgainIsAllowedOnlyWhenAsked() {
        var s = HCISecurity()
        _ = s.handle(.attach(1, configuration(SecurityRequest(level: .encrypted), bond: storedBond)))
        _ = s.handle(.secure(1, 10, SecurityRequest(level: .encrypted)))
        let lost = s.handle(.encryptionChanged(1, EncryptionChangeEvent(status: .pinOrKeyMissing, handle: 0x40, enabled: 0)))
        #expect(failures(lost).map { $0.1.kind } == [.bondLost])
        #expect(failures(lost).first?.1.securityFailure.category == .bondLost)
        // Asked again with `pairAgain`: a Pairing Request goes out.
        let again = s.handle(.secure(1, 11, SecurityRequest(level: .encrypted, pairAgain: true)))
        #expect(again.contains { if case .send(1, let pdu) = $0 { return pdu.first == 0x01 } else { return false } })
    }

    @Test func requestsWaitTheirTurnAndOneAlreadyMetCompletesAtOnce() {
        var s = HCISecurity()
        _ = s.handle(.attach(1, configuration(SecurityRequest(level: .encrypted), bond: storedBond)))
        _ = s.handle(.secure(1, 10, SecurityRequest(level: .encrypted)))
        // A second caller while encryption runs: nothing goes out for it yet.
        #expect(s.handle(.secure(1, 11, SecurityRequest(level: .encrypted))) == [])
        let done = s.handle(.encryptionChanged(1, EncryptionChangeEvent(handle: 0x40, enabled: 1)))
        #expect(outcomes(done).map(\.0) == [10, 11])
    }

    @Test func aLevelNotReachedFailsTheRequestThatAskedForIt() {
        var s = HCISecurity()
        // The device's Security Request (bonding, no MITM) is met with the stored bond before anyone asks.
        _ = s.handle(.attach(1, configuration(SecurityRequest(level: .encrypted), bond: storedBond)))
        _ = s.handle(.received(1, hex("0b 09")))
        let asked = s.handle(.secure(1, 10, SecurityRequest(level: .authenticated)))
        #expect(asked == [])
        let done = s.handle(.encryptionChanged(1, EncryptionChangeEvent(handle: 0x40, enabled: 1)))
        // The stored bond (not MITM) met the Security Request; the caller's request then needs a
        // passkey this side does not have.
        #expect(outcomes(done).map(\.0) == [nil])
        #expect(failures(done).map(\.0) == [10])
        #expect(failures(done).first?.1.kind == .authenticationRequirements)
    }

    @Test func pdusBeforeTheLinkIsAttachedAreKeptAndReplayed() {
        var s = HCISecurity()
        #expect(s.handle(.received(1, hex("0b 01"))) == [])
        // A link nobody secures: with no bond the Security Request is refused, Pairing Not Supported.
        #expect(s.handle(.attach(1, configuration(nil))) == [.send(1, hex("05 05"))])
    }

    @Test func theSMPTimerEndsAPairingAsATimeoutAndClosesTheChannel() {
        var s = HCISecurity()
        _ = s.handle(.attach(1, configuration(SecurityRequest(level: .encrypted))))
        let start = s.handle(.secure(1, 10, SecurityRequest(level: .encrypted)))
        #expect(start.contains(.armTimer(1, .seconds(30))))
        let expired = s.handle(.timerExpired(1))
        #expect(failures(expired).map { $0.1.kind } == [.timeout])
        #expect(failures(expired).first?.1.securityFailure.category == .timeout)
        // No pairing on this link any more.
        #expect(failures(s.handle(.secure(1, 11, SecurityRequest(level: .encrypted)))).first?.1.kind == .channelClosed)
    }

    @Test func aRefusedEnableEncryptionFailsTheProcedure() {
        var s = HCISecurity()
        _ = s.handle(.attach(1, configuration(SecurityRequest(level: .encrypted), bond: storedBond)))
        _ = s.handle(.secure(1, 10, SecurityRequest(level: .encrypted)))
        let refused = s.handle(.encryptionRefused(1, .commandDisallowed))
        #expect(failures(refused).first?.1.kind == .encryptionFailed(status: 0x0C))
        #expect(failures(refused).first?.1.securityFailure.category == .encryptionFailed)
    }

    @Test func aCancelledRequestGetsNoAnswerButItsBondIsStillReported() {
        var s = HCISecurity()
        _ = s.handle(.attach(1, configuration(SecurityRequest(level: .encrypted), bond: storedBond)))
        _ = s.handle(.secure(1, 10, SecurityRequest(level: .encrypted)))
        #expect(s.handle(.cancel(1, 10)) == [])
        #expect(outcomes(s.handle(.encryptionChanged(1, EncryptionChangeEvent(handle: 0x40, enabled: 1)))).map(\.0) == [nil])
    }

    @Test func detachingForgetsTheLinkAndItsTimer() {
        var s = HCISecurity()
        _ = s.handle(.attach(1, configuration(SecurityRequest(level: .encrypted))))
        _ = s.handle(.secure(1, 10, SecurityRequest(level: .encrypted)))
        #expect(s.handle(.detach(1)) == [.disarmTimer(1)])
        #expect(!s.isAttached(1))
        #expect(failures(s.handle(.secure(1, 11, SecurityRequest(level: .encrypted)))).map(\.0) == [11])
    }
}

/// A whole LE Secure Connections pairing through `HCIHost`, byte for byte on the controller side: the
/// peripheral is the library's `SMPPeripheral`, played by the test behind a controller that answers
/// LE Enable Encryption as a real one does (its Long Term Key Request goes to the peripheral).
@Suite struct HCIHostSecurityTests {
    /// The controller side: pumps the host's SMP PDUs to the peripheral and the peripheral's back,
    /// completes every ACL packet, and runs LE Enable Encryption against the peripheral's key.
    struct Peer {
        var peripheral: SMPPeripheral
        var enabledKeys: [Key128] = []
        var transcript: [String] = []
        var pinOrKeyMissing = false
        var reassembler = ACLReassembler()

        mutating func pump(_ h: inout HostHarness, _ first: [HCIHost.Action]) -> [HCIHost.Action] {
            var all = first
            var guardCount = 0
            while guardCount < 200 {
                guardCount += 1
                let writes = h.take()
                if writes.isEmpty { break }
                var decoder = H4Decoder()
                for packet in writes.flatMap({ decoder.feed(hex($0)) }) {
                    let bytes = packet.framed
                    if packet.type == .acl {
                        // ACL: handle 0x0040, then an L2CAP frame on CID 6 (a long PDU in fragments).
                        all += h.controller("04 1305 01 4000 0100")
                        guard let acl = try? ACLDataPacket(packet: packet.bytes) else { continue }
                        for case .frame(let frame) in reassembler.push(acl) where frame.channel == .smp {
                            transcript.append("C> " + frame.payload.hexString)
                            all += deliver(&h, peripheral.handle(.received(frame.payload)))
                        }
                    } else if bytes.count > 3, bytes[1] == 0x19, bytes[2] == 0x20,
                              let command = try? LEEnableEncryptionCommand(parameters: Array(bytes.dropFirst(4))) {
                        enabledKeys.append(command.ltk)
                        all += h.controller("\(statusOK) 1920")
                        let replies = peripheral.handle(.longTermKeyRequested(ediv: command.ediv, rand: command.rand))
                        guard case .replyLongTermKey(let key)? = replies.first(where: {
                            if case .replyLongTermKey = $0 { return true } else { return false }
                        }) else { continue }
                        if key == command.ltk && !pinOrKeyMissing {
                            all += h.controller("04 0804 00 4000 01")
                            all += deliver(&h, peripheral.handle(.encryptionChanged(enabled: true, keySize: 16)))
                        } else {
                            all += h.controller("04 0804 06 4000 00")
                        }
                    }
                }
            }
            return all
        }

        private mutating func deliver(_ h: inout HostHarness, _ actions: [SMPAction]) -> [HCIHost.Action] {
            var all: [HCIHost.Action] = []
            for case .send(let pdu) in actions {
                transcript.append("P> " + pdu.bytes.hexString)
                let frame = L2CAPBasicFrame(channel: .smp, payload: pdu.bytes).bytes
                let length = UInt16(frame.count)
                all += h.on(.received([0x02, 0x40, 0x20, UInt8(length & 0xFF), UInt8(length >> 8)] + frame))
            }
            return all
        }
    }

    private func connected() throws -> (HostHarness, HCIHost.LinkID) {
        var h = HostHarness { $0.securityHandler = true }
        h.on(.connect(1, device, timeout: .seconds(10)))
        h.controller("\(statusOK) 0d20")
        let up = h.controller("04 3e13 01 00 4000 00 01 0100000000f0 1800 0000 f401 00")
        let link = try #require(up.compactMap { if case .connected(_, let info) = $0 { return info.id } else { return nil } }.first)
        _ = h.take()
        return (h, link)
    }

    @Test func justWorksPairsOverCID6AndEncryptsWithTheKeyThePeripheralDerived() throws {
        var (h, link) = try connected()
        h.on(.attachSecurity(link, configuration(SecurityRequest(level: .encrypted))))
        var peer = Peer(peripheral: SMPPeripheral(configuration: SMPPeripheralConfiguration(
            localAddress: device, peerAddress: station,
            localIdentity: SMPLocalIdentity(irk: Key128(0x77), address: device))))
        let first = h.on(.secure(link, 5, SecurityRequest(level: .encrypted)))
        // The Pairing Request, as the host writes it: ACL handle 0x0040, L2CAP length 7 on CID 6;
        // NoInputNoOutput, no OOB, bonding + Secure Connections + CT2, 16-octet keys, the device's
        // encryption and identity keys asked for.
        #expect(h.written.first == x("02 4000 0b00 0700 0600 01 03 00 29 10 00 03"))
        #expect(h.armed[.security(link)] == .seconds(30))
        let actions = peer.pump(&h, first)
        let done = actions.compactMap { if case .securityCompleted(link, 5, let o) = $0 { return o } else { return nil } }
        #expect(done.count == 1)
        #expect(done.first?.securityOutcome.security == LinkSecurity(level: .encrypted, keySize: 16, secureConnections: true))
        #expect(done.first?.bond?.peerIRK == Key128(0x77))
        // The key the host encrypted with is the one the peripheral derived (it answered its LTK request
        // with it, and the controller compared them).
        #expect(peer.enabledKeys.count == 1 && peer.enabledKeys.first == done.first?.bond?.ltk)
        #expect(peer.peripheral.security.level == .encrypted)
        #expect(peer.transcript.map { String($0.prefix(5)) } == ["C> 01", "P> 02", "C> 0c", "P> 0c", "P> 03", "C> 04", "P> 04",
                                                                "C> 0d", "P> 0d", "P> 08", "P> 09"])
        #expect(h.armed[.security(link)] == nil)
    }

    @Test func aBondedLinkEncryptsAndAPeripheralWithoutTheKeyIsABondLost() throws {
        var (h, link) = try connected()
        h.on(.attachSecurity(link, configuration(SecurityRequest(level: .encrypted), bond: storedBond)))
        var peer = Peer(peripheral: SMPPeripheral(configuration: SMPPeripheralConfiguration(localAddress: device, peerAddress: station)))
        let first = h.on(.secure(link, 5, SecurityRequest(level: .encrypted)))
        // LE Enable Encryption: handle 0x0040, Rand 0, EDIV 0, the stored LTK least significant octet first.
        #expect(h.written == [x("01 1920 1c 4000 0000000000000000 0000 00ffeeddccbbaa998877665544332211")])
        let actions = peer.pump(&h, first)
        let failed = actions.compactMap { if case .securityFailed(link, 5, let f) = $0 { return f } else { return nil } }
        #expect(failed.map(\.kind) == [.bondLost])
        #expect(peer.transcript.isEmpty)
    }

    @Test func aLinkNobodySecuresRefusesASecurityRequestWithoutABond() throws {
        var (h, link) = try connected()
        h.on(.attachSecurity(link, configuration(nil)))
        h.on(.received(hex("02 4020 0600 0200 0600 0b 0d")))
        #expect(h.take() == [x("02 4000 0600 0200 0600 05 05")])
    }

    @Test func aLongTermKeyRequestIsRefused() throws {
        var (h, _) = try connected()
        h.controller("04 3e0d 05 4000 0000000000000000 0000")
        #expect(h.take() == [x("01 1b20 02 4000")])
    }

    @Test func theLinkGoingDownDisarmsItsSMPTimer() throws {
        var (h, link) = try connected()
        h.on(.attachSecurity(link, configuration(SecurityRequest(level: .encrypted))))
        h.on(.secure(link, 5, SecurityRequest(level: .encrypted)))
        #expect(h.armed[.security(link)] != nil)
        h.controller("04 0504 00 4000 13")
        #expect(h.armed[.security(link)] == nil)
    }
}
