import BLE
import Support
import YAML

/// The ESP-IDF provisioning step family: `wifi_provision`, `wifi_scan`, `esp_custom` (docs/esp.md),
/// parsed with positions like every other step.
extension ParserState {
    /// The option keys of each step of the family.
    static let espSessionKeys = ["security", "username", "pop", "allow_insecure", "service"]
    static let espOptionKeys: [String: [String]] = [
        "wifi_provision": ["ssid", "passphrase"] + espSessionKeys,
        "wifi_scan": ["capture"] + espSessionKeys,
        "esp_custom": ["endpoint", "value", "capture", "as"] + espSessionKeys,
    ]

    /// A step's timeout when it gives none: joining a network takes longer than a GATT request.
    static func espDefaultTimeout(_ kind: String, _ defaults: Workflow.Defaults) -> Duration? {
        switch kind {
        case "wifi_provision": return max(defaults.timeout, .seconds(45))
        case "wifi_scan": return max(defaults.timeout, .seconds(20))
        case "esp_custom": return defaults.timeout
        default: return nil
        }
    }

    /// Parses one step of the family; `derivedName` is set to its default name.
    mutating func espStep(_ kindName: String, _ options: YAMLNode, number: Int, laterCaptures: [String: Int],
                          derivedName: inout String) -> Step.Kind? {
        switch kindName {
        case "wifi_provision":
            guard let s = espSession(options, required: true, laterCaptures: laterCaptures) else { return nil }
            guard let ssidNode = options["ssid"] else {
                reader.error("`wifi_provision` needs `ssid`", at: options.mark, hint: "for example `ssid: \"${ssid}\"` (an inventory variable)")
                return nil
            }
            guard let ssid = reader.template(ssidNode, "`ssid`") else { return nil }
            checkReferences(ssid, laterCaptures: laterCaptures)
            if ssid.isLiteral, ssid.source.isEmpty || ssid.source.utf8.count > 32 {
                reader.error("an SSID is 1 to 32 bytes, not \(ssid.source.utf8.count)", at: ssidNode.mark)
                return nil
            }
            var passphrase: Template?
            if let p = options["passphrase"] {
                guard let t = secret(p, "the Wi-Fi passphrase", laterCaptures: laterCaptures) else { return nil }
                passphrase = t
            }
            derivedName = "wifi_provision \(ssid.source)"
            return .wifiProvision(Step.WiFiProvision(ssid: ssid, passphrase: passphrase, security: s.security, username: s.username, pop: s.pop,
                                                     allowInsecure: s.allowInsecure, service: s.service))
        case "wifi_scan":
            let session = espSession(options, required: false, laterCaptures: laterCaptures)
            var capture: String?
            if let c = options["capture"] { capture = newCapture(c, number: number, type: .text) }
            derivedName = "wifi_scan"
            return .wifiScan(Step.WiFiScan(capture: capture, session: session))
        case "esp_custom":
            let session = espSession(options, required: false, laterCaptures: laterCaptures)
            guard let e = options["endpoint"] else {
                reader.error("`esp_custom` needs `endpoint`", at: options.mark, hint: "the endpoint's name, for example `endpoint: custom-data`")
                return nil
            }
            guard let endpoint = reader.string(e, "`endpoint`") else { return nil }
            guard !endpoint.isEmpty, endpoint.utf8.count <= 64, !endpoint.contains("\0") else {
                reader.error("an endpoint name is 1 to 64 bytes", at: e.mark)
                return nil
            }
            reader.refuseControlCharacters(endpoint, "the endpoint", at: e.mark)
            if ["proto-ver", "prov-session", "prov-config", "prov-scan", "prov-ctrl"].contains(endpoint) {
                reader.error("`\(endpoint)` is a provisioning endpoint, not a custom one", at: e.mark,
                             hint: "use `wifi_provision` or `wifi_scan`; `esp_custom` talks to the application's own endpoints")
                return nil
            }
            guard let v = options["value"] else {
                reader.error("`esp_custom` needs `value`", at: options.mark, hint: "for example `value: { utf8: \"wifi?\" }`")
                return nil
            }
            guard let value = reader.valueSpec(v, "`value`") else { return nil }
            for t in value.templates { checkReferences(t, laterCaptures: laterCaptures) }
            checkTypes(value)
            var format = ValueFormat.utf8
            if let a = options["as"], let f = valueFormat(a) { format = f }
            var capture: String?
            if let c = options["capture"] { capture = newCapture(c, number: number, type: format.valueType) }
            derivedName = "esp_custom \(endpoint)"
            return .espCustom(Step.ESPCustom(endpoint: endpoint, value: value, capture: capture, format: format, session: session))
        default:
            return nil
        }
    }

    /// A proof of possession or passphrase: a template over variables (which become secret), never written out.
    private mutating func secret(_ node: YAMLNode, _ what: String, laterCaptures: [String: Int]) -> Template? {
        guard let t = reader.template(node, what) else { return nil }
        if t.isLiteral, !t.source.isEmpty {
            reader.error("\(what) is written out in the workflow, where it is no secret", at: node.mark,
                         hint: "give it in the inventory (a device's `vars`, `defaults: { vars: }`) or in a `--secrets` file, and write `\"${name}\"` here")
            return nil
        }
        checkReferences(t, laterCaptures: laterCaptures)
        for name in t.referencedNames where !Template.builtins.contains(name) { secretNames.insert(name) }
        return t
    }

    /// The session options (`security`, `username`, `pop`, `allow_insecure`, `service`); nil when a step
    /// that may borrow them gives none.
    private mutating func espSession(_ options: YAMLNode, required: Bool, laterCaptures: [String: Int]) -> Step.ProtocommSecurity? {
        let given = Self.espSessionKeys.contains { options[$0] != nil }
        guard given || required else { return nil }
        var s = Step.ProtocommSecurity(security: 2)
        var securityMark = options.mark
        if let n = options["security"] {
            securityMark = n.mark
            guard let v = reader.integer(n, "`security`", in: 0...2) else { return nil }
            s.security = v
        }
        if let a = options["allow_insecure"], let v = reader.bool(a, "`allow_insecure`") { s.allowInsecure = v }
        if let u = options["service"] { s.service = reader.uuid(u, "`service`") }
        if let u = options["username"] {
            if s.security != 2 {
                reader.error("`username` goes with `security: 2` (SRP6a)", at: u.mark)
            } else {
                s.username = reader.template(u, "`username`")
                if let t = s.username { checkReferences(t, laterCaptures: laterCaptures) }
            }
        }
        if let p = options["pop"] {
            if s.security == 0 {
                reader.error("`security: 0` has no proof of possession", at: p.mark, hint: "use `security: 1` or `2` to prove the unit is in hand")
            } else {
                s.pop = secret(p, "the proof of possession", laterCaptures: laterCaptures)
            }
        }
        switch s.security {
        case 0:
            if !s.allowInsecure {
                reader.error("`security: 0` sends the Wi-Fi passphrase in the clear", at: securityMark,
                             hint: "use `security: 2` (or 1) with a proof of possession, or say `allow_insecure: true` for a bench unit")
                return nil
            }
        case 2:
            if s.username == nil {
                reader.error("`security: 2` needs `username` (the SRP6a user the unit was built with)", at: securityMark,
                             hint: "ESP-IDF's examples use `username: wifiprov`")
                return nil
            }
            if s.pop == nil, options["pop"] == nil {
                reader.error("`security: 2` needs `pop` (the SRP6a password)", at: securityMark, hint: "for example `pop: \"${pop}\"`")
                return nil
            }
        default:
            if let a = options["allow_insecure"], s.allowInsecure {
                reader.error("`allow_insecure` goes with `security: 0`", at: a.mark)
            }
        }
        return s
    }

    /// `wifi_scan` and `esp_custom` without session options borrow those of the workflow's
    /// `wifi_provision`; with none to borrow they are an error at their position.
    mutating func resolveESPSessions(_ steps: inout [Step]) {
        let provision = steps.lazy.compactMap { step -> Step.ProtocommSecurity? in
            if case .wifiProvision(let w) = step.kind { return w.sessionSecurity }
            return nil
        }.first
        for i in steps.indices {
            switch steps[i].kind {
            case .wifiScan(var s) where s.session == nil:
                guard let provision else { missingSession(steps[i]); continue }
                s.session = provision
                steps[i].kind = .wifiScan(s)
            case .espCustom(var c) where c.session == nil:
                guard let provision else { missingSession(steps[i]); continue }
                c.session = provision
                steps[i].kind = .espCustom(c)
            default:
                continue
            }
        }
    }

    private mutating func missingSession(_ step: Step) {
        reader.error("`\(step.kind.keyword)` needs the session's `security` (and `username`, `pop`), or a `wifi_provision` step to take them from",
                     at: step.mark, hint: "for example `security: 2, username: wifiprov, pop: \"${pop}\"`")
    }
}
