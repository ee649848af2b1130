import Synchronization
import Testing
@testable import HCI

@Suite struct HCIPacketTapTests {
    final class Seen: Sendable {
        let packets = Mutex<[([UInt8], Bool)]>([])
    }

    @Test func bytesAreCutIntoWholePacketsPerDirection() {
        let seen = Seen()
        let tap = HCIPacketTap { packet, received in seen.packets.withLock { $0.append((packet, received)) } }
        let reset: [UInt8] = [0x01, 0x03, 0x0C, 0x00]
        let complete: [UInt8] = [0x04, 0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00]
        // Two ACL fragments written together.
        let acl1: [UInt8] = [0x02, 0x40, 0x00, 0x02, 0x00, 0xAA, 0xBB]
        let acl2: [UInt8] = [0x02, 0x40, 0x10, 0x01, 0x00, 0xCC]
        tap.sent(reset)
        // The answer read in three pieces, the last one with the start of an ACL packet.
        tap.received(Array(complete[0..<2]))
        tap.received(Array(complete[2..<5]))
        tap.received(Array(complete[5...]) + Array(acl1[0..<3]))
        tap.sent(acl1 + acl2)
        tap.received(Array(acl1[3...]))
        let got = seen.packets.withLock { $0 }
        #expect(got.map(\.0) == [reset, complete, acl1, acl2, acl1])
        #expect(got.map(\.1) == [false, true, false, false, true])
    }
}
