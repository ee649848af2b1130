import Foundation
import Testing
import YAML
@testable import Workflow

/// One broken input and the exact first error it must produce.
struct GoldenCase: Sendable, CustomTestStringConvertible {
    var name: String
    var workflow: String
    var inventory: String?
    var inventoryName: String?
    var limit: String?
    /// (file name, line, column, message, hint); `$DIR` stands for the case's directory.
    var expect: (file: String, line: Int, column: Int, message: String, hint: String?)

    init(_ name: String, workflow: String, inventory: String?, inventoryName: String?, limit: String?,
         expect: (String, Int, Int, String, String?)) {
        self.name = name
        self.workflow = workflow
        self.inventory = inventory
        self.inventoryName = inventoryName
        self.limit = limit
        self.expect = expect
    }

    var testDescription: String { name }

    static let all: [GoldenCase] = [
        GoldenCase("empty file",
            workflow: "",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 1, 1, "the workflow is empty", "a workflow needs at least `name:` and `steps:`")),
        GoldenCase("only comments",
            workflow: "# nothing here\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 1, 1, "the workflow is empty", "a workflow needs at least `name:` and `steps:`")),
        GoldenCase("unclosed flow sequence",
            workflow: "name: t\nsteps: [\n  - connect\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 3, 3, "did not find expected node content while parsing a flow node", "a `[` list or `{` mapping is not closed, or a `,` is missing")),
        GoldenCase("tab in indentation",
            workflow: "name: t\nsteps:\n\t- connect\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 3, 1, "tab character in indentation", "indent with spaces; YAML does not allow tabs for indentation")),
        GoldenCase("duplicate key",
            workflow: "name: t\nname: u\nsteps: [connect]\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 2, 1, "duplicate key `name` (first defined at 1:1)", "remove one of the two")),
        GoldenCase("second document",
            workflow: "name: t\nsteps: [connect]\n---\nname: u\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 3, 1, "a second YAML document starts here", "a workflow or inventory file holds exactly one document; remove the `---`")),
        GoldenCase("alias",
            workflow: "name: &n t\nsteps: [connect]\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 1, 7, "anchors (&name) are not supported", "remove the anchor")),
        GoldenCase("binary junk",
            workflow: "name: t\nsteps: \u{0}\u{1}\u{2}\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 2, 8, "NUL byte in text (is this a binary file?)", nil)),
        GoldenCase("top level is a list",
            workflow: "- connect\n- read\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 1, 1, "a workflow must be a mapping (`key: value`), not a list", nil)),
        GoldenCase("misspelt top-level key",
            workflow: "name: t\nstepz:\n  - connect\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 2, 1, "unknown key `stepz` in the workflow", "did you mean `steps`?")),
        GoldenCase("missing name",
            workflow: "steps:\n  - connect\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 1, 1, "the workflow needs a `name`", "add `name: my-workflow` at the top")),
        GoldenCase("steps is a mapping",
            workflow: "name: t\nsteps:\n  connect: {}\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 3, 3, "`steps` must be a list, not a mapping", nil)),
        GoldenCase("steps is empty",
            workflow: "name: t\nsteps: []\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 2, 8, "`steps` is empty", "a workflow needs at least one step")),
        GoldenCase("unknown step kind",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - wrte: { service: FFF0, characteristic: FFF1, value: { hex: \"01\" } }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 5, "unknown step `wrte`", "did you mean `write`?")),
        GoldenCase("two kinds in one step",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - read: { service: 180A, characteristic: 2A26 }\n    write: { service: FFF0, characteristic: FFF1, value: { hex: \"01\" } }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 5, 5, "a step does one thing: found both `read` and `write`", "split them into two steps (each starting with `- `)")),
        GoldenCase("step is a number",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - 42\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 5, "unknown step `42`", "steps: scan, connect, pair, discover, read, verify, write, write_blob, subscribe, unsubscribe, await, sleep, disconnect, set, dfu, file_upload, settings, mcumgr, wifi_provision, wifi_scan, esp_custom")),
        GoldenCase("misspelt option key",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - read: { service: 180A, charateristic: 2A26 }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 28, "unknown key `charateristic` in `read`", "did you mean `characteristic`?")),
        GoldenCase("bad 16-bit UUID",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - read: { service: 18G0, characteristic: 2A26 }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 22, "`18G0` is not a Bluetooth UUID", "write 4 hex digits (`180A`, `0x180A`), 8 for 32-bit, or the 128-bit form `0000180a-0000-1000-8000-00805f9b34fb`")),
        GoldenCase("bad 128-bit UUID",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - read: { service: 0000180a-0000-1000-8000-00805f9b34, characteristic: 2A26 }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 22, "`0000180a-0000-1000-8000-00805f9b34` is not a Bluetooth UUID", "write 4 hex digits (`180A`, `0x180A`), 8 for 32-bit, or the 128-bit form `0000180a-0000-1000-8000-00805f9b34fb`")),
        GoldenCase("odd-length hex",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - write: { service: FFF0, characteristic: FFF1, value: { hex: \"010\" } }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 65, "`010` is not valid hex (odd number of digits)", "every byte takes two digits: write `0010` or check for a missing digit")),
        GoldenCase("hex with non-hex digits",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - write: { service: FFF0, characteristic: FFF1, value: { hex: \"01zz\" } }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 65, "`01zz` is not valid hex", "hex is pairs of the digits 0-9 and a-f, like `0a0b`")),
        GoldenCase("value without encoding",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - write: { service: FFF0, characteristic: FFF1, value: \"0101\" }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 58, "`value` must say how it is encoded", "write `{ hex: \"0101\" }` (or `{ utf8: \"0101\" }` for text)")),
        GoldenCase("unknown value encoding",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - write: { service: FFF0, characteristic: FFF1, value: { hexx: \"01\" } }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 60, "unknown value encoding `hexx`", "did you mean `hex`?")),
        GoldenCase("integer out of range",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - write: { service: FFF0, characteristic: FFF1, value: { uint8: 300 } }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 67, "300 does not fit in uint8 (0...255)", nil)),
        GoldenCase("duration without unit",
            workflow: "name: t\ndefaults:\n  timeout: 10\nsteps: [connect]\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 3, 12, "duration `10` has no unit", "write a unit: `10ms`, `10s` or `10m`")),
        GoldenCase("unknown duration unit",
            workflow: "name: t\ndefaults:\n  timeout: 10sec\nsteps: [connect]\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 3, 12, "unknown duration unit `sec` in `10sec`", "use ms, s, m or h")),
        GoldenCase("negative duration",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - sleep: -5s\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 12, "duration `-5s` is negative", nil)),
        GoldenCase("timeout given twice",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - timeout: 5s\n    read: { service: 180A, characteristic: 2A26, timeout: 2s }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 5, 59, "`timeout` is given twice for this step", "keep one of them")),
        GoldenCase("unknown decoder",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - read: { id: fw, service: 180A, characteristic: 2A26, as: utf9 }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 62, "unknown decoder `utf9`", "did you mean `utf8`?")),
        GoldenCase("duplicate capture id",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - read: { id: fw, service: 180A, characteristic: 2A26 }\n  - read: { id: fw, service: 180A, characteristic: 2A25 }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 5, 17, "`fw` is already captured by step 2", "give each `read` its own id")),
        GoldenCase("capture id is a built-in",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - read: { id: name, service: 180A, characteristic: 2A26 }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 17, "`name` is a built-in name and cannot be a capture id", "choose another id, like `name_read`")),
        GoldenCase("reference to a later capture",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - verify: { value: \"${fw}\", equals: \"2\" }\n  - read: { id: fw, service: 180A, characteristic: 2A26 }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 23, "`${fw}` is captured by step 3, which runs after this one", "move this step after step 3")),
        GoldenCase("unterminated template",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - verify: { value: \"${fw\", equals: \"2\" }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 23, "unterminated `${` in \"${fw\"", "write `$${` for a literal `${`")),
        GoldenCase("invalid template name",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - verify: { value: \"${1fw}\", equals: \"2\" }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 25, "`${1fw}` is not a valid variable name", "write `$${` for a literal `${`")),
        GoldenCase("verify without matcher",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - verify: { value: \"x\" }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 13, "`verify` needs at least one limit", "one of: min, max, equals, in, matches, version_at_least, version_below")),
        GoldenCase("a number limit on text",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - verify: { value: \"x\", equals: \"x\", min: 1 }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 45, "`min`: min needs a number, but the value is text", "min and max need a number (read the value as: uint8, sfloat, …)")),
        GoldenCase("range upside down",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - read: { id: n, service: 180F, characteristic: 2A19, as: uint8 }\n  - verify: { value: \"${n}\", min: 10, max: 1 }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 5, 35, "`min`: min 10 is above max 1: no value can pass", nil)),
        GoldenCase("bad regex",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - verify: { value: \"x\", matches: \"([\" }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 36, "`([` is not a valid regular expression: missing terminating ] for character class at character 3", nil)),
        GoldenCase("await unknown subscription",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - subscribe: { id: acks, service: FFF0, characteristic: FFF3 }\n  - await: { subscription: acsk, equals: { hex: \"0100\" } }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 5, 28, "no subscription `acsk` before this step", "did you mean `acks`?")),
        GoldenCase("await without matcher",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - subscribe: { id: acks, service: FFF0, characteristic: FFF3 }\n  - await: { subscription: acks }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 5, 12, "`await` needs `equals` or `matches`", "for example `equals: { hex: \"0100\" }`")),
        GoldenCase("resend without trigger",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - subscribe: { id: acks, service: FFF0, characteristic: FFF3 }\n  - await: { subscription: acks, equals: { hex: \"0100\" }, resend: [1s] }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 5, 67, "`resend` needs a `trigger` to re-send", "add `trigger:` with the write that causes the notification")),
        GoldenCase("retry attempts zero",
            workflow: "name: t\ndefaults:\n  retry: { attempts: 0 }\nsteps: [connect]\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 3, 22, "`attempts` must be between 1 and 100, not 0", nil)),
        GoldenCase("unknown error class",
            workflow: "name: t\ndefaults:\n  retry: { attempts: 2, on: [timeout, disconected] }\nsteps: [connect]\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 3, 39, "unknown error class `disconected`", "did you mean `disconnected`?")),
        GoldenCase("jitter out of range",
            workflow: "name: t\ndefaults:\n  retry: { backoff: { initial: 1s, jitter: 2 } }\nsteps: [connect]\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 3, 44, "`jitter` is a fraction between 0 and 1, not 2", "0.2 spreads each wait by ±20%")),
        GoldenCase("unbounded reconnect",
            workflow: "name: t\ndefaults:\n  reconnect: { attempts: unlimited }\nsteps: [connect]\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 3, 26, "reconnect attempts must be bounded", "give a number from 0 to 20")),
        GoldenCase("huge reconnect count",
            workflow: "name: t\ndefaults:\n  reconnect: { attempts: 1000000 }\nsteps: [connect]\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 3, 26, "reconnect `attempts` must be between 0 and 20, not 1000000", nil)),
        GoldenCase("reconnect delay too long",
            workflow: "name: t\ndefaults:\n  reconnect: { attempts: 2, delay: 10m }\nsteps: [connect]\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 3, 36, "reconnect `delay` 10m is longer than the limit of 1m", nil)),
        GoldenCase("mtu out of range",
            workflow: "name: t\nsteps:\n  - connect: { mtu: 1000 }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 3, 21, "`mtu` must be between 23 and 517, not 1000", nil)),
        GoldenCase("boolean misspelt",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - write: { service: FFF0, characteristic: FFF1, value: { hex: \"01\" }, with_response: maybe }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 88, "`with_response` must be `true` or `false`, not `maybe`", nil)),
        GoldenCase("read before connect",
            workflow: "name: t\nsteps:\n  - read: { service: 180A, characteristic: 2A26 }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 3, 5, "`read` needs a connection, but no `connect` step comes before it", "add `- connect: {}` before this step")),
        GoldenCase("subscribe without id",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - subscribe: { service: FFF0, characteristic: FFF3 }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 16, "`subscribe` needs `id`", "name it, for example `id: acks`, so `await` can refer to it")),
        GoldenCase("duplicate subscription id",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - subscribe: { id: acks, service: FFF0, characteristic: FFF3 }\n  - subscribe: { id: acks, service: 180F, characteristic: 2A19 }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 5, 22, "subscription `acks` is already defined by step 2", "give each subscription its own id")),
        GoldenCase("misspelt subscription mode",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - subscribe: { id: acks, service: FFF0, characteristic: FFF3, mode: notfy }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 71, "`mode` must be `notify` or `indicate`, not `notfy`", "did you mean `notify`?")),
        GoldenCase("bad scan address",
            workflow: "name: t\nsteps:\n  - scan: { address: \"C0:5E:00:00:01\" }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 3, 22, "`C0:5E:00:00:01` is not a Bluetooth address", "write six hex pairs: `C0:5E:00:00:00:01`")),
        GoldenCase("rssi out of range",
            workflow: "name: t\nsteps:\n  - scan: { min_rssi: 50 }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 3, 23, "`min_rssi` must be between -127 and 20, not 50", nil)),
        GoldenCase("write_blob with file and value",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - write_blob: { service: FFF0, characteristic: FFF4, file: a.bin, value: { hex: \"01\" } }\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 62, "`write_blob` takes `value` or `file`, not both", nil)),
        GoldenCase("sleep without duration",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - sleep: {}\n",
            inventory: nil, inventoryName: nil, limit: nil,
            expect: ("wf.yaml", 4, 12, "`sleep` needs a duration", "write `sleep: 500ms`")),
        GoldenCase("unknown variable with suggestion",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - write: { service: FFF0, characteristic: FFF1, value: { hex: \"01${confg}\" } }\n",
            inventory: "devices:\n  - { id: SN-1, name: S1, vars: { config: \"0a0b\", blob: b.bin } }\n  - { id: SN-2, name: S2, vars: { config: \"0c0d\", blob: b.bin } }\n", inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 4, 68, "unknown variable `${confg}`", "did you mean `config`?")),
        GoldenCase("variable missing on some devices",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - write: { service: FFF0, characteristic: FFF1, value: { hex: \"01${config}\" } }\n",
            inventory: "devices:\n  - { id: SN-1, name: S1, vars: { config: \"0a\" } }\n  - { id: SN-2, name: S2 }\n", inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 4, 68, "`${config}` is not defined for 1 device: SN-2", "add `config` to those devices' `vars`, or to `defaults: { vars: }`; SN-2 is at $DIR/inv.yaml:3:5")),
        GoldenCase("duplicate device id",
            workflow: "name: t\nsteps:\n  - connect: {}\n",
            inventory: "devices:\n  - { id: SN-1, name: S1 }\n  - { id: SN-1, name: S2 }\n", inventoryName: "inv.yaml", limit: nil,
            expect: ("inv.yaml", 3, 5, "duplicate device id `SN-1` (first at line 2)", "every device needs its own id")),
        GoldenCase("bad device address",
            workflow: "name: t\nsteps:\n  - connect: {}\n",
            inventory: "devices:\n  - { id: SN-1, address: \"C0:5E:00:00:00:GG\" }\n", inventoryName: "inv.yaml", limit: nil,
            expect: ("inv.yaml", 2, 26, "`C0:5E:00:00:00:GG` is not a Bluetooth address", "write six hex pairs: `C0:5E:00:00:00:01`")),
        GoldenCase("device without address or name",
            workflow: "name: t\nsteps:\n  - connect: {}\n",
            inventory: "devices:\n  - { id: SN-1, name: S1 }\n  - { id: SN-2 }\n", inventoryName: "inv.yaml", limit: nil,
            expect: ("inv.yaml", 3, 5, "device `SN-2` has neither `address` nor `name`", "give at least one, so the device can be found")),
        GoldenCase("variable named like a built-in",
            workflow: "name: t\nsteps:\n  - connect: {}\n",
            inventory: "devices:\n  - { id: SN-1, name: S1, vars: { id: x } }\n", inventoryName: "inv.yaml", limit: nil,
            expect: ("inv.yaml", 2, 35, "`id` is a built-in and cannot be a variable", "set `id` on the device itself, or rename the variable")),
        GoldenCase("misspelt inventory key",
            workflow: "name: t\nsteps:\n  - connect: {}\n",
            inventory: "device:\n  - { id: SN-1, name: S1 }\n", inventoryName: "inv.yaml", limit: nil,
            expect: ("inv.yaml", 1, 1, "unknown key `device` in the inventory", "did you mean `devices`?")),
        GoldenCase("hex variable is not hex",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - write: { service: FFF0, characteristic: FFF1, value: { hex: \"01${config}\" } }\n",
            inventory: "devices:\n  - { id: SN-1, name: S1, vars: { config: \"0a\" } }\n  - { id: SN-2, name: S2, vars: { config: \"xyz\" } }\n", inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 4, 68, "step `write FFF1`: the value cannot be made for 1 device (SN-2): \"01xyz\" is not valid hex (pairs of 0-9, a-f)", "fix the variable in the inventory; SN-2 is at $DIR/inv.yaml:3:5")),
        GoldenCase("blob file missing",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - write_blob: { service: FFF0, characteristic: FFF4, file: \"${blob}\" }\n",
            inventory: "devices:\n  - { id: SN-1, name: S1, vars: { config: \"0a0b\", blob: b.bin } }\n  - { id: SN-2, name: S2, vars: { config: \"0c0d\", blob: b.bin } }\n", inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 4, 63, "step `write_blob FFF4`: the value cannot be made for 2 devices (SN-1, SN-2): cannot read file $DIR/b.bin", "fix the variable in the inventory (file paths are relative to the inventory's file root, $DIR); SN-1 is at $DIR/inv.yaml:2:5")),
        GoldenCase("csv row with a missing cell",
            workflow: "name: t\nsteps:\n  - connect: {}\n",
            inventory: "id,address,name,config\nSN-1,C0:5E:00:00:00:01,S1,0a\nSN-2,C0:5E:00:00:00:02,S2\n", inventoryName: "inv.csv", limit: nil,
            expect: ("inv.csv", 3, 1, "row has 3 cells; the header has 4", "check for a missing or extra comma")),
        GoldenCase("csv header without id",
            workflow: "name: t\nsteps:\n  - connect: {}\n",
            inventory: "address,name\nC0:5E:00:00:00:01,S1\n", inventoryName: "inv.csv", limit: nil,
            expect: ("inv.csv", 1, 1, "the first column of a CSV inventory must be `id`", "the header is `id,address,name,<var>,...`")),
        GoldenCase("csv unterminated quote",
            workflow: "name: t\nsteps:\n  - connect: {}\n",
            inventory: "id,name\nSN-1,\"S1\nSN-2,S2\n", inventoryName: "inv.csv", limit: nil,
            expect: ("inv.csv", 2, 6, "unterminated quoted cell", "close the quote with `\"`")),
        GoldenCase("limit names an unknown device",
            workflow: "name: t\nsteps:\n  - connect: {}\n",
            inventory: "devices:\n  - { id: SN-1, name: S1, vars: { config: \"0a0b\", blob: b.bin } }\n  - { id: SN-2, name: S2, vars: { config: \"0c0d\", blob: b.bin } }\n", inventoryName: "inv.yaml", limit: "SN-1,SN-3",
            expect: ("--limit", 1, 6, "no device with id `SN-3` in the inventory", "did you mean `SN-1`?")),
    ]
}

@Suite struct GoldenDiagnosticTests {
    @Test("a broken input reports its first error at the exact line and column", arguments: GoldenCase.all)
    func brokenInputReportsExactPosition(_ c: GoldenCase) throws {
        try c.check()
    }

    @Test func thereAreAtLeastFortyGoldenCases() {
        #expect(GoldenCase.all.count >= 40)
    }

    @Test func invalidUTF8IsReportedAtItsByte() {
        var bytes = Array("name: t\nsteps: [connect]\n# caf".utf8)
        bytes += [0xC3, 0x28, 0x0A]
        let (workflow, diagnostics) = WorkflowParser().parse(bytes: bytes, path: "w.yaml")
        #expect(workflow == nil)
        #expect(diagnostics.first?.mark == SourceMark(line: 3, column: 6))
        #expect(diagnostics.first?.message == "invalid UTF-8 (byte 0xC3)")
    }

    @Test func hugeFileIsRefusedBeforeParsing() throws {
        let dir = try TemporaryDirectory()
        try dir.write("big.yaml", "name: t\nsteps: [connect]\n# " + String(repeating: "x", count: 10 * 1024 * 1024) + "\n")
        let result = Validator.validate(workflowPath: dir.path + "/big.yaml", inventoryPath: nil)
        #expect(!result.isValid)
        #expect(result.errors.first?.mark == SourceMark(line: 1, column: 1))
        #expect(result.errors.first?.message.hasPrefix("file is 10485788 bytes; the limit is 10485760 bytes") == true)
    }

    /// An inventory may be larger than a workflow (a line of 100,000 devices is 13 MB of YAML), up to
    /// 64 MiB; beyond, it is refused before reading, with what to do instead.
    @Test func anInventoryHasItsOwnLimit() throws {
        let dir = try TemporaryDirectory()
        try dir.write("w.yaml", "name: t\nsteps: [connect]\n")
        let path = dir.path + "/big.yaml"
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.truncate(atOffset: UInt64(Validator.maxInventoryBytes + 1))  // sparse: nothing is read
        try handle.close()
        let result = Validator.validate(workflowPath: dir.path + "/w.yaml", inventoryPath: path)
        #expect(result.errors.first?.message == "file is \(Validator.maxInventoryBytes + 1) bytes; the limit is \(Validator.maxInventoryBytes) bytes")
        #expect(result.errors.first?.hint?.contains("split the line into several inventories") == true)
        #expect(Validator.maxInventoryBytes > 13_200_053 * 4, "a 100,000-device YAML inventory fits, four times over")
    }

    @Test func deepNestingIsRefusedWithPosition() {
        let text = "name: t\nsteps: " + String(repeating: "[", count: 100) + String(repeating: "]", count: 100) + "\n"
        let (_, diagnostics) = WorkflowParser().parse(bytes: Array(text.utf8), path: "w.yaml")
        #expect(diagnostics.first?.mark == SourceMark(line: 2, column: 71))
        #expect(diagnostics.first?.message == "nesting deeper than 64 levels")
    }

    @Test func missingFileIsADiagnostic() {
        let result = Validator.validate(workflowPath: "/nonexistent/wf.yaml", inventoryPath: nil)
        #expect(result.errors.map(\.message) == ["no such file"])
    }

    @Test func everyErrorIsReportedNotOnlyTheFirst() throws {
        let text = """
            name: t
            steps:
              - connect: {}
              - read: { service: 18G0, characteristic: 2A26 }
              - wrte: {}
              - sleep: 5
            """
        let (_, diagnostics) = WorkflowParser().parse(bytes: Array(text.utf8), path: "w.yaml")
        #expect(diagnostics.map(\.mark) == [SourceMark(line: 4, column: 22), SourceMark(line: 5, column: 5), SourceMark(line: 6, column: 12)])
    }
}

extension GoldenCase {
    /// Validates the case's files and checks its first error: file, line, column, message and hint.
    func check() throws {
        let c = self
        let dir = try TemporaryDirectory()
        let workflowPath = dir.path + "/wf.yaml"
        try dir.write("wf.yaml", c.workflow)
        var inventoryPath: String?
        if let inventory = c.inventory, let name = c.inventoryName {
            try dir.write(name, inventory)
            inventoryPath = dir.path + "/" + name
        }
        let result = Validator.validate(workflowPath: workflowPath, inventoryPath: inventoryPath, limit: c.limit)
        #expect(!result.isValid)
        let first = try #require(result.errors.first)
        let file = first.path == "--limit" ? "--limit" : URL(fileURLWithPath: first.path).lastPathComponent
        #expect(file == c.expect.file)
        #expect(first.line == c.expect.line)
        #expect(first.column == c.expect.column)
        #expect(first.message == c.expect.message.replacingOccurrences(of: "$DIR", with: dir.path))
        #expect(first.hint == c.expect.hint?.replacingOccurrences(of: "$DIR", with: dir.path))
    }
}
