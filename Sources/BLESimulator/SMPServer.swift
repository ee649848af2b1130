import Digests
import BLE
import CBOR
import MCUboot
import McuMgr

/// The SMP server of a simulated device: one request frame in, its response frame and the state events
/// it causes out — Zephyr's MCUmgr as its group documents describe it (OS, image, settings, file), with
/// MCUboot's slots behind the image group. A value over the device's `McuMgrState`; `SMPDeviceLink`
/// runs it with buffers and flash timing.
struct SMPServer: Sendable {
    let config: McuMgrConfig
    let notBootable: Bool

    /// What one request does.
    struct Outcome: Sendable, Equatable {
        var response: SMPFrame?
        var events: [SMPDeviceEvent] = []
        /// Flash work the request takes (erase, writes).
        var flashTime: Duration = .zero
        /// The device resets after answering.
        var reset = false
    }

    /// An error of a group (sent as `err` in version 2, translated to `rc` in version 1).
    private struct GroupError: Error {
        var group: SMPGroup
        var rc: UInt64
        var v1: McuMgrReturnCode
        var extra: [CBOR.Pair] = []
    }

    private struct SMPLevelError: Error {
        var rc: McuMgrReturnCode
    }

    func handle(_ frame: SMPFrame, state: McuMgrState) -> Outcome {
        let h = frame.header
        let answerVersion: SMPVersion = config.smpV2 ? (h.version ?? .v1) : .v1
        func respond(_ body: CBOR) -> SMPFrame {
            SMPFrame(version: answerVersion, op: h.op.response, group: h.group, command: h.command, sequence: h.sequence, body: body)
        }
        if config.smpV2, h.version == nil {
            return Outcome(response: respond(["rc": .int(McuMgrReturnCode.protocolTooNew.rawValue)]))
        }
        guard !h.op.isResponse else { return Outcome(response: nil) }
        let body: CBOR
        do {
            body = try CBORDecoder(limits: .init(maxBytes: 65_535, maxDepth: 8, maxItems: 1_024)).decode(frame.data)
        } catch {
            return Outcome(response: respond(["rc": .int(McuMgrReturnCode.invalid.rawValue)]))
        }
        do {
            let handled = try dispatch(h, body, state)
            return Outcome(response: respond(handled.responseBody), events: handled.events, flashTime: handled.flashTime, reset: handled.reset)
        } catch let e as GroupError {
            if answerVersion == .v2 {
                return Outcome(response: respond(.map([CBOR.Pair("err", .textMap(["group": .unsigned(UInt64(e.group.rawValue)), "rc": .unsigned(e.rc)]))] + e.extra)))
            }
            return Outcome(response: respond(.map([CBOR.Pair("rc", .int(e.v1.rawValue))] + e.extra)))
        } catch let e as SMPLevelError {
            return Outcome(response: respond(["rc": .int(e.rc.rawValue)]))
        } catch {
            return Outcome(response: respond(["rc": .int(McuMgrReturnCode.invalid.rawValue)]))
        }
    }

    /// A handled request before it is framed.
    private struct Handled {
        var responseBody: CBOR
        var events: [SMPDeviceEvent] = []
        var flashTime: Duration = .zero
        var reset = false
    }

    private func dispatch(_ h: SMPHeader, _ body: CBOR, _ state: McuMgrState) throws -> Handled {
        switch (h.group, h.command, h.op) {
        case (.os, 0, _):
            let r = try EchoRequest(body: body)
            return Handled(responseBody: EchoResponse(text: r.text).body)
        case (.os, 5, .write):
            return Handled(responseBody: .map([]), events: [.reset], reset: true)
        case (.os, 6, .read):
            guard config.parameters else { throw SMPLevelError(rc: .notSupported) }
            return Handled(responseBody: ParametersResponse(bufferSize: config.bufferSize, bufferCount: config.bufferCount).body)
        case (.image, 0, .read):
            return Handled(responseBody: imageState(state).body)
        case (.image, 0, .write):
            return try imageStateWrite(try ImageStateWriteRequest(body: body), state)
        case (.image, 1, .write):
            return try upload(try ImageUploadRequest(body: body), state)
        case (.image, 5, .write):
            if state.pending != nil { throw GroupError(group: .image, rc: 28, v1: .badState) }
            return Handled(responseBody: .map([]), events: [.erase], flashTime: config.eraseTime)
        case (.settings, 0, .read):
            let r = try SettingsReadRequest(body: body)
            guard let v = state.settings[r.name] else { throw GroupError(group: .settings, rc: 3, v1: .noEntry) }
            return Handled(responseBody: SettingsReadResponse(value: v).body)
        case (.settings, 0, .write):
            let r = try SettingsWriteRequest(body: body)
            return Handled(responseBody: .map([]), events: [.settingWrite(name: r.name, value: r.value)])
        case (.settings, 1, .write):
            let r = try SettingsDeleteRequest(body: body)
            guard state.settings[r.name] != nil || state.savedSettings[r.name] != nil else {
                throw GroupError(group: .settings, rc: 3, v1: .noEntry)
            }
            return Handled(responseBody: .map([]), events: [.settingDelete(name: r.name)])
        case (.settings, 2, .write):
            return Handled(responseBody: .map([]))
        case (.settings, 3, .read):
            return Handled(responseBody: .map([]), events: [.settingsLoad])
        case (.settings, 3, .write):
            return Handled(responseBody: .map([]), events: [.settingsSave], flashTime: config.writeTime(bytes: 256))
        case (.file, 0, .write):
            return try fileUpload(try FileUploadRequest(body: body), state)
        case (.file, 1, .read):
            let r = try FileStatusRequest(body: body)
            guard let f = state.files[r.name] else { throw GroupError(group: .file, rc: 3, v1: .noEntry) }
            return Handled(responseBody: FileStatusResponse(length: f.count).body)
        case (.file, 2, .read):
            guard config.fileHash else { throw SMPLevelError(rc: .notSupported) }
            let r = try FileHashRequest(body: body)
            guard r.type == nil || r.type == "sha256" else { throw GroupError(group: .file, rc: 13, v1: .notSupported) }
            guard let f = state.files[r.name] else { throw GroupError(group: .file, rc: 3, v1: .noEntry) }
            let digest = SHA256.hash(f)
            return Handled(responseBody: FileHashResponse(type: "sha256", length: f.count, output: .bytes(digest)).body)
        default:
            throw SMPLevelError(rc: .notSupported)
        }
    }

    func imageState(_ state: McuMgrState) -> ImageStateResponse {
        var images = [ImageSlotState(slot: 0, version: state.primary.version, hash: state.primary.hash, bootable: true,
                                     confirmed: state.primaryConfirmed, active: true)]
        if let s = state.secondary {
            images.append(ImageSlotState(slot: 1, version: s.version, hash: s.hash, bootable: !notBootable,
                                         pending: state.pending != nil, permanent: state.pending == .permanent))
        }
        return ImageStateResponse(images: images)
    }

    private func imageStateWrite(_ r: ImageStateWriteRequest, _ state: McuMgrState) throws -> Handled {
        var after = state
        var events: [SMPDeviceEvent] = []
        if r.confirm && (r.hash == nil || r.hash == state.primary.hash) {
            if notBootable && !state.primaryConfirmed { throw GroupError(group: .image, rc: 32, v1: .badState) }
            events.append(.confirm)
        } else {
            guard let hash = r.hash, let s = state.secondary, s.hash == hash else {
                throw GroupError(group: .image, rc: 8, v1: .noEntry)
            }
            if notBootable { throw GroupError(group: .image, rc: 1, v1: .badState) }
            events.append(.markTest(permanent: r.confirm))
        }
        for e in events { after.apply(e, faults: .init()) }
        return Handled(responseBody: imageState(after).body, events: events, flashTime: config.writeTime(bytes: 16))
    }

    private func upload(_ r: ImageUploadRequest, _ state: McuMgrState) throws -> Handled {
        if r.offset == 0 {
            guard let length = r.length else { throw GroupError(group: .image, rc: 21, v1: .invalid) }
            if let u = state.upload, u.sha != nil, u.sha == r.sha, u.length == length {
                // The same upload: continue where it is.
                return Handled(responseBody: ImageUploadResponse(offset: u.bytes.count).body)
            }
            if let sha = r.sha, state.completedSHA == sha, state.upload == nil, state.secondary != nil {
                return Handled(responseBody: ImageUploadResponse(offset: length).body)
            }
            if state.pending != nil { throw GroupError(group: .image, rc: 28, v1: .badState) }
            if !state.primaryConfirmed { throw GroupError(group: .image, rc: 9, v1: .badState) }
            var reader = ByteReader(r.data)
            guard let header = try? ImageHeader(from: &reader) else { throw GroupError(group: .image, rc: 23, v1: .invalid) }
            if length > config.slotSize { throw GroupError(group: .image, rc: 30, v1: .noMemory) }
            if r.upgrade == true || config.downgradePrevention, let running = ImageVersion(state.primary.version),
               !header.version.isNewerIgnoringBuild(than: running) {
                throw GroupError(group: .image, rc: 27, v1: .badState)
            }
            let events: [SMPDeviceEvent] = [.uploadStarted(sha: r.sha, length: length, image: r.image ?? 0),
                                            .uploadChunk(offset: 0, data: r.data)]
            var after = state
            for e in events { after.apply(e, faults: .init()) }
            return Handled(responseBody: response(after, length: length), events: events,
                           flashTime: config.eraseTime + config.writeTime(bytes: r.data.count))
        }
        guard let u = state.upload else { return Handled(responseBody: ImageUploadResponse(offset: 0).body) }
        guard r.offset == u.bytes.count else { return Handled(responseBody: ImageUploadResponse(offset: u.bytes.count).body) }
        guard r.offset + r.data.count <= u.length else { throw GroupError(group: .image, rc: 31, v1: .invalid) }
        var after = state
        after.apply(.uploadChunk(offset: r.offset, data: r.data), faults: .init())
        return Handled(responseBody: response(after, length: u.length), events: [.uploadChunk(offset: r.offset, data: r.data)],
                       flashTime: config.writeTime(bytes: r.data.count))
    }

    /// An upload answer: the offset, and at the end whether the data matched the `sha`.
    private func response(_ after: McuMgrState, length: Int) -> CBOR {
        guard let u = after.upload else {
            return ImageUploadResponse(offset: length, match: after.lastUploadMatched).body
        }
        return ImageUploadResponse(offset: u.bytes.count).body
    }

    private func fileUpload(_ r: FileUploadRequest, _ state: McuMgrState) throws -> Handled {
        let current = state.files[r.name]?.count ?? 0
        if r.offset != 0 && r.offset != current {
            throw GroupError(group: .file, rc: 11, v1: .invalid, extra: [CBOR.Pair("len", .unsigned(UInt64(current)))])
        }
        let event = SMPDeviceEvent.fileWrite(name: r.name, offset: r.offset, data: r.data)
        return Handled(responseBody: FileUploadResponse(offset: r.offset + r.data.count).body, events: [event],
                       flashTime: config.writeTime(bytes: r.data.count))
    }
}
