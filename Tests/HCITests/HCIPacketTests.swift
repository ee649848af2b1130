import BLE
import HCI
import Testing

private func hex(_ s: String) -> [UInt8] { [UInt8](hex: s) ?? [] }

/// Checks command → bytes → command for one golden packet, then truncation and trailing bytes.
private func roundTrip<C: HCICommand>(_ command: C, _ golden: String) throws {
    #expect(command.packet.hexString == golden.replacingOccurrences(of: " ", with: ""))
    var r = ByteReader(command.packet)
    let packet = try HCICommandPacket(from: &r)
    #expect(packet.opcode == C.opcode)
    #expect(try C(parameters: packet.parameters) == command)
    if !packet.parameters.isEmpty {
        #expect(throws: DecodeError.self) { try C(parameters: Array(packet.parameters.dropLast())) }
    }
    #expect(throws: DecodeError.self) { try C(parameters: packet.parameters + [0x00]) }
}

/// Checks event bytes → event → bytes, then a short and a long length.
private func roundTrip(event golden: String, _ expected: HCIEvent, fixedLength: Bool = true) throws {
    let bytes = hex(golden)
    let event = try HCIEvent(packet: bytes)
    #expect(event == expected)
    #expect(event.packet == bytes)
    // Parameter_Total_Length that disagrees with the bytes present.
    #expect(throws: DecodeError.self) { try HCIEvent(packet: Array(bytes.dropLast())) }
    #expect(throws: DecodeError.self) { try HCIEvent(packet: bytes + [0x00]) }
    // Events that end in a variable part (Command Complete) cannot tell a cut field from a short one.
    guard fixedLength else { return }
    // A consistent length that cuts the last field off.
    var cut = Array(bytes.dropLast())
    cut[1] -= 1
    #expect(throws: DecodeError.self) { try HCIEvent(packet: cut) }
    // A consistent length with one byte too many.
    var long = bytes + [0xEE]
    long[1] += 1
    #expect(throws: DecodeError.self) { try HCIEvent(packet: long) }
}

private let peer = BluetoothAddress("F0:00:00:00:00:01", kind: .random)!

@Suite struct HCICommandTests {
    @Test func parameterlessCommandsEncodeToTheirOpcode() throws {
        try roundTrip(ResetCommand(), "030c00")
        try roundTrip(ReadLocalVersionCommand(), "011000")
        try roundTrip(ReadBDADDRCommand(), "091000")
        try roundTrip(ReadBufferSizeCommand(), "051000")
        try roundTrip(LEReadBufferSizeCommand(), "022000")
        try roundTrip(LECreateConnectionCancelCommand(), "0e2000")
    }

    @Test func eventMasksEncodeLittleEndian() throws {
        try roundTrip(SetEventMaskCommand.host, "010c08 9080000200800020")
        try roundTrip(LESetEventMaskCommand.host, "012008 4f0a000000000000")
    }

    @Test func addressScanAndConnectionCommandsEncodeInWireOrder() throws {
        try roundTrip(LESetRandomAddressCommand(address: BluetoothAddress("C0:11:22:33:44:55", kind: .random)!),
                      "052006 5544332211c0")
        try roundTrip(LESetScanParametersCommand(), "0b2007 01 6000 3000 01 00")
        try roundTrip(LESetScanEnableCommand(enable: true), "0c2002 0100")
        try roundTrip(LECreateConnectionCommand(peer: peer),
                      "0d2019 6000 6000 00 01 0100000000f0 01 1800 2800 0000 f401 0000 0000")
        try roundTrip(DisconnectCommand(handle: 0x40, reason: .remoteUserTerminated), "060403 4000 13")
        try roundTrip(LEConnectionUpdateCommand(handle: 1, intervalMin: 6, intervalMax: 12, maxLatency: 0, supervisionTimeout: 500),
                      "13200e 0100 0600 0c00 0000 f401 0000 0000")
    }

    @Test func returnParametersDecodeAndRejectShortInput() throws {
        var r = ByteReader(hex("000d01000dffff0200"))
        let version = try LocalVersionReturn(from: &r)
        #expect(version.hciVersion == 0x0D && version.companyIdentifier == 0xFFFF && version.lmpSubversion == 2)
        var w = ByteWriter()
        version.encode(into: &w)
        #expect(w.bytes.hexString == "000d01000dffff0200")
        var short = ByteReader(hex("000d01000dffff02"))
        #expect(throws: DecodeError.self) { try LocalVersionReturn(from: &short) }

        r = ByteReader(hex("00 1b00 40"))
        #expect(try LEBufferSizeReturn(from: &r) == LEBufferSizeReturn(aclLength: 27, aclPackets: 64))
        r = ByteReader(hex("00 fd03 00 0800 0000"))
        #expect(try BufferSizeReturn(from: &r) == BufferSizeReturn(aclLength: 1021, syncLength: 0, aclPackets: 8, syncPackets: 0))
        r = ByteReader(hex("00 010000aa0000"))
        #expect(try BDADDRReturn(from: &r).address == BluetoothAddress("00:00:AA:00:00:01"))
        var truncated = ByteReader(hex("00 010000aa00"))
        #expect(throws: DecodeError.self) { try BDADDRReturn(from: &truncated) }
    }
}

@Suite struct HCILECommandTests {
    @Test func capabilityAndAcceptListCommandsEncodeInWireOrder() throws {
        try roundTrip(LEReadLocalSupportedFeaturesCommand(), "032000")
        try roundTrip(LEReadFilterAcceptListSizeCommand(), "0f2000")
        try roundTrip(LEClearFilterAcceptListCommand(), "102000")
        try roundTrip(LEReadSupportedStatesCommand(), "1c2000")
        try roundTrip(LEAddDeviceToFilterAcceptListCommand(address: peer), "112007 01 0100000000f0")
        try roundTrip(LERemoveDeviceFromFilterAcceptListCommand(address: BluetoothAddress("C0:5E:00:00:00:01")!),
                      "122007 00 010000005ec0")
        // Initiator filter policy 1: the list decides; Peer_Address is carried but ignored by the controller.
        try roundTrip(LECreateConnectionCommand(peer: peer, filterPolicy: 1),
                      "0d2019 6000 6000 01 01 0100000000f0 01 1800 2800 0000 f401 0000 0000")
    }

    @Test func linkTuningCommandsEncodeInWireOrder() throws {
        try roundTrip(LESetDataLengthCommand(handle: 0x40), "222006 4000 fb00 4808")
        try roundTrip(LEWriteSuggestedDefaultDataLengthCommand(), "242004 fb00 4808")
        try roundTrip(LESetPHYCommand(handle: 0x40), "322007 4000 00 02 02 0000")
        try roundTrip(ReadRSSICommand(handle: 0x40), "051402 4000")
    }

    @Test func capabilityReturnParametersDecodeAndRejectShortInput() throws {
        var r = ByteReader(hex("00 2101000000000000"))
        let features = try LEFeaturesReturn(from: &r)
        #expect(features.features == 0x0121)
        #expect(features.features & LEFeaturesReturn.dataLengthExtension != 0)
        #expect(features.features & LEFeaturesReturn.twoMegabitPHY != 0)
        var w = ByteWriter()
        features.encode(into: &w)
        #expect(w.bytes.hexString == "002101000000000000")

        // Bumble 0.0.236's states: no scanning while initiating (bits 22 and 23 clear).
        r = ByteReader(hex("00 ffff3fffff030000"))
        let bumble = try LESupportedStatesReturn(from: &r)
        #expect(!bumble.scansWhileInitiating(active: true) && !bumble.scansWhileInitiating(active: false))
        r = ByteReader(hex("00 ffffbfffff030000"))
        let activeToo = try LESupportedStatesReturn(from: &r)
        #expect(activeToo.scansWhileInitiating(active: true) && !activeToo.scansWhileInitiating(active: false))

        r = ByteReader(hex("00 08"))
        #expect(try FilterAcceptListSizeReturn(from: &r) == FilterAcceptListSizeReturn(size: 8))
        r = ByteReader(hex("00 4000"))
        #expect(try ConnectionHandleReturn(from: &r) == ConnectionHandleReturn(handle: 0x40))
        r = ByteReader(hex("00 4000 c4"))
        #expect(try RSSIReturn(from: &r) == RSSIReturn(handle: 0x40, rssi: -60))
        var cut = ByteReader(hex("00 21010000000000"))
        #expect(throws: DecodeError.self) { try LEFeaturesReturn(from: &cut) }
        cut = ByteReader(hex("00 ffff3fffff0300"))
        #expect(throws: DecodeError.self) { try LESupportedStatesReturn(from: &cut) }
        cut = ByteReader(hex("00"))
        #expect(throws: DecodeError.self) { try FilterAcceptListSizeReturn(from: &cut) }
        cut = ByteReader(hex("00 40"))
        #expect(throws: DecodeError.self) { try ConnectionHandleReturn(from: &cut) }
        cut = ByteReader(hex("00 4000"))
        #expect(throws: DecodeError.self) { try RSSIReturn(from: &cut) }
    }
}

@Suite struct HCIEventTests {
    @Test func commandCompleteAndStatusRoundTrip() throws {
        try roundTrip(event: "0e04 01 030c 00",
                      .commandComplete(CommandCompleteEvent(opcode: .reset, returnParameters: [0x00])), fixedLength: false)
        try roundTrip(event: "0f04 00 01 0d20",
                      .commandStatus(CommandStatusEvent(status: .success, opcode: .leCreateConnection)))
    }

    @Test func connectionEventsRoundTrip() throws {
        try roundTrip(event: "0504 00 4000 13",
                      .disconnectionComplete(DisconnectionCompleteEvent(handle: 0x40, reason: .remoteUserTerminated)))
        try roundTrip(event: "1309 02 4000 0200 4100 0100", .numberOfCompletedPackets(NumberOfCompletedPacketsEvent(entries: [
            .init(handle: 0x40, count: 2), .init(handle: 0x41, count: 1),
        ])))
        try roundTrip(event: "3e13 01 00 4000 00 01 0100000000f0 1800 0000 f401 00",
                      .leConnectionComplete(LEConnectionCompleteEvent(status: .success, handle: 0x40, peer: peer)))
        try roundTrip(event: "3e1f 0a 00 4000 00 01 0100000000f0 000000000000 000000000000 1800 0000 f401 00",
                      .leConnectionComplete(LEConnectionCompleteEvent(status: .success, handle: 0x40, peer: peer, enhanced: true)))
        try roundTrip(event: "3e0a 03 00 4000 1800 0000 f401",
                      .leConnectionUpdateComplete(LEConnectionUpdateCompleteEvent(status: .success, handle: 0x40, interval: 0x18, latency: 0, supervisionTimeout: 500)))
    }

    @Test func dataLengthAndPHYEventsRoundTrip() throws {
        try roundTrip(event: "3e0b 07 4000 fb00 4808 fb00 4808",
                      .leDataLengthChange(LEDataLengthChangeEvent(handle: 0x40, maxTxOctets: 251, maxTxTime: 2120,
                                                                  maxRxOctets: 251, maxRxTime: 2120)))
        try roundTrip(event: "3e06 0c 00 4000 02 02",
                      .lePHYUpdateComplete(LEPHYUpdateCompleteEvent(status: .success, handle: 0x40, txPHY: 2, rxPHY: 2)))
    }

    @Test func advertisingReportsCarrySeveralReports() throws {
        try roundTrip(event: "3e19 02 02 00 01 0100000000f0 03 020106 c4 04 01 0100000000f0 00 c4",
                      .leAdvertisingReport(LEAdvertisingReportEvent(reports: [
                        .init(eventType: 0, address: peer, data: [0x02, 0x01, 0x06], rssi: -60),
                        .init(eventType: 4, address: peer, data: [], rssi: -60),
                      ])))
        let event = try HCIEvent(packet: hex("3e19 02 02 00 01 0100000000f0 03 020106 c4 04 01 0100000000f0 00 c4"))
        guard case .leAdvertisingReport(let reports) = event else { Issue.record("not a report"); return }
        #expect(reports.reports.map(\.report.kind) == [.advertisement(connectable: true), .scanResponse])
        // Zero reports and data longer than 31 bytes are invalid.
        #expect(throws: DecodeError.self) { try HCIEvent(packet: hex("3e02 02 00")) }
        #expect(throws: DecodeError.self) {
            try HCIEvent(packet: hex("3e0d 02 01 00 01 0100000000f0 20 c4"))
        }
    }

    @Test func extendedAdvertisingReportsRoundTrip() throws {
        try roundTrip(event: "3e1d 0d 01 1300 01 0100000000f0 01 00 ff 7f c4 0000 00 000000000000 03 020106",
                      .leExtendedAdvertisingReport(LEExtendedAdvertisingReportEvent(reports: [
                        .init(eventType: 0x13, address: peer, rssi: -60, data: [0x02, 0x01, 0x06]),
                      ])))
    }

    @Test func unknownEventsKeepTheirBytes() throws {
        let event = try HCIEvent(packet: hex("ff03 010203"))
        #expect(event == .unknown(code: HCIEventCode(rawValue: 0xFF), parameters: [1, 2, 3]))
        #expect(event.packet == hex("ff03 010203"))
        let meta = try HCIEvent(packet: hex("3e03 14 0102"))
        #expect(meta == .leMeta(subevent: HCILESubeventCode(rawValue: 0x14), parameters: [1, 2]))
        #expect(throws: DecodeError.self) { try HCIEvent(packet: []) }
        #expect(throws: DecodeError.self) { try HCIEvent(packet: [0x0E]) }
    }
}

@Suite struct ACLAndL2CAPTests {
    @Test func aclPacketsRoundTripWithFlags() throws {
        let golden = hex("4020 0700 0300 0400 02f700")
        let packet = try ACLDataPacket(packet: golden)
        #expect(packet.handle == 0x40 && packet.boundary == .firstFlushable && packet.broadcast == 0)
        #expect(packet.packet == golden)
        let frame = try L2CAPBasicFrame(bytes: packet.data)
        #expect(frame == L2CAPBasicFrame(channel: .att, payload: [0x02, 0xF7, 0x00]))
        #expect(frame.bytes == packet.data)
        #expect(throws: DecodeError.self) { try ACLDataPacket(packet: Array(golden.dropLast())) }
        #expect(throws: DecodeError.self) { try ACLDataPacket(packet: golden + [0]) }
        #expect(throws: DecodeError.self) { try L2CAPBasicFrame(bytes: Array(packet.data.dropLast())) }
        #expect(throws: DecodeError.self) { try L2CAPBasicFrame(bytes: packet.data + [0]) }
    }

    @Test func signallingAnswersParameterUpdatesAndRejectsTheUnknown() throws {
        let request = hex("12 01 0800 0600 0c00 0000 f401")
        let (response, accepted) = LESignalingResponder.respond(to: request)
        #expect(response?.bytes == hex("13 01 0200 0000"))
        #expect(accepted == ConnectionParameterUpdateRequest(intervalMin: 6, intervalMax: 12, latency: 0, timeout: 500))
        // Interval min above max: rejected.
        let bad = LESignalingResponder.respond(to: hex("12 02 0800 0c00 0600 0000 f401"))
        #expect(bad.response?.bytes == hex("13 02 0200 0100"))
        #expect(bad.accepted == nil)
        // Unknown code: Command Reject "not understood".
        #expect(LESignalingResponder.respond(to: hex("14 03 0000")).response?.bytes == hex("01 03 0200 0000"))
        // Truncated request: rejected, never trapped.
        #expect(LESignalingResponder.respond(to: hex("12 04 0800 0600")).response?.bytes == hex("01 04 0200 0000"))
        #expect(LESignalingResponder.respond(to: hex("13 05 0200 0000")).response == nil)
        #expect(LESignalingResponder.respond(to: []).response == nil)
        #expect(try L2CAPSignal(bytes: request).bytes == request)
    }

    @Test func smpRequestsGetPairingNotSupported() {
        #expect(SMPResponder.respond(to: hex("01 03 00 01 10 07 07")) == [0x05, 0x05])
        #expect(SMPResponder.respond(to: hex("0b 01")) == [0x05, 0x05])
        #expect(SMPResponder.respond(to: hex("05 05")) == nil)
        #expect(SMPResponder.respond(to: []) == nil)
    }
}
