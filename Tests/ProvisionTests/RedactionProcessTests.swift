import EngineTestSupport
import Foundation
import Testing

/// A secret never reaches what a run writes or prints, in any rendering: the report, the journal, the
/// events, the JUnit file, stdout and stderr.
@Suite(.serialized) struct RedactionProcessTests {
    static let key = "A1B2C3D4E5F6A7B8"          // hex, upper case; read back in lower case
    static let password = "hunter2-Secret"       // text, sent and read back as hex and base64

    /// Every form the secrets could take in a file or on a terminal.
    static var renderings: [String] {
        let keyBytes = [UInt8](hex: key) ?? []
        let pw = Array(password.utf8)
        return [key, key.lowercased(), password, pw.hexString, Data(keyBytes).base64EncodedString().prefix(8).description,
                Data(pw).base64EncodedString().prefix(8).description]
    }

    /// A line whose devices echo the secrets on FFF5 and FFF6; `steps` follow scan, connect and the reads.
    static func line(steps: String) throws -> TestLine {
        let line = try TestLine()
        let model = line.directory + "/models/sensor-v2.yaml"
        let text = try String(contentsOfFile: model, encoding: .utf8)
            .replacingOccurrences(of: "  battery: \"87\"", with: "  battery: \"87\"\n  key: \"00\"\n  password: \"none\"")
            .replacingOccurrences(
            of: "      - { uuid: FFF4, properties: [write-without-response] }",
            with: "      - { uuid: FFF4, properties: [write-without-response] }\n      - { uuid: FFF5, properties: [read], value: { hex: \"${key}\" } }\n      - { uuid: FFF6, properties: [read], value: { utf8: \"${password}\" } }")
        try Data(text.utf8).write(to: URL(fileURLWithPath: model))
        let inventory = """
            simulator: { model: models/sensor-v2.yaml }
            secrets: [key, password]
            devices:
              - { id: SN-0001, name: SNS-0001, address: "C0:5E:00:00:00:01", vars: { key: "\(key)", password: "\(password)" } }
            """
        try Data(inventory.utf8).write(to: URL(fileURLWithPath: line.directory + "/inventory.yaml"))
        let workflow = """
            name: secrets
            defaults: { timeout: 2s }
            steps:
              - scan: { name: "${name}", timeout: 1s }
              - connect: {}
              - read: { id: echo_key, service: FFF0, characteristic: FFF5, as: hex }
              - read: { id: echo_password, service: FFF0, characteristic: FFF6, as: hex }
              - read: { id: echo_password_b64, service: FFF0, characteristic: FFF6, as: base64 }
              - read: { id: echo_password_text, service: FFF0, characteristic: FFF6, as: utf8 }
            \(steps)
            """
        try Data(workflow.utf8).write(to: URL(fileURLWithPath: line.directory + "/workflow.yaml"))
        return line
    }

    /// Runs the line and checks every file and stream it wrote.
    static func runAndCheck(_ line: TestLine, _ comment: Comment) async throws {
        let child = try ChildProcess(["run", "workflow.yaml", "--inventory", "inventory.yaml", "--adapter", "sim", "--sim-latency", "0",
                                      "--report", "r.json", "--junit", "r.xml", "--events", "events.jsonl"], directory: line.directory)
        var stdout = ""
        for await l in child.lines { stdout += l + "\n" }
        let stderr = await child.stderr()
        #expect(await child.wait() == 1, comment)
        var texts = ["stdout": stdout, "stderr": stderr]
        for file in ["r.json", "r.journal", "r.xml", "events.jsonl"] {
            texts[file] = try String(contentsOfFile: line.directory + "/" + file, encoding: .utf8)
        }
        #expect(texts["r.json"]?.contains("\"echo_key\" : \"***\"") == true, comment)
        #expect(texts["stderr"]?.contains("SN-0001  failed") == true, comment)
        for (name, text) in texts {
            for secret in renderings {
                #expect(!text.lowercased().contains(secret.lowercased()), "\(comment): \(name) shows \(secret)")
            }
        }
    }

    @Test func secretsReadBackInOtherEncodingsAreHiddenEverywhere() async throws {
        let line = try Self.line(steps: #"  - verify: { value: "${echo_key} ${echo_password} ${echo_password_b64} ${echo_password_text}", equals: "nothing" }"#)
        defer { line.remove() }
        try await Self.runAndCheck(line, "a verify quoting the values read")
    }

    @Test func theSimulatorDumpKeepsWhatDevicesReceivedAndSaysSo() async throws {
        let line = try Self.line(steps: #"  - write: { service: FFF0, characteristic: FFF1, value: { hex: "01${key}" } }"#)
        defer { line.remove() }
        let child = try ChildProcess(["run", "workflow.yaml", "--inventory", "inventory.yaml", "--adapter", "sim", "--sim-latency", "0",
                                      "--report", "r.json", "--sim-dump", "dump.json", "--sim-state", "sim.state"], directory: line.directory)
        for await _ in child.lines {}
        let stderr = await child.stderr()
        #expect(await child.wait() == 0, "\(stderr)")
        #expect(stderr.contains("note: dump.json (--sim-dump) holds what the simulated devices received, the secrets `key`, `password` included, unredacted (written readable by its owner only)"))
        #expect(stderr.contains("note: sim.state (--sim-state) holds what the simulated devices received"))
        // The device side is the proof of what a unit got: the key arrived whole.
        let dump = try String(contentsOfFile: line.directory + "/dump.json", encoding: .utf8)
        #expect(dump.contains("\"config\" : \"\(Self.key.lowercased())\""))
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: line.directory + "/dump.json")[.posixPermissions] as? Int)
        #expect(mode == 0o600)
    }

    @Test func aSecretInsideALargerWrittenValueIsHidden() async throws {
        let line = try Self.line(steps: """
              - subscribe: { id: acks, service: FFF0, characteristic: FFF3 }
              - name: set configuration
                await:
                  subscription: acks
                  trigger: { service: FFF0, characteristic: FFF1, value: { hex: "01${key}" } }
                  equals: { hex: "01${key}" }
                  timeout: 200ms
            """)
        defer { line.remove() }
        try await Self.runAndCheck(line, "an await whose expected value is 01${key}")
    }
}
