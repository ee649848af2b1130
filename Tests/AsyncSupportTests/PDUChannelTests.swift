import Synchronization
import Testing
import AsyncSupport

/// One direction of a link without an `AsyncStream`: order, the end, a waiting receiver, cancellation.
/// Waits are observed (`observeWaiting`), never slept on.
@Suite(.timeLimit(.minutes(1)))
struct PDUChannelTests {
    /// A channel and a one-shot that is fulfilled when its receiver starts waiting.
    private func observed() -> (PDUChannel, OneShot<Void>) {
        let channel = PDUChannel()
        let waiting = OneShot<Void>()
        channel.observeWaiting { waiting.fulfill(()) }
        return (channel, waiting)
    }

    @Test func pdusArriveInTheOrderTheyWereSentWhetherBufferedOrHandedToAWaitingReceiver() async {
        let (channel, waiting) = observed()
        for i in 0..<100 { #expect(channel.send([UInt8(i)])) }
        var got: [UInt8] = []
        for _ in 0..<100 { got += await channel.receive() ?? [] }
        #expect(got == (0..<100).map { UInt8($0) })
        // Now the receiver waits: the next PDU goes straight to it.
        let receiver = Task { await channel.receive() }
        _ = await waiting.wait()
        #expect(channel.send([0xAB]))
        #expect(await receiver.value == [0xAB])
        // Several senders at once: each sender's PDUs keep their order, none is lost.
        await withTaskGroup(of: Void.self) { group in
            for sender in 0..<4 {
                group.addTask { for i in 0..<50 { channel.send([UInt8(sender), UInt8(i)]) } }
            }
        }
        var bySender: [UInt8: [UInt8]] = [:]
        for _ in 0..<200 {
            guard let pdu = await channel.receive() else { break }
            bySender[pdu[0], default: []].append(pdu[1])
        }
        for sender in 0..<4 { #expect(bySender[UInt8(sender)] == (0..<50).map { UInt8($0) }) }
    }

    @Test func finishingEndsAWaitingReceiverAndRefusesLaterSends() async {
        let (channel, waiting) = observed()
        let receiver = Task { await channel.receive() }
        _ = await waiting.wait()
        channel.finish()
        #expect(await receiver.value == nil)
        #expect(!channel.send([0x01]))
        #expect(await channel.receive() == nil)
        #expect(channel.isFinished)
    }

    @Test func whatWasSentBeforeTheFinishIsStillReceivedThenNil() async {
        let channel = PDUChannel()
        channel.send([0x01])
        channel.send([0x02])
        channel.finish()
        channel.finish()
        #expect(await channel.receive() == [0x01])
        #expect(await channel.receive() == [0x02])
        #expect(await channel.receive() == nil)
    }

    @Test func cancellingAWaitingReceiveReturnsNilAndLosesNothingSentAfterIt() async {
        let (channel, waiting) = observed()
        let receiver = Task { await channel.receive() }
        _ = await waiting.wait()
        receiver.cancel()
        #expect(await receiver.value == nil)
        // The channel is still open: what comes next is kept for the next receive.
        #expect(channel.send([0x07]))
        #expect(await channel.receive() == [0x07])
    }

    @Test func aCancelledTaskReceivesNilWithoutWaitingButBufferedPDUsFirst() async {
        let channel = PDUChannel()
        channel.send([0x05])
        let gate = OneShot<Void>()
        let receiver = Task { () -> ([UInt8]?, [UInt8]?) in
            _ = await gate.wait()
            return (await channel.receive(), await channel.receive())
        }
        receiver.cancel()
        gate.fulfill(())
        let (first, second) = await receiver.value
        #expect(first == [0x05])
        #expect(second == nil)
    }

    @Test func aSecondReceiverWhileOneWaitsGetsNilAndTheFirstKeepsWaiting() async {
        let (channel, waiting) = observed()
        let first = Task { await channel.receive() }
        _ = await waiting.wait()
        #expect(await channel.receive() == nil)
        channel.send([0x09])
        #expect(await first.value == [0x09])
    }

    @Test func theStreamViewYieldsTheSamePDUsAndEndsWithTheChannel() async {
        let channel = PDUChannel()
        channel.send([1])
        channel.send([2])
        channel.finish()
        var got: [[UInt8]] = []
        for await pdu in channel.stream { got.append(pdu) }
        #expect(got == [[1], [2]])
    }
}
