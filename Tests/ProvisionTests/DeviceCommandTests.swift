import EngineTestSupport
import Foundation
import Testing

/// `provision gatt | read | write | subscribe`: looking at one device, on the simulator.
@Suite struct DeviceCommandTests {
    /// A line of three sensors; SN-0002 runs firmware 1.9.0 and reports a battery of 19 %, SN-0003's
    /// firmware string is hostile (escape sequences).
    static func line() throws -> TestLine {
        let line = try TestLine()
        _ = try line.write(count: 3, faults: [2: "{ firmware: \"1.9.0\", battery: \"19\" }",
                                              3: "{ firmware: \"1.0\\e[2J\\a\\n\\u202E\" }"])
        return line
    }

    @Test func gattListsTheDatabaseWithValuesAsTextAndJSON() async throws {
        let line = try Self.line()
        defer { line.remove() }
        let text = await run(["gatt", "--adapter", "sim", "--inventory", "inventory.yaml", "SN-0002"], in: line.directory)
        #expect(text.code == 0, "\(text.err)")
        let lines = text.out.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("SN-0002 (C0:5E:00:00:00:02) \"SNS-0002\", RSSI ") == true)
        #expect(lines.contains("service 180A Device Information  handles 0x0001-0x0009"))
        #expect(lines.contains("  characteristic 2A26 Firmware Revision String  handle 0x0009  read  = \"1.9.0\" (312e392e30)"))
        #expect(lines.contains("  characteristic 2A19 Battery Level  handle 0x000c  read, notify  = 19 % (13)"))
        #expect(lines.contains("  characteristic FFF1  handle 0x0010  write"))
        #expect(lines.contains("    descriptor 2902 Client Characteristic Configuration  handle 0x0015"))

        let json = await run(["gatt", "--adapter", "sim", "--inventory", "inventory.yaml", "SN-0001", "--json"], in: line.directory)
        #expect(json.code == 0)
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any])
        #expect((doc["device"] as? [String: Any])?["id"] as? String == "SN-0001")
        let services = try #require(doc["services"] as? [[String: Any]])
        let info = try #require(services.first { $0["uuid"] as? String == "180A" })
        let fw = try #require((info["characteristics"] as? [[String: Any]])?.first { $0["uuid"] as? String == "2A26" })
        #expect(fw["value"] as? String == "322e342e31")
        #expect(fw["text"] as? String == "2.4.1")
        #expect(fw["properties"] as? [String] == ["read"])
        #expect(doc["mtu"] as? Int == 247)
    }

    @Test func deviceTextIsShownEscaped() async throws {
        let line = try Self.line()
        defer { line.remove() }
        let base = ["--adapter", "sim", "--inventory", "inventory.yaml", "SN-0003"]
        // Read as text: the control characters are shown escaped.
        let read = await run(["read"] + base + ["180A", "2A26", "--as", "utf8"], in: line.directory)
        #expect(read.code == 0, "\(read.err)")
        #expect(read.out == "1.0\\u{1B}[2J\\u{7}\\u{A}\\u{202E}\n")
        // The dump shows text only when it is printable; this value is shown as its bytes.
        let gatt = await run(["gatt"] + base, in: line.directory)
        #expect(gatt.code == 0)
        #expect(!gatt.out.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\u{07}" || $0 == "\u{202E}" })
        #expect(gatt.out.contains("2A26 Firmware Revision String  handle 0x0009  read  = 312e301b5b324a070ae280ae\n"))
    }

    @Test func readDecodesAsAWorkflowWould() async throws {
        let line = try Self.line()
        defer { line.remove() }
        let dir = line.directory
        // By inventory id, by advertised name, by address: the same device.
        for device in ["SN-0002", "SNS-0002", "C0:5E:00:00:00:02"] {
            let r = await run(["read", "--adapter", "sim", "-i", "inventory.yaml", device, "180F", "2A19", "--as", "uint8"], in: dir)
            #expect(r.code == 0 && r.out == "19\n", "\(device): \(r.err)")
        }
        let hex = await run(["read", "--adapter", "sim", "-i", "inventory.yaml", "SN-0002", "180F", "2A19"], in: dir)
        #expect(hex.out == "13\n", "hex by default")
        let json = await run(["read", "--adapter", "sim", "-i", "inventory.yaml", "SN-0002", "180A", "2A26", "--as", "version", "--json"], in: dir)
        #expect(json.out == "{\"address\":\"C0:5E:00:00:00:02\",\"characteristic\":\"2A26\",\"device\":\"SN-0002\",\"hex\":\"312e392e30\",\"service\":\"180A\",\"type\":\"version\",\"value\":\"1.9.0\"}\n")
    }

    @Test func exitCodesSayWhatWentWrong() async throws {
        let line = try Self.line()
        defer { line.remove() }
        let dir = line.directory
        let base = ["--adapter", "sim", "-i", "inventory.yaml"]
        // The device is not there: 1, within the deadline.
        let absent = await run(["read"] + base + ["NOBODY", "180A", "2A26", "--timeout", "300ms"], in: dir)
        #expect(absent.code == 1)
        #expect(absent.err == "error: `NOBODY` (no inventory device has that id; looked for as an advertised name) was not heard within 300ms\n")
        // The device has no such characteristic: 1.
        let missing = await run(["read"] + base + ["SN-0001", "180A", "2A99"], in: dir)
        #expect(missing.code == 1)
        #expect(missing.err.contains("SN-0001 (C0:5E:00:00:00:01): read 180A/2A99: not found on the device: characteristic 2A99"))
        // The value does not decode as asked: 1, with the bytes.
        let wrong = await run(["read"] + base + ["SN-0001", "180A", "2A26", "--as", "uint8"], in: dir)
        #expect(wrong.code == 1)
        #expect(wrong.err.contains("uint8 needs exactly 1 byte, got 5 (322e342e31)"))
        // Usage: 2, with a hint.
        let format = await run(["read"] + base + ["SN-0001", "180A", "2A26", "--as", "unit8"], in: dir)
        #expect(format.code == 2)
        #expect(format.err.contains("`--as unit8` is not a format (did you mean `uint8`?)"))
        let uuid = await run(["read"] + base + ["SN-0001", "180X", "2A26"], in: dir)
        #expect(uuid.code == 2 && uuid.err.contains("SERVICE `180X` is not a UUID"))
        let noAdapter = await run(["read", "SN-0001", "180A", "2A26"], in: dir)
        #expect(noAdapter.code == 2 && noAdapter.err.contains("`--adapter SPEC` is required"))
        let value = await run(["write"] + base + ["SN-0001", "FFF0", "FFF1", "0g"], in: dir)
        #expect(value.code == 2)
        #expect(value.err.contains("VALUE:1:1: error: the value must say how it is encoded"))
        let hexValue = await run(["write"] + base + ["SN-0001", "FFF0", "FFF1", "hex:0g"], in: dir)
        #expect(hexValue.err.contains("VALUE:1:5: error: `0g` is not valid hex"))
    }

    @Test func writeSendsTheWorkflowsValueSyntaxAndTheDeviceAcksIt() async throws {
        let line = try Self.line()
        defer { line.remove() }
        let dir = line.directory
        let base = ["--adapter", "sim", "-i", "inventory.yaml"]
        // `${config}` is the device's inventory variable (SN-0001: 00010a0b0c).
        let w = await run(["write"] + base + ["SN-0001", "FFF0", "FFF1", "{ hex: \"01${config}\" }", "--trace", "w.jsonl"], in: dir)
        #expect(w.code == 0, "\(w.err)")
        #expect(w.out == "wrote 6 byte(s) 0100010a0b0c to FFF0/FFF1 of SN-0001 (C0:5E:00:00:00:01)\n")
        // What the device received, from the ATT trace: the write, and its answer.
        let trace = try String(contentsOfFile: dir + "/w.jsonl", encoding: .utf8)
        #expect(trace.contains("\"direction\":\"sent\",\"handle\":16,\"link\":\"SN-0001\",\"name\":\"Write Request\",\"opcode\":18"))
        #expect(trace.contains("\"value\":\"0100010a0b0c\""))
        #expect(trace.contains("\"direction\":\"received\",\"link\":\"SN-0001\",\"name\":\"Write Response\""))
        // Subscribe to the acks and trigger the command: the device answers `01 00`.
        let s = await run(["subscribe"] + base + ["SN-0002", "FFF0", "FFF3", "--count", "1", "--for", "5s",
                                                  "--trigger", "FFF1=[{ hex: \"01\" }, { utf8: \"${id}\" }]"], in: dir)
        #expect(s.code == 0, "\(s.err)")
        #expect(s.out == "0100\n")
        // Nothing comes without a trigger: with --count that is a failure.
        let quiet = await run(["subscribe"] + base + ["SN-0002", "FFF0", "FFF3", "--count", "1", "--for", "300ms"], in: dir)
        #expect(quiet.code == 1)
        #expect(quiet.err.contains("fewer than 1 value(s) of FFF0/FFF3 arrived within 300ms"))
    }
}
