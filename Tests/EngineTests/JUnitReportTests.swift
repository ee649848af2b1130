import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing
import Workflow
@testable import Engine
import EngineTestSupport
import TestSupport

/// `--junit`: a test case per device and step, properties for captured values, station and run id,
/// failed measurements as failures.
@Suite struct JUnitReportTests {
    /// An element of the parsed XML.
    final class Element {
        let name: String
        let attributes: [String: String]
        var children: [Element] = []
        var text = ""
        init(_ name: String, _ attributes: [String: String]) {
            self.name = name
            self.attributes = attributes
        }
        func all(_ name: String) -> [Element] { children.filter { $0.name == name } }
        func first(_ name: String) -> Element? { children.first { $0.name == name } }
        /// `<properties><property name= value=/>…` as a dictionary.
        var properties: [String: String] {
            Dictionary((first("properties")?.all("property") ?? []).map { ($0.attributes["name"] ?? "", $0.attributes["value"] ?? "") },
                       uniquingKeysWith: { a, _ in a })
        }
    }

    final class Builder: NSObject, XMLParserDelegate {
        var stack: [Element] = [Element("#document", [:])]
        func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName qName: String?,
                    attributes attributeDict: [String: String] = [:]) {
            let e = Element(elementName, attributeDict)
            stack.last?.children.append(e)
            stack.append(e)
        }
        func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName qName: String?) {
            stack.removeLast()
        }
        func parser(_ parser: XMLParser, foundCharacters string: String) { stack.last?.text += string }
    }

    static func parse(_ xml: String) throws -> Element {
        let parser = XMLParser(data: Data(xml.utf8))
        let builder = Builder()
        parser.delegate = builder
        guard parser.parse(), let root = builder.stack.first?.children.first else {
            throw JUnitError(message: "not well-formed XML: \(parser.parserError.map { "\($0)" } ?? "?")")
        }
        return root
    }

    struct JUnitError: Error { var message: String }

    static func report() -> RunReport {
        let battery = MeasurementLimits(min: .integer(20, signed: false), max: .integer(100, signed: false))
        func steps(failing: Bool) -> [StepRecord] {
            [StepRecord(name: "scan", kind: "scan", outcome: .succeeded, attempts: 1, startMs: 0, durationMs: 20),
             StepRecord(name: "read battery", kind: "read", outcome: .succeeded, attempts: 2, startMs: 20, durationMs: 15),
             StepRecord(name: "battery level", kind: "verify", outcome: .failed, attempts: 1, startMs: 35, durationMs: 1, optional: failing ? true : nil),
             StepRecord(name: "update", kind: "write", outcome: .skippedByCondition, attempts: 0, startMs: 36, durationMs: 0,
                        skipReason: "when: firmware < 2.0.0 was false"),
             StepRecord(name: "disconnect", kind: "disconnect", outcome: .succeeded, attempts: 1, startMs: 36, durationMs: 2)]
        }
        var ok = DeviceRecord(id: "SN-<1>", address: nil, name: "x\"&'", outcome: .succeeded, attempts: 1, adapter: "sim", rssi: -50,
                              started: wallTime("2026-01-05T08:00:00.000Z"), durationMs: 38,
                              captured: ["battery": 87, "key": "***", "evil": "\u{1B}]0;x\u{07}"],
                              measurements: [MeasurementRecord(step: 2, result: battery.check(.integer(87, signed: false), name: "battery level", unit: "%"))],
                              steps: steps(failing: false))
        ok.steps[2].outcome = .succeeded
        let low = DeviceRecord(id: "SN-2", address: nil, name: nil, outcome: .succeeded, attempts: 1, adapter: "sim", started: wallTime("2026-01-05T08:00:01.000Z"),
                               durationMs: 38, captured: ["battery": 19],
                               measurements: [MeasurementRecord(step: 2, result: battery.check(.integer(19, signed: false), name: "battery level", unit: "%"))],
                               steps: steps(failing: true))
        let lost = DeviceRecord(id: "SN-3", address: nil, name: nil, outcome: .failed, attempts: 3, durationMs: 500,
                                steps: [StepRecord(name: "scan", kind: "scan", outcome: .failed, attempts: 3, startMs: 0, durationMs: 500,
                                                   error: FailureRecord(kind: .notFound, step: "scan", message: "no advertisement", causes: ["tried 3 times"]))],
                                error: FailureRecord(kind: .notFound, step: "scan", message: "no advertisement", causes: ["tried 3 times"]))
        let never = DeviceRecord(id: "SN-4", address: nil, name: nil, outcome: .skipped, skipReason: "the line was stopped")
        let info = RunInfo(id: "run-1", workflow: FileRef(name: "audit", path: "w.yaml", sha256: "0"), inventory: FileRef(path: "i.yaml", sha256: "1"),
                           adapters: [], simulated: true, station: "line-3", toolVersion: "t", options: [:], started: wallTime("2026-01-05T08:00:00.000Z"),
                           captureTypes: ["battery": .integer(signed: false), "key": .bytes, "evil": .text])
        let devices = [ok, low, lost, never]
        return RunReport(run: info, summary: Summary.compute(devices, wall: .seconds(2)), devices: devices)
    }

    @Test func aTestCasePerDeviceAndStepWithPropertiesAndMeasurements() throws {
        let root = try Self.parse(Self.report().junitXML())
        #expect(root.name == "testsuites")
        let suites = root.all("testsuite")
        #expect(suites.map { $0.attributes["name"] } == ["SN-<1>", "SN-2", "SN-3", "SN-4"])
        // Totals: 5 + 5 + 1 step test cases + 1 for the device that never started.
        #expect(root.attributes["tests"] == "12")
        #expect(root.attributes["failures"] == "2", "the failed measurement of SN-2 and SN-3's scan")
        #expect(root.attributes["skipped"] == "3")

        let first = suites[0]
        #expect(first.attributes["hostname"] == "line-3" && first.attributes["timestamp"] == "2026-01-05T08:00:00.000Z")
        let p = first.properties
        #expect(p["run_id"] == "run-1" && p["station"] == "line-3" && p["outcome"] == "succeeded")
        #expect(p["captured.battery"] == "87" && p["captured.key"] == "***")
        #expect(p["captured.evil"] == "?]0;x?", "control characters XML cannot hold")
        let cases = first.all("testcase")
        #expect(cases.map { $0.attributes["name"] } == ["01 scan", "02 read battery", "03 battery level", "04 update", "05 disconnect"])
        #expect(cases.allSatisfy { $0.attributes["classname"] == "SN-<1>" })
        #expect(cases[1].attributes["time"] == "0.015")
        let measured = cases[2].properties
        #expect(measured["measurement"] == "battery level" && measured["value"] == "87" && measured["unit"] == "%")
        #expect(measured["limits"] == "min 20 %, max 100 %" && measured["outcome"] == "pass")
        #expect(cases[2].first("failure") == nil)
        #expect(cases[3].first("skipped")?.attributes["message"] == "when: firmware < 2.0.0 was false")

        // An optional verify that failed: a failure with the measurement's message.
        let low = suites[1].all("testcase")[2]
        #expect(low.first("failure")?.attributes["type"] == "measurement")
        #expect(low.first("failure")?.attributes["message"] == "battery level 19 % is below min 20 %")
        #expect(suites[1].attributes["failures"] == "1")

        let lost = suites[2]
        #expect(lost.properties["error.kind"] == "not_found")
        #expect(lost.all("testcase").first?.first("failure")?.attributes["type"] == "not_found")
        #expect(lost.all("testcase").first?.first("failure")?.text == "step: scan\ntried 3 times")
        let never = suites[3].all("testcase")
        #expect(never.map { $0.attributes["name"] } == ["device"])
        #expect(never.first?.first("skipped")?.attributes["message"] == "the line was stopped")
    }
}
