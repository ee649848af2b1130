import BLE
import Foundation
import Testing
import YAML
@testable import BLESimulator

/// The `store` behaviour and models of several behaviours: written values are kept (read back, on this
/// link and later ones, replayed from a state file), notified to a subscriber, and dumped; the model
/// file's mistakes are errors at their position.
@Suite(.timeLimit(.minutes(1)))
struct StoreBehaviourTests {
    /// The smart-lock model: command-ack on FFE1/FFE2/FFE3, store on FFE4...FFE7.
    static func lock() throws -> DeviceModel {
        try DeviceModel.load(path: Fixtures.root + "/inventory/models/smart-lock.yaml")
    }

    static func central(statePath: String? = nil) throws -> SimulatedCentral {
        try SimulatedCentral(model: try lock(), devices: [SimulatedDeviceSpec(id: "SL-1", name: "LOCK-1")], inventoryFile: "inv.yaml",
                             options: SimulatorOptions(latencyScale: 0, statePath: statePath))
    }

    @Test func theLockModelHasBothBehaviours() throws {
        let m = try Self.lock()
        let p = { (c: UInt16) in CommandBehaviour.Path(service: BluetoothUUID(0xFFE0), characteristic: BluetoothUUID(c)) }
        #expect(m.behaviour?.control == p(0xFFE1) && m.behaviour?.ack == p(0xFFE2) && m.behaviour?.state == p(0xFFE3))
        #expect(m.store?.characteristics == [p(0xFFE4), p(0xFFE5), p(0xFFE6), p(0xFFE7)])
    }

    @Test func aWrittenValueIsReadBackNotifiedAndKeptAcrossConnections() async throws {
        let central = try Self.central()
        var client = try await Fixtures.connect(central, "SL-1")
        try await client.discover()
        #expect(try await client.read(0xFFE4) == [], "the model's initial value")
        #expect(try await client.write(0xFFE4, Array("Hall 3".utf8)) == .writeResponse)
        #expect(try await client.read(0xFFE4) == Array("Hall 3".utf8))
        // A subscriber to a stored characteristic that notifies gets what is written.
        _ = try await client.subscribe(0xFFE6)
        #expect(try await client.write(0xFFE6, [0x01]) == .writeResponse)
        let n = try #require(try await client.notification())
        #expect(n.handle == (try client.handle(0xFFE6)) && n.value == [0x01])
        #expect(try await client.write(0xFFE5, [0x1E, 0x00]) == .writeResponse)
        #expect(client.notifications.isEmpty, "only a characteristic that declares notify notifies")
        await client.link.disconnect()
        var again = try await Fixtures.connect(central, "SL-1")
        try await again.discover()
        #expect(try await again.read(0xFFE4) == Array("Hall 3".utf8), "kept by the device")
        #expect(try await again.read(0xFFE6) == [0x01])
        await again.link.disconnect()
        let d = try #require(central.dump(device: "SL-1"))
        #expect(d.stored == ["FFE0/FFE4": Array("Hall 3".utf8).hexString, "FFE0/FFE5": "1e00", "FFE0/FFE6": "01"])
        #expect(d.commands.isEmpty, "stored writes are not commands")
    }

    @Test func commandsAndStoredValuesWorkSideBySide() async throws {
        let central = try Self.central()
        var client = try await Fixtures.connect(central, "SL-1")
        try await client.discover()
        _ = try await client.subscribe(0xFFE2)
        let key = [UInt8](repeating: 0x5A, count: 18)
        _ = try await client.write(0xFFE1, [0x01] + key)
        #expect(try await client.notification()?.value == [0x01, 0x00])
        _ = try await client.write(0xFFE7, [0x01])
        _ = try await client.write(0xFFE1, [0x02])
        #expect(try await client.notification()?.value == [0x02, 0x00], "a stored characteristic without notify notifies nothing")
        #expect(try await client.read(0xFFE3) == [0x02])
        await client.link.disconnect()
        let d = try #require(central.dump(device: "SL-1"))
        #expect(d.config == key.hexString && d.commits == 1 && d.stored == ["FFE0/FFE7": "01"])
        #expect(await central.dump().json().contains("\"FFE0/FFE7\" : \"01\""))
    }

    @Test func aStateFileReplaysStoredValues() async throws {
        let path = NSTemporaryDirectory() + "store-state-\(UUID().uuidString).jsonl"
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            let central = try Self.central(statePath: path)
            var client = try await Fixtures.connect(central, "SL-1")
            try await client.discover()
            _ = try await client.write(0xFFE4, Array("door \"A\"".utf8))
            await client.link.disconnect()
            await central.close()
        }
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains(#"{"id":"SL-1","event":"store","service":"FFE0","characteristic":"FFE4","hex":"646f6f7220224122"}"#))
        let reopened = try Self.central(statePath: path)
        #expect(reopened.dump(device: "SL-1")?.stored == ["FFE0/FFE4": Array("door \"A\"".utf8).hexString])
        var client = try await Fixtures.connect(reopened, "SL-1")
        try await client.discover()
        #expect(try await client.read(0xFFE4) == Array("door \"A\"".utf8))
        await client.link.disconnect()
    }

    @Test func aDumpWithoutStoredValuesReadsBack() throws {
        let old = #"{"seed":1,"devices":[{"id":"a","address":"C0:00:00:00:00:01","model":"m","connections":0,"connect_attempts":0,"config":null,"blob":null,"blob_bytes_dropped":0,"state":"00","commits":0,"commands":[],"faults":{}}]}"#
        let dump = try JSONDecoder().decode(SimulatorDump.self, from: Data(old.utf8))
        #expect(dump.devices.first?.stored == [:])
    }

    /// The lock model with `behaviour` replaced.
    static func model(behaviour: String) throws -> String {
        let text = try String(contentsOfFile: Fixtures.root + "/inventory/models/smart-lock.yaml", encoding: .utf8)
        let start = try #require(text.range(of: "behaviour:\n"))
        let end = try #require(text.range(of: "\nfaults:"))
        return String(text[..<start.lowerBound]) + behaviour + String(text[end.lowerBound...])
    }

    @Test("a model's behaviour mistakes are errors at their position", arguments: [
        ("behaviour:\n  - { type: store }\n", "a store behaviour needs `characteristics`: the characteristics whose written values are kept"),
        ("behaviour:\n  - { type: store, characteristics: [FFE9] }\n", "stored characteristic FFE9 is not in `services:`"),
        ("behaviour:\n  - { type: store, characteristics: [FFE3] }\n", "stored characteristic FFE3 must declare write or write-without-response"),
        ("behaviour:\n  - { type: store, characteristics: [FFE4, FFE4] }\n", "characteristic FFE4 is listed twice"),
        ("behaviour:\n  - { type: stor, characteristics: [FFE4] }\n", "unknown behaviour type `stor`"),
        ("behaviour:\n  - { characteristics: [FFE4] }\n", "a behaviour needs a `type` (command-ack, store)"),
        ("behaviour:\n  - { type: command-ack, control: FFE1, ack: FFE2 }\n  - { type: command-ack, control: FFE1, ack: FFE2 }\n",
         "a model has one `command-ack` behaviour"),
        ("behaviour:\n  - { type: command-ack, control: FFE1, ack: FFE2 }\n  - { type: store, characteristics: [FFE1] }\n",
         "characteristic FFE1 is stored and also used by the command-ack behaviour"),
        ("behaviour:\n  - { type: command-ack, control: FFE4, ack: FFE2 }\n  - { type: store, characteristics: [FFE4] }\n",
         "characteristic FFE4 is stored and also used by the command-ack behaviour"),
    ])
    func behaviourMistakes(_ c: (yaml: String, message: String)) throws {
        let text = try Self.model(behaviour: c.yaml)
        #expect(throws: SimulatorError.self) { try DeviceModel.parse(Array(text.utf8), file: "lock.yaml") }
        do {
            _ = try DeviceModel.parse(Array(text.utf8), file: "lock.yaml")
        } catch {
            #expect(error.message == c.message)
            #expect(error.mark != nil && (error.mark?.line ?? 0) >= 44, "at the behaviour, line \(error.mark?.line ?? 0)")
        }
    }
}
