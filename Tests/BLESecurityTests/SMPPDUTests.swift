import BLE
@testable import BLESecurity
import Testing

@Suite struct SMPPDUTests {
    static let sequence16 = "000102030405060708090a0b0c0d0e0f"

    /// One golden encoding of every PDU, code first, with the value it decodes to.
    static func goldens() throws -> [(hex: String, pdu: SMPPDU)] {
        let seq = try u128("0f0e0d0c0b0a09080706050403020100")
        let publicKeyA = try #require(P256PublicKey(x: try bytes(SpecKeys.publicAX), y: try bytes(SpecKeys.publicAY)))
        let publicKeyHex = (try bytes(SpecKeys.publicAX)).reversed().hexString + (try bytes(SpecKeys.publicAY)).reversed().hexString
        return [
            ("01 02 00 2d 10 02 03", .pairingRequest(SMPPairingParameters(
                ioCapability: .keyboardOnly, oobDataFlag: 0, authRequirements: [.bonding, .mitm, .secureConnections, .ct2],
                maxEncryptionKeySize: 16, initiatorKeys: [.identityKey], responderKeys: [.encryptionKey, .identityKey]))),
            ("02 00 01 0d 07 00 07", .pairingResponse(SMPPairingParameters(
                ioCapability: .displayOnly, oobDataFlag: 1, authRequirements: [.bonding, .mitm, .secureConnections],
                maxEncryptionKeySize: 7, initiatorKeys: [], responderKeys: [.encryptionKey, .identityKey, .signingKey]))),
            ("03" + sequence16, .pairingConfirm(SMPPairingConfirm(value: seq))),
            ("04" + sequence16, .pairingRandom(SMPPairingRandom(value: seq))),
            ("05 04", .pairingFailed(SMPPairingFailed(reason: .confirmValueFailed))),
            ("06" + sequence16, .encryptionInformation(SMPEncryptionInformation(ltk: Key128(seq)))),
            ("07 34 12 88 77 66 55 44 33 22 11", .centralIdentification(SMPCentralIdentification(ediv: 0x1234, rand: 0x1122_3344_5566_7788))),
            ("08" + sequence16, .identityInformation(SMPIdentityInformation(irk: Key128(seq)))),
            ("09 01 06 05 04 03 02 c1", .identityAddressInformation(SMPIdentityAddressInformation(
                address: try #require(BluetoothAddress("C1:02:03:04:05:06", kind: .random))))),
            ("0a" + sequence16, .signingInformation(SMPSigningInformation(csrk: Key128(seq)))),
            ("0b 0d", .securityRequest(SMPSecurityRequest(authRequirements: [.bonding, .mitm, .secureConnections]))),
            ("0c" + publicKeyHex, .pairingPublicKey(SMPPairingPublicKey(key: publicKeyA))),
            ("0d" + sequence16, .pairingDHKeyCheck(SMPPairingDHKeyCheck(value: seq))),
            ("0e 01", .keypressNotification(SMPKeypressNotification(type: .digitEntered))),
        ]
    }

    @Test func everyPDURoundTripsThroughItsGoldenBytes() throws {
        for (hex, pdu) in try Self.goldens() {
            let raw = try bytes(hex)
            #expect(try SMPPDU(decoding: raw) == pdu, "decoding \(hex)")
            #expect(pdu.bytes == raw, "encoding \(pdu.code)")
            #expect(pdu.code.rawValue == raw[0])
        }
    }

    @Test func everyKnownPDUWithAByteMissingIsTruncated() throws {
        for (hex, pdu) in try Self.goldens() {
            let raw = try bytes(hex)
            #expect("\(pdu.code)" != "", "code has a name")
            do {
                _ = try SMPPDU(decoding: Array(raw.dropLast()))
                Issue.record("\(pdu.code) one byte short decoded")
            } catch {
                guard case .truncated = error else { Issue.record("\(pdu.code): \(error)"); continue }
            }
        }
    }

    @Test func everyKnownPDUWithAnExtraByteIsRefused() throws {
        for (hex, pdu) in try Self.goldens() {
            let raw = try bytes(hex) + [0x00]
            do {
                _ = try SMPPDU(decoding: raw)
                Issue.record("\(pdu.code) with a trailing byte decoded")
            } catch {
                guard case .trailingBytes = error else { Issue.record("\(pdu.code): \(error)"); continue }
            }
        }
    }

    @Test func emptyInputIsTruncated() {
        #expect(throws: DecodeError.truncated(field: "SMP code", needed: 1, available: 0)) { try SMPPDU(decoding: []) }
    }

    @Test func anUnknownCodeKeepsItsPayload() throws {
        let pdu = try SMPPDU(decoding: [0x0F, 0xAA, 0xBB])
        #expect(pdu == .unknown(code: SMPCode(0x0F), payload: [0xAA, 0xBB]))
        #expect(pdu.bytes == [0x0F, 0xAA, 0xBB])
        #expect(pdu.code.name == "unknown SMP command 0xf")
    }

    @Test func aReservedIdentityAddressTypeIsRefused() throws {
        #expect(throws: DecodeError.self) { try SMPPDU(decoding: try bytes("09 02 06 05 04 03 02 c1")) }
    }

    @Test func reservedWireValuesSurviveAndArePrintedByName() throws {
        let pdu = try SMPPDU(decoding: try bytes("01 07 02 c1 11 f0 f8"))
        guard case .pairingRequest(let p) = pdu else { Issue.record("not a request"); return }
        #expect(p.ioCapability.name == "reserved IO capability 0x7")
        #expect(p.oobDataFlag == 2 && !p.oobDataPresent)
        #expect(p.authRequirements.description == "bonding|RFU 0xc0")
        #expect(p.initiatorKeys.description == "RFU 0xf0")
        #expect(pdu.bytes == (try bytes("01 07 02 c1 11 f0 f8")))
        #expect(SMPPairingFailedReason(rawValue: 0x42).name == "reserved reason 0x42")
        #expect(SMPPairingFailedReason.dhKeyCheckFailed.name == "DHKey check failed")
    }

    @Test func theIOCapOfF6IsAuthReqThenOOBThenIOCapability() {
        let p = SMPPairingParameters(ioCapability: .displayYesNo, oobDataFlag: 1, authRequirements: [.bonding],
                                     maxEncryptionKeySize: 16, initiatorKeys: [], responderKeys: [])
        #expect(p.ioCapValue == 0x010101)
    }

    @Test func printingAKeyPDUShowsNoKeyBytes() throws {
        let ltk = Key128(try u128("cafebabe deadbeef 01234567 89abcdef"))
        for pdu: SMPPDU in [.encryptionInformation(SMPEncryptionInformation(ltk: ltk)),
                            .identityInformation(SMPIdentityInformation(irk: ltk)),
                            .signingInformation(SMPSigningInformation(csrk: ltk))] {
            var dumped = ""
            dump(pdu, to: &dumped)
            for text in ["\(pdu)", String(reflecting: pdu), dumped] {
                #expect(!text.lowercased().contains("cafebabe") && !text.lowercased().contains("efcdab"), "\(text)")
                #expect(!text.contains("\(ltk.value)"))
            }
        }
    }
}
