import Foundation
@testable import LineDatabase
import Testing

@Suite struct GroupCommitTests {
    typealias Commit = GroupCommit<Int>

    func intent(_ d: String) -> Commit.Item { .intent(LineIntent(device: d, attempt: 1, stepIndex: 3, step: "set configuration")) }
    func outcome(_ d: String) -> Commit.Item {
        .outcome(LineOutcome(device: d, attempt: 1, outcome: .succeeded, finished: Date(timeIntervalSince1970: 0), record: "{}"))
    }
    func tickets(_ batch: [Commit.Entry]?) -> [Int]? { batch?.map(\.ticket) }

    @Test func theFirstEntryGoesAtOnceAndTheRestGatherWhileItIsWritten() {
        var c = Commit()
        let first = c.submit(.init(ticket: 1, item: intent("a")))
        #expect(tickets(first) == [1])
        #expect(c.submit(.init(ticket: 2, item: intent("b"))) == nil)
        #expect(c.submit(.init(ticket: 3, item: outcome("c"))) == nil)
        #expect(c.submit(.init(ticket: 4, item: intent("d"))) == nil)
        let second = c.batchFinished(first ?? [])
        #expect(tickets(second) == [2, 3, 4])
        #expect(c.batchFinished(second ?? []) == nil)
        #expect(c.writing == 0)
    }

    @Test func aBatchHoldsAtMostMaxBatchEntries() {
        var c = Commit(maxBatch: 2)
        _ = c.submit(.init(ticket: 0, item: intent("x")))
        for i in 1...5 { #expect(c.submit(.init(ticket: i, item: outcome("d\(i)"))) == nil) }
        #expect(tickets(c.batchFinished([])) == [1, 2])
        #expect(tickets(c.batchFinished([])) == [3, 4])
        #expect(tickets(c.batchFinished([])) == [5])
    }

    @Test func oneDevicesWritesKeepTheirOrderAcrossBatches() {
        var c = Commit()
        let zero = c.submit(.init(ticket: 0, item: intent("x")))
        // An intent then the outcome of one device may share a batch (intents are written first) ...
        _ = c.submit(.init(ticket: 1, item: intent("a")))
        _ = c.submit(.init(ticket: 2, item: outcome("a")))
        // ... but a second intent of the same device waits, and so does everything after it for that device.
        _ = c.submit(.init(ticket: 3, item: intent("b")))
        _ = c.submit(.init(ticket: 4, item: intent("b")))
        _ = c.submit(.init(ticket: 5, item: outcome("b")))
        // An outcome then an intent of one device: the intent waits (a batch writes intents first).
        _ = c.submit(.init(ticket: 6, item: outcome("c")))
        _ = c.submit(.init(ticket: 7, item: intent("c")))
        let first = c.batchFinished(zero ?? [])
        #expect(tickets(first) == [1, 2, 3, 6])
        // While that batch is written, nothing else of a, b or c may go.
        let second = c.batchFinished(first ?? [])
        #expect(tickets(second) == [4, 5, 7])
        #expect(c.batchFinished(second ?? []) == nil)
    }

    @Test func severalWritersWriteBatchesAtOnceButNeverOneDeviceTwice() {
        var c = Commit(writers: 2)
        let first = c.submit(.init(ticket: 1, item: intent("a")))
        #expect(tickets(first) == [1])
        let second = c.submit(.init(ticket: 2, item: intent("b")))
        #expect(tickets(second) == [2])
        #expect(c.writing == 2)
        // Both writers busy: these gather. The outcome of "a" must wait until a's intent is written.
        #expect(c.submit(.init(ticket: 3, item: outcome("a"))) == nil)
        #expect(c.submit(.init(ticket: 4, item: intent("c"))) == nil)
        #expect(tickets(c.batchFinished(second ?? [])) == [4])
        #expect(tickets(c.batchFinished(first ?? [])) == [3])
    }
}
