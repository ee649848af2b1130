import BLESecurity

/// What a protocol trace of an HCI adapter (`provision run --trace`) leaves out: the secrets of link
/// security, which the host and its controller exchange in clear (encryption happens in the controller).
/// The packet keeps its length and every other byte, so Wireshark still shows each pairing step, each
/// encryption and its outcome; only these values become zeros:
///
/// | Packet | Zeroed |
/// |---|---|
/// | HCI_LE_Enable_Encryption (command 0x2019) | Long_Term_Key (the LTK or STK the link is encrypted with) |
/// | HCI_LE_Long_Term_Key_Request_Reply (command 0x201A) | Long_Term_Key |
/// | SMP Encryption Information (0x06), Identity Information (0x08), Signing Information (0x0A) | the distributed LTK, IRK, CSRK |
/// | SMP Pairing Confirm (0x03), Pairing Random (0x04) | the confirm and random values, from which a passkey (or a legacy TK) can be worked out |
///
/// SMP PDUs are read from the first fragment of an ACL packet on the SMP channel (0x0006): every SMP PDU
/// with a secret fits in one fragment of the smallest LE ACL buffer (27 bytes). A pure function of one
/// packet; it never traps, whatever the bytes (a short packet keeps what it has, zeroed where asked).
public enum HCITraceRedaction {
    /// `packet` (one H4 packet, its indicator byte first) with the secrets above zeroed.
    public static func redacted(_ packet: [UInt8]) -> [UInt8] {
        guard let indicator = packet.first else { return packet }
        switch indicator {
        case 0x01 where packet.count >= 4:
            // Command: indicator, opcode (LE), parameter length, parameters.
            let opcode = HCIOpcode(rawValue: UInt16(packet[1]) | UInt16(packet[2]) << 8)
            switch opcode {
            case .leEnableEncryption: return zeroed(packet, from: 4 + 2 + 8 + 2, count: 16)   // handle, rand, ediv, LTK
            case .leLongTermKeyRequestReply: return zeroed(packet, from: 4 + 2, count: 16)    // handle, LTK
            default: return packet
            }
        case 0x02 where packet.count >= 10:
            // ACL: indicator, handle and flags (LE), data length (LE), then an L2CAP basic frame's length,
            // channel and payload when this is a first fragment (packet boundary flag other than 0b01).
            let boundary = (packet[2] >> 4) & 0x03
            let channel = UInt16(packet[7]) | UInt16(packet[8]) << 8
            guard boundary != 0b01, channel == L2CAPBasicFrame.ChannelID.smp.rawValue else { return packet }
            switch SMPCode(packet[9]) {
            case .pairingConfirm, .pairingRandom, .encryptionInformation, .identityInformation, .signingInformation:
                return zeroed(packet, from: 10, count: 16)
            default:
                return packet
            }
        default:
            return packet
        }
    }

    /// `packet` with up to `count` bytes from `from` set to zero (as many as there are).
    private static func zeroed(_ packet: [UInt8], from: Int, count: Int) -> [UInt8] {
        guard from < packet.count else { return packet }
        var out = packet
        for i in from..<min(from + count, packet.count) { out[i] = 0 }
        return out
    }
}
