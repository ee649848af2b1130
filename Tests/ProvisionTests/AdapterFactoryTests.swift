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

    @Test func theDefaultConcurrencyNeedsNoNote() throws {
        for specs in [["hci:tcp:127.0.0.1:9000"], ["hci:tcp:127.0.0.1:9000", "hci:tcp:127.0.0.1:9001"], ["hci:tcp:127.0.0.1:9000,slots=3"], ["sim"]] {
            let options = try RunCommandOptionsTests.parse(specs.flatMap { ["--adapter", $0] })
            let radios = options.adapters.map { Radio($0.spec, slots: AdapterFactory.expectedSlots($0, slots: nil), simulated: $0.isSimulator) }
            #expect(AdapterFactory.concurrencyNote(concurrency: options.effectiveConcurrency, slots: nil, adapters: radios) == nil, "\(specs)")
        }
        #expect(try RunCommandOptionsTests.parse(["--adapter", "hci:tcp:127.0.0.1:9000"]).effectiveConcurrency == 8)
        #expect(try RunCommandOptionsTests.parse(["--adapter", "sim"]).effectiveConcurrency == 16)
    }

    @Test func adapterOptionsAreCheckedBeforeAnythingOpens() throws {
        #expect(try AdapterChoice.parse("sim") == .simulator)
        let hci = try AdapterChoice.parse("hci:tcp:127.0.0.1:9000,slots=16,phy=1m")
        #expect(hci.spec == "hci:tcp:127.0.0.1:9000,slots=16,phy=1m")
        #expect(AdapterFactory.expectedSlots(hci, slots: 4) == 16, "the spec's slots= wins over --slots")
        #expect(AdapterFactory.expectedSlots(try AdapterChoice.parse("hci:tcp:127.0.0.1:9000"), slots: nil) == AdapterFactory.defaultHCISlots)
        #expect(throws: UsageError.self) { try AdapterChoice.parse("hci:tcp:127.0.0.1:9000,phy=3m") }
        do {
            _ = try AdapterChoice.parse("hci:tcp:127.0.0.1:9000,phy=3m")
        } catch {
            #expect(error.message.contains("phy '3m' is not 2m or 1m"))
            #expect(error.message.hasPrefix("`--adapter hci:tcp:127.0.0.1:9000,phy=3m` is not an adapter spec"))
        }
    }
}
