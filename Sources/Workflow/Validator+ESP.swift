import YAML

/// The ESP-IDF provisioning family's checks, for every device before any is touched (docs/esp.md):
/// the SSID, passphrase and proof of possession each device would send.
extension Validator {
    static func checkESP(_ step: Step, path: String, workflow: Workflow, inventory: Inventory, devices: [InventoryDevice],
                         captured: Set<String>) -> [Diagnostic] {
        guard let session = step.protocommSession else { return [] }
        var fields: [(template: Template, what: String, problem: (String) -> String?)] = []
        if case .wifiProvision(let w) = step.kind {
            fields.append((w.ssid, "the SSID", { s in (1...32).contains(s.utf8.count) ? nil : "an SSID is 1 to 32 bytes, not \(s.utf8.count)" }))
            if let p = w.passphrase {
                fields.append((p, "the Wi-Fi passphrase", { s in
                    let n = s.utf8.count
                    if n == 0 || (8...63).contains(n) { return nil }
                    if n == 64, s.allSatisfy(\.isHexDigit) { return nil }
                    return "a WPA passphrase is 8 to 63 characters (or 64 hex digits), not \(n)"
                }))
            }
        }
        if let p = session.pop, session.security == 2 {
            fields.append((p, "the proof of possession", { s in s.isEmpty ? "security 2 needs a proof of possession that is not empty" : nil }))
        }
        if let u = session.username {
            fields.append((u, "the SRP username", { s in s.isEmpty || s.utf8.count > 64 ? "an SRP username is 1 to 64 bytes" : nil }))
        }
        var out: [Diagnostic] = []
        for field in fields {
            let mark = field.template.references.first?.mark ?? step.mark
            if let name = field.template.referencedNames.first(where: captured.contains) {
                if field.what != "the SSID" {
                    out.append(Diagnostic(path: path, mark: mark, message: "\(field.what) comes from `${\(name)}`, a value read from the device",
                                          hint: "it comes from the inventory, `defaults: { vars: }` or a `--secrets` file"))
                }
                continue
            }
            var bad: [(InventoryDevice, String)] = []
            for device in devices {
                guard let text = try? field.template.render({ device.value(of: $0) }) else { continue }
                if let problem = field.problem(text) { bad.append((device, problem)) }
            }
            if let first = bad.first {
                out.append(Diagnostic(path: path, mark: mark,
                                      message: "step `\(step.name)`: \(field.what) does not fit for \(bad.count) device\(bad.count == 1 ? "" : "s") (\(idList(bad.map(\.0)))): \(first.1)",
                                      hint: "fix the value in the inventory; \(first.0.id) is at \(inventory.path):\(first.0.mark)"))
            }
        }
        return out
    }
}
