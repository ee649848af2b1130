import Testing
@testable import BLE

/// An `InMemoryLink` over two `PDUChannel`s and a credit semaphore.
@Suite(.timeLimit(.minutes(1)))
struct InMemoryLinkTests {
    @Test func anInMemoryLinkCarriesPDUsBothWaysInOrderAndEndsBothSidesOnClose() async throws {
        let link = InMemoryLink(peer: BluetoothAddress(value: 7), adapterID: "test", credits: 4)
        let bearer = try #require(link.bearer as? any ATTBearerReceiving)
        for i in 0..<4 { try await link.bearer.send([UInt8(i)]) }
        for i in 0..<4 {
            #expect(await link.device.receive() == [UInt8(i)])
            link.device.consumed()
        }
        for i in 0..<3 { #expect(link.device.send([0x10 + UInt8(i)])) }
        for i in 0..<3 { #expect(await bearer.receive() == [0x10 + UInt8(i)]) }
        // Both sides see the end; a send after it fails.
        link.device.send([0xEE])
        await link.disconnect()
        #expect(await bearer.receive() == [0xEE])
        #expect(await bearer.receive() == nil)
        #expect(await link.device.receive() == nil)
        #expect(!link.device.send([0x01]))
        await #expect(throws: BLEError.disconnected(.localHostTerminated)) { try await link.bearer.send([0x01]) }
    }
}
