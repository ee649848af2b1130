import BLE
import McuMgr
import Synchronization
import Workflow

/// `McuMgrStepHost` for the device agent: one attempt of one step, with a copy of the device's values,
/// its session and SMP endpoint, and the run's store for intents. The agent reads back what the step
/// made (bytes to learn as secret) and whether an irreversible action went out.
final class McuMgrAgentHost: McuMgrStepHost {
    let step: Step
    let index: Int
    let deadline: ContinuousClock.Instant
    let baseDirectory: String
    let journaledActions: Set<String>
    private let currentSession: Session
    private let smp: SessionSMPDevice
    private let values: (String) -> String?
    private let store: any RunStore
    private let deviceID: String
    /// Value specs rendered, with their bytes (the agent learns secret ones).
    private(set) var made: [(ValueSpec, [UInt8])] = []
    private let sent = SentFlags()

    init(step: Step, index: Int, session: Session, smp: SessionSMPDevice, baseDirectory: String, values: @escaping (String) -> String?,
         journaledActions: Set<String>, store: any RunStore, deviceID: String) {
        self.step = step
        self.index = index
        self.deadline = .now + step.effectiveTimeout
        self.currentSession = session
        self.smp = smp
        self.baseDirectory = baseDirectory
        self.values = values
        self.journaledActions = journaledActions
        self.store = store
        self.deviceID = deviceID
    }

    var sentIrreversible: Bool { sent.flags.withLock { $0.irreversible } }
    var wasRefused: Bool { sent.flags.withLock { $0.refused } }

    func session() throws -> Session { currentSession }

    func render(_ template: Template) throws -> String { try template.render(values) }

    func bytes(_ spec: ValueSpec) throws -> [UInt8] {
        let data = try spec.bytes(variables: values, baseDirectory: baseDirectory)
        made.append((spec, data))
        return data
    }

    func recordIntent(_ action: String) async throws {
        try await intentRecorder(action)
    }

    func refused() { sent.flags.withLock { $0.refused = true } }

    func smpDevice(_ session: Session) -> SessionSMPDevice { smp }

    /// A checked step (`dfu`) journals each action with its name; any other irreversible step journals
    /// a plain intent (a resume leaves the device for review).
    var intentRecorder: @Sendable (String) async throws -> Void {
        let store = self.store, device = deviceID, name = step.name, index = self.index
        let checked = step.checksItsIrreversibleActions
        let sent = self.sent
        return { action in
            do {
                if checked {
                    try await store.intent(device: device, step: name, stepIndex: index, action: action)
                } else {
                    try await store.intent(device: device, step: name, stepIndex: index)
                }
            } catch {
                throw DeviceFailure(.interrupted, "not sent: the journal could not record the intent to \(action) (step `\(name)`)",
                                    causes: ["\(error)"])
            }
            if !checked { sent.flags.withLock { $0.irreversible = true } }
        }
    }

    var progressSink: @Sendable (Int, Int?) -> Void { { _, _ in } }
}

/// Whether an attempt's irreversible action went out, and whether the device refused it.
private final class SentFlags: Sendable {
    let flags = Mutex((irreversible: false, refused: false))
}
