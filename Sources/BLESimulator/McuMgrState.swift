import Digests
import BLE
import MCUboot

/// What a simulated MCUmgr/MCUboot device holds: its two image slots, what the bootloader will do at
/// the next boot, the upload in progress (RAM: lost at a reset), its settings (RAM, and what was saved)
/// and files. A value: the fold of `SMPDeviceEvent`s, which is also how a state file replays it, so a
/// device meets a resumed run as the crashed run left it — with its upload in RAM, as a real device that
/// kept running would.
struct McuMgrState: Sendable, Equatable {
    /// An image in a slot: its identity (the SHA-256 TLV) and version.
    struct SlotImage: Sendable, Equatable {
        var hash: [UInt8]
        var version: String
    }

    enum Pending: String, Sendable, Equatable {
        case test, permanent
    }

    /// An upload in RAM.
    struct Upload: Sendable, Equatable {
        var sha: [UInt8]?
        var length: Int
        var image: Int
        var bytes: [UInt8]
    }

    var primary: SlotImage
    var primaryConfirmed = true
    var secondary: SlotImage?
    var pending: Pending?
    var upload: Upload?
    /// The `sha` of the last upload that completed (a first request with it is answered `off: len`).
    var completedSHA: [UInt8]?
    /// Whether the last completed upload's data had the SHA-256 its first request named (nil: none named).
    var lastUploadMatched: Bool?
    var settings: [String: [UInt8]] = [:]
    var savedSettings: [String: [UInt8]] = [:]
    var files: [String: [UInt8]] = [:]

    // Counters for the dump and the tests.
    var uploadsStarted = 0
    var uploadsCompleted = 0
    var uploadBytes = 0
    var tests = 0
    var confirms = 0
    var resets = 0
    var swaps = 0
    var reverts = 0
    var swapFailures = 0
    /// Versions the device ran, boot after boot (the first is the factory image).
    var bootedVersions: [String] = []

    init(primary: SlotImage) {
        self.primary = primary
        bootedVersions = [primary.version]
    }

    /// How the bootloader behaves at a boot (the device's faults).
    struct BootFaults: Sendable, Equatable {
        /// Every swap fails: slot 1 is erased, the old image boots.
        var failedSwap = false
        /// A test image crashes on its first boot: MCUboot reverts.
        var crashOnTest = false
    }

    mutating func apply(_ event: SMPDeviceEvent, faults: BootFaults) {
        switch event {
        case .uploadStarted(let sha, let length, let image):
            upload = Upload(sha: sha, length: length, image: image, bytes: [])
            upload?.bytes.reserveCapacity(length)
            secondary = nil
            completedSHA = nil
            uploadsStarted += 1
        case .uploadChunk(let offset, let data):
            guard var u = upload, offset == u.bytes.count, offset + data.count <= u.length else { return }
            u.bytes += data
            uploadBytes += data.count
            if u.bytes.count == u.length {
                upload = nil
                uploadsCompleted += 1
                completedSHA = u.sha
                lastUploadMatched = u.sha.map { SHA256.hash(u.bytes) == $0 }
                // MCUboot's view of the slot: a whole image whose hash checks out, else nothing.
                if let image = try? MCUbootImage(bytes: u.bytes) {
                    secondary = SlotImage(hash: image.hash, version: image.version.description)
                } else {
                    secondary = nil
                }
            } else {
                upload = u
            }
        case .erase:
            secondary = nil
            upload = nil
            completedSHA = nil
        case .markTest(let permanent):
            guard secondary != nil else { return }
            pending = permanent ? .permanent : .test
            tests += 1
        case .confirm:
            primaryConfirmed = true
            confirms += 1
        case .reset:
            resets += 1
            upload = nil
            settings = savedSettings
            boot(faults)
        case .settingWrite(let name, let value):
            settings[name] = value
        case .settingDelete(let name):
            settings[name] = nil
            savedSettings[name] = nil
        case .settingsSave:
            savedSettings = settings
        case .settingsLoad:
            settings.merge(savedSettings) { _, saved in saved }
        case .fileWrite(let name, let offset, let data):
            if offset == 0 {
                files[name] = data
            } else if var f = files[name], f.count == offset {
                f += data
                files[name] = f
            }
        }
    }

    /// MCUboot in swap mode at boot.
    private mutating func boot(_ faults: BootFaults) {
        if let p = pending, let new = secondary {
            pending = nil
            if faults.failedSwap {
                swapFailures += 1
                secondary = nil
            } else {
                let old = primary
                primary = new
                secondary = old
                swaps += 1
                primaryConfirmed = p == .permanent
                if p == .test && faults.crashOnTest {
                    // The test image crashes; the watchdog resets and MCUboot swaps back.
                    bootedVersions.append(primary.version)
                    revert()
                }
            }
        } else if !primaryConfirmed, secondary != nil {
            revert()
        }
        pending = nil
        bootedVersions.append(primary.version)
    }

    private mutating func revert() {
        guard let old = secondary else { return }
        secondary = primary
        primary = old
        primaryConfirmed = true
        reverts += 1
    }
}

/// A change to a simulated MCUmgr device's state (one line of the state file each).
enum SMPDeviceEvent: Sendable, Equatable {
    case uploadStarted(sha: [UInt8]?, length: Int, image: Int)
    case uploadChunk(offset: Int, data: [UInt8])
    case erase
    case markTest(permanent: Bool)
    case confirm
    case reset
    case settingWrite(name: String, value: [UInt8])
    case settingDelete(name: String)
    case settingsSave
    case settingsLoad
    case fileWrite(name: String, offset: Int, data: [UInt8])
}
