import YAML
import Digests
import BLE
import MCUboot
import McuMgr
import Workflow

/// The MCUmgr step family (`dfu`, `file_upload`, `settings`, `mcumgr`; docs/dfu.md): each step is a
/// thin use of the McuMgr target — `DFUExecutor` for a firmware update, `Uploader` for a file, the
/// SMP client for settings and single commands. Errors become `DeviceFailure`s with their kinds.
struct McuMgrSteps: StepExecutor {
    /// Runs one attempt; captures the DFU's figures (`dfu_…`) or a command's answer.
    func run(_ step: Step, in context: StepContext) async throws -> StepOutput {
        let captures: [(String, TypedValue)]
        switch step.kind {
        case .dfu(let d): captures = try await dfu(d, context)
        case .fileUpload(let f): captures = try await fileUpload(f, context)
        case .settings(let s): captures = try await settings(s, context)
        case .mcumgr(let m): captures = try await command(m, context)
        default: captures = []
        }
        return StepOutput(captures: captures.map { (name: $0.0, value: $0.1) })
    }

    /// The device's SMP endpoint, kept across its steps (MCUmgr parameters asked once per device) and
    /// made again for a new session.
    final class Endpoint {
        var session: Session?
        var device: SessionSMPDevice?

        func device(for session: Session) -> SessionSMPDevice {
            if let d = device, self.session === session { return d }
            let d = SessionSMPDevice(session: session)
            self.session = session
            device = d
            return d
        }
    }

    private func smpDevice(_ context: StepContext) throws -> SessionSMPDevice {
        let session = try context.session()
        return context.deviceState(Endpoint.self) { Endpoint() }.device(for: session)
    }

    /// Upload options that keep to the step's deadline.
    private func uploadOptions(_ context: StepContext, window: Int? = nil) -> Uploader.Options {
        var o = Uploader.Options()
        o.machine.maxWindow = window
        o.deadline = context.deadline
        return o
    }

    // MARK: - dfu

    private func dfu(_ d: Step.DFU, _ context: StepContext) async throws -> [(String, TypedValue)] {
        let image = try Self.image(d.image, version: d.version, context)
        let device = try smpDevice(context)
        let journaled = Set(context.journaledActions.compactMap(DFUIntent.init(rawValue:)))
        let configuration = DFUMachine.Configuration(image: DFUImage(image), confirm: ConfirmPolicy(rawValue: d.confirm.rawValue) ?? .afterBoot,
                                                     upgradeOnly: d.upgradeOnly, imageNumber: d.imageNumber, rebootTimeout: d.rebootTimeout)
        var options = DFUExecutor.Options()
        options.upload = uploadOptions(context, window: d.window)
        let total = image.bytes.count
        let record = context.intentRecorder, progress = context.progressSink
        let report: DFUReport
        do {
            report = try await DFUExecutor.run(configuration, image: image.bytes, journaled: journaled, device: device, options: options,
                                               recordIntent: { try await record($0.rawValue) },
                                               progress: { progress($0.acknowledged, total) })
        } catch let e as DFUError {
            throw Self.failure(e)
        }
        return Self.figures(report, imageNumber: d.imageNumber, size: total)
    }

    /// Reads an image through the inventory's file root (confined like every file a device is sent) and
    /// checks it: an MCUboot image, its SHA-256 TLV intact, the version the step names.
    static func image(_ template: Template, version: Template?, _ context: StepContext) throws -> MCUbootImage {
        let path = try context.render(template)
        let bytes = try FileRoot(context.baseDirectory).read(path)
        let image: MCUbootImage
        do {
            image = try MCUbootImage(bytes: bytes)
        } catch {
            throw DeviceFailure(.invalidInput, "\(path): \(error)")
        }
        if let version {
            let text = try context.render(version)
            guard let wanted = ImageVersion(text), wanted == image.version else {
                throw DeviceFailure(.invalidInput, "\(path) is version \(image.version), not \(text)")
            }
        }
        return image
    }

    /// The report's figures of a DFU, as captured values (`dfu_…`; `dfu1_…` for image 1).
    static func figures(_ r: DFUReport, imageNumber: Int, size: Int) -> [(String, TypedValue)] {
        let p = imageNumber == 0 ? "dfu_" : "dfu\(imageNumber)_"
        var out: [(String, TypedValue)] = []
        switch r.result {
        case .alreadyCurrent(let v):
            out.append((p + "result", .text("already_current")))
            if let sv = SemanticVersion(v) { out.append((p + "version_after", .version(sv))) }
        case .updated(let from, let to, let confirmed):
            out.append((p + "result", .text(confirmed ? "updated" : "updated_unconfirmed")))
            if let from, let sv = SemanticVersion(from) { out.append((p + "version_before", .version(sv))) }
            if let sv = SemanticVersion(to) { out.append((p + "version_after", .version(sv))) }
        }
        out.append((p + "image_bytes", .integer(Int64(size), signed: false)))
        out.append((p + "bytes_sent", .integer(Int64(r.upload?.sent ?? 0), signed: false)))
        if let u = r.upload {
            out.append((p + "kbps", .real((u.kilobytesPerSecond * 10).rounded() / 10)))
            out.append((p + "window", .integer(Int64(u.window), signed: false)))
            out.append((p + "drops", .integer(Int64(u.drops), signed: false)))
            out.append((p + "link_losses", .integer(Int64(u.linkLosses), signed: false)))
        }
        for phase in DFUPhase.allCases {
            guard let d = r.phases[phase] else { continue }
            let ms = d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
            out.append((p + phase.rawValue + "_ms", .integer(ms, signed: false)))
        }
        return out
    }

    /// A DFU failure as the report's kind: reverted, downgrade and not bootable are never retried; a
    /// link that failed is (a new attempt reads the device's state and goes on from there).
    static func failure(_ e: DFUError) -> DeviceFailure {
        if let f = e.failure {
            switch f {
            case .reverted: return DeviceFailure(.dfuReverted, f.description)
            case .downgrade: return DeviceFailure(.dfuDowngrade, f.description)
            case .notBootable: return DeviceFailure(.dfuNotBootable, f.description)
            case .rebootTimeout: return DeviceFailure(.timeout, f.description)
            case .upload(.stalled): return DeviceFailure(.timeout, f.description)
            case .upload(.transport(let t)): return transport(t)
            default: return DeviceFailure(.mcumgrError, f.description)
            }
        }
        return transport(e.transport ?? .transport("DFU failed"))
    }

    static func transport(_ e: SMPError) -> DeviceFailure {
        switch e {
        case .timeout: return DeviceFailure(.timeout, e.description)
        case .disconnected: return DeviceFailure(.disconnected, e.description)
        case .cancelled: return DeviceFailure(.interrupted, "cancelled")
        case .device(let d): return DeviceFailure(d.kind == .busy ? .busy : .mcumgrError, d.description)
        case .malformed, .tooLarge: return DeviceFailure(.protocolError, e.description)
        case .transport: return DeviceFailure(.disconnected, e.description)
        }
    }

    // MARK: - file_upload

    private func fileUpload(_ f: Step.FileUpload, _ context: StepContext) async throws -> [(String, TypedValue)] {
        let data = try context.bytes(f.file)
        let name = try context.render(f.to)
        let device = try smpDevice(context)
        let total = data.count
        let options = uploadOptions(context)
        let progress = context.progressSink
        return try await smp {
            let client = try await device.client(within: .seconds(10))
            // Resumable: a file the device already holds part (or all) of, with our bytes, goes on there.
            let start = try await Self.resumeOffset(name: name, data: data, client: client)
            if start < data.count {
                _ = try await Uploader.run(.file(name: name), data: data, device: device, options: options, startingAt: start,
                                           progress: { progress($0.acknowledged, total) })
            }
            try await Self.verifyFile(name: name, data: data, mode: f.verify, device: device)
            return []
        }
    }

    /// Where an upload of `data` to `name` can start: the device's file length when its first bytes are
    /// ours (its SHA-256 of them says so), else 0.
    static func resumeOffset(name: String, data: [UInt8], client: SMPClient) async throws -> Int {
        let status: FileStatusResponse
        switch await smpResult({ () async throws(SMPError) in try await client.send(FileStatusRequest(name: name), timeout: .seconds(5)) }) {
        case .success(let s): status = s
        case .failure(.device): return 0
        case .failure(let e): throw e
        }
        guard status.length > 0, status.length <= data.count else { return 0 }
        let request = FileHashRequest(name: name, type: "sha256", offset: 0, length: status.length)
        switch await smpResult({ () async throws(SMPError) in try await client.send(request, timeout: .seconds(10)) }) {
        case .success(let hash): return hash.output.bytesValue == SHA256.hash(data[..<status.length]) ? status.length : 0
        case .failure(.device): return 0
        case .failure(let e): throw e
        }
    }

    /// The device's SHA-256 of the file must be ours (`auto`: where the device offers the hash command).
    static func verifyFile(name: String, data: [UInt8], mode: Step.FileUpload.Verification, device: SessionSMPDevice) async throws {
        guard mode != .none else { return }
        let client = try await device.client(within: .seconds(10))
        let answer: FileHashResponse
        switch await smpResult({ () async throws(SMPError) in try await client.send(FileHashRequest(name: name, type: "sha256"), timeout: .seconds(10)) }) {
        case .success(let a): answer = a
        case .failure(.device(let e)) where e.kind == .notSupported && mode == .auto: return
        case .failure(let e): throw e
        }
        guard answer.length == data.count, answer.output.bytesValue == SHA256.hash(data) else {
            throw DeviceFailure(.verifyFailed, "the device's SHA-256 of \(name) (\(answer.length) bytes) is not the file's (\(data.count) bytes)")
        }
    }

    // MARK: - settings

    private func settings(_ s: Step.Settings, _ context: StepContext) async throws -> [(String, TypedValue)] {
        let values = try s.writes.map { ($0.name, try context.bytes($0.value)) }
        let device = try smpDevice(context)
        return try await smp {
            let client = try await device.client(within: .seconds(10))
            for (name, value) in values {
                _ = try await client.send(SettingsWriteRequest(name: name, value: value), timeout: .seconds(5))
            }
            if s.save { _ = try await client.send(SettingsSaveRequest(), timeout: .seconds(10)) }
            return []
        }
    }

    // MARK: - mcumgr

    private func command(_ m: Step.McuMgrCommand, _ context: StepContext) async throws -> [(String, TypedValue)] {
        let device = try smpDevice(context)
        var hash: [UInt8]?
        if let t = m.image { hash = try Self.image(t, version: nil, context).hash }
        let text = try m.text.map { try context.render($0) } ?? "provision"
        // A single command is a plain irreversible step: journaled first, never sent again on a resume
        // (the device is left for review), since nothing here checks whether it took effect.
        if m.command.isIrreversible { try await context.recordIntent() }
        do {
            return try await smp {
                do {
                    let client = try await device.client(within: .seconds(10))
                    let timeout = Duration.seconds(10)
                    switch m.command {
                    case .echo:
                        let r = try await client.send(EchoRequest(text: text), timeout: timeout)
                        return m.capture.map { [($0, TypedValue.text(r.text))] } ?? []
                    case .params:
                        let r = try await client.send(ParametersRequest(), timeout: timeout)
                        return m.capture.map { [($0, TypedValue.text("\(r.bufferSize) x \(r.bufferCount)"))] } ?? []
                    case .imageState:
                        let r = try await client.send(ImageStateReadRequest(), timeout: timeout)
                        guard let running = r.images.first(where: \.active) ?? r.slot(0) else {
                            throw DeviceFailure(.protocolError, "the device reports no running image")
                        }
                        guard let id = m.capture else { return [] }
                        guard let v = SemanticVersion(running.version) else {
                            throw DeviceFailure(.protocolError, "the running image's version `\(running.version)` is not a version")
                        }
                        return [(id, .version(v))]
                    case .reset:
                        switch await smpResult({ () async throws(SMPError) in try await client.send(ResetRequest(), timeout: timeout) }) {
                        case .success, .failure(.disconnected):
                            // A device may reset before its answer leaves.
                            return []
                        case .failure(let e): throw e
                        }
                    case .imageTest:
                        _ = try await client.send(ImageStateWriteRequest(hash: hash, confirm: false), timeout: timeout)
                        return []
                    case .imageConfirm:
                        _ = try await client.send(ImageStateWriteRequest(hash: hash, confirm: true), timeout: timeout)
                        return []
                    case .imageErase:
                        _ = try await client.send(ImageEraseRequest(slot: m.slot), timeout: .seconds(30))
                        return []
                    }
                }
            }
        } catch let f as DeviceFailure where f.kind == .mcumgrError && m.command.isIrreversible {
            // The device answered with an error: the action was not executed.
            context.refused()
            throw f
        }
    }

    /// SMP errors as device failures.
    private func smp<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let e as SMPError {
            throw Self.transport(e)
        } catch let e as UploadFailure {
            switch e {
            case .stalled: throw DeviceFailure(.timeout, e.description)
            case .transport(let t): throw Self.transport(t)
            default: throw DeviceFailure(.mcumgrError, e.description)
            }
        }
    }
}
