import BLE
import Testing
@testable import ProvisionCLI

/// A radio with a slot count, for the start-of-run note.
private final class Radio: Central {
    let id: String
    let connectionSlots: Int
    let isSimulated: Bool
    init(_ id: String, slots: Int, simulated: Bool = false) {
        self.id = id
        self.connectionSlots = slots
        self.isSimulated = simulated
    }
    func scan(_ filter: ScanFilter) -> AsyncThrowingStream<Advertisement, any Error> { AsyncThrowingStream { $0.finish() } }
    func connect(to peer: BluetoothAddress, options: ConnectOptions) async throws -> any Link { throw BLEError.cancelled }
    func close() async {}
}

@Suite struct AdapterFactoryTests {
    @Test func aConcurrencyAboveTheRadiosSlotsIsSaidAtStart() throws {
        let note = try #require(AdapterFactory.concurrencyNote(concurrency: 16, slots: nil, adapters: [Radio("hci:tcp:127.0.0.1:9000", slots: 8)]))
        #expect(note.contains("--concurrency 16") && note.contains("hold 8 link(s)") && note.contains("hci:tcp:127.0.0.1:9000: 8"))
        #expect(note.contains("--slots N") && note.contains("slots=N"))
        // Two radios add up.
        #expect(AdapterFactory.concurrencyNote(concurrency: 16, slots: nil, adapters: [Radio("a", slots: 8), Radio("b", slots: 8)]) == nil)
        #expect(AdapterFactory.concurrencyNote(concurrency: 17, slots: nil, adapters: [Radio("a", slots: 8), Radio("b", slots: 8)]) != nil)
    }

    @Test func nothingIsSaidWithSlotsGivenOrOnTheSimulator() {
        #expect(AdapterFactory.concurrencyNote(concurrency: 16, slots: 4, adapters: [Radio("hci", slots: 4)]) == nil)
        #expect(AdapterFactory.concurrencyNote(concurrency: 16, slots: nil, adapters: [Radio("sim", slots: 8, simulated: true)]) == nil)
    }

    @Test func adapterOptionsAreCheckedBeforeAnythingOpens() {
        #expect(AdapterFactory.problem(with: "sim") == nil)
        #expect(AdapterFactory.problem(with: "hci:tcp:127.0.0.1:9000,slots=16,phy=1m") == nil)
        #expect(AdapterFactory.problem(with: "hci:tcp:127.0.0.1:9000,phy=3m")?.contains("phy '3m' is not 2m or 1m") == true)
    }
}
