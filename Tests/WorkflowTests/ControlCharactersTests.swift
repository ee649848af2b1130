import Testing
import YAML
@testable import Workflow

/// Control characters: refused in ids, names and addresses (with a position), escaped when printed.
@Suite struct ControlCharactersTests {
    /// One of each kind: C0, DEL, C1, the separators, bidi marks, overrides and isolates, invisible ones.
    static let controls: [Unicode.Scalar] = [
        "\u{0}", "\u{7}", "\u{8}", "\u{9}", "\u{A}", "\u{D}", "\u{1B}", "\u{7F}", "\u{85}", "\u{9B}", "\u{2028}", "\u{2029}",
        "\u{61C}", "\u{200E}", "\u{200F}", "\u{202A}", "\u{202B}", "\u{202C}", "\u{202D}", "\u{202E}", "\u{2066}", "\u{2067}",
        "\u{2068}", "\u{2069}", "\u{200B}", "\u{200C}", "\u{200D}", "\u{2060}", "\u{FEFF}",
    ]

    @Test func theClassCoversEveryKindAndNothingPrintable() {
        for s in Self.controls { #expect(ControlCharacters.contains(s), "U+\(String(s.value, radix: 16))") }
        for s in ["a", "Z", "0", " ", "-", "é", "漢", "🙂", "\u{A0}", "\u{2013}"] as [Unicode.Scalar] {
            #expect(!ControlCharacters.contains(s), "U+\(String(s.value, radix: 16))")
        }
    }

    @Test func escapingShowsEachCodeAndKeepsTheRest() {
        #expect(ControlCharacters.escaped("SNS-1\u{1B}[2J\u{7}\n\u{202E}é") == "SNS-1\\u{1B}[2J\\u{7}\\u{A}\\u{202E}é")
        #expect(ControlCharacters.escaped("plain text: 2.4.1") == "plain text: 2.4.1")
        for s in Self.controls {
            #expect(!ControlCharacters.escaped("a\(String(s))b").unicodeScalars.contains(where: ControlCharacters.contains))
        }
    }

    @Test func idsNamesAndAddressesWithControlCharactersAreRefusedWithAPosition() {
        let cases: [(String, String, SourceMark)] = [
            (#"  - { id: "SN-\e[2J1", name: S1 }"#, "device id `SN-\\u{1B}[2J1` contains the control character U+001B (ESC) at character 4", SourceMark(line: 2, column: 11)),
            (#"  - { id: SN-1, name: "S\a1" }"#, "device `SN-1`'s name `S\\u{7}1` contains the control character U+0007 (BEL) at character 2", SourceMark(line: 2, column: 23)),
            (#"  - { id: SN-1, name: "S1\nS2" }"#, "device `SN-1`'s name `S1\\u{A}S2` contains the control character U+000A (LINE FEED) at character 3", SourceMark(line: 2, column: 23)),
            (#"  - { id: SN-1, name: "S\L1" }"#, "device `SN-1`'s name `S\\u{2028}1` contains the control character U+2028 (LINE SEPARATOR) at character 2", SourceMark(line: 2, column: 23)),
            (#"  - { id: SN-1, name: "S\u202E1" }"#, "device `SN-1`'s name `S\\u{202E}1` contains the control character U+202E (RIGHT-TO-LEFT OVERRIDE) at character 2", SourceMark(line: 2, column: 23)),
            (#"  - { id: SN-1, name: "S\u20661" }"#, "device `SN-1`'s name `S\\u{2066}1` contains the control character U+2066 (LEFT-TO-RIGHT ISOLATE) at character 2", SourceMark(line: 2, column: 23)),
            (#"  - { id: SN-1, address: "C0:5E:00:00:00:01\x9B" }"#, "device `SN-1`'s address `C0:5E:00:00:00:01\\u{9B}` contains the control character U+009B (CSI) at character 18", SourceMark(line: 2, column: 26)),
        ]
        for (device, message, mark) in cases {
            let r = InventoryParser().parse(bytes: Array("devices:\n\(device)\n".utf8), path: "inv.yaml")
            #expect(r.inventory == nil, "\(device)")
            #expect(r.diagnostics.first?.message == message, "\(device)")
            #expect(r.diagnostics.first?.mark == mark, "\(device)")
        }
    }

    @Test func csvCellsWithControlCharactersAreRefused() {
        let csv = "id,address,name\nSN-1,,S\u{1B}[31m1\nSN\u{202E}2,,S2\n"
        let r = InventoryParser().parse(bytes: Array(csv.utf8), path: "inv.csv")
        #expect(r.inventory == nil)
        #expect(r.diagnostics.map(\.message) == [
            "device `SN-1`'s name `S\\u{1B}[31m1` contains the control character U+001B (ESC) at character 2",
            "device id `SN\\u{202E}2` contains the control character U+202E (RIGHT-TO-LEFT OVERRIDE) at character 3",
        ])
        #expect(r.diagnostics.map(\.mark) == [SourceMark(line: 2, column: 7), SourceMark(line: 3, column: 1)])
    }

    @Test func workflowAndStepNamesWithControlCharactersAreRefused() {
        let r = WorkflowParser().parse(bytes: Array("""
            name: "line\\e]0;pwned\\a"
            steps:
              - name: "scan\\u2028now"
                scan: {}
            """.utf8), path: "w.yaml")
        #expect(r.workflow == nil)
        #expect(r.diagnostics.map(\.message) == [
            "the workflow's `name` `line\\u{1B}]0;pwned\\u{7}` contains the control character U+001B (ESC) at character 5",
            "the step `name` `scan\\u{2028}now` contains the control character U+2028 (LINE SEPARATOR) at character 5",
        ])
        #expect(r.diagnostics.map(\.mark) == [SourceMark(line: 1, column: 7), SourceMark(line: 3, column: 11)])
    }
}
