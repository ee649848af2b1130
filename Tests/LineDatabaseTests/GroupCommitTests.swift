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
        #expect(tickets(c.submit(.init(ticket: 1, item: intent("a")))) == [1])
        #expect(c.submit(.init(ticket: 2, item: intent("b"))) == nil)
        #expect(c.submit(.init(ticket: 3, item: outcome("c"))) == nil)
        #expect(c.submit(.init(ticket: 4, item: intent("d"))) == nil)
        #expect(tickets(c.batchFinished()) == [2, 3, 4])
        #expect(c.batchFinished() == nil)
        #expect(!c.writing)
    }

    @Test func aBatchHoldsAtMostMaxBatchEntries() {
        var c = Commit(maxBatch: 2)
        _ = c.submit(.init(ticket: 0, item: intent("x")))
        for i in 1...5 { #expect(c.submit(.init(ticket: i, item: outcome("d\(i)"))) == nil) }
        #expect(tickets(c.batchFinished()) == [1, 2])
        #expect(tickets(c.batchFinished()) == [3, 4])
        #expect(tickets(c.batchFinished()) == [5])
    }

    @Test func oneDevicesWritesKeepTheirOrderAcrossBatches() {
        var c = Commit()
        _ = c.submit(.init(ticket: 0, item: intent("x")))
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
        #expect(tickets(c.batchFinished()) == [1, 2, 3, 6])
        #expect(tickets(c.batchFinished()) == [4, 5, 7])
        #expect(c.batchFinished() == nil)
    }
}
