import MCUboot

/// When a new image is confirmed (made permanent).
public enum ConfirmPolicy: String, Sendable, Hashable, CaseIterable {
    /// Marked for test, reset, confirmed once it runs and its hash checks out: a new image that does not
    /// boot is reverted by MCUboot.
    case afterBoot = "after_boot"
    /// Marked permanent before the reset: no revert.
    case now
    /// Marked for test and left unconfirmed: the next reset reverts it unless the application confirms it.
    case never
}

/// An irreversible DFU action, journaled (durably) before it is sent.
public enum DFUIntent: String, Sendable, Hashable, CaseIterable, Codable {
    /// Mark the uploaded image for test (or permanent, with `confirm: now`).
    case test
    /// Reset the device: MCUboot swaps to the marked image.
    case reset
    /// Confirm the running image.
    case confirm
}

/// What the DFU of one device must install: the image's identity (its SHA-256 TLV), its version and the
/// file's SHA-256 (the upload's `sha`).
public struct DFUImage: Sendable, Equatable {
    public var hash: [UInt8]
    public var fileSHA256: [UInt8]
    public var version: ImageVersion
    public var size: Int

    public init(hash: [UInt8], fileSHA256: [UInt8], version: ImageVersion, size: Int) {
        self.hash = hash
        self.fileSHA256 = fileSHA256
        self.version = version
        self.size = size
    }

    public init(_ image: MCUbootImage) {
        self.init(hash: image.hash, fileSHA256: image.fileSHA256, version: image.version, size: image.bytes.count)
    }
}

/// How a DFU ended well.
public enum DFUResult: Sendable, Equatable {
    /// The device already ran this image, confirmed: nothing was sent.
    case alreadyCurrent(version: String)
    /// The device runs the new image (confirmed unless the policy is `never`).
    case updated(from: String?, to: String, confirmed: Bool)
}

/// Why a DFU failed.
public enum DFUFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// After the reset the device runs its old image: the new one did not boot (MCUboot reverted it) or
    /// was not installed.
    case reverted(running: String, expected: String, detail: String)
    /// `upgrade_only` and the image is not newer than the running one (decided here, or by the device).
    case downgrade(running: String?, image: String, byDevice: Bool)
    /// The device marks the uploaded image not bootable: nothing was reset.
    case notBootable(version: String)
    /// Slot 1 holds another image that is pending: the device would boot that one.
    case slotBusy(String)
    case upload(UploadFailure)
    /// The device refused a command.
    case device(command: String, SMPDeviceError)
    /// The device did not come back within `reboot_timeout`.
    case rebootTimeout(Duration)
    /// The same action was needed again and again without the device's state changing.
    case noProgress(String)
    /// The device's image state does not say what a DFU needs (no running image).
    case unexpectedState(String)

    public var description: String {
        switch self {
        case .reverted(let running, let expected, let detail): return "the device runs \(running) after the reset, not \(expected): \(detail)"
        case .downgrade(let running, let image, let byDevice):
            let who = byDevice ? "the device refused" : "refused"
            return "\(who) \(image) as a downgrade (upgrade_only): it runs \(running ?? "a version it did not report")"
        case .notBootable(let v): return "the device marks the uploaded image \(v) not bootable; it was not reset"
        case .slotBusy(let why): return why
        case .upload(let f): return "upload failed: \(f)"
        case .device(let command, let e): return "\(command): \(e)"
        case .rebootTimeout(let d): return "the device did not come back within \(d) after the reset"
        case .noProgress(let why): return why
        case .unexpectedState(let why): return "unexpected image state: \(why)"
        }
    }

    /// The report's error kind.
    public var kind: String {
        switch self {
        case .reverted: return "dfu_reverted"
        case .downgrade: return "dfu_downgrade"
        case .notBootable: return "dfu_not_bootable"
        case .rebootTimeout: return "timeout"
        case .upload(.stalled): return "timeout"
        default: return "dfu_failed"
        }
    }
}

/// The decisions of a firmware update, as a value: what to do next is decided from the device's image
/// state (read first, and again after every step) and from the irreversible actions already journaled,
/// never from where a run happened to stop. So a resumed run never uploads blindly: killed after the
/// test mark and before the reset, it finds slot 1 pending with its hash and resets; killed after the
/// reset, it finds the new image running (and confirms it) or the old one (and reports the revert).
///
/// Order: read state → upload (when slot 1 does not hold the image) → read state (slot 1 must hold it,
/// bootable) → intent, mark for test → intent, reset → wait for the device → read state (the image must
/// run) → intent, confirm. Each action is bounded (two of each per run).
public struct DFUMachine: Sendable {
    public struct Configuration: Sendable, Equatable {
        public var image: DFUImage
        public var confirm: ConfirmPolicy
        public var upgradeOnly: Bool
        /// The MCUboot image number (0 for a single-image device).
        public var imageNumber: Int
        public var rebootTimeout: Duration
        public init(image: DFUImage, confirm: ConfirmPolicy = .afterBoot, upgradeOnly: Bool = true, imageNumber: Int = 0,
                    rebootTimeout: Duration = .seconds(60)) {
            self.image = image
            self.confirm = confirm
            self.upgradeOnly = upgradeOnly
            self.imageNumber = imageNumber
            self.rebootTimeout = rebootTimeout
        }
    }

    public enum Event: Sendable, Equatable {
        case begin
        /// The image state (a read, or the answer to a test or confirm).
        case state(ImageStateResponse)
        case uploaded
        case uploadFailed(UploadFailure)
        /// The intent is durable: the action may be sent.
        case intentRecorded(DFUIntent)
        /// The device refused a test, reset or confirm.
        case refused(DFUIntent, SMPDeviceError)
        /// The reset was sent (its answer, or the link dropping right after it).
        case resetSent
        /// The device is back (a new link).
        case rebooted
        case rebootTimedOut
    }

    public enum Action: Sendable, Equatable {
        case readState
        /// Upload the image (the device continues an upload of the same `sha` where it stopped).
        case upload
        /// Journal the intent durably, then answer `intentRecorded`.
        case recordIntent(DFUIntent)
        case markForTest(hash: [UInt8], permanent: Bool)
        case reset
        /// Wait (within the reboot timeout) for the link to drop and the device to come back.
        case awaitReboot
        case confirm(hash: [UInt8])
        case finish(DFUResult)
        case fail(DFUFailure)
    }

    public let configuration: Configuration
    /// Irreversible actions journaled for this device: by earlier runs (a resume), and by this one.
    public private(set) var intents: Set<DFUIntent>
    /// The running version when first read (the report's "before").
    public private(set) var versionBefore: String?
    public private(set) var uploads = 0
    private var counts: [DFUIntent: Int] = [:]
    private var uploadFailure: UploadFailure?
    private var done = false

    public init(_ configuration: Configuration, journaled intents: Set<DFUIntent> = []) {
        self.configuration = configuration
        self.intents = intents
    }

    /// True once `finish` or `fail` was returned.
    public var isDone: Bool { done }

    public mutating func handle(_ event: Event) -> [Action] {
        guard !done else { return [] }
        switch event {
        case .begin, .uploaded, .rebooted:
            return [.readState]
        case .state(let state):
            return decide(state)
        case .uploadFailed(let failure):
            if case .device(let e) = failure, e.kind == .downgrade {
                return end(.fail(.downgrade(running: versionBefore, image: configuration.image.version.description, byDevice: true)))
            }
            // The device may hold the whole image all the same (a lost last answer): the state decides.
            uploadFailure = failure
            return [.readState]
        case .intentRecorded(let intent):
            intents.insert(intent)
            counts[intent, default: 0] += 1
            switch intent {
            case .test: return [.markForTest(hash: configuration.image.hash, permanent: configuration.confirm == .now)]
            case .reset: return [.reset]
            case .confirm: return [.confirm(hash: configuration.image.hash)]
            }
        case .refused(let intent, let error):
            let command = intent == .test ? "mark for test" : intent.rawValue
            return end(.fail(.device(command: command, error)))
        case .resetSent:
            return [.awaitReboot]
        case .rebootTimedOut:
            return end(.fail(.rebootTimeout(configuration.rebootTimeout)))
        }
    }

    private mutating func decide(_ state: ImageStateResponse) -> [Action] {
        let ours = configuration.image.hash
        let target = configuration.image.version.description
        let slots = state.images.filter { ($0.image ?? 0) == configuration.imageNumber }
        guard let running = slots.first(where: \.active) ?? slots.first(where: { $0.slot == 0 }) else {
            return end(.fail(.unexpectedState("the device reports no running image \(configuration.imageNumber)")))
        }
        if versionBefore == nil { versionBefore = running.version }
        let secondary = slots.first { $0.slot != running.slot }

        if running.hash == ours {
            let wasReset = intents.contains(.reset)
            if running.confirmed || running.permanent {
                return end(.finish(wasReset || intents.contains(.test) ? .updated(from: versionBefore(wasReset), to: target, confirmed: true)
                                                                       : .alreadyCurrent(version: running.version)))
            }
            switch configuration.confirm {
            case .never:
                return end(.finish(.updated(from: versionBefore(wasReset), to: target, confirmed: false)))
            case .afterBoot, .now:
                return again(.confirm, "the device did not confirm \(target) after two confirms")
            }
        }

        if intents.contains(.reset), secondary?.hash != ours || secondary?.pending != true {
            // The reset went out and the device runs something else: MCUboot reverted the image, or
            // never installed it.
            let detail = secondary?.hash == ours
                ? "MCUboot reverted to it (the new image did not boot, or was not confirmed before a reset)"
                : "the new image is no longer in slot 1 (MCUboot did not install it)"
            return end(.fail(.reverted(running: running.version, expected: target, detail: detail)))
        }

        if let s = secondary, s.hash == ours {
            guard s.bootable else { return end(.fail(.notBootable(version: s.version))) }
            if s.pending {
                return again(.reset, "the device kept \(target) pending after two resets")
            }
            return again(.test, "the device did not mark \(target) for test after two requests")
        }

        if let s = secondary, s.pending {
            return end(.fail(.slotBusy("slot 1 holds another image (\(s.version)) marked for the next boot; it must be erased or booted first")))
        }
        if let failure = uploadFailure {
            return end(.fail(.upload(failure)))
        }
        if configuration.upgradeOnly, let current = ImageVersion(running.version),
           !configuration.image.version.isNewerIgnoringBuild(than: current) {
            return end(.fail(.downgrade(running: running.version, image: target, byDevice: false)))
        }
        guard uploads < 2 else {
            return end(.fail(.noProgress("slot 1 does not hold \(target) after two uploads")))
        }
        uploads += 1
        return [.upload]
    }

    /// The "before" version for an update: unknown when the image was already running at the first read
    /// of a resumed run (the reset happened in an earlier run).
    private func versionBefore(_ wasReset: Bool) -> String? {
        versionBefore == configuration.image.version.description && wasReset ? nil : versionBefore
    }

    /// Journals `intent` (then sends it), at most twice per run.
    private mutating func again(_ intent: DFUIntent, _ stuck: String) -> [Action] {
        guard counts[intent, default: 0] < 2 else { return end(.fail(.noProgress(stuck))) }
        return [.recordIntent(intent)]
    }

    private mutating func end(_ action: Action) -> [Action] {
        done = true
        return [action]
    }
}
