import BLE
import Support
import YAML

/// The typed parts of the workflow language: `vars:`, `when:`, `optional` / `continue_on_error`,
/// `verify` as a measurement, `set:`, `await … capture:`, and the type check of every use of a typed
/// name (docs/workflow.md, "Typed values").
extension ParserState {
    /// What a name stands for while a step is read: a typed value (a capture of an earlier step, a
    /// declared variable, a built-in), or an inventory variable the workflow does not declare (text,
    /// checked against each device by `Validator`).
    enum NameType: Equatable {
        case typed(ValueType)
        case inventoryText
        /// A capture whose step failed to parse: its type is not known, so its uses are not checked
        /// (the step's own error says what to fix).
        case unknown
    }

    func nameType(_ name: String) -> NameType {
        if let t = captureTypes[name] { return .typed(t) }
        if failedCaptures.contains(name) { return .unknown }
        if let d = declared[name] { return .typed(d.type) }
        if Template.builtins.contains(name) { return .typed(.text) }
        return .inventoryText
    }

    /// The type a template's value has: a lone `${name}` has the name's type; anything else is text.
    func templateType(_ t: Template) -> ValueType {
        if let name = t.loneReference, case .typed(let type) = nameType(name) { return type }
        return .text
    }

    /// The id a step captures into, read ahead of parsing (so that a reference to a later capture gets
    /// a precise message).
    static func captureID(of item: YAMLNode) -> String? {
        guard let pairs = item.mapping else { return nil }
        for pair in pairs {
            switch pair.key.scalar {
            case "read", "set": return pair.value["id"]?.scalar
            case "wifi_scan", "esp_custom": return pair.value["capture"]?.scalar
            case "await":
                guard let c = pair.value["capture"] else { return nil }
                return c.scalar ?? c["id"]?.scalar
            default: continue
            }
        }
        return nil
    }

    // MARK: - vars

    /// `vars: { config: { hex: [1, 200] }, device_key: { hex: 16, secret: true }, site: utf8 }`.
    mutating func variables(_ node: YAMLNode) {
        guard let pairs = reader.mapping(node, "`vars`") else { return }
        let formats = ValueFormat.allCases.map(\.rawValue)
        for pair in pairs {
            guard let name = reader.identifier(pair.key, "variable name") else { continue }
            if Template.builtins.contains(name) {
                reader.error("`\(name)` is a built-in name; it is not declared", at: pair.key.mark,
                             hint: "`id`, `name` and `address` come from the inventory and are text")
                continue
            }
            let value = pair.value
            var format: ValueFormat?
            var length: ClosedRange<Int>?
            var secret = false
            var ok = true
            if value.scalar != nil, !value.isNull {
                format = formatNamed(value, what: "the format of `\(name)`")
            } else if let inner = reader.mapping(value, "the declaration of `\(name)`") {
                for p in inner {
                    guard let key = p.key.scalar else { continue }
                    if key == "secret" {
                        secret = reader.bool(p.value, "`secret`") ?? false
                    } else if format == nil, let f = ValueFormat(rawValue: key) {
                        format = f
                        if !p.value.isNull {
                            if let l = byteLength(p.value) { length = l } else { ok = false }
                        }
                    } else {
                        let hint = Suggestions.hint(for: key, in: format == nil ? formats + ["secret"] : ["secret"])
                            ?? (format == nil ? "a declaration is `{ FORMAT: LENGTH, secret: true }`; formats: \(formats.joined(separator: ", "))"
                                : "a declaration is `{ FORMAT: LENGTH, secret: true }`")
                        reader.error(format == nil ? "unknown format `\(key)`" : "unknown key `\(key)` in the declaration of `\(name)`",
                                     at: p.key.mark, hint: hint)
                        ok = false
                    }
                }
                if format == nil && ok {
                    reader.error("the declaration of `\(name)` needs a format", at: value.mark,
                                 hint: "for example `{ hex: 16, secret: true }` or `uint8`")
                }
            } else {
                ok = false
            }
            guard ok, let format else { continue }
            do {
                let d = try VariableDeclaration(format: format, length: length, secret: secret)
                declared[name] = d
                declaredMarks[name] = pair.key.mark
                if secret { secretNames.insert(name) }
            } catch {
                reader.error("`\(name)`: \(error.message)", at: value.mark)
            }
        }
    }

    /// `16` or `[1, 200]`: a byte length.
    private mutating func byteLength(_ node: YAMLNode) -> ClosedRange<Int>? {
        if let items = node.sequence {
            guard items.count == 2 else {
                reader.error("a length range is `[min, max]`, found \(items.count) item\(items.count == 1 ? "" : "s")", at: node.mark)
                return nil
            }
            guard let lo = reader.integer(items[0], "the minimum length", in: 0...65_536),
                  let hi = reader.integer(items[1], "the maximum length", in: 0...65_536) else { return nil }
            guard lo <= hi else {
                reader.error("the minimum length \(lo) is above the maximum \(hi)", at: node.mark, hint: "write `[min, max]`")
                return nil
            }
            return lo...hi
        }
        return reader.integer(node, "a length in bytes", in: 0...65_536).map { $0...$0 }
    }

    /// A format name (`uint8`, `version`, …) with a "did you mean" hint.
    mutating func formatNamed(_ node: YAMLNode, what: String) -> ValueFormat? {
        guard let text = reader.string(node, what) else { return nil }
        let (format, hint) = ValueFormat.named(text)
        if format == nil {
            reader.error("unknown format `\(text)`", at: node.mark,
                         hint: hint ?? "use one of \(ValueFormat.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return format
    }

    // MARK: - when, optional, continue_on_error

    /// `when: firmware < 2.0.0 and battery >= 30`: parsed and type-checked against the captures of
    /// earlier steps, the declared variables and the built-ins; errors point at the column.
    mutating func condition(_ node: YAMLNode, laterCaptures: [String: Int]) -> Step.Condition? {
        guard let text = reader.string(node, "`when`") else { return nil }
        // A column in the expression is a column in the file when the scalar sits on one line.
        func mark(_ column: Int) -> SourceMark {
            guard !text.contains("\n"), case .scalar(_, let style) = node.kind, style != .literal, style != .folded else { return node.mark }
            let quote = style == .singleQuoted || style == .doubleQuoted ? 1 : 0
            return SourceMark(line: node.mark.line, column: node.mark.column + quote + column - 1)
        }
        let expression: Expression
        do {
            expression = try Expression(parsing: text)
        } catch {
            reader.error("`when`: \(error.message)", at: mark(error.column), hint: error.hint)
            return nil
        }
        var fields: [String: FieldType] = [:]
        for name in Template.builtins { fields[name] = FieldType(.text) }
        for (name, d) in declared { fields[name] = FieldType(d.type) }
        for (name, t) in captureTypes { fields[name] = FieldType(t) }
        // A name whose capturing step failed has no known type: that step's error says what to fix.
        if expression.names.contains(where: { failedCaptures.contains($0.0) && fields[$0.0] == nil }) { return nil }
        var ok = true
        for (name, column) in expression.names where fields[name] == nil {
            if let later = laterCaptures[name] {
                reader.error("`\(name)` is captured by step \(later), which runs after this one", at: mark(column),
                             hint: "a `when:` can use only values captured before its step")
                ok = false
            }
        }
        guard ok else { return nil }
        do {
            return Step.Condition(expression: try expression.check(fields: fields), mark: node.mark)
        } catch {
            for e in error.errors {
                var hint = e.hint
                if hint == nil, e.message.hasPrefix("unknown name") {
                    hint = "a `when:` uses captured values and variables declared in `vars:` (for example `model: utf8`)"
                }
                reader.error("`when`: \(e.message)", at: mark(e.column), hint: hint)
            }
            return nil
        }
    }

    /// `optional: true` or `continue_on_error: true` (not both, and not on an irreversible step).
    mutating func onFailure(optional: YAMLNode?, continueOnError: YAMLNode?, irreversible: Bool) -> Step.OnFailure {
        let o = optional.flatMap { reader.bool($0, "`optional`") } ?? false
        let c = continueOnError.flatMap { reader.bool($0, "`continue_on_error`") } ?? false
        if o, c, let node = continueOnError {
            reader.error("a step is `optional` or `continue_on_error`, not both", at: node.mark,
                         hint: "`optional`: its failure does not fail the device; `continue_on_error`: the device goes on and fails at the end")
            return .stop
        }
        if (o || c), irreversible, let node = optional ?? continueOnError {
            reader.error("an irreversible step cannot be `\(o ? "optional" : "continue_on_error")`", at: node.mark,
                         hint: "a device whose irreversible write failed must stop there; remove the key")
            return .stop
        }
        return o ? .optional : c ? .continueOnError : .stop
    }

    // MARK: - verify

    /// `verify: { value: "${battery}", min: 20, max: 100, unit: "%" }` and the other limits.
    mutating func verify(_ options: YAMLNode, explicitName: String?, laterCaptures: [String: Int]) -> Step.Verify? {
        var value: Template?
        if let v = options["value"] {
            value = reader.template(v, "`value`")
        } else if !reader.hasTypo(of: "value", in: options) {
            reader.error("`verify` needs `value`", at: options.mark, hint: "for example `value: \"${battery}\"`")
        }
        guard let value else { return nil }
        checkReferences(value, laterCaptures: laterCaptures)
        // The value of a capture whose step failed has no known type: nothing here can be checked.
        if value.referencedNames.contains(where: { nameType($0) == .unknown }) { return nil }
        let valueType = templateType(value)
        var limits = LimitSpecs()
        var marks: [String: SourceMark] = [:]
        var ok = true
        // `equals: [{ uint32le: "${interval_s}" }, { utf8: "${room}", length: 16 }]`: bytes built from typed
        // parts, for a value that is bytes; no part may read a file (a limit is made for every device).
        func encodedLimit(_ key: String, _ node: YAMLNode) -> LimitSpecs.Limit? {
            let advice = adviser
            guard let spec = reader.valueSpec(node, "`\(key)`", advice: advice) else { return nil }
            for t in spec.templates { checkReferences(t, laterCaptures: laterCaptures) }
            checkTypes(spec)
            if let file = spec.fileTemplates.first {
                reader.error("`\(key)` cannot read a file: a limit is made for every device", at: file.references.first?.mark ?? node.mark,
                             hint: "capture the file first (`set: { id: image, concat: [{ file: \"\(file.source)\" }] }`), then write `\(key): \"${image}\"`")
                return nil
            }
            guard valueType == .bytes else {
                reader.error("`\(key)`: the parts make bytes, but the value is \(valueType.phrase)", at: node.mark,
                             hint: value.loneReference.map { declared[$0] != nil ? "declare `\($0)` as `hex` in `vars:` to compare bytes" : "read `\($0)` `as: hex` to compare bytes" }
                                ?? "the value must be bytes: a lone `\"${name}\"` read `as: hex`")
                return nil
            }
            return .encoded(spec)
        }
        func limit(_ key: String, _ kind: LimitSpecs.Kind, _ node: YAMLNode) -> LimitSpecs.Limit? {
            marks[key] = marks[key] ?? node.mark
            if kind == .sameAsValue, node.mapping != nil || node.sequence != nil {
                return encodedLimit(key, node)
            }
            guard let t = reader.template(node, "`\(key)`") else { return nil }
            if !t.isLiteral {
                checkReferences(t, laterCaptures: laterCaptures)
                return .template(t)
            }
            do {
                return .value(try LimitSpecs.read(t.source, kind, valueType: valueType))
            } catch {
                reader.error("`\(key)`: \(error.message)", at: node.mark, hint: Self.limitHint(kind, valueType))
                return nil
            }
        }
        for (key, kind) in [("min", LimitSpecs.Kind.number), ("max", .number), ("equals", .sameAsValue),
                            ("version_at_least", .version), ("version_below", .version)] {
            guard let node = options[key] else { continue }
            guard let l = limit(key, kind, node) else { ok = false; continue }
            switch key {
            case "min": limits.min = l
            case "max": limits.max = l
            case "equals": limits.equals = l
            case "version_at_least": limits.versionAtLeast = l
            default: limits.versionBelow = l
            }
        }
        let lists = ["in", "one_of"].filter { options[$0] != nil }
        if lists.count == 2, let second = options["one_of"] {
            reader.error("`in` and `one_of` are the same list; give one of them", at: second.mark)
            ok = false
        } else if let key = lists.first, let node = options[key] {
            if let items = reader.sequence(node, "`\(key)`") {
                var list: [LimitSpecs.Limit] = []
                for item in items {
                    if let l = limit("in", .sameAsValue, item) { list.append(l) } else { ok = false }
                }
                limits.oneOf = list
                marks["in"] = node.mark
                // `in: [0, 100]` was a range before `in` became a list: say so.
                if items.count == 2, valueType.isNumeric, list.count == 2,
                   case .value(let lo) = list[0], case .value(let hi) = list[1], (try? TypedValue.compare(lo, .less, hi)) == true {
                    reader.sink.warning("`in` lists the allowed values: `[\(lo), \(hi)]` allows only \(lo) and \(hi)", at: node.mark,
                                        hint: "for a range write `min: \(lo), max: \(hi)`")
                }
            } else {
                ok = false
            }
        }
        if let m = options["matches"] {
            marks["matches"] = m.mark
            if let text = reader.string(m, "`matches`") {
                if let problem = Matcher.regexError(text) {
                    reader.error("`\(text)` is not a valid regular expression: \(problem)", at: m.mark)
                    ok = false
                } else {
                    limits.matches = text
                }
            } else {
                ok = false
            }
        }
        var unit: String?
        if let u = options["unit"] {
            unit = reader.string(u, "`unit`")
            if let text = unit { reader.refuseControlCharacters(text, "`unit`", at: u.mark) }
        }
        guard ok else { return nil }
        // Type problems, each at its key: template limits take part with a stand-in of their type.
        var probe = MeasurementLimits(matches: limits.matches)
        var templated = Set<String>()
        // A templated limit of a typed name stands as a value of its type; one read from inventory text
        // (per device, by `Validator`) as a value of the type it will be read as.
        func stand(_ l: LimitSpecs.Limit?, _ key: String, _ kind: LimitSpecs.Kind) -> TypedValue? {
            switch l {
            case .value(let v)?: return v
            case .encoded?:
                templated.insert(key)
                return .bytes([])
            case .template(let t)?:
                templated.insert(key)
                if let name = t.loneReference, case .typed(let type) = nameType(name), type != .text { return Self.standIn(type) }
                switch kind {
                case .number: return .integer(0, signed: true)
                case .version: return Self.standIn(.version)
                case .sameAsValue: return Self.standIn(valueType)
                }
            case nil: return nil
            }
        }
        probe.min = stand(limits.min, "min", .number)
        probe.max = stand(limits.max, "max", .number)
        probe.equals = stand(limits.equals, "equals", .sameAsValue)
        probe.oneOf = limits.oneOf.map { $0.compactMap { stand($0, "in", .sameAsValue) } }
        if case .version(let v)? = stand(limits.versionAtLeast, "version_at_least", .version) { probe.versionAtLeast = v }
        if case .version(let v)? = stand(limits.versionBelow, "version_below", .version) { probe.versionBelow = v }
        if limits.all.isEmpty && limits.matches == nil { probe = MeasurementLimits() }
        var problems = probe.typeProblems(for: valueType)
        if !templated.isEmpty {
            // A stand-in says nothing about order, and a templated limit may be read per device.
            problems.removeAll { $0.message.contains("is above max") || ($0.key == "" && !limits.all.isEmpty) }
        }
        if limits.all.isEmpty && limits.matches == nil {
            problems = [MeasurementLimits.Problem(key: "", message: "`verify` needs at least one limit",
                                                  hint: "one of: \(MeasurementLimits.keys.joined(separator: ", "))")]
        }
        for p in problems {
            let message = p.key.isEmpty ? p.message : "`\(p.key)`: \(p.message)"
            reader.error(message, at: marks[p.key] ?? options.mark, hint: p.hint)
        }
        guard problems.isEmpty else { return nil }
        let name = explicitName ?? value.loneReference ?? value.source
        return Step.Verify(value: value, valueType: valueType, limits: limits, unit: unit, measurementName: name)
    }

    /// A value of `type` that stands for a templated limit while the limits are type-checked.
    private static func standIn(_ type: ValueType) -> TypedValue {
        switch type {
        case .integer(let signed): return .integer(0, signed: signed)
        case .real: return .real(0)
        case .text: return .text("")
        case .bytes: return .bytes([])
        case .version: return SemanticVersion("0").map { .version($0) } ?? .text("")
        case .boolean: return .boolean(false)
        }
    }

    private static func limitHint(_ kind: LimitSpecs.Kind, _ valueType: ValueType) -> String? {
        switch kind {
        case .number: return valueType == .version ? "for versions use version_at_least / version_below" : "write a number, like `20` or `36.5`"
        case .version: return "write a version, like `2.0.0`"
        case .sameAsValue: return "the value is \(valueType.phrase); write the limit the same way"
        }
    }

    // MARK: - set

    /// `set: { id, crc: CRC-16/CCITT-FALSE, of: "${key}" }`, `{ id, slice: "${mac}", start: -3, length: 2 }`,
    /// `{ id, concat: ["${header}", "${config}"] }`. The inputs of `crc` (`of:`, one or a list) and
    /// `concat` may be typed parts (`{ uint32le: "${interval_s}" }`), which are bytes.
    mutating func derive(_ options: YAMLNode, number: Int, laterCaptures: [String: Int]) -> Step.Derive? {
        var id: String?
        if let n = options["id"] {
            id = captureId(n, kind: "`set`")
        } else {
            reader.error("`set` needs `id`: the name the derived value is captured under", at: options.mark, hint: "for example `id: key_crc`")
        }
        let forms = ["crc", "slice", "concat"].filter { options[$0] != nil }
        guard forms.count == 1, let form = forms.first, let formNode = options[form] else {
            if forms.isEmpty {
                reader.error("`set` needs one of `crc`, `slice`, `concat`", at: options.mark,
                             hint: "for example `crc: CRC-16/CCITT-FALSE, of: \"${key}\"`")
            } else if let second = options[forms[1]] {
                reader.error("`set` derives one value; found `\(forms[0])` and `\(forms[1])`", at: second.mark,
                             hint: "use a second `set` step")
            }
            return nil
        }
        let allowed: [String: [String]] = ["crc": ["id", "crc", "of"], "slice": ["id", "slice", "start", "length"], "concat": ["id", "concat"]]
        for pair in options.mapping ?? [] {
            guard let key = pair.key.scalar, WorkflowParser.optionKeys["set"]?.contains(key) == true, allowed[form]?.contains(key) != true else { continue }
            reader.error("`\(key)` does not go with `\(form)`", at: pair.key.mark, hint: "`\(form)` takes \((allowed[form] ?? []).map { "`\($0)`" }.joined(separator: ", "))")
            return nil
        }
        var derivation: Derivation?
        var inputNodes: [YAMLNode] = []
        switch form {
        case "crc":
            derivation = reader.crcAlgorithm(formNode).map { .crc($0) }
            if let of = options["of"] { inputNodes = of.sequence ?? [of] } else {
                reader.error("`crc` needs `of`: the value to checksum", at: options.mark, hint: "for example `of: \"${device_key}\"`")
            }
            if options["of"]?.sequence?.isEmpty == true, let of = options["of"] {
                reader.error("`of` is an empty list", at: of.mark, hint: "give the values to checksum")
            }
        case "slice":
            inputNodes = [formNode]
            let start = options["start"].flatMap { reader.integer($0, "`start`", in: -65_536...65_536) }
            let length = options["length"].flatMap { reader.integer($0, "`length`", in: 0...65_536) }
            if options["start"] == nil {
                reader.error("`slice` needs `start` (from 0; negative counts from the end)", at: options.mark)
            } else if let start, options["length"] == nil || length != nil {
                derivation = .slice(start: start, length: length)
            }
        default:
            if let items = reader.sequence(formNode, "`concat`") {
                if items.isEmpty { reader.error("`concat` needs at least one value", at: formNode.mark) } else {
                    inputNodes = items
                    derivation = .concat
                }
            }
        }
        // Each input: a template, or (for `crc` and `concat`) typed parts.
        var inputs: [Step.Derive.Input] = []
        var ok = true
        var selfReference = false
        // `set: { id: x, concat: ["${x}", …] }`: the value it makes has no value yet. Said once, and no
        // type is guessed for it (which made a second, spurious error).
        func selfReferenced(_ t: Template) {
            guard let id, let own = t.references.first(where: { $0.name == id }) else { return }
            reader.error("`${\(id)}` is the value this `set` makes: it has no value yet", at: own.mark,
                         hint: "derive it from other values, or give this `set` another id")
            selfReference = true
        }
        for node in inputNodes {
            if node.mapping != nil, form != "slice" {
                let advice = adviser
                guard let spec = reader.valueSpec(node, "a part of `\(form == "crc" ? "of" : form)`", advice: advice) else { ok = false; continue }
                for t in spec.templates {
                    selfReferenced(t)
                    checkReferences(t, laterCaptures: laterCaptures, except: id)
                }
                checkTypes(spec)
                inputs.append(.encoded(spec))
            } else if node.sequence != nil {
                reader.error("a value of `set` cannot be a list here", at: node.mark,
                             hint: "list the parts in `\(form == "crc" ? "of" : form)` itself: `[{ uint32le: … }, { utf8: … }]`")
                ok = false
            } else if let t = reader.template(node, "a value of `set`") {
                selfReferenced(t)
                checkReferences(t, laterCaptures: laterCaptures, except: id)
                inputs.append(.template(t))
            } else {
                ok = false
            }
        }
        if selfReference, let id {
            // Known as captured here, so that later uses are not reported again as unknown.
            captures[id] = number
            return nil
        }
        guard ok, let derivation, !inputs.isEmpty else { return nil }
        // A value of a capture whose step failed has no known type: its error is reported there, and
        // this derivation cannot be checked (nor can what uses it).
        let probe = Step.Derive(id: id ?? "", derivation: derivation, inputs: inputs, resultType: .bytes)
        if probe.templates.contains(where: { $0.referencedNames.contains(where: failedCaptures.contains) }) { return nil }
        // Parts are bytes; a lone `${name}` has its type; literals take the type of the first typed input.
        func type(_ input: Step.Derive.Input) -> ValueType? {
            switch input {
            case .encoded: return .bytes
            case .template(let t): return t.isLiteral ? nil : templateType(t)
            }
        }
        let literalType = inputs.compactMap { type($0) }.first ?? .text
        for (input, node) in zip(inputs, inputNodes) {
            guard case .template(let t) = input, t.isLiteral else { continue }
            do { _ = try TypedValue(text: t.source, as: literalType) } catch {
                reader.error("`\(t.source)`: \(error.message)", at: node.mark,
                             hint: literalType == .bytes ? "beside bytes a literal is hex; write text as a part: `{ utf8: \"\(t.source)\" }`" : nil)
                return nil
            }
        }
        let types = inputs.map { type($0) ?? literalType }
        // `crc` and `concat` join values of one kind: name each input that differs, at its position.
        if case .slice = derivation {} else if let kind = types.first, kind == .bytes || kind == .text {
            var mixed = false
            for (i, (t, node)) in zip(types, inputNodes).enumerated() where t != kind {
                mixed = true
                guard case .template(let template) = inputs[i] else { continue }
                let shown = template.loneReference.map { "`${\($0)}`" } ?? "`\(template.source)`"
                let hint: String?
                if kind == .bytes {
                    hint = template.loneReference.flatMap(partWriting).map { "write it as a part: `\($0)`" }
                } else {
                    // Text with a value inside a template is text: one template joins them.
                    let sources = inputs.compactMap { if case .template(let t) = $0 { return t.source } else { return nil } }
                    hint = sources.count == inputs.count ? "join the text in one template: `\"\(sources.joined())\"` is text" : nil
                }
                reader.error("\(shown) is \(t.phrase), but `\(form)` joins \(kind == .bytes ? "bytes" : "text") here", at: node.mark,
                             hint: hint ?? "join values of one kind: all bytes (parts, hex), or all text")
            }
            if mixed { return nil }
        }
        let resultType: ValueType
        do {
            resultType = try derivation.resultType(for: types)
        } catch {
            let offending = zip(inputs, zip(types, inputNodes)).first { $0.1.0 != .bytes && $0.1.0 != .text }
            var hint = Self.deriveHint(derivation)
            if case .slice = derivation {} else if case .template(let t)? = offending?.0, let part = t.loneReference.flatMap(partWriting) {
                hint = "write it as a part: `\(part)`"
            }
            reader.error("`set`: \(error.message)", at: (offending?.1.1 ?? formNode).mark, hint: hint)
            return nil
        }
        guard let id else { return nil }
        captures[id] = number
        captureTypes[id] = resultType
        if case .crc(let algorithm) = derivation { captureFormats[id] = ValueFormat(rawValue: "uint\(algorithm.width)le") }
        let derive = Step.Derive(id: id, derivation: derivation, inputs: inputs, resultType: resultType)
        if derive.templates.contains(where: { $0.referencedNames.contains(where: secretNames.contains) }) { secretNames.insert(id) }
        return derive
    }

    private static func deriveHint(_ d: Derivation) -> String {
        switch d {
        case .slice: return "slice takes bytes: read or declare the value as hex"
        case .crc: return "a CRC takes bytes or text; write a number as a part, like `{ uint32le: \"${n}\" }`"
        case .concat: return "concat joins bytes or text; write a number as a part, like `{ uint32le: \"${n}\" }`"
        }
    }

    /// A new capture id: a valid name, not a built-in, not captured before, not a declared variable.
    private mutating func captureId(_ node: YAMLNode, kind: String) -> String? {
        guard let v = reader.identifier(node, "capture id") else { return nil }
        if Template.builtins.contains(v) {
            reader.error("`\(v)` is a built-in name and cannot be a capture id", at: node.mark, hint: "choose another id, like `\(v)_read`")
        } else if let earlier = captures[v] {
            reader.error("`\(v)` is already captured by step \(earlier)", at: node.mark, hint: "give each capture its own id")
        } else if declared[v] != nil {
            reader.error("`\(v)` is declared in `vars:`; a capture needs a name of its own", at: node.mark, hint: "choose another id")
        } else {
            return v
        }
        return nil
    }

    // MARK: - await capture

    /// `capture: ack` or `capture: { id: lock_state, slice: [2, 1], as: uint8 }`.
    mutating func awaitCapture(_ node: YAMLNode, number: Int) -> Step.Capture? {
        if node.scalar != nil, !node.isNull {
            guard let id = captureId(node, kind: "`await`") else { return nil }
            captures[id] = number
            captureTypes[id] = .bytes
            return Step.Capture(id: id)
        }
        guard let pairs = reader.mapping(node, "`capture`") else { return nil }
        reader.checkKeys(pairs, allowed: ["id", "as", "slice"], in: "`capture`")
        guard let idNode = node["id"] else {
            reader.error("`capture` needs `id`", at: node.mark, hint: "for example `capture: { id: state, as: uint8 }`")
            return nil
        }
        guard let id = captureId(idNode, kind: "`await`") else { return nil }
        var capture = Step.Capture(id: id)
        if let a = node["as"] {
            guard let f = formatNamed(a, what: "`as`") else { return nil }
            capture.format = f
        }
        if let s = node["slice"] {
            guard let items = reader.sequence(s, "`slice`") else { return nil }
            guard items.count == 1 || items.count == 2 else {
                reader.error("`slice` is `[start]` or `[start, length]`", at: s.mark)
                return nil
            }
            guard let start = reader.integer(items[0], "the slice start", in: -65_536...65_536) else { return nil }
            capture.start = start
            if items.count == 2 {
                guard let length = reader.integer(items[1], "the slice length", in: 0...65_536) else { return nil }
                capture.length = length
                if let size = capture.format.size, size != length {
                    reader.error("`\(capture.format)` needs \(size) byte\(size == 1 ? "" : "s"), but the slice is \(length)", at: items[1].mark)
                    return nil
                }
            }
        }
        captures[id] = number
        captureTypes[id] = capture.format.valueType
        captureFormats[id] = capture.format
        return capture
    }

    // MARK: - Type checks of uses

    /// The part that writes `${name}` as its type says: what a hint suggests, so that following a hint
    /// never leads to another error. Nil when no part writes it (a real number) or its type is unknown.
    func partWriting(_ name: String) -> String? {
        guard case .typed(let type) = nameType(name) else { return nil }
        switch type {
        case .bytes: return "{ hex: \"${\(name)}\" }"
        case .text, .version: return "{ utf8: \"${\(name)}\" }"
        case .integer(let signed):
            let format = formatOf(name)?.integer?.rawValue ?? (signed ? "int32le" : "uint32le")
            return "{ \(format): \"${\(name)}\" }"
        case .real, .boolean: return nil
        }
    }

    /// `partWriting` as of now, for a reader call (which holds `reader`, a part of this state).
    var adviser: (String) -> String? {
        let now = self
        return { now.partWriting($0) }
    }

    /// The format a name was read or declared as, when known (`read … as:`, `capture … as:`, `vars:`).
    func formatOf(_ name: String) -> ValueFormat? {
        captureFormats[name] ?? declared[name]?.format
    }

    /// Every `${name}` in a value that is written or compared must fit the encoding it sits in: bytes or
    /// text in `hex:`, an integer alone (or text) in `uint16le:` (& co.), text in `base64:` and `file:`,
    /// bytes in `bytes:`; never bytes in `utf8:` (they would be written as their hex text). Each error's
    /// hint names the part that writes the value as its type.
    mutating func checkTypes(_ spec: ValueSpec) {
        func check(_ t: Template, _ encoding: String, needs: String, allowed: (ValueType) -> Bool, hint: (String, ValueType) -> String?) {
            for (name, mark) in t.references {
                guard case .typed(let type) = nameType(name), !allowed(type) else { continue }
                reader.error("`${\(name)}` is \(type.phrase), but `\(encoding):` needs \(needs)", at: mark,
                             hint: hint(name, type) ?? partWriting(name).map { "write it with `\($0)`" })
            }
        }
        func asPart(_ name: String, _ type: ValueType) -> String? {
            if type == .real { return "a real number cannot be written; read the value `as: hex` to write its bytes" }
            return partWriting(name).map { "write it as a part of its own: `\($0)` (join parts with a list)" }
        }
        switch spec {
        case .hex(let t):
            check(t, "hex", needs: "bytes", allowed: { $0 == .bytes || $0 == .text }, hint: asPart)
        case .utf8(let t), .utf8Field(let t, _, _):
            check(t, "utf8", needs: "text", allowed: { $0 != .bytes }, hint: { _, _ in nil })
        case .base64(let t):
            check(t, "base64", needs: "text (the base64 of the bytes)", allowed: { $0 == .text }, hint: { name, type in asPart(name, type) })
        case .file(let t, _), .integer(_, .lengthOf(let t)):
            check(t, "file", needs: "text (a path)", allowed: { $0 == .text }) { _, _ in "a file path is text: name the file with an inventory variable" }
        case .bytes(let t):
            for (name, mark) in t.references {
                switch nameType(name) {
                case .typed(.bytes), .unknown:
                    continue
                case .typed(let type):
                    reader.error("`${\(name)}` is \(type.phrase), but `bytes:` needs bytes", at: mark,
                                 hint: partWriting(name).map { "write it with `\($0)`" } ?? "a real number cannot be written; read the value `as: hex` to write its bytes")
                case .inventoryText:
                    reader.error("`${\(name)}` is an inventory variable the workflow does not declare, so it is not known to be bytes", at: mark,
                                 hint: "declare it in `vars:` (`\(name): hex`), or write `{ hex: \"${\(name)}\" }`")
                }
            }
        case .integer(let format, .literal(let t)):
            let lone = t.loneReference
            check(t, format.rawValue, needs: "an integer", allowed: { $0.isNumeric ? lone != nil && $0 != .real : $0 == .text }) { name, type in
                if case .integer = type, lone == nil { return "write `${\(name)}` alone in `\(format.rawValue):`" }
                if type == .real { return "a real number cannot be written as an integer; read the value `as: hex` to write its bytes" }
                let fix = self.declared[name] != nil ? "or declare it `\(format.rawValue)`" : "or read it `as: \(format.rawValue)`"
                return self.partWriting(name).map { "write it with `\($0)`, \(fix)" }
            }
        case .integer(_, .crc(_, let inner)):
            checkTypes(inner)
        case .concat(let parts):
            for p in parts { checkTypes(p) }
        }
    }
}
