import BLE
import HCI
import Testing

private func hex(_ s: String) -> [UInt8] { [UInt8](hex: s.replacingOccurrences(of: " ", with: "")) ?? [] }

/// Encodes `command`, compares with the golden packet (without the H4 indicator), and parses its
/// parameters back; parameters one byte short or one too long are refused.
private func roundTrip<C: HCICommand>(_ command: C, _ golden: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    #expect(command.packet == hex(golden), sourceLocation: sourceLocation)
    let parameters = Array(hex(golden).dropFirst(3))
    #expect(try C(parameters: parameters) == command, sourceLocation: sourceLocation)
    if !parameters.isEmpty {
        #expect(throws: DecodeError.self, sourceLocation: sourceLocation) { try C(parameters: Array(parameters.dropLast())) }
    }
    #expect(throws: DecodeError.self, sourceLocation: sourceLocation) { try C(parameters: parameters + [0]) }
}

/// Return parameters: decoded from the golden bytes, encoded back to them; one byte short throws.
private func returns<T: Equatable>(_ golden: String, _ decode: (inout ByteReader) throws(DecodeError) -> T, _ encode: (T, inout ByteWriter) -> Void,
                                   sourceLocation: SourceLocation = #_sourceLocation) throws -> T {
    var r = ByteReader(hex(golden))
    let value = try decode(&r)
    #expect(r.isAtEnd, sourceLocation: sourceLocation)
    var w = ByteWriter()
    encode(value, &w)
    #expect(w.bytes == hex(golden), sourceLocation: sourceLocation)
    var short = ByteReader(Array(hex(golden).dropLast()))
    #expect(throws: DecodeError.self, sourceLocation: sourceLocation) { _ = try decode(&short) }
    return value
}

@Suite struct HCIControllerPacketTests {
    @Test func controllerAndLinkDefaultCommandsRoundTrip() throws {
        try roundTrip(ReadLocalSupportedCommandsCommand(), "021000")
        try roundTrip(LEReadBufferSizeV2Command(), "602000")
        try roundTrip(LESetDefaultPHYCommand(txPHYs: 0b010, rxPHYs: 0b010), "312003 00 02 02")
        try roundTrip(LERemoteConnectionParameterRequestReplyCommand(handle: 0x40, intervalMin: 6, intervalMax: 12, maxLatency: 0, timeout: 400),
                      "20200e 4000 0600 0c00 0000 9001 0000 0000")
        try roundTrip(LERemoteConnectionParameterRequestNegativeReplyCommand(handle: 0x40), "212003 4000 3b")
        try roundTrip(ZephyrReadSupportedCommandsCommand(), "02fc00")
        try roundTrip(ZephyrReadStaticAddressesCommand(), "09fc00")
    }

    @Test func extendedScanAndConnectCommandsRoundTrip() throws {
        try roundTrip(LESetExtendedScanParametersCommand(phys: 0b101, parameters: [.init(scanType: 1, interval: 0x60, window: 0x30),
                                                                                 .init(scanType: 0, interval: 0x120, window: 0x90)]),
                      "41200d 01 00 05 01 6000 3000 00 2001 9000")
        try roundTrip(LESetExtendedScanEnableCommand(enable: true, filterDuplicates: 1), "422006 01 01 0000 0000")
        let legacy = LECreateConnectionCommand(peer: BluetoothAddress("F0:00:00:00:00:01", kind: .random)!, filterPolicy: 1)
        try roundTrip(LEExtendedCreateConnectionCommand(legacy, phys: 0b001),
                      "43201a 01 01 01 0100000000f0 01 6000 6000 1800 2800 0000 f401 0000 0000")
    }

    @Test func returnParametersDecodeAndEncode() throws {
        let commands = try returns("00" + String(repeating: "00", count: 41) + "20" + String(repeating: "00", count: 22),
                                   SupportedCommandsReturn.init(from:), { $0.encode(into: &$1) })
        #expect(commands.commands.leReadBufferSizeV2 && !commands.commands.leSetPHY)
        let v2 = try returns("00 fb00 0a 0000 00", LEBufferSizeV2Return.init(from:), { $0.encode(into: &$1) })
        #expect(v2 == LEBufferSizeV2Return(aclLength: 251, aclPackets: 10))
        let vendor = try returns("00 0301" + String(repeating: "00", count: 62), ZephyrSupportedCommandsReturn.init(from:), { $0.encode(into: &$1) })
        #expect(vendor.readStaticAddresses)
        let statics = try returns("00 02 010000005ac4 00112233445566778899aabbccddeeff ffffffffffff 00000000000000000000000000000000",
                                  ZephyrStaticAddressesReturn.init(from:), { $0.encode(into: &$1) })
        #expect(statics.entries.count == 2)
        #expect(statics.firstStatic?.address == BluetoothAddress("C4:5A:00:00:00:01", kind: .random))
        // An entry of all ones is no static address: it is not the first static one.
        let onlyOnes = try returns("00 01 ffffffffffff 00000000000000000000000000000000", ZephyrStaticAddressesReturn.init(from:), { $0.encode(into: &$1) })
        #expect(onlyOnes.firstStatic == nil)
    }

    @Test func theRemoteConnectionParameterRequestEventRoundTrips() throws {
        let packet = hex("3e0b 06 4000 1000 2000 0000 9001")
        let event = try HCIEvent(packet: packet)
        #expect(event == .leRemoteConnectionParameterRequest(LERemoteConnectionParameterRequestEvent(
            handle: 0x40, intervalMin: 0x10, intervalMax: 0x20, maxLatency: 0, timeout: 0x190)))
        #expect(event.packet == packet)
        #expect(throws: DecodeError.self) { try HCIEvent(packet: hex("3e0a 06 4000 1000 2000 0000 90")) }
    }
}

@Suite struct H4FramingTests {
    @Test func aControllerStreamSkipsHeadersThatMakeNoSense() {
        var d = H4Decoder(fromController: true)
        // A command packet (a controller sends none), Disconnection Complete of length 3, an ACL packet
        // with a handle above 0x0EFF and one longer than 1024 bytes: skipped byte by byte, and the
        // Command Complete after them is found.
        let junk = hex("01 030c00   04 0503 00 4000   02 ff3f 0100 00   02 4000 0105 00")
        let packets = d.feed(junk + hex("04 0e04 01 030c 00"))
        #expect(packets == [H4Packet(type: .event, bytes: hex("0e04 01 030c 00"))])
        #expect(d.discardedBytes == junk.count)
        #expect(d.pendingBytes == 0)
    }

    @Test func aLostByteIsFoundAgainAtTheNextPacket() {
        var d = H4Decoder(fromController: true)
        // Number Of Completed Packets for two handles with its count byte lost: its length no longer
        // matches the count read in its place.
        let lost = hex("04 1309 4000 0100 4100 0100")
        let next = hex("04 0504 00 4000 13")
        #expect(d.feed(lost + next) == [H4Packet(type: .event, bytes: hex("0504 00 4000 13"))])
        #expect(d.discardedBytes == lost.count)
    }

    @Test func splitWritesAreJoinedAndAnLEEventWaitsForItsSubevent() {
        var d = H4Decoder(fromController: true)
        let packet = hex("04 3e13 01 00 4000 00 01 0100000000f0 1800 0000 f401 00")
        var out: [H4Packet] = []
        for byte in packet { out += d.feed([byte]) }
        #expect(out == [H4Packet(type: .event, bytes: Array(packet.dropFirst()))])
        #expect(d.discardedBytes == 0)
        // The same event with a length its subevent cannot have: skipped once the subevent is known.
        let wrong = hex("04 3e12 01 00 4000 00 01 0100000000f0 1800 0000 f401")
        #expect(d.feed(wrong).isEmpty && d.discardedBytes > 0)
    }

    @Test func withoutValidationEveryIndicatorIsTrusted() {
        var d = H4Decoder()
        #expect(d.feed(hex("01 030c00")) == [H4Packet(type: .command, bytes: hex("030c00"))])
    }
}
