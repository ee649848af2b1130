import Support
import Testing
@testable import BLE

@Suite struct ATTClientFuzzTests {
    /// 100,000 seeded random PDUs (mostly known opcodes, random lengths and bodies) arrive while requests
    /// keep going out. The client must neither trap nor hang: afterwards it still delivers a marker
    /// notification, and when the bearer ends every pending request fails with `disconnected`.
    @Test func oneHundredThousandRandomPDUsNeitherTrapNorHang() async throws {
        let bearer = ScriptedBearer()
        let values = Recorder<ATTValueEvent>()
        let client = ATTClient(bearer: bearer, transactionTimeout: .seconds(30)) { e in
            if e.handle == 0xBEEF { values.append(e) }
        }
        await client.start()
        let requester = Task { () -> Int in
            var outcomes = 0
            while !Task.isCancelled {
                do {
                    _ = try await client.request(.readRequest(ATTReadRequest(handle: 3)))
                } catch BLEError.disconnected {
                    return outcomes
                } catch is BLEError {
                } catch {
                    Issue.record("non-BLE error \(error)")
                }
                outcomes += 1
            }
            return outcomes
        }
        // The first request is out before the noise starts, so at least it gets an outcome.
        try await bearer.sent.wait(count: 1)
        var rng = SplitMix64(seed: 0xA77_F022)
        let known: [UInt8] = [0x01, 0x02, 0x03, 0x05, 0x07, 0x09, 0x0A, 0x0B, 0x0D, 0x0F, 0x11, 0x13, 0x17, 0x19, 0x1B, 0x1D, 0x1E, 0x52]
        for _ in 0..<100_000 {
            let roll = UInt8.random(in: 0...9, using: &rng)
            let opcode = roll < 8 ? (known.randomElement(using: &rng) ?? 0x0B) : UInt8.random(in: 0...255, using: &rng)
            let length = Int.random(in: 0...40, using: &rng)
            var pdu: [UInt8] = roll == 9 && length == 0 ? [] : [opcode]
            for _ in 0..<length { pdu.append(UInt8.random(in: 0...255, using: &rng)) }
            bearer.inject(pdu)
        }
        bearer.inject([0x1B, 0xEF, 0xBE, 0x01])
        try await values.wait(count: 1, within: .seconds(30))
        bearer.endIncoming()
        let outcomes = try await withDeadline(.seconds(5), operation: "requester ends") { await requester.value }
        #expect(outcomes > 0)
        #expect(await client.closedError == .disconnected(.bearerClosed))
    }
}
