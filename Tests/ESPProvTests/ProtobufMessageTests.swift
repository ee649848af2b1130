import BLE
import Support
import Testing
@testable import ESPProv

/// Golden bytes for every protocomm and Wi-Fi provisioning message.
///
/// Source of every vector: Python `protobuf` 7.36.2 serialising the messages with ESP-IDF's own generated
/// modules (components/protocomm/python/{session,sec0,sec1,sec2}_pb2.py and
/// components/wifi_provisioning/python/wifi_{config,scan,ctrl}_pb2.py, ESP-IDF at 6b503d0db5d^, the
/// last commit with wifi_provisioning in the tree), each built from the field values written beside it.
@Suite struct ProtobufMessageTests {
    private func roundTrip<M: ProtoMessage>(_ message: M, _ hex: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let golden = try #require([UInt8](hex: hex))
        #expect(message.encoded.hexString == hex, sourceLocation: sourceLocation)
        #expect(try M(protobuf: golden) == message, sourceLocation: sourceLocation)
    }

    // MARK: session.proto

    @Test func sessionMessagesOfSecurity0() throws {
        // SessionData(sec_ver=0, sec0=Sec0Payload(msg=0, sc=S0SessionCmd()))
        try roundTrip(SessionData(secVer: .scheme0, proto: .sec0(Sec0Payload(msg: 0, payload: .sc(EmptyMessage())))), "5203a20100")
        // SessionData(sec_ver=0, sec0=Sec0Payload(msg=1, sr=S0SessionResp(status=Success)))
        try roundTrip(SessionData(secVer: .scheme0, proto: .sec0(Sec0Payload(msg: 1, payload: .sr(StatusMessage(status: .success))))), "52050801aa0100")
    }

    @Test func sessionMessagesOfSecurity1() throws {
        // sec1.sc0.client_pubkey = bytes(range(32)), msg left at 0
        try roundTrip(SessionData(secVer: .scheme1, proto: .sec1(Sec1Payload(msg: 0, payload: .sc0(Sec1Command0(clientPubkey: Array(0..<32)))))),
                      "10015a25a201220a20000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
        // msg=1, sr0(status=0, device_pubkey=bytes(range(0x20, 0x40)), device_random=bytes(range(0xA0, 0xB0)))
        try roundTrip(SessionData(secVer: .scheme1, proto: .sec1(Sec1Payload(msg: 1, payload: .sr0(Sec1Response0(
            status: .success, devicePubkey: Array(0x20..<0x40), deviceRandom: Array(0xA0..<0xB0)))))),
                      "10015a390801aa01341220202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f1a10a0a1a2a3a4a5a6a7a8a9aaabacadaeaf")
        // msg=2, sc1(client_verify_data=b'\x55'*32)
        try roundTrip(SessionData(secVer: .scheme1, proto: .sec1(Sec1Payload(msg: 2, payload: .sc1(Sec1Command1(clientVerifyData: [UInt8](repeating: 0x55, count: 32)))))),
                      "10015a270802b2012212205555555555555555555555555555555555555555555555555555555555555555")
        // msg=3, sr1(status=0, device_verify_data=b'\xaa'*32)
        try roundTrip(SessionData(secVer: .scheme1, proto: .sec1(Sec1Payload(msg: 3, payload: .sr1(Sec1Response1(status: .success, deviceVerifyData: [UInt8](repeating: 0xAA, count: 32)))))),
                      "10015a270803ba01221a20aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
    }

    @Test func sessionMessagesOfSecurity2() throws {
        // msg=0, sc0(client_username=b'wifiprov', client_pubkey=b'\x01\x02\x03')
        try roundTrip(SessionData(secVer: .scheme2, proto: .sec2(Sec2Payload(msg: 0, payload: .sc0(Sec2Command0(clientUsername: Array("wifiprov".utf8), clientPubkey: [1, 2, 3]))))),
                      "10026212a2010f0a087769666970726f761203010203")
        // msg=1, sr0(status=CryptoError, device_pubkey=b'\x04\x05', device_salt=b'\x06'*16)
        try roundTrip(SessionData(secVer: .scheme2, proto: .sec2(Sec2Payload(msg: 1, payload: .sr0(Sec2Response0(
            status: .cryptoError, devicePubkey: [4, 5], deviceSalt: [UInt8](repeating: 6, count: 16)))))),
                      "1002621d0801aa01180806120204051a1006060606060606060606060606060606")
        // msg=2, sc1(client_proof=b'\x07'*64)
        try roundTrip(SessionData(secVer: .scheme2, proto: .sec2(Sec2Payload(msg: 2, payload: .sc1(Sec2Command1(clientProof: [UInt8](repeating: 7, count: 64)))))),
                      "100262470802b201420a40" + String(repeating: "07", count: 64))
        // msg=3, sr1(status=0, device_proof=b'\x08'*4, device_nonce=bytes(range(12)))
        try roundTrip(SessionData(secVer: .scheme2, proto: .sec2(Sec2Payload(msg: 3, payload: .sr1(Sec2Response1(status: .success, deviceProof: [8, 8, 8, 8], deviceNonce: Array(0..<12)))))),
                      "100262190803ba01141204080808081a0c000102030405060708090a0b")
    }

    // MARK: wifi_config.proto

    @Test func wifiConfigMessages() throws {
        try roundTrip(WiFiConfigPayload(.cmdGetStatus), "5200")
        // resp_get_status(sta_state=Connected, connected(ip4_addr='192.168.1.42', auth_mode=WPA2_PSK,
        // ssid=b'factory-line', bssid=24:0a:c4:00:00:01, channel=6))
        try roundTrip(WiFiConfigPayload(.respGetStatus(WiFiStatusResponse(status: .success, staState: .connected, state: .connected(WiFiConnectedState(
            ip4Addr: "192.168.1.42", authMode: .wpa2PSK, ssid: Array("factory-line".utf8), bssid: [0x24, 0x0A, 0xC4, 0, 0, 1], channel: 6))))),
                      "08015a2a5a280a0c3139322e3136382e312e343210031a0c666163746f72792d6c696e652206240ac40000012806")
        // sta_state=ConnectionFailed, fail_reason=AuthError (0, written because it is a oneof member)
        try roundTrip(WiFiConfigPayload(.respGetStatus(WiFiStatusResponse(status: .success, staState: .connectionFailed, state: .failReason(.authError)))), "08015a0410035000")
        try roundTrip(WiFiConfigPayload(.respGetStatus(WiFiStatusResponse(status: .success, staState: .connectionFailed, state: .failReason(.networkNotFound)))), "08015a0410035001")
        // sta_state=Connecting, attempt_failed(attempts_remaining=4)
        try roundTrip(WiFiConfigPayload(.respGetStatus(WiFiStatusResponse(status: .success, staState: .connecting, state: .attemptFailed(WiFiAttemptFailed(attemptsRemaining: 4))))), "08015a06100162020804")
        try roundTrip(WiFiConfigPayload(.respGetStatus(WiFiStatusResponse(status: .success, staState: .connecting, state: nil))), "08015a021001")
        // cmd_set_config(ssid=b'factory-line', passphrase=b'not-a-real-pass')
        try roundTrip(WiFiConfigPayload(.cmdSetConfig(WiFiSetConfigCommand(ssid: Array("factory-line".utf8), passphrase: Array("not-a-real-pass".utf8)))),
                      "0802621f0a0c666163746f72792d6c696e65120f6e6f742d612d7265616c2d70617373")
        // cmd_set_config(ssid=b'x', bssid=bytes(6), channel=-1): int32 -1 is ten bytes
        try roundTrip(WiFiConfigPayload(.cmdSetConfig(WiFiSetConfigCommand(ssid: [0x78], passphrase: [], bssid: [0, 0, 0, 0, 0, 0], channel: -1))),
                      "080262160a01781a0600000000000020ffffffffffffffffff01")
        try roundTrip(WiFiConfigPayload(.respSetConfig(StatusMessage(status: .invalidArgument))), "08036a020804")
        try roundTrip(WiFiConfigPayload(.cmdApplyConfig), "08047200")
        try roundTrip(WiFiConfigPayload(.respApplyConfig(StatusMessage(status: .success))), "08057a00")
    }

    // MARK: wifi_scan.proto

    @Test func wifiScanMessages() throws {
        // msg=0 (not written), cmd_scan_start(blocking=True)
        try roundTrip(WiFiScanPayload(.cmdScanStart(WiFiScanStartCommand(blocking: true))), "52020801")
        try roundTrip(WiFiScanPayload(.respScanStart), "08015a00")
        try roundTrip(WiFiScanPayload(.cmdScanStatus), "08026200")
        try roundTrip(WiFiScanPayload(.respScanStatus(WiFiScanStatusResponse(scanFinished: true, resultCount: 3))), "08036a0408011003")
        try roundTrip(WiFiScanPayload(.cmdScanResult(WiFiScanResultCommand(startIndex: 0, count: 4))), "080472021004")
        // two entries: factory-line ch 6 -48 dBm WPA2_PSK; guest ch 11 -71 dBm Open (auth 0 not written)
        try roundTrip(WiFiScanPayload(.respScanResult(WiFiScanResultResponse(entries: [
            WiFiScanResult(ssid: Array("factory-line".utf8), channel: 6, rssi: -48, bssid: [0x24, 0x0A, 0xC4, 0, 0, 1], auth: .wpa2PSK),
            WiFiScanResult(ssid: Array("guest".utf8), channel: 11, rssi: -71, bssid: [0x24, 0x0A, 0xC4, 0, 0, 2], auth: .open),
        ]))), "08057a450a250a0c666163746f72792d6c696e65100618d0ffffffffffffffff012206240ac400000128030a1c0a056775657374100b18b9ffffffffffffffff012206240ac4000002")
    }

    // MARK: wifi_ctrl.proto

    @Test func wifiCtrlMessages() throws {
        try roundTrip(WiFiCtrlPayload(.cmdCtrlReset), "08015a00")
        try roundTrip(WiFiCtrlPayload(.respCtrlReset), "08026200")
        try roundTrip(WiFiCtrlPayload(.cmdCtrlReprov), "08036a00")
        try roundTrip(WiFiCtrlPayload(.respCtrlReprov, status: .internalError), "080410057200")
    }

    // MARK: hostile bytes

    @Test func unknownFieldsOfEveryWireTypeAreSkipped() throws {
        // The status response above, with unknown fields 7 (varint), 8 (I64), 9 (LEN) and 13 (I32) around it.
        let bytes = try #require([UInt8](hex: "38ffff03" + "410102030405060708" + "4a03aabbcc" + "08015a021001" + "6d01020304"))
        let m = try WiFiConfigPayload(protobuf: bytes)
        #expect(m == WiFiConfigPayload(.respGetStatus(WiFiStatusResponse(status: .success, staState: .connecting, state: nil))))
    }

    @Test func aKnownFieldWithTheWrongWireTypeIsSkipped() throws {
        // sec_ver (2) sent as LEN, then the real sec_ver 1.
        let m = try SessionData(protobuf: try #require([UInt8](hex: "12020101" + "1001")))
        #expect(m.secVer == .scheme1)
        #expect(m.proto == nil)
    }

    @Test func unknownEnumValuesSurvive() throws {
        let m = try WiFiConfigPayload(protobuf: try #require([UInt8](hex: "08015a0410095007")))
        guard case .respGetStatus(let r) = m.payload else { Issue.record("not a status response"); return }
        #expect(r.staState.rawValue == 9)
        #expect(!r.staState.isKnown)
        #expect(r.state == .failReason(WiFiConnectFailedReason(rawValue: 7)))
        #expect(m.encoded.hexString == "08015a0410095007")
    }

    @Test func truncatedAndMalformedInputsThrow() {
        let cases: [(String, String)] = [
            ("5a", "a key with no value"),
            ("5a05", "a length past the end"),
            ("5a051001", "a length past the end, partly there"),
            ("08", "a varint cut off"),
            ("08ffffffffffffffffff7f", "a varint over 64 bits"),
            ("08ffffffffffffffffffff01", "a varint over 10 bytes"),
            ("00", "field number 0"),
            ("0b", "a start-group"),
            ("0c", "an end-group"),
            ("0e", "wire type 6"),
            ("41010203", "an I64 cut off"),
            ("5d0102", "an I32 cut off"),
            ("5a0a1008ffffffffffffffff", "a varint cut off inside an embedded message"),
            ("5a075a050a033132ff", "an embedded ip4_addr that is not UTF-8"),
        ]
        for (hex, why) in cases {
            guard let bytes = [UInt8](hex: hex) else { Issue.record("bad hex \(hex)"); continue }
            #expect(throws: DecodeError.self, "\(why)") { _ = try WiFiConfigPayload(protobuf: bytes) }
        }
        // ip4_addr must be UTF-8.
        #expect(throws: DecodeError.self) { _ = try WiFiConnectedState(protobuf: [0x0A, 0x02, 0xC3, 0x28]) }
    }

    @Test func theMaximumVarintDecodes() throws {
        var r = ProtoReader([0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01], message: "m")
        let f = try #require(try r.next())
        #expect(f.number == 1)
        #expect(f.value == .varint(UInt64.max))
        #expect(try r.next() == nil)
    }

    @Test func thePassphraseIsNeverPrinted() {
        let m = WiFiSetConfigCommand(ssid: Array("line".utf8), passphrase: Array("hunter2-secret".utf8))
        for text in [String(describing: m), String(reflecting: m), "\(WiFiConfigPayload(.cmdSetConfig(m)))"] {
            #expect(!text.contains("hunter2"))
            #expect(!text.contains(Array("hunter2".utf8).hexString))
        }
    }

    /// 200,000 seeded random and mutated inputs through every top-level message: nothing traps, and
    /// whatever decodes encodes to bytes that decode to the same message.
    @Test func fuzzedInputsNeitherTrapNorLoseWhatDecoded() throws {
        var rng = SplitMix64(seed: 0xE5_9A0)
        let seeds = ["5203a20100", "10015a390801aa01341220202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f1a10a0a1a2a3a4a5a6a7a8a9aaabacadaeaf",
                     "08015a2a5a280a0c3139322e3136382e312e343210031a0c666163746f72792d6c696e652206240ac40000012806",
                     "08057a450a250a0c666163746f72792d6c696e65100618d0ffffffffffffffff012206240ac400000128030a1c0a056775657374100b18b9ffffffffffffffff012206240ac4000002",
                     "100262190803ba01141204080808081a0c000102030405060708090a0b", "080410057200"].compactMap { [UInt8](hex: $0) }
        var decoded = 0
        for i in 0..<200_000 {
            var bytes: [UInt8]
            if i % 2 == 0, let seed = seeds.randomElement(using: &rng) {
                bytes = seed
                for _ in 0...Int.random(in: 0...3, using: &rng) where !bytes.isEmpty {
                    let at = Int.random(in: 0..<bytes.count, using: &rng)
                    switch Int.random(in: 0...2, using: &rng) {
                    case 0: bytes[at] = UInt8.random(in: 0...255, using: &rng)
                    case 1: bytes.remove(at: at)
                    default: bytes.insert(UInt8.random(in: 0...255, using: &rng), at: at)
                    }
                }
            } else {
                bytes = (0..<Int.random(in: 0...48, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            }
            decoded += check(SessionData.self, bytes) + check(WiFiConfigPayload.self, bytes)
                + check(WiFiScanPayload.self, bytes) + check(WiFiCtrlPayload.self, bytes)
        }
        #expect(decoded > 1000)
    }

    private func check<M: ProtoMessage>(_ type: M.Type, _ bytes: [UInt8]) -> Int {
        guard let m = try? M(protobuf: bytes) else { return 0 }
        let again = try? M(protobuf: m.encoded)
        if again != m { Issue.record("\(M.self) \(bytes.hexString) does not survive a round trip") }
        return 1
    }
}
