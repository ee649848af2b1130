import BLE
import BLESecurity
import HCI
import Testing

private func hex(_ s: String) -> [UInt8] { [UInt8](hex: s.replacingOccurrences(of: " ", with: "")) ?? [] }

/// What an HCI trace leaves out: golden H4 packets before and after, packets that keep every byte, and
/// hostile bytes that never trap.
@Suite struct HCITraceRedactionTests {
    static let key = "ffeeddccbbaa99887766554433221100"
    static let zeros = String(repeating: "00", count: 16)

    @Test func theKeyOfLEEnableEncryptionIsZeroedAndEverythingElseKept() {
        let command = LEEnableEncryptionCommand(handle: 0x0040, rand: 0x0102_0304_0506_0708, ediv: 0x1234,
                                                ltk: Key128(0x0011_2233_4455_6677_8899_AABB_CCDD_EEFF))
        let packet = [0x01] + command.packet
        #expect(packet == hex("01 1920 1c 4000 0807060504030201 3412 \(Self.key)"))
        #expect(HCITraceRedaction.redacted(packet) == hex("01 1920 1c 4000 0807060504030201 3412 \(Self.zeros)"))
    }

    @Test func theKeyOfALongTermKeyRequestReplyIsZeroed() {
        #expect(HCITraceRedaction.redacted(hex("01 1a20 12 4000 \(Self.key)")) == hex("01 1a20 12 4000 \(Self.zeros)"))
        #expect(HCIOpcode.leLongTermKeyRequestReply.name == "LE Long Term Key Request Reply")
    }

    @Test func distributedKeysAndPairingValuesAreZeroedInSMPPDUsBothWays() {
        // Handle 0x0040, first automatically flushable fragment (0x20) or first non-flushable (0x00).
        for flags in ["4020", "4000"] {
            for code in ["03", "04", "06", "08", "0a"] {
                let packet = hex("02 \(flags) 1500 1100 0600 \(code) \(Self.key)")
                #expect(HCITraceRedaction.redacted(packet) == hex("02 \(flags) 1500 1100 0600 \(code) \(Self.zeros)"), "SMP \(code)")
            }
        }
    }

    @Test func packetsWithoutSecretsKeepEveryByte() {
        let kept = [
            "02 4020 0b00 0700 0600 01 03 00 0d 10 0f 0f",              // SMP Pairing Request
            "02 4020 0f00 0b00 0600 07 3412 0807060504030201",          // SMP Central Identification (EDIV, Rand: not a key)
            "02 4020 0c00 0800 0600 09 00 665544332211",                 // SMP Identity Address Information
            "02 4020 1500 1100 0400 0b \(Self.key)",                    // ATT Read Response on channel 4
            "02 4010 1100 06 \(Self.key)",                              // a continuing fragment: no L2CAP header
            "01 1b20 02 4000",                                          // LE LTK Request Negative Reply
            "01 0c20 02 0000",                                          // LE Set Scan Enable
            "04 3e 0d 05 4000 0807060504030201 3412",                   // LE Long Term Key Request event (Rand, EDIV)
            "04 08 04 00 4000 01",                                      // Encryption Change
        ]
        for text in kept {
            #expect(HCITraceRedaction.redacted(hex(text)) == hex(text), "\(text)")
        }
    }

    @Test func aTruncatedPacketIsZeroedAsFarAsItGoes() {
        #expect(HCITraceRedaction.redacted(hex("01 1920 1c 4000 0807060504030201 3412 ffee")) == hex("01 1920 1c 4000 0807060504030201 3412 0000"))
        #expect(HCITraceRedaction.redacted(hex("01 1920 1c 4000 08")) == hex("01 1920 1c 4000 08"))
        #expect(HCITraceRedaction.redacted(hex("02 4020 0800 0400 0600 06 ffeedd")) == hex("02 4020 0800 0400 0600 06 000000"))
        for short in ["", "01", "0119", "011920", "02", "024020", "0240201500110006"] {
            #expect(HCITraceRedaction.redacted(hex(short)) == hex(short))
        }
    }

    @Test func hostileBytesNeverTrapAndKeepTheirLength() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let count = Int.random(in: 0...40, using: &generator)
            var packet = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if !packet.isEmpty { packet[0] = [0x01, 0x02, 0x04][Int.random(in: 0...2, using: &generator)] }
            let out = HCITraceRedaction.redacted(packet)
            #expect(out.count == packet.count)
        }
    }
}
