import BLE
import ESPProv
import Workflow

/// The ESP-IDF provisioning family (`wifi_provision`, `wifi_scan`, `esp_custom`; docs/esp.md): each step
/// runs one operation of the device's `ProtocommMachine` over `GATTProtocommTransport`. The session
/// (the handshake's keys) is kept for the device's later steps on the same link; a failure or a new
/// link starts a new one. Errors become `DeviceFailure`s with their kinds (`security_failed`,
/// `wifi_auth_failed`, `wifi_ap_not_found`, ...).
struct ESPSteps: StepExecutor {
    func run(_ step: Step, in context: StepContext) async throws -> StepOutput {
        guard let security = step.protocommSession else {
            throw DeviceFailure(.invalidInput, "`\(step.kind.keyword)` is not an ESP provisioning step")
        }
        let session = try context.session()
        let state = context.deviceState(ProtocommState.self) { ProtocommState() }
        let configuration = try Self.configuration(security, context)
        let operation: ProtocommMachine.Operation
        switch step.kind {
        case .wifiProvision(let w):
            let ssid = try context.bytes(.utf8(w.ssid))
            let passphrase = try w.passphrase.map { try context.bytes(.utf8($0)) } ?? []
            operation = .provision(ssid: ssid, passphrase: passphrase)
        case .wifiScan:
            operation = .scan
        case .espCustom(let c):
            operation = .custom(endpoint: c.endpoint, data: try context.bytes(c.value))
        default:
            operation = .session
        }
        var (machine, transport) = state.machine(for: session, configuration: configuration,
                                                 service: security.service ?? GATTProtocommTransport.defaultService)
        let outcome: ProtocommMachine.Outcome
        do {
            let reused = machine.isReady
            do {
                outcome = try await ProtocommClient.run(operation, on: &machine, over: transport, deadline: context.deadline, timeout: context.timeout)
            } catch let e as ProtocommError where reused && e.kind == .deviceRefused {
                // The session kept from an earlier step may have ended with a link the session has restored
                // since (the unit forgets it on a disconnect): the refused request was not executed, so it
                // goes again once, in a new session.
                machine = ProtocommMachine(configuration: configuration)
                outcome = try await ProtocommClient.run(operation, on: &machine, over: transport, deadline: context.deadline, timeout: context.timeout)
            }
            state.keep(machine)
        } catch {
            state.forget()
            throw Self.failure(error)
        }
        return try Self.output(outcome, step)
    }

    /// What the device's ESP steps share: the link their session runs on, and the machine holding it.
    final class ProtocommState {
        private var session: Session?
        private var transport: GATTProtocommTransport?
        private var machine: ProtocommMachine?

        /// The machine to run on `session` with `configuration`: the one kept when it is ready on the same
        /// link with the same security, else a new one.
        func machine(for session: Session, configuration: ProtocommMachine.Configuration,
                     service: BluetoothUUID) -> (ProtocommMachine, GATTProtocommTransport) {
            if self.session !== session || transport?.service != service {
                self.session = session
                transport = GATTProtocommTransport(session: session, service: service)
                machine = nil
            }
            let t = transport ?? GATTProtocommTransport(session: session, service: service)
            if let m = machine, m.isReady, m.configuration == configuration { return (m, t) }
            return (ProtocommMachine(configuration: configuration), t)
        }

        func keep(_ m: ProtocommMachine) { machine = m }
        func forget() { machine = nil }
    }

    private static func configuration(_ s: Step.ProtocommSecurity, _ context: StepContext) throws -> ProtocommMachine.Configuration {
        let credentials: SecurityCredentials
        switch s.security {
        case 0:
            credentials = .none
        case 1:
            credentials = .proofOfPossession(try s.pop.map { try context.bytes(.utf8($0)) } ?? [])
        default:
            guard let u = s.username, let p = s.pop else {
                throw DeviceFailure(.invalidInput, "security 2 needs a username and a proof of possession")
            }
            credentials = .srp(username: try context.bytes(.utf8(u)), password: try context.bytes(.utf8(p)))
        }
        return ProtocommMachine.Configuration(credentials: credentials, allowInsecure: s.allowInsecure)
    }

    private static func output(_ outcome: ProtocommMachine.Outcome, _ step: Step) throws -> StepOutput {
        switch (outcome, step.kind) {
        case (.joined(let j), _):
            return StepOutput(captures: [("wifi_state", .text(j.state)), ("wifi_ip", .text(j.ip)),
                                         ("wifi_channel", .integer(Int64(j.channel), signed: false))])
        case (.scanned(let aps), .wifiScan(let w)):
            guard let name = w.capture else { return .none }
            let lines = aps.map { ap in
                let ssid = String(decoding: ap.ssid, as: UTF8.self).filter { $0.asciiValue.map { $0 >= 0x20 && $0 < 0x7F } ?? true }
                return "\(ssid) (channel \(ap.channel), \(ap.rssi) dBm, \(ap.auth))"
            }
            return .captured(name, .text(lines.joined(separator: "\n")))
        case (.custom(let bytes), .espCustom(let c)):
            guard let name = c.capture else { return .none }
            do {
                return .captured(name, try c.format.decode(bytes))
            } catch {
                throw DeviceFailure(.protocolError, "the answer of `\(c.endpoint)` cannot be decoded as \(c.format): \(error.message)")
            }
        default:
            return .none
        }
    }

    /// A protocomm failure as the report names it.
    static func failure(_ error: any Error) -> DeviceFailure {
        switch error {
        case let e as ProtocommError:
            let kind: FailureKind
            switch e.kind {
            case .securityFailed: kind = .securityFailed
            case .wifiAuthFailed: kind = .wifiAuthFailed
            case .wifiAPNotFound: kind = .wifiAPNotFound
            case .endpointNotFound: kind = .attributeNotFound
            default: kind = .protocolError
            }
            return DeviceFailure(kind, e.message)
        case let t as ProtocommTimeout:
            return DeviceFailure(.timeout, t.description)
        default:
            return DeviceFailure.from(error)
        }
    }
}
