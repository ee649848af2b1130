import Workflow

/// Runs the steps of one family (`read`, `write`, `await`, a firmware update, Wi-Fi provisioning...),
/// one attempt of one step at a time. The seam new step families plug into: an executor is registered
/// for its step keywords in `StepExecutors`, and the device agent hands it every step of those kinds
/// with a `StepContext`; neither `DeviceAgent` nor `DeviceMachine` knows the family.
///
/// The contract (docs/architecture.md, "Step executors"):
/// - `run` runs one attempt of `step` and returns what it captured (`StepOutput`), or throws. A thrown
///   `DeviceFailure` keeps its kind, which decides whether the step is retried (`FailureKind.errorClass`
///   against the step's `retry.on`); anything else is classified by `DeviceFailure.from` (`BLEError`,
///   `ValueError`, `CancellationError`, ...). Messages may name values: the engine hides the device's
///   secrets in them before they reach a record or an event.
/// - It keeps to the step's deadline (`context.deadline`, `context.remaining`) and to cancellation: the
///   run stopping cuts the device by cancelling its task; let `CancellationError` or
///   `BLEError.cancelled` out, never swallow them.
/// - An irreversible action (one the device must never receive twice by accident) goes out only after
///   `try await context.recordIntent()` returned; what the device then answers is reported:
///   `context.refused()` when it shows the action was not executed, `context.confirmed(tookEffect:)`
///   after checking. The engine decides from that whether a failed attempt is retried, checked first, or
///   left for review (`needs_review`).
/// - An executor holds no state of a device between calls (one instance serves every device); what a
///   family keeps for one device across its steps lives in `context.deviceState(_:)`.
public protocol StepExecutor: Sendable {
    /// Runs one attempt of `step` (its kind is one this executor was registered for).
    func run(_ step: Step, in context: StepContext) async throws -> StepOutput
}

/// What one attempt of a step produced.
public struct StepOutput: Sendable, Equatable {
    /// Values captured, by name (a `read … id:`, an `await … capture:`, a `set:`): they become the
    /// device's values when the step succeeds, typed, and are hidden in the report when they are secret.
    public var captures: [(name: String, value: TypedValue)]

    public init(captures: [(name: String, value: TypedValue)] = []) {
        self.captures = captures
    }

    /// Nothing captured.
    public static let none = StepOutput()

    /// One value captured under `name`.
    public static func captured(_ name: String, _ value: TypedValue) -> StepOutput {
        StepOutput(captures: [(name, value)])
    }

    public static func == (a: StepOutput, b: StepOutput) -> Bool {
        a.captures.count == b.captures.count && zip(a.captures, b.captures).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }
}

/// The executors of a run, by step keyword. `standard` runs every step the workflow language has; a new
/// family adds its executor for its keywords (`adding(_:for:)`), and a run is given the set it uses
/// (`Runner.run(…, executors:)`). A workflow whose step has no executor is refused before any device
/// is touched.
public struct StepExecutors: Sendable {
    private var byKeyword: [String: any StepExecutor]

    private init(_ byKeyword: [String: any StepExecutor]) {
        self.byKeyword = byKeyword
    }

    /// Every step of the workflow language: link (`scan`, `connect`, `pair`, `discover`,
    /// `disconnect`), GATT (`read`, `write`, `write_blob`), notifications (`subscribe`, `unsubscribe`,
    /// `await`), values (`verify`, `set`, `sleep`) and MCUmgr (`dfu`, `file_upload`, `settings`, `mcumgr`).
    public static let standard = StepExecutors([:])
        .adding(LinkSteps(), for: ["scan", "connect", "pair", "discover", "disconnect"])
        .adding(GATTSteps(), for: ["read", "write", "write_blob"])
        .adding(NotificationSteps(), for: ["subscribe", "unsubscribe", "await"])
        .adding(ValueSteps(), for: ["verify", "set", "sleep"])
        .adding(McuMgrSteps(), for: ["dfu", "file_upload", "settings", "mcumgr"])

    /// These executors, with `executor` running the steps of `keywords` (replacing any before it).
    public func adding(_ executor: any StepExecutor, for keywords: [String]) -> StepExecutors {
        var copy = self
        for k in keywords { copy.byKeyword[k] = executor }
        return copy
    }

    /// The executor of a step's kind.
    public func executor(for kind: Step.Kind) -> (any StepExecutor)? { byKeyword[kind.keyword] }

    /// The keywords of `steps` that no executor runs.
    func missing(in steps: [Step]) -> [String] {
        var seen: [String] = []
        for s in steps where byKeyword[s.kind.keyword] == nil && !seen.contains(s.kind.keyword) { seen.append(s.kind.keyword) }
        return seen
    }
}
