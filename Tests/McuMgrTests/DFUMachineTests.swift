import Digests
import MCUboot
import Testing

@testable import McuMgr

/// The DFU's decisions as golden sequences: from image states (and the intents journaled) to actions,
/// including every point a crash can leave a device at.
@Suite struct DFUMachineTests {
    static let new = DFUImage(hash: Array(repeating: 0xAA, count: 32), fileSHA256: Array(repeating: 0xF1, count: 32),
                              version: ImageVersion(major: 1, minor: 1, revision: 0), size: 4096)
    static let oldHash = [UInt8](repeating: 0x01, count: 32)
    static let otherHash = [UInt8](repeating: 0x0B, count: 32)

    /// Slot 0 running `running` (confirmed unless said), slot 1 holding `secondary`.
    static func state(running: [UInt8] = oldHash, version: String = "1.0.0", confirmed: Bool = true,
                      secondary: [UInt8]? = nil, secondaryVersion: String = "1.1.0", pending: Bool = false, permanent: Bool = false,
                      bootable: Bool = true) -> ImageStateResponse {
        var images = [ImageSlotState(slot: 0, version: version, hash: running, bootable: true, confirmed: confirmed, active: true)]
        if let secondary {
            images.append(ImageSlotState(slot: 1, version: secondaryVersion, hash: secondary, bootable: bootable, pending: pending, permanent: permanent))
        }
        return ImageStateResponse(images: images)
    }

    private func machine(_ policy: ConfirmPolicy = .afterBoot, upgradeOnly: Bool = true, journaled: Set<DFUIntent> = []) -> DFUMachine {
        DFUMachine(DFUMachine.Configuration(image: Self.new, confirm: policy, upgradeOnly: upgradeOnly), journaled: journaled)
    }

    @Test func aWholeUpdateGoesUploadTestResetConfirm() {
        var m = machine()
        #expect(m.handle(.begin) == [.readState])
        #expect(m.handle(.state(Self.state())) == [.upload])
        #expect(m.handle(.uploaded) == [.readState])
        #expect(m.handle(.state(Self.state(secondary: Self.new.hash))) == [.recordIntent(.test)])
        #expect(m.handle(.intentRecorded(.test)) == [.markForTest(hash: Self.new.hash, permanent: false)])
        #expect(m.handle(.state(Self.state(secondary: Self.new.hash, pending: true))) == [.recordIntent(.reset)])
        #expect(m.handle(.intentRecorded(.reset)) == [.reset])
        #expect(m.handle(.resetSent) == [.awaitReboot])
        #expect(m.handle(.rebooted) == [.readState])
        #expect(m.handle(.state(Self.state(running: Self.new.hash, version: "1.1.0", confirmed: false, secondary: Self.oldHash, secondaryVersion: "1.0.0")))
                == [.recordIntent(.confirm)])
        #expect(m.handle(.intentRecorded(.confirm)) == [.confirm(hash: Self.new.hash)])
        #expect(m.handle(.state(Self.state(running: Self.new.hash, version: "1.1.0", secondary: Self.oldHash, secondaryVersion: "1.0.0")))
                == [.finish(.updated(from: "1.0.0", to: "1.1.0", confirmed: true))])
        #expect(m.intents == [.test, .reset, .confirm] && m.isDone)
        #expect(m.handle(.begin) == [])
    }

    @Test func aDeviceRunningTheImageConfirmedIsAlreadyCurrent() {
        var m = machine()
        _ = m.handle(.begin)
        #expect(m.handle(.state(Self.state(running: Self.new.hash, version: "1.1.0"))) == [.finish(.alreadyCurrent(version: "1.1.0"))])
    }

    @Test func confirmNowMarksPermanentAndNeverLeavesItUnconfirmed() {
        var m = machine(.now)
        _ = m.handle(.begin)
        _ = m.handle(.state(Self.state(secondary: Self.new.hash)))
        #expect(m.handle(.intentRecorded(.test)) == [.markForTest(hash: Self.new.hash, permanent: true)])
        _ = m.handle(.state(Self.state(secondary: Self.new.hash, pending: true, permanent: true)))
        _ = m.handle(.intentRecorded(.reset))
        _ = m.handle(.resetSent)
        _ = m.handle(.rebooted)
        #expect(m.handle(.state(Self.state(running: Self.new.hash, version: "1.1.0", secondary: Self.oldHash, secondaryVersion: "1.0.0")))
                == [.finish(.updated(from: "1.0.0", to: "1.1.0", confirmed: true))])
    }

    @Test func confirmNeverLeavesTheNewImageRunningUnconfirmed() {
        var m = machine(.never, journaled: [.test, .reset])
        _ = m.handle(.begin)
        #expect(m.handle(.state(Self.state(running: Self.new.hash, version: "1.1.0", confirmed: false, secondary: Self.oldHash, secondaryVersion: "1.0.0")))
                == [.finish(.updated(from: nil, to: "1.1.0", confirmed: false))])
    }

    // MARK: - Resumed after a crash: the journal's intents and the device's state decide

    @Test func killedAfterTheTestMarkAndBeforeTheResetItResets() {
        var m = machine(journaled: [.test])
        _ = m.handle(.begin)
        #expect(m.handle(.state(Self.state(secondary: Self.new.hash, pending: true))) == [.recordIntent(.reset)])
    }

    @Test func killedAfterTheTestIntentButBeforeTheMarkItMarksAgain() {
        var m = machine(journaled: [.test])
        _ = m.handle(.begin)
        #expect(m.handle(.state(Self.state(secondary: Self.new.hash))) == [.recordIntent(.test)])
    }

    @Test func killedAfterTheResetIntentButBeforeTheResetItResets() {
        var m = machine(journaled: [.test, .reset])
        _ = m.handle(.begin)
        #expect(m.handle(.state(Self.state(secondary: Self.new.hash, pending: true))) == [.recordIntent(.reset)])
    }

    @Test func killedAfterTheResetItConfirmsTheImageItFindsRunning() {
        var m = machine(journaled: [.test, .reset])
        _ = m.handle(.begin)
        #expect(m.handle(.state(Self.state(running: Self.new.hash, version: "1.1.0", confirmed: false, secondary: Self.oldHash, secondaryVersion: "1.0.0")))
                == [.recordIntent(.confirm)])
    }

    @Test func killedAfterTheConfirmItIsDone() {
        var m = machine(journaled: [.test, .reset, .confirm])
        _ = m.handle(.begin)
        #expect(m.handle(.state(Self.state(running: Self.new.hash, version: "1.1.0", secondary: Self.oldHash, secondaryVersion: "1.0.0")))
                == [.finish(.updated(from: nil, to: "1.1.0", confirmed: true))])
    }

    @Test func killedMidUploadItUploadsAgainAndTheDeviceContinues() {
        // Slot 1 does not hold the image yet: upload (the device answers the same `sha` with its offset).
        var m = machine()
        _ = m.handle(.begin)
        #expect(m.handle(.state(Self.state())) == [.upload])
    }

    // MARK: - Failures

    @Test func aRevertedImageFailsNamingTheVersions() {
        var m = machine(journaled: [.test, .reset])
        _ = m.handle(.begin)
        let reverted = Self.state(secondary: Self.new.hash)
        guard case .fail(let f)? = m.handle(.state(reverted)).first else {
            Issue.record("no failure")
            return
        }
        #expect(f.kind == "dfu_reverted")
        #expect(f.description == "the device runs 1.0.0 after the reset, not 1.1.0: MCUboot reverted to it (the new image did not boot, or was not confirmed before a reset)")
        var swapFailed = machine(journaled: [.test, .reset])
        _ = swapFailed.handle(.begin)
        guard case .fail(.reverted(_, _, let detail))? = swapFailed.handle(.state(Self.state())).first else {
            Issue.record("no failure")
            return
        }
        #expect(detail == "the new image is no longer in slot 1 (MCUboot did not install it)")
    }

    @Test func aDowngradeIsRefusedBeforeAnythingIsSentAndWhenTheDeviceRefusesIt() {
        var m = machine()
        _ = m.handle(.begin)
        #expect(m.handle(.state(Self.state(version: "1.2.0"))) == [.fail(.downgrade(running: "1.2.0", image: "1.1.0", byDevice: false))])
        var same = machine()
        _ = same.handle(.begin)
        #expect(same.handle(.state(Self.state(version: "1.1.0.5"))).first == .fail(.downgrade(running: "1.1.0.5", image: "1.1.0", byDevice: false)))
        var allowed = machine(upgradeOnly: false)
        _ = allowed.handle(.begin)
        #expect(allowed.handle(.state(Self.state(version: "1.2.0"))) == [.upload])
        var byDevice = machine()
        _ = byDevice.handle(.begin)
        _ = byDevice.handle(.state(Self.state(version: "weird-1")))
        #expect(byDevice.handle(.uploadFailed(.device(SMPDeviceError(.v2(group: .image, rc: 27)))))
                == [.fail(.downgrade(running: "weird-1", image: "1.1.0", byDevice: true))])
    }

    @Test func anImageTheDeviceMarksNotBootableFailsBeforeAnyReset() {
        var m = machine()
        _ = m.handle(.begin)
        _ = m.handle(.state(Self.state()))
        _ = m.handle(.uploaded)
        #expect(m.handle(.state(Self.state(secondary: Self.new.hash, bootable: false))) == [.fail(.notBootable(version: "1.1.0"))])
        #expect(m.intents.isEmpty)
    }

    @Test func anotherPendingImageInSlot1FailsTheDevice() {
        var m = machine()
        _ = m.handle(.begin)
        guard case .fail(.slotBusy)? = m.handle(.state(Self.state(secondary: Self.otherHash, pending: true))).first else {
            Issue.record("no failure")
            return
        }
    }

    @Test func aFailedUploadIsCheckedAgainstTheStateBeforeFailing() {
        var m = machine()
        _ = m.handle(.begin)
        _ = m.handle(.state(Self.state()))
        #expect(m.handle(.uploadFailed(.stalled(acknowledged: 4000, attempts: 6))) == [.readState])
        // The last answer was lost but the device holds the whole image: go on.
        #expect(m.handle(.state(Self.state(secondary: Self.new.hash))) == [.recordIntent(.test)])
        var n = machine()
        _ = n.handle(.begin)
        _ = n.handle(.state(Self.state()))
        _ = n.handle(.uploadFailed(.stalled(acknowledged: 4000, attempts: 6)))
        #expect(n.handle(.state(Self.state())) == [.fail(.upload(.stalled(acknowledged: 4000, attempts: 6)))])
    }

    @Test func everyActionIsBoundedToTwoPerRun() {
        var m = machine()
        _ = m.handle(.begin)
        _ = m.handle(.state(Self.state(secondary: Self.new.hash, pending: true)))
        _ = m.handle(.intentRecorded(.reset))
        _ = m.handle(.resetSent)
        _ = m.handle(.rebooted)
        // The device still shows it pending (the reset did not happen): once more, then give up.
        #expect(m.handle(.state(Self.state(secondary: Self.new.hash, pending: true))) == [.recordIntent(.reset)])
        _ = m.handle(.intentRecorded(.reset))
        _ = m.handle(.resetSent)
        _ = m.handle(.rebooted)
        #expect(m.handle(.state(Self.state(secondary: Self.new.hash, pending: true))) == [.fail(.noProgress("the device kept 1.1.0 pending after two resets"))])
        var u = machine()
        _ = u.handle(.begin)
        _ = u.handle(.state(Self.state()))
        _ = u.handle(.uploaded)
        #expect(u.handle(.state(Self.state())) == [.upload])
        _ = u.handle(.uploaded)
        #expect(u.handle(.state(Self.state())) == [.fail(.noProgress("slot 1 does not hold 1.1.0 after two uploads"))])
    }

    @Test func refusalsAndTimeoutsEndTheDevice() {
        var m = machine()
        _ = m.handle(.begin)
        _ = m.handle(.state(Self.state(secondary: Self.new.hash)))
        _ = m.handle(.intentRecorded(.test))
        #expect(m.handle(.refused(.test, SMPDeviceError(.v2(group: .image, rc: 1)))) == [.fail(.device(command: "mark for test", SMPDeviceError(.v2(group: .image, rc: 1))))])
        var r = machine()
        _ = r.handle(.begin)
        _ = r.handle(.state(Self.state(secondary: Self.new.hash, pending: true)))
        _ = r.handle(.intentRecorded(.reset))
        _ = r.handle(.resetSent)
        #expect(r.handle(.rebootTimedOut) == [.fail(.rebootTimeout(.seconds(60)))])
        var e = machine()
        _ = e.handle(.begin)
        #expect(e.handle(.state(ImageStateResponse(images: []))) == [.fail(.unexpectedState("the device reports no running image 0"))])
    }
}
