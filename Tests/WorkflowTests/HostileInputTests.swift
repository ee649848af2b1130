import Foundation
import Testing
import YAML
@testable import Workflow

@Suite struct HostileInputTests {
    @Test func aHugeKeyGivesAShortMessageQuickly() {
        let key = String(repeating: "k", count: 1_000_000)
        let text = "name: t\n\(key): 1\nsteps: [connect]\n"
        let (_, diagnostics) = WorkflowParser().parse(bytes: Array(text.utf8), path: "w.yaml")
        // libyaml refuses keys over 1024 characters; the error is on the key's line.
        #expect(diagnostics.count == 1)
        #expect(diagnostics.first?.mark.line == 2)
        #expect((diagnostics.first?.message.count ?? 0) <= 401)
    }

    @Test func aLongUnknownKeyIsQuotedButBounded() {
        let key = String(repeating: "k", count: 1000)
        let (_, diagnostics) = WorkflowParser().parse(bytes: Array("name: t\n\(key): 1\nsteps: [connect]\n".utf8), path: "w.yaml")
        #expect(diagnostics.map(\.mark) == [SourceMark(line: 2, column: 1)])
        #expect(diagnostics.first?.message.hasPrefix("unknown key `kkk") == true)
        #expect(diagnostics.first?.message.count == 401)
    }

    @Test func aTenThousandDeviceInventoryWithOneBadAddressNamesIt() {
        var text = "devices:\n"
        for i in 1...10_000 {
            let address = i == 5_000 ? "C0:5E:00:00:00" : String(format: "C0:5E:00:00:%02X:%02X", i >> 8, i & 0xFF)
            text += "  - { id: D\(i), address: \"\(address)\" }\n"
        }
        let (inventory, diagnostics) = InventoryParser().parse(bytes: Array(text.utf8), path: "i.yaml")
        #expect(inventory == nil)
        #expect(diagnostics.map(\.mark) == [SourceMark(line: 5_001, column: 27)])
    }
}
