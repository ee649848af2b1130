import BLE
import YAML

/// One step of a workflow: what to do, its name, and its own timeout and retry (if any).
public struct Step: Sendable, Equatable {
    /// What the step does, with the options of its kind.
    public enum Kind: Sendable, Equatable {
        case scan(Scan)
        case connect(Connect)
        case pair(Pair)
        case discover(Discover)
        case read(Read)
        case verify(Verify)
        case write(Write)
        case writeBlob(WriteBlob)
        case subscribe(Subscribe)
        case unsubscribe(Unsubscribe)
        case await(Await)
        case sleep(Sleep)
        case disconnect(Disconnect)
        /// `set:`: derive a value from captured values and variables.
        case derive(Derive)
        /// `dfu:`: a firmware update over MCUmgr (upload, test, reset, confirm).
        case dfu(DFU)
        /// `file_upload:`: a file written to the device's file system over MCUmgr.
        case fileUpload(FileUpload)
        /// `settings:`: settings written (and saved) over MCUmgr.
        case settings(Settings)
        /// `mcumgr:`: one MCUmgr command.
        case mcumgr(McuMgrCommand)
        /// `wifi_provision:`: ESP-IDF Wi-Fi provisioning over protocomm.
        case wifiProvision(WiFiProvision)
        /// `wifi_scan:`: the access points an ESP unit sees.
        case wifiScan(WiFiScan)
        /// `esp_custom:`: one request to a custom protocomm endpoint.
        case espCustom(ESPCustom)

        /// The keyword as written in a workflow (`write_blob`, `await`, ...).
        public var keyword: String {
            switch self {
            case .scan: return "scan"
            case .connect: return "connect"
            case .pair: return "pair"
            case .discover: return "discover"
            case .read: return "read"
            case .verify: return "verify"
            case .write: return "write"
            case .writeBlob: return "write_blob"
            case .subscribe: return "subscribe"
            case .unsubscribe: return "unsubscribe"
            case .await: return "await"
            case .sleep: return "sleep"
            case .disconnect: return "disconnect"
            case .derive: return "set"
            case .dfu: return "dfu"
            case .fileUpload: return "file_upload"
            case .settings: return "settings"
            case .mcumgr: return "mcumgr"
            case .wifiProvision: return "wifi_provision"
            case .wifiScan: return "wifi_scan"
            case .espCustom: return "esp_custom"
            }
        }

        /// Every step keyword.
        public static let keywords = [
            "scan", "connect", "pair", "discover", "read", "verify", "write", "write_blob", "subscribe", "unsubscribe",
            "await", "sleep", "disconnect", "set", "dfu", "file_upload", "settings", "mcumgr", "wifi_provision", "wifi_scan", "esp_custom",
        ]
    }

    /// The step's name: given in the workflow, else derived (`read fw`, `write FFF1`).
    public var name: String
    /// True when `name` was written in the workflow.
    public var hasExplicitName: Bool
    public var kind: Kind
    /// The step's own timeout, if it set one.
    public var timeout: Duration?
    /// The step's own retry policy, if it set one.
    public var retry: RetryPolicy?
    /// Where the step starts in the workflow file.
    public var mark: SourceMark
    /// Timeout after defaults: the step's own, else the workflow default.
    public var effectiveTimeout: Duration
    /// Retry after defaults: the step's own, else the workflow default.
    public var effectiveRetry: RetryPolicy
    /// `retry_from`: the name of an earlier step where a retry of this step restarts (e.g. a blob
    /// stream cut by a link loss restarts at "begin blob"), and its index in the workflow's steps.
    public var retryFrom: String?
    public var retryFromIndex: Int?
    /// `when:`: the step runs only for devices where this holds (else it is skipped by condition).
    public var condition: Condition?
    /// What a failure of this step (after its retries) does to the device.
    public var onFailure: OnFailure = .stop

    /// What a step's final failure does to the device.
    public enum OnFailure: String, Sendable, Equatable {
        /// The device fails at once (the default).
        case stop
        /// `optional: true`: the failure is recorded and the device goes on; it does not fail the device.
        case optional
        /// `continue_on_error: true`: the failure is recorded, the device goes on and fails at the end.
        case continueOnError = "continue_on_error"
    }

    /// A `when:` condition, type-checked against the names the step can see.
    public struct Condition: Sendable, Equatable {
        public var expression: CheckedExpression
        /// Where the condition is written.
        public var mark: SourceMark
        public init(expression: CheckedExpression, mark: SourceMark) {
            self.expression = expression
            self.mark = mark
        }
        /// The condition as written.
        public var source: String { expression.source }
    }

    public init(
        name: String, hasExplicitName: Bool, kind: Kind, timeout: Duration?, retry: RetryPolicy?, mark: SourceMark,
        effectiveTimeout: Duration, effectiveRetry: RetryPolicy
    ) {
        self.name = name
        self.hasExplicitName = hasExplicitName
        self.kind = kind
        self.timeout = timeout
        self.retry = retry
        self.mark = mark
        self.effectiveTimeout = effectiveTimeout
        self.effectiveRetry = effectiveRetry
    }

    /// Every template the step uses (for validation and for rendering per device).
    public var templates: [Template] {
        switch kind {
        case .scan(let s): return [s.address, s.name].compactMap { $0 }
        case .connect(let c): return c.security.templates
        case .pair(let p): return p.security.templates
        case .discover, .subscribe, .unsubscribe, .sleep, .disconnect, .read: return []
        case .verify(let v): return [v.value] + v.limits.templates
        case .derive(let d): return d.templates
        case .write(let w): return w.value.templates
        case .writeBlob(let w): return w.value.templates
        case .await(let a): return a.matcher.templates + (a.trigger?.value.templates ?? []) + (a.confirm?.matcher.templates ?? [])
        case .dfu(let d): return [d.image]
        case .fileUpload(let f): return f.file.templates + [f.to]
        case .settings(let s): return s.writes.flatMap(\.value.templates)
        case .mcumgr(let m): return [m.image, m.text].compactMap { $0 }
        case .wifiProvision(let w): return [w.ssid, w.username].compactMap { $0 } + w.secretTemplates
        case .wifiScan(let w): return [w.session?.username, w.session?.pop].compactMap { $0 }
        case .espCustom(let c): return c.value.templates + [c.session?.username, c.session?.pop].compactMap { $0 }
        }
    }

    /// Value specs the step writes or compares (for per-device validation).
    public var valueSpecs: [ValueSpec] {
        switch kind {
        case .write(let w): return [w.value]
        case .writeBlob(let w): return [w.value]
        case .await(let a):
            var specs: [ValueSpec] = []
            if case .equalsValue(let v) = a.matcher { specs.append(v) }
            if let t = a.trigger { specs.append(t.value) }
            if case .equalsValue(let v)? = a.confirm?.matcher { specs.append(v) }
            return specs
        case .verify(let v): return v.limits.encoded
        case .derive(let d): return d.encoded
        case .fileUpload(let f): return [f.file]
        case .settings(let s): return s.writes.map(\.value)
        case .espCustom(let c): return [c.value]
        default: return []
        }
    }

    /// The characteristics the step touches (the trigger's too, for an `await`).
    public var targets: [CharacteristicRef] {
        switch kind {
        case .read(let r): return [r.target]
        case .write(let w): return [w.target]
        case .writeBlob(let w): return [w.target]
        case .subscribe(let s): return [s.target]
        case .await(let a): return (a.trigger.map { [$0.target] } ?? []) + (a.confirm.map { [$0.target] } ?? [])
        default: return []
        }
    }

    /// True when the step sends an irreversible write (a `write`, or an `await` trigger, marked `irreversible: true`).
    public var irreversible: Bool {
        switch kind {
        case .write(let w): return w.irreversible
        case .await(let a): return a.trigger?.irreversible ?? false
        case .mcumgr(let m): return m.command.isIrreversible
        default: return false
        }
    }

    /// True for a `dfu` step: its irreversible actions (test, reset, confirm) are journaled one by one,
    /// and whether each took effect is read back from the device's image state, so a resumed run goes
    /// on from what the device says instead of stopping the device for review.
    public var checksItsIrreversibleActions: Bool {
        if case .dfu = kind { return true }
        return false
    }

    /// True when the step's write is declared `idempotent: true`: sending it again has the same effect
    /// as sending it once, so it may be re-sent after its answer was lost.
    public var idempotent: Bool {
        switch kind {
        case .write(let w): return w.idempotent
        case .await(let a): return a.trigger?.idempotent ?? false
        default: return false
        }
    }

    /// The security options of a `connect` or `pair` step.
    public var security: Security? {
        switch kind {
        case .connect(let c): return c.security
        case .pair(let p): return p.security
        default: return nil
        }
    }

    /// The name this step captures into: a `read` with an `id`, an `await` with `capture:`, a `set:`.
    public var capturedName: String? {
        switch kind {
        case .read(let r): return r.id
        case .await(let a): return a.capture?.id
        case .derive(let d): return d.id
        case .mcumgr(let m): return m.capture
        case .wifiScan(let w): return w.capture
        case .espCustom(let c): return c.capture
        default: return nil
        }
    }

    /// The names the step's `when:` reads.
    public var conditionNames: Set<String> { condition?.expression.names ?? [] }
}

/// A service and a characteristic, by UUID (one type with the BLE layer's).
public typealias CharacteristicRef = CharacteristicPath

extension Step {
    /// `scan`: find the device's advertisement. With neither `address` nor `name` the device is found by
    /// its inventory address, else its inventory name.
    public struct Scan: Sendable, Equatable {
        public var address: Template?
        public var name: Template?
        /// Service UUIDs the advertisement must list (all of them).
        public var services: [BluetoothUUID]
        public var manufacturer: ManufacturerFilter?
        /// Weakest acceptable signal, in dBm.
        public var minRSSI: Int?
        public init(address: Template? = nil, name: Template? = nil, services: [BluetoothUUID] = [], manufacturer: ManufacturerFilter? = nil, minRSSI: Int? = nil) {
            self.address = address
            self.name = name
            self.services = services
            self.manufacturer = manufacturer
            self.minRSSI = minRSSI
        }
    }

    /// Manufacturer-specific data filter: company identifier and an optional data prefix.
    public struct ManufacturerFilter: Sendable, Equatable {
        public var company: UInt16
        public var prefix: [UInt8]
        public init(company: UInt16, prefix: [UInt8]) {
            self.company = company
            self.prefix = prefix
        }
    }

    /// `connect`: open a connection, optionally request an ATT MTU, with a reconnect policy and the
    /// security every link of the connection gets (`security`, see `Step.Security`).
    public struct Connect: Sendable, Equatable {
        /// ATT MTU to request (23...517), or nil to keep the default.
        public var mtu: Int?
        /// The connection's reconnect policy after defaults.
        public var reconnect: ReconnectPolicy
        public var security: Security
        /// What the link should get from the radio (`interval`, `latency`, `supervision_timeout`, `phy`,
        /// `data_length`); nil: the adapter's defaults.
        public var link: LinkPreferences?
        public init(mtu: Int? = nil, reconnect: ReconnectPolicy = .standard, security: Security = .none, link: LinkPreferences? = nil) {
            self.mtu = mtu
            self.reconnect = reconnect
            self.security = security
            self.link = link
        }
    }

    /// `discover`: targeted discovery of the services the workflow uses (default), or of everything.
    public struct Discover: Sendable, Equatable {
        public var all: Bool
        /// Services to discover when targeted; empty means "those the workflow uses".
        public var services: [BluetoothUUID]
        public init(all: Bool = false, services: [BluetoothUUID] = []) {
            self.all = all
            self.services = services
        }
    }

    /// `read`: read a characteristic, decode it (`as:`, default `hex`), and capture the typed value
    /// under `id`.
    public struct Read: Sendable, Equatable {
        public var target: CharacteristicRef
        public var id: String?
        public var format: ValueFormat
        public init(target: CharacteristicRef, id: String?, format: ValueFormat = .hex) {
            self.target = target
            self.id = id
            self.format = format
        }
    }

    /// `verify`: a measurement. The value (a template; `"${battery}"` keeps the captured value's type)
    /// is checked against limits (`min`, `max`, `equals`, `in`, `matches`, `version_at_least`,
    /// `version_below`), and recorded with its name and unit, passed or failed.
    public struct Verify: Sendable, Equatable {
        public var value: Template
        /// The value's type, known from the workflow: a lone `${name}` has its capture's or declared
        /// variable's type; any other text is text.
        public var valueType: ValueType
        public var limits: LimitSpecs
        public var unit: String?
        /// The measurement's name in the report: the step's `name:`, else the variable checked, else the
        /// value as written.
        public var measurementName: String
        public init(value: Template, valueType: ValueType, limits: LimitSpecs, unit: String? = nil, measurementName: String) {
            self.value = value
            self.valueType = valueType
            self.limits = limits
            self.unit = unit
            self.measurementName = measurementName
        }
    }

    /// `set:`: a value derived from others (a slice, a CRC, a concatenation), captured under `id` with
    /// the derivation's result type. `value(typed:text:baseDirectory:)` derives it for one device.
    public struct Derive: Sendable, Equatable {
        /// One value a derivation takes.
        public enum Input: Sendable, Equatable {
            /// A template: a lone `${name}` keeps its type, a literal is read as the type of the others,
            /// any other text is text.
            case template(Template)
            /// Bytes built from typed parts (`{ uint32le: "${interval_s}" }`, `{ utf8: "${room}", length: 16 }`).
            case encoded(ValueSpec)
        }

        public var id: String
        public var derivation: Derivation
        /// The values derived from, in order.
        public var inputs: [Input]
        public var resultType: ValueType
        public init(id: String, derivation: Derivation, inputs: [Input], resultType: ValueType) {
            self.id = id
            self.derivation = derivation
            self.inputs = inputs
            self.resultType = resultType
        }
    }

    /// `write`: write a value, with response (a write request) by default. Long values use
    /// Prepare/Execute Write (with response) — the engine decides from the MTU.
    public struct Write: Sendable, Equatable {
        public var target: CharacteristicRef
        public var value: ValueSpec
        public var withResponse: Bool
        /// The write changes the device for good (a commit): the journal records the intent durably before
        /// it is sent, and a run that stops between the two leaves the device for review instead of
        /// sending it again on resume.
        public var irreversible: Bool
        /// Sending the write again has the same effect as sending it once (the device says so: the
        /// reference device's commit). Only then may an irreversible write be re-sent (`resend`, or a
        /// retry after its answer was lost).
        public var idempotent: Bool
        public init(target: CharacteristicRef, value: ValueSpec, withResponse: Bool = true, irreversible: Bool = false,
                    idempotent: Bool = false) {
            self.target = target
            self.value = value
            self.withResponse = withResponse
            self.irreversible = irreversible
            self.idempotent = idempotent
        }
    }

    /// `write_blob`: stream a value without response in chunks of at most MTU-3 (or `chunkSize`).
    public struct WriteBlob: Sendable, Equatable {
        public var target: CharacteristicRef
        public var value: ValueSpec
        public var chunkSize: Int?
        public init(target: CharacteristicRef, value: ValueSpec, chunkSize: Int? = nil) {
            self.target = target
            self.value = value
            self.chunkSize = chunkSize
        }
    }

    /// How a subscription is delivered.
    public enum SubscriptionMode: String, Sendable, Equatable {
        case notify, indicate
    }

    /// `subscribe`: enable notifications or indications and name the subscription `id`.
    public struct Subscribe: Sendable, Equatable {
        public var id: String
        public var target: CharacteristicRef
        public var mode: SubscriptionMode
        /// Subscribe even when the characteristic does not declare notify/indicate (firmware quirk).
        public var allowUndeclared: Bool
        public init(id: String, target: CharacteristicRef, mode: SubscriptionMode = .notify, allowUndeclared: Bool = false) {
            self.id = id
            self.target = target
            self.mode = mode
            self.allowUndeclared = allowUndeclared
        }
    }

    /// `unsubscribe`: end the subscription `id`.
    public struct Unsubscribe: Sendable, Equatable {
        public var id: String
        public init(id: String) { self.id = id }
    }

    /// `await`: wait for a value on subscription `subscription` that matches. With a `trigger`, the
    /// engine starts listening before it writes, so no notification is missed; on timeout it may
    /// re-send the trigger after each wait in `resend`.
    public struct Await: Sendable, Equatable {
        public var subscription: String
        public var matcher: MatcherSpec
        public var trigger: Write?
        /// Waits before re-sending the trigger after a timeout (`[1s, 2s, 5s]` = up to 3 re-sends).
        public var resend: [Duration]
        /// A value that means "busy, try again" (e.g. `{ hex: "^0102" }`): the step fails at once with the
        /// transient error class `busy`, for the retry policy to handle.
        public var busy: MatcherSpec?
        /// A value that means the command failed (e.g. `{ hex: "^0401" }`): the step fails at once with
        /// the error class `mismatch` instead of waiting for its timeout.
        public var failsOn: MatcherSpec?
        /// How to tell, when the answer does not come, whether the trigger took effect: a read of the
        /// device that matches when it did (`confirm`).
        public var confirm: Confirm?
        /// `capture:`: keep (part of) the value that matched, decoded, under an id.
        public var capture: Capture?
        public init(subscription: String, matcher: MatcherSpec, trigger: Write? = nil, resend: [Duration] = [], busy: MatcherSpec? = nil,
                    failsOn: MatcherSpec? = nil, confirm: Confirm? = nil, capture: Capture? = nil) {
            self.subscription = subscription
            self.matcher = matcher
            self.trigger = trigger
            self.resend = resend
            self.busy = busy
            self.failsOn = failsOn
            self.confirm = confirm
            self.capture = capture
        }
    }

    /// `capture:` on an `await`: the bytes `start ..< start + length` of the value that matched (the
    /// whole value by default; a negative `start` counts from the end), decoded `as:` a format.
    public struct Capture: Sendable, Equatable {
        public var id: String
        public var format: ValueFormat
        public var start: Int
        public var length: Int?
        public init(id: String, format: ValueFormat = .hex, start: Int = 0, length: Int? = nil) {
            self.id = id
            self.format = format
            self.start = start
            self.length = length
        }

        /// The captured value of a notification.
        public func value(of bytes: [UInt8]) throws(ValueError) -> TypedValue {
            let part = start == 0 && length == nil ? bytes : try Derivation.slice(bytes, start: start, length: length)
            return try format.decode(part)
        }
    }

    /// `confirm` on an `await`: a characteristic to read, and what it holds once the trigger took
    /// effect (`{ service: FFF0, characteristic: FFF2, equals: { hex: "02" } }`).
    public struct Confirm: Sendable, Equatable {
        public var target: CharacteristicRef
        public var matcher: MatcherSpec
        public init(target: CharacteristicRef, matcher: MatcherSpec) {
            self.target = target
            self.matcher = matcher
        }
    }

    /// `sleep`: wait a fixed time.
    public struct Sleep: Sendable, Equatable {
        public var duration: Duration
        public init(duration: Duration) { self.duration = duration }
    }

    /// `disconnect`: close the connection (never triggers a reconnect).
    public struct Disconnect: Sendable, Equatable {
        public init() {}
    }

    /// When `dfu` confirms the new image (MCUboot): the policies of docs/dfu.md.
    public enum ConfirmPolicy: String, Sendable, Equatable, CaseIterable {
        case afterBoot = "after_boot", now, never
    }

    /// `dfu`: update the firmware of an MCUmgr/MCUboot device with the image a variable names.
    public struct DFU: Sendable, Equatable {
        /// The image file (relative to the inventory's file root): `"${firmware}"`.
        public var image: Template
        public var confirm: ConfirmPolicy
        /// Refuse an image that is not newer than the running one (the device checks too).
        public var upgradeOnly: Bool
        /// How long the device may take to come back after its reset.
        public var rebootTimeout: Duration
        /// `version`: the image's version must be this one (checked during validation, per device).
        public var version: Template?
        /// The MCUboot image number (0 on a single-image device).
        public var imageNumber: Int
        /// `window`: at most this many requests in flight (default: the device's buffers).
        public var window: Int?

        /// The values a `dfu` records for the report (as captures): its result, the versions before and
        /// after, the image's size, the bytes sent, the upload's KB/s, window, drops and link losses, and
        /// the time of each phase. `dfu_…`, or `dfu1_…` for image 1.
        public static func figures(imageNumber: Int) -> [(String, ValueType)] {
            let p = imageNumber == 0 ? "dfu_" : "dfu\(imageNumber)_"
            let count = ValueType.integer(signed: false)
            return [(p + "result", .text), (p + "version_before", .version), (p + "version_after", .version), (p + "image_bytes", count),
                    (p + "bytes_sent", count), (p + "kbps", .real), (p + "window", count), (p + "drops", count), (p + "link_losses", count)]
                + ["state", "upload", "test", "reboot", "confirm"].map { (p + $0 + "_ms", count) }
        }
        public init(image: Template, confirm: ConfirmPolicy = .afterBoot, upgradeOnly: Bool = true, rebootTimeout: Duration = .seconds(60),
                    version: Template? = nil, imageNumber: Int = 0, window: Int? = nil) {
            self.image = image
            self.confirm = confirm
            self.upgradeOnly = upgradeOnly
            self.rebootTimeout = rebootTimeout
            self.version = version
            self.imageNumber = imageNumber
            self.window = window
        }
    }

    /// `file_upload`: write a file to the device over MCUmgr (resumable), checked with the device's
    /// SHA-256 of it where the device offers one.
    public struct FileUpload: Sendable, Equatable {
        /// The bytes: `file: "${cert}"` (a `file` value spec), or any value spec under `value:`.
        public var file: ValueSpec
        /// The path on the device: `/lfs/cert.der`.
        public var to: Template
        /// `verify`: `sha256` (default: when the device offers it), `required`, or `none`.
        public var verify: Verification
        public enum Verification: String, Sendable, Equatable, CaseIterable {
            case auto, required, none
        }
        public init(file: ValueSpec, to: Template, verify: Verification = .auto) {
            self.file = file
            self.to = to
            self.verify = verify
        }
    }

    /// `settings`: write settings (names to value specs, in order), then save them when asked.
    public struct Settings: Sendable, Equatable {
        public struct Write: Sendable, Equatable {
            public var name: String
            public var value: ValueSpec
            public init(name: String, value: ValueSpec) {
                self.name = name
                self.value = value
            }
        }
        public var writes: [Write]
        public var save: Bool
        public init(writes: [Write], save: Bool = false) {
            self.writes = writes
            self.save = save
        }
    }

    /// `mcumgr`: one MCUmgr command, for what the composite steps do not cover.
    public struct McuMgrCommand: Sendable, Equatable {
        public enum Command: String, Sendable, Equatable, CaseIterable {
            case echo, reset, params
            case imageState = "image_state", imageTest = "image_test", imageConfirm = "image_confirm", imageErase = "image_erase"

            /// Commands that change the device for good: journaled as intents, never sent again on a resume.
            public var isIrreversible: Bool {
                switch self {
                case .reset, .imageTest, .imageConfirm, .imageErase: return true
                case .echo, .params, .imageState: return false
                }
            }
        }
        public var command: Command
        /// `capture`: the id the answer is captured under (echo: the text; image_state: the running version;
        /// params: `buf_size x buf_count`).
        public var capture: String?
        /// `image`: the image whose hash `image_test` marks (and `image_confirm` confirms, else the running one).
        public var image: Template?
        /// `text`: what `echo` sends.
        public var text: Template?
        /// `slot`: what `image_erase` erases (default 1).
        public var slot: Int?
        public init(command: Command, capture: String? = nil, image: Template? = nil, text: Template? = nil, slot: Int? = nil) {
            self.command = command
            self.capture = capture
            self.image = image
            self.text = text
            self.slot = slot
        }

        /// The captured value's type.
        public var captureType: ValueType {
            command == .imageState ? .version : .text
        }
    }
}
