import Support
import YAML

/// The MCUmgr step family: `dfu`, `file_upload`, `settings`, `mcumgr` (docs/dfu.md), parsed with
/// positions like every other step.
extension ParserState {
    /// A step's timeout when it gives none: an update or an upload takes longer than a GATT request.
    static func mcumgrDefaultTimeout(_ kind: String, _ defaults: Workflow.Defaults) -> Duration {
        switch kind {
        case "dfu": return max(defaults.timeout, .seconds(900))
        case "file_upload": return max(defaults.timeout, .seconds(120))
        default: return defaults.timeout
        }
    }

    /// Parses one MCUmgr step; `derivedName` is set to its default name.
    mutating func mcumgrStep(_ kindName: String, _ options: YAMLNode, number: Int, laterCaptures: [String: Int],
                             derivedName: inout String) -> Step.Kind? {
        switch kindName {
        case "dfu": return dfu(options, laterCaptures: laterCaptures, derivedName: &derivedName)
        case "file_upload": return fileUpload(options, laterCaptures: laterCaptures, derivedName: &derivedName)
        case "settings": return settings(options, laterCaptures: laterCaptures, derivedName: &derivedName)
        case "mcumgr": return mcumgrCommand(options, number: number, laterCaptures: laterCaptures, derivedName: &derivedName)
        default: return nil
        }
    }

    private mutating func dfu(_ options: YAMLNode, laterCaptures: [String: Int], derivedName: inout String) -> Step.Kind? {
        guard let node = options["image"] else {
            reader.error("`dfu` needs `image`", at: options.mark, hint: "for example `image: \"${firmware}\"` (an inventory variable)")
            return nil
        }
        guard let image = reader.template(node, "`image`") else { return nil }
        checkReferences(image, laterCaptures: laterCaptures)
        var dfu = Step.DFU(image: image)
        if let c = options["confirm"], let text = reader.string(c, "`confirm`") {
            if let policy = Step.ConfirmPolicy(rawValue: text) {
                dfu.confirm = policy
            } else {
                let all = Step.ConfirmPolicy.allCases.map(\.rawValue)
                reader.error("`confirm` must be \(all.joined(separator: ", ")), not `\(text)`", at: c.mark,
                             hint: Suggestions.hint(for: text, in: all) ?? "after_boot confirms once the new image runs")
            }
        }
        if let u = options["upgrade_only"], let v = reader.bool(u, "`upgrade_only`") { dfu.upgradeOnly = v }
        if let t = options["reboot_timeout"], let v = reader.duration(t, "`reboot_timeout`", max: .seconds(600)) {
            if v < .seconds(1) {
                reader.error("`reboot_timeout` must be at least 1s", at: t.mark, hint: "a device takes seconds to boot and swap images")
            } else {
                dfu.rebootTimeout = v
            }
        }
        if let v = options["version"], let t = reader.template(v, "`version`") {
            checkReferences(t, laterCaptures: laterCaptures)
            dfu.version = t
        }
        if let n = options["image_number"], let v = reader.integer(n, "`image_number`", in: 0...15) { dfu.imageNumber = v }
        if let w = options["window"], let v = reader.integer(w, "`window`", in: 1...64) { dfu.window = v }
        derivedName = "dfu \(image.source)"
        return .dfu(dfu)
    }

    private mutating func fileUpload(_ options: YAMLNode, laterCaptures: [String: Int], derivedName: inout String) -> Step.Kind? {
        let value = fileOrValue(options, step: "file_upload", laterCaptures: laterCaptures)
        var to: Template?
        if let t = options["to"] {
            to = reader.template(t, "`to`")
            if let to {
                checkReferences(to, laterCaptures: laterCaptures)
                if to.parts.count == 1, case .literal(let path) = to.parts[0], !path.hasPrefix("/") {
                    reader.error("`to` must be an absolute path on the device, not `\(path)`", at: t.mark, hint: "for example `/lfs/\(path)`")
                }
            }
        } else {
            reader.error("`file_upload` needs `to`", at: options.mark, hint: "the path on the device, for example `to: /lfs/cert.der`")
        }
        var verify = Step.FileUpload.Verification.auto
        if let v = options["verify"], let text = reader.string(v, "`verify`") {
            if let m = Step.FileUpload.Verification(rawValue: text) {
                verify = m
            } else {
                let all = Step.FileUpload.Verification.allCases.map(\.rawValue)
                reader.error("`verify` must be \(all.joined(separator: ", ")), not `\(text)`", at: v.mark, hint: Suggestions.hint(for: text, in: all))
            }
        }
        guard let value, let to else { return nil }
        derivedName = "file_upload \(to.source)"
        return .fileUpload(Step.FileUpload(file: value, to: to, verify: verify))
    }

    private mutating func settings(_ options: YAMLNode, laterCaptures: [String: Int], derivedName: inout String) -> Step.Kind? {
        var writes: [Step.Settings.Write] = []
        if let w = options["write"], let pairs = reader.mapping(w, "`write`") {
            var seen: Set<String> = []
            for pair in pairs {
                guard let name = reader.string(pair.key, "a setting name") else { continue }
                if name.isEmpty || name.utf8.count > 255 {
                    reader.error("a setting name must be 1 to 255 bytes", at: pair.key.mark)
                    continue
                }
                reader.refuseControlCharacters(name, "a setting name", at: pair.key.mark)
                guard seen.insert(name).inserted else {
                    reader.error("setting `\(name)` is written twice", at: pair.key.mark)
                    continue
                }
                guard let spec = reader.valueSpec(pair.value, "the value of `\(name)`") else { continue }
                for t in spec.templates { checkReferences(t, laterCaptures: laterCaptures) }
                checkTypes(spec)
                writes.append(Step.Settings.Write(name: name, value: spec))
            }
        }
        var save = false
        if let s = options["save"], let v = reader.bool(s, "`save`") { save = v }
        if writes.isEmpty && !save {
            // A `write` whose values were all refused has its own errors already.
            guard options["write"] == nil else { return nil }
            reader.error("`settings` needs `write` (names and values) or `save: true`", at: options.mark,
                         hint: "for example `write: { \"app/interval\": { uint32le: 60 } }, save: true`")
            return nil
        }
        derivedName = writes.count == 1 ? "settings \(writes[0].name)" : "settings"
        return .settings(Step.Settings(writes: writes, save: save))
    }

    private mutating func mcumgrCommand(_ options: YAMLNode, number: Int, laterCaptures: [String: Int],
                                        derivedName: inout String) -> Step.Kind? {
        guard let c = options["command"] else {
            reader.error("`mcumgr` needs `command`", at: options.mark,
                         hint: "one of \(Step.McuMgrCommand.Command.allCases.map(\.rawValue).joined(separator: ", "))")
            return nil
        }
        guard let text = reader.string(c, "`command`") else { return nil }
        guard let command = Step.McuMgrCommand.Command(rawValue: text) else {
            let all = Step.McuMgrCommand.Command.allCases.map(\.rawValue)
            reader.error("unknown MCUmgr command `\(text)`", at: c.mark, hint: Suggestions.hint(for: text, in: all) ?? "commands: \(all.joined(separator: ", "))")
            return nil
        }
        var step = Step.McuMgrCommand(command: command)
        if let i = options["image"] {
            if command == .imageTest || command == .imageConfirm {
                step.image = reader.template(i, "`image`")
                if let t = step.image { checkReferences(t, laterCaptures: laterCaptures) }
            } else {
                reader.error("`image` goes with image_test or image_confirm", at: i.mark)
            }
        } else if command == .imageTest {
            reader.error("`image_test` needs `image`: the image whose hash is marked", at: options.mark, hint: "`image: \"${firmware}\"`")
        }
        if let t = options["text"] {
            if command == .echo {
                step.text = reader.template(t, "`text`")
                if let tt = step.text { checkReferences(tt, laterCaptures: laterCaptures) }
            } else {
                reader.error("`text` goes with echo", at: t.mark)
            }
        }
        if let s = options["slot"] {
            if command == .imageErase {
                step.slot = reader.integer(s, "`slot`", in: 0...3)
            } else {
                reader.error("`slot` goes with image_erase", at: s.mark)
            }
        }
        if let n = options["capture"], let v = reader.identifier(n, "capture id") {
            if command == .reset || command == .imageErase || command == .imageTest || command == .imageConfirm {
                reader.error("`\(text)` answers nothing to capture", at: n.mark, hint: "capture with echo, params or image_state")
            } else if Template.builtins.contains(v) {
                reader.error("`\(v)` is a built-in name and cannot be a capture id", at: n.mark)
            } else if let earlier = captures[v] {
                reader.error("`\(v)` is already captured by step \(earlier)", at: n.mark)
            } else if declared[v] != nil {
                reader.error("`\(v)` is declared in `vars:`; a capture needs a name of its own", at: n.mark)
            } else {
                step.capture = v
                captures[v] = number
                captureTypes[v] = step.captureType
            }
        }
        derivedName = "mcumgr \(command.rawValue)"
        return .mcumgr(step)
    }
}
