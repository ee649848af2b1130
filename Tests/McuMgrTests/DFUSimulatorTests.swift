import Digests
import YAML
import BLE
import MCUboot
import Synchronization
import Testing

@testable import BLESimulator
@testable import McuMgr

/// Whole DFUs against the simulator's MCUmgr/MCUboot device over a real `Session`: what the device ends
/// with (running image, confirmed, uploads, resets), and what each fault leads to.
@Suite(.timeLimit(.minutes(2)))
struct DFUSimulatorTests {
    static let modelText = """
        model: zephyr-dfu
        mtu: 247
        advertising: { services: [8D53DC1D-1DB7-4CD3-868B-8A527460AA84] }
        services:
          - uuid: 180A
            characteristics:
              - { uuid: 2A26, properties: [read], value: "1.0.0" }
        mcumgr:
          buffers: { count: 4, size: 2475 }
          flash: { write: 2MB/s, erase: 5ms }
          boot: 20ms
          reset_delay: 5ms
          running: { version: "1.0.0" }
        """

    static func image(_ version: String = "1.1.0", size: Int = 40_000) throws -> MCUbootImage {
        var g = SimulatorRandom(seed: 7, device: version, stream: 1)
        let body = (0..<size).map { _ in UInt8(truncatingIfNeeded: g.next()) }
        return try MCUbootImage.build(body: body, version: try #require(ImageVersion(version)), headerSize: 32)
    }

    /// A fleet of one device (`faults` as in an inventory's `simulator: { faults: }`).
    static func fleet(faults: String? = nil, edit: (inout DeviceModel) -> Void = { _ in }) throws -> (SimulatedCentral, VirtualDevice) {
        var model = try DeviceModel.parse(Array(modelText.utf8), file: "zephyr-dfu.yaml")
        edit(&model)
        var overrides: YAMLNode?
        if let faults {
            overrides = try YAMLParser().parse(Array("faults: { \(faults) }".utf8))
        }
        let central = try SimulatedCentral(model: model, devices: [SimulatedDeviceSpec(id: "DFU-1", overrides: overrides)],
                                           options: SimulatorOptions(seed: 5, latencyScale: 1))
        return (central, try #require(central.devices.first))
    }

    static func session(_ central: SimulatedCentral, _ device: VirtualDevice) -> Session {
        Session(central: central, peer: device.address,
                options: SessionOptions(connect: ConnectOptions(timeout: .seconds(5), preferredMTU: 247),
                                        reconnect: .limited(maxAttempts: 3, delays: [.milliseconds(20)])))
    }

    /// Journaled intents, as the engine would hold them.
    final class Journal: Sendable {
        let intents = Mutex<[DFUIntent]>([])
        func record(_ i: DFUIntent) { intents.withLock { $0.append(i) } }
        var all: [DFUIntent] { intents.withLock { $0 } }
    }

    static func dfu(_ central: SimulatedCentral, _ device: VirtualDevice, _ image: MCUbootImage, policy: ConfirmPolicy = .afterBoot,
                    journaled: Set<DFUIntent> = [], journal: Journal = Journal(), options: DFUExecutor.Options = .init()) async throws -> DFUReport {
        let session = Self.session(central, device)
        try await session.connect()
        defer { Task { await session.disconnect() } }
        let smp = SessionSMPDevice(session: session, requestTimeout: .seconds(2), log: { print("SMP:", $0) })
        let configuration = DFUMachine.Configuration(image: DFUImage(image), confirm: policy, upgradeOnly: true, rebootTimeout: .seconds(10))
        return try await DFUExecutor.run(configuration, image: image.bytes, journaled: journaled, device: smp, options: options,
                                         recordIntent: { journal.record($0) })
    }

    @Test func aDeviceIsUpdatedAndConfirmedAndItsSlotsSaySo() async throws {
        let (central, device) = try Self.fleet()
        let image = try Self.image()
        let journal = Journal()
        let report = try await Self.dfu(central, device, image, journal: journal)
        #expect(report.result == .updated(from: "1.0.0", to: "1.1.0", confirmed: true))
        #expect(report.versionBefore == "1.0.0" && report.versionAfter == "1.1.0")
        #expect(journal.all == [.test, .reset, .confirm])
        let state = try #require(device.smpState)
        #expect(state.primary.hash == image.hash && state.primaryConfirmed)
        #expect(state.uploadsCompleted == 1 && state.resets == 1 && state.swaps == 1 && state.reverts == 0)
        #expect(state.bootedVersions == ["1.0.0", "1.1.0"])
        let upload = try #require(report.upload)
        // Four buffers shared by requests and responses hold three requests: nothing is dropped.
        #expect(upload.bytes == image.bytes.count && upload.sent == image.bytes.count)
        #expect(upload.window == 3 && upload.drops == 0 && device.snapshot.faults.isEmpty)
        #expect(upload.match == true)
        #expect(report.phases[.upload] != nil && report.phases[.reboot] != nil)
    }

    @Test func aSecondRunOnAnUpdatedDeviceUploadsNothing() async throws {
        let (central, device) = try Self.fleet()
        let image = try Self.image()
        _ = try await Self.dfu(central, device, image)
        let journal = Journal()
        let again = try await Self.dfu(central, device, image, journal: journal)
        #expect(again.result == .alreadyCurrent(version: "1.1.0"))
        #expect(again.upload == nil && journal.all.isEmpty)
        #expect(device.smpState?.uploadsStarted == 1 && device.smpState?.resets == 1)
    }

    @Test func aDropMidUploadResumesFromTheDevicesOffset() async throws {
        let (central, device) = try Self.fleet(faults: "drop_mid_upload: 0.5")
        // The issue's 256 KiB image: what was in flight when the link dropped is small beside it.
        let image = try Self.image(size: 256 * 1024)
        let report = try await Self.dfu(central, device, image)
        #expect(report.result == .updated(from: "1.0.0", to: "1.1.0", confirmed: true))
        let upload = try #require(report.upload)
        #expect(upload.linkLosses == 1)
        #expect(Double(upload.sent) <= 1.1 * Double(image.bytes.count))
        #expect(device.snapshot.faults["drop_mid_upload"] == 1)
        #expect(device.smpState?.uploadsStarted == 1)
    }

    @Test func aRevertedImageFailsAsRevertedAndTheDeviceRunsTheOldOne() async throws {
        let (central, device) = try Self.fleet(faults: "revert: true")
        let image = try Self.image()
        do {
            _ = try await Self.dfu(central, device, image)
            Issue.record("a reverted DFU succeeded")
        } catch let e as DFUError {
            #expect(e.failure?.kind == "dfu_reverted")
            #expect(e.description.hasPrefix("the device runs 1.0.0 after the reset, not 1.1.0"))
        }
        let state = try #require(device.smpState)
        #expect(state.primary.version == "1.0.0" && state.reverts == 1 && state.confirms == 0)
    }

    @Test func aFailedSwapFailsAsRevertedWithoutConfirmingAnything() async throws {
        let (central, device) = try Self.fleet(faults: "failed_swap: true")
        do {
            _ = try await Self.dfu(central, device, try Self.image())
            Issue.record("a failed swap succeeded")
        } catch let e as DFUError {
            #expect(e.failure?.kind == "dfu_reverted")
        }
        #expect(device.smpState?.swapFailures == 1 && device.smpState?.confirms == 0)
    }

    @Test func anImageTheDeviceCannotBootFailsBeforeAnyReset() async throws {
        let (central, device) = try Self.fleet(faults: "not_bootable: true")
        let journal = Journal()
        do {
            _ = try await Self.dfu(central, device, try Self.image(), journal: journal)
            Issue.record("a not-bootable image was installed")
        } catch let e as DFUError {
            #expect(e.failure?.kind == "dfu_not_bootable")
        }
        #expect(journal.all.isEmpty && device.smpState?.resets == 0)
    }

    @Test func aDowngradeIsRejected() async throws {
        let (central, device) = try Self.fleet()
        do {
            _ = try await Self.dfu(central, device, try Self.image("0.9.0"))
            Issue.record("a downgrade was installed")
        } catch let e as DFUError {
            #expect(e.failure?.kind == "dfu_downgrade")
        }
        #expect(device.smpState?.uploadsStarted == 0)
    }

    @Test func aDeviceWithFewerBuffersThanItReportsIsUpdatedWithANarrowerWindow() async throws {
        let (central, device) = try Self.fleet(faults: "buffer_overflow: 2")
        let image = try Self.image(size: 120_000)
        let report = try await Self.dfu(central, device, image)
        let upload = try #require(report.upload)
        #expect(upload.drops >= 1 && upload.window < 4)
        #expect(device.smpState?.primary.hash == image.hash)
        #expect((device.snapshot.faults["smp_buffer_overflow"] ?? 0) + (device.snapshot.faults["smp_no_response_buffer"] ?? 0) >= 1)
    }

    @Test func lostNotificationsAreRecovered() async throws {
        let (central, device) = try Self.fleet(faults: "lose_responses: 0.05")
        let image = try Self.image(size: 80_000)
        let report = try await Self.dfu(central, device, image,
                                        options: DFUExecutor.Options(requestTimeout: .milliseconds(500),
                                                                     upload: Uploader.Options(machine: .init(requestTimeout: .milliseconds(500), maxStalls: 20))))
        #expect(report.result == .updated(from: "1.0.0", to: "1.1.0", confirmed: true))
        #expect(device.smpState?.primary.hash == image.hash)
    }

    @Test func aDeviceWithoutParametersGetsOneWriteSizedRequestAtATime() async throws {
        let (central, device) = try Self.fleet { $0.mcumgr?.parameters = false; $0.mcumgr?.reassembly = false }
        let image = try Self.image(size: 8_000)
        let report = try await Self.dfu(central, device, image)
        #expect(report.result == .updated(from: "1.0.0", to: "1.1.0", confirmed: true))
        #expect(report.upload?.window == 1)
        #expect(device.snapshot.faults["smp_request_too_long"] == nil)
    }

    @Test func resumedAfterTheTestMarkItResetsWithoutUploadingAgain() async throws {
        let (central, device) = try Self.fleet()
        let image = try Self.image()
        // A first run that uploaded and marked the image, then "died": the device keeps slot 1 pending.
        let session = Self.session(central, device)
        try await session.connect()
        let smp = SessionSMPDevice(session: session)
        _ = try await Uploader.run(.image(number: 0, sha: image.fileSHA256, upgrade: true), data: image.bytes, device: smp)
        let client = try await smp.client(within: .seconds(5))
        _ = try await client.send(ImageStateWriteRequest(hash: image.hash, confirm: false), timeout: .seconds(2))
        await session.disconnect()
        let journal = Journal()
        let report = try await Self.dfu(central, device, image, journaled: [.test], journal: journal)
        #expect(report.result == .updated(from: "1.0.0", to: "1.1.0", confirmed: true))
        #expect(report.upload == nil && journal.all == [.reset, .confirm])
        #expect(device.smpState?.uploadsStarted == 1 && device.smpState?.tests == 1)
    }
}
