import Foundation
import Testing
import YAML
@testable import Workflow

/// Random byte- and token-level mutations of the example files: each must give a workflow or a
/// diagnostic with a position, never a trap or a hang.
@Suite struct MutationTests {
    /// A small, seeded generator so every run mutates the same way.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            var z = state
            z = (z ^ (z >> 33)) &* 0xff51afd7ed558ccd
            return z ^ (z >> 33)
        }
    }

    static let tokens: [String] = [
        ":", "- ", "{", "}", "[", "]", ",", "\"", "'", "${", "}", "$${", "&a ", "*a", "!!str ", "\n", "  ", "\t", "#", "---\n",
        "read", "write", "await", "service", "characteristic", "value", "hex", "utf8", "timeout", "10", "10s", "-1",
        "0xFFFF", "999999999999999999999", "null", "~", "yes", "FFF1", "2A26", "${id}", "${nope}", "\u{0}", "\u{FFFD}", "é",
        // Byte building: parts, their options and CRCs.
        "set", "concat", "crc", "of", "bytes", "length", "pad", "uint16be", "int64be", "CRC-16/CCITT-FALSE", "CRC-32/ISO-HDLC",
        "{ crc: CRC-16/XMODEM, of: ", "{ utf8: \"${room}\", length: 16 }", "{ bytes: \"${config}\" }",
    ]

    static func mutate(_ original: [UInt8], _ g: inout Generator) -> [UInt8] {
        var bytes = original
        let count = Int.random(in: 1...4, using: &g)
        for _ in 0..<count {
            let at = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &g)
            switch Int.random(in: 0..<6, using: &g) {
            case 0 where !bytes.isEmpty: bytes[at] = UInt8.random(in: 0...255, using: &g)
            case 1 where !bytes.isEmpty: bytes.remove(at: at)
            case 2: bytes.insert(UInt8.random(in: 0x20...0x7E, using: &g), at: at)
            case 3: bytes.insert(contentsOf: Array(tokens[Int.random(in: 0..<tokens.count, using: &g)].utf8), at: at)
            case 4 where !bytes.isEmpty:
                let end = min(bytes.count, at + Int.random(in: 1...40, using: &g))
                bytes.removeSubrange(at..<end)
            default:
                // Duplicate a line somewhere else (duplicate keys, repeated steps).
                let lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false)
                if let line = lines.randomElement(using: &g) { bytes.insert(contentsOf: Array(line) + [0x0A], at: at) }
            }
        }
        return bytes
    }

    func check(_ diagnostics: [Diagnostic], lines: Int) {
        for d in diagnostics {
            #expect(d.line >= 1 && d.column >= 1)
            #expect(d.line <= lines + 2, "\(d)")
            #expect(!d.message.isEmpty)
        }
    }

    @Test func fiveThousandMutationsOfEachExampleNeverTrap() throws {
        var total = 0
        let files = ["sensor-v2", "fleet-audit", "smart-lock", "thermostat"]
        for (i, name) in files.enumerated() {
            let original = [UInt8](try Data(contentsOf: URL(fileURLWithPath: repositoryRoot + "/workflows/\(name).yaml")))
            var g = Generator(state: 0xC0FFEE + UInt64(i))
            for _ in 0..<5_000 {
                let bytes = Self.mutate(original, &g)
                let lines = bytes.filter { $0 == 0x0A }.count + 1
                let (workflow, diagnostics) = WorkflowParser().parse(bytes: bytes, path: "m.yaml")
                if workflow == nil { #expect(diagnostics.contains { $0.severity == .error }) }
                check(diagnostics, lines: lines)
                total += 1
            }
        }
        #expect(total == 5_000 * files.count)
    }

    @Test func twoThousandInventoryMutationsNeverTrap() throws {
        let workflow = try #require(WorkflowParser().parse(bytes: [UInt8](try Data(contentsOf: URL(fileURLWithPath: repositoryRoot + "/workflows/sensor-v2.yaml"))), path: "w.yaml").workflow)
        for (i, name) in ["line-3.yaml", "line-3.csv"].enumerated() {
            let path = repositoryRoot + "/inventory/" + name
            let original = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            var g = Generator(state: 0xBEEF + UInt64(i))
            for _ in 0..<1_000 {
                let bytes = Self.mutate(original, &g)
                let lines = bytes.filter { $0 == 0x0A || $0 == 0x0D }.count + 1
                let (inventory, diagnostics) = InventoryParser().parse(bytes: bytes, path: path)
                check(diagnostics, lines: lines)
                if let inventory {
                    check(Validator.check(workflow, against: inventory, devices: inventory.devices), lines: 100)
                } else {
                    #expect(diagnostics.contains { $0.severity == .error })
                }
            }
        }
    }
}
