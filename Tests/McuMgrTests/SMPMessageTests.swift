import BLE
import CBOR
import Testing

@testable import McuMgr

/// Golden frames, written out independently of libcbor (a small CBOR encoder in Python), in both
/// directions: request and response messages encode to these bytes and decode back to themselves.
@Suite struct SMPMessageTests {
    private func frame<R: SMPRequest>(_ r: R, version: SMPVersion = .v2, sequence: UInt8) -> String {
        SMPFrame(version: version, op: R.op, group: R.group, command: R.command, sequence: sequence, body: r.body).encoded.hexString
    }

    private func decoded(_ hex: String) throws -> (SMPFrame, CBOR) {
        let f = try SMPFrame(bytes: [UInt8](hex: hex) ?? [])
        return (f, try CBORDecoder().decode(f.data))
    }

    @Test func echoRequestIsAVersion2WriteToTheOSGroup() throws {
        #expect(frame(EchoRequest(text: "hi"), sequence: 0) == "0a00000600000000a16164626869")
        let (f, body) = try decoded("0a00000600000000a16164626869")
        #expect(f.header == SMPHeader(version: .v2, op: .write, length: 6, group: .os, sequence: 0, command: 0))
        #expect(try EchoRequest(body: body) == EchoRequest(text: "hi"))
    }

    @Test func resetIsAnEmptyMapAndVersion1SetsNoVersionBits() throws {
        #expect(frame(ResetRequest(), version: .v1, sequence: 255) == "020000010000ff05a0")
        let (f, _) = try decoded("020000010000ff05a0")
        #expect(f.header.version == .v1 && f.header.op == .write && f.header.sequence == 255 && f.header.command == 5)
    }

    @Test func parametersResponseCarriesBufferSizeAndCount() throws {
        let p = ParametersResponse(bufferSize: 2475, bufferCount: 4)
        #expect(p.body.encoded.hexString == "a2686275665f73697a651909ab696275665f636f756e7404")
        #expect(try ParametersResponse(body: CBORDecoder().decode(p.body.encoded)) == p)
    }

    @Test func theFirstUploadChunkCarriesLengthShaAndUpgrade() throws {
        let r = ImageUploadRequest(length: 4096, offset: 0, sha: Array(0..<32), data: [1, 2, 3, 4], upgrade: true)
        let golden = "0a00004600010701a5636c656e191000636f666600637368615820000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f646461746144010203046775706772616465f5"
        #expect(frame(r, sequence: 7) == golden)
        let (f, body) = try decoded(golden)
        #expect(f.header.group == .image && f.header.command == 1 && f.header.op == .write)
        #expect(try ImageUploadRequest(body: body) == r)
        let response = "0b00000600010701a1636f666604"
        let (rf, rbody) = try decoded(response)
        #expect(rf.header.op == .writeResponse && rf.header.sequence == 7)
        #expect(try ImageUploadResponse(body: rbody) == ImageUploadResponse(offset: 4))
        #expect(ImageUploadResponse(offset: 4).body.encoded.hexString == "a1636f666604")
    }

    @Test func imageStateListsSlotsWithFalseFlagsLeftOut() throws {
        let state = ImageStateResponse(images: [
            ImageSlotState(slot: 0, version: "1.0.0", hash: [UInt8](repeating: 0xAA, count: 32), bootable: true, confirmed: true, active: true),
            ImageSlotState(slot: 1, version: "1.1.0.7", hash: [UInt8](repeating: 0xBB, count: 32), bootable: true, pending: true),
        ])
        let golden = "a166696d6167657382a664736c6f74006776657273696f6e65312e302e3064686173685820" + String(repeating: "aa", count: 32)
            + "68626f6f7461626c65f569636f6e6669726d6564f566616374697665f5a564736c6f74016776657273696f6e67312e312e302e3764686173685820"
            + String(repeating: "bb", count: 32) + "68626f6f7461626c65f56770656e64696e67f5"
        #expect(state.body.encoded.hexString == golden)
        let back = try ImageStateResponse(body: CBORDecoder().decode([UInt8](hex: golden) ?? []))
        #expect(back == state)
        #expect(back.slot(1)?.pending == true && back.slot(0)?.active == true && back.slot(2) == nil)
    }

    @Test func markingForTestSendsTheHashAndConfirmFalse() throws {
        let golden = "0a00003100010100a264686173685820" + String(repeating: "bb", count: 32) + "67636f6e6669726df4"
        let r = ImageStateWriteRequest(hash: [UInt8](repeating: 0xBB, count: 32), confirm: false)
        #expect(frame(r, sequence: 1) == golden)
        #expect(try ImageStateWriteRequest(body: decoded(golden).1) == r)
    }

    @Test func settingsWriteAndFileUploadAndHash() throws {
        #expect(frame(SettingsWriteRequest(name: "app/interval", value: [60, 0, 0, 0]), sequence: 2)
                == "0a00001c00030200a2646e616d656c6170702f696e74657276616c6376616c443c000000")
        let upload = FileUploadRequest(offset: 0, data: Array("cert".utf8), name: "/lfs/cert.der", length: 4)
        #expect(frame(upload, sequence: 9) == "0a00002800080900a4636f66660064646174614463657274646e616d656d2f6c66732f636572742e646572636c656e04")
        #expect(try FileUploadRequest(body: decoded(frame(upload, sequence: 9)).1) == upload)
        #expect(frame(FileHashRequest(name: "/lfs/cert.der", type: "sha256"), sequence: 3)
                == "0800002000080302a2646e616d656d2f6c66732f636572742e646572647479706566736861323536")
        let hash = FileHashResponse(type: "sha256", length: 4, output: .bytes([UInt8](repeating: 0xCC, count: 32)))
        #expect(hash.body.encoded.hexString == "a3647479706566736861323536636c656e04666f75747075745820" + String(repeating: "cc", count: 32))
        #expect(try FileHashResponse(body: CBORDecoder().decode(hash.body.encoded)) == hash)
    }

    @Test func errorsOfBothVersionsMapToKinds() throws {
        let v2 = try SMPDeviceError.reported(in: CBORDecoder().decode([UInt8](hex: "a163657272a26567726f757001627263181b") ?? []))
        #expect(v2 == SMPDeviceError(.v2(group: .image, rc: 27)))
        #expect(v2?.kind == .downgrade)
        let v1 = try SMPDeviceError.reported(in: CBORDecoder().decode([UInt8](hex: "a162726308") ?? []))
        #expect(v1?.kind == .notSupported)
        let reason = try SMPDeviceError.reported(in: CBORDecoder().decode([UInt8](hex: "a2627263066372736e6462757379") ?? []))
        #expect(reason == SMPDeviceError(.v1(.badState), reason: "busy"))
        #expect(reason?.description == "device returned rc 6 (EBADSTATE) [bad_state]: busy")
        #expect(try SMPDeviceError.reported(in: ["rc": 0, "off": 4]) == nil)
        #expect(try SMPDeviceError.reported(in: ["err": ["group": 1, "rc": 0]]) == nil)
        #expect(SMPDeviceError(.v2(group: .image, rc: 28)).kind == .badState)
        #expect(SMPDeviceError(.v2(group: .image, rc: 9)).kind == .noSpace)
        #expect(SMPDeviceError(.v2(group: .file, rc: 3)).kind == .notFound)
        #expect(SMPDeviceError(.v2(group: .settings, rc: 3)).kind == .notFound)
        #expect(SMPDeviceError(.v1(McuMgrReturnCode(rawValue: 300))).description.contains("EPERUSER(300)"))
    }

    @Test func malformedBodiesAreRefusedWithTheKeyAndType() {
        #expect(throws: SMPMessageError("image upload response: `off` must be an unsigned integer, not a text string")) {
            try ImageUploadResponse(body: ["off": "4"])
        }
        #expect(throws: SMPMessageError("image state response has no `images`")) { try ImageStateResponse(body: [:]) }
        #expect(throws: SMPMessageError("echo response is an array, not a map")) { try EchoResponse(body: [1]) }
        #expect(throws: SMPMessageError("image state entry: `slot` 4294967296 is out of range")) {
            try ImageStateResponse(body: ["images": [["slot": 4_294_967_296, "version": "1"]]])
        }
        #expect(throws: SMPMessageError("`err` must be a map of unsigned `group` and `rc`, not {\"group\": -1}")) {
            try SMPDeviceError.reported(in: ["err": ["group": -1]])
        }
    }

    @Test func headersAndFramesRefuseTruncatedReservedAndTrailingBytes() {
        #expect(throws: DecodeError.self) { try SMPFrame(bytes: [UInt8](hex: "0a000006000000") ?? []) }
        #expect(throws: DecodeError.truncated(field: "SMP Data", needed: 6, available: 5)) {
            try SMPFrame(bytes: [UInt8](hex: "0a00000600000000a161646268") ?? [])
        }
        #expect(throws: DecodeError.trailingBytes(context: "SMP frame", count: 1)) {
            try SMPFrame(bytes: [UInt8](hex: "0a00000600000000a1616462686900") ?? [])
        }
        #expect(throws: DecodeError.self) { try SMPFrame(bytes: [UInt8](hex: "2a00000000000000") ?? []) }
        // Reserved version bits and unknown ops survive (open values).
        let odd = try? SMPFrame(bytes: [UInt8](hex: "1f07000000400001") ?? [])
        #expect(odd?.header.versionBits == 3 && odd?.header.op == SMPOp(rawValue: 7) && odd?.header.group == SMPGroup(rawValue: 64))
        #expect(odd?.header.version == nil && odd?.encoded.hexString == "1f07000000400001")
    }
}
