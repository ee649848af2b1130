import EngineTestSupport
import Foundation
import Testing

/// What a device says (an advertised name, a value read) reaches the terminal with its control
/// characters escaped: a unit cannot clear the screen, retitle the window or reorder a line.
@Suite(.serialized) struct EscapingProcessTests {
    static func hasRawControls(_ text: String) -> Bool {
        text.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\u{07}" || $0 == "\u{202E}" || $0 == "\u{2028}" }
    }

    @Test func advertisedNamesAreEscapedInTheScanTable() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 2)
        let model = line.directory + "/models/sensor-v2.yaml"
        let text = try String(contentsOfFile: model, encoding: .utf8)
            .replacingOccurrences(of: "name: \"${name}\"", with: #"name: "${name}\e[2J\a\u202E""#)
        try Data(text.utf8).write(to: URL(fileURLWithPath: model))
        let child = try ChildProcess(["scan", "--adapter", "sim", "--inventory", paths.inventory, "--timeout", "500ms"], directory: line.directory)
        var out = ""
        for await l in child.lines { out += l + "\n" }
        #expect(await child.wait() == 0)
        #expect(!Self.hasRawControls(out))
        #expect(out.contains("SNS-0001\\u{1B}[2J\\u{7}\\u{202E}"), "\(out)")
    }

    @Test func valuesReadFromADeviceAreEscapedInProgressAndSummary() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 2, faults: [2: #"{ firmware: "1.0\e[31m\u202E\L" }"#])
        let child = try ChildProcess(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--sim-latency", "0",
                                      "--report", "r.json"], directory: line.directory)
        var out = ""
        for await l in child.lines { out += l + "\n" }
        let err = await child.stderr()
        #expect(await child.wait() == 1)
        #expect(!Self.hasRawControls(out) && !Self.hasRawControls(err), "\(out)\(err)")
        #expect(err.contains("SN-0002  failed") && err.contains("1.0\\u{1B}[31m\\u{202E}\\u{2028}"), "\(err)")
        // The report keeps the value as the device sent it (JSON escapes it); only the terminal is protected.
        let report = try String(contentsOfFile: line.directory + "/r.json", encoding: .utf8)
        #expect(report.contains("1.0\\u001b[31m"))
    }
}
