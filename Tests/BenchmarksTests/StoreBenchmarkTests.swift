import Benchmarks
import Engine
import Foundation
import LineStore
import Testing

@Suite struct StoreBenchmarkTests {
    @Test func everyDeviceOfTheBenchmarkIsRecordedOnceInTheStoreItMeasures() async throws {
        let dir = NSTemporaryDirectory() + "provision-storebench-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/bench.journal"
        let ids = (0..<40).map { String(format: "BENCH-%06d", $0) }
        let result = try await StoreBenchmark.run(name: "file journal", stores: [try FileJournal(path: path, fsync: false)],
                                                  devices: ids, inFlight: 8, work: .zero)
        #expect(result.devices == 40)
        #expect(result.stations == 1 && result.inFlight == 8)
        #expect(result.claimsPerSecond == 0, "a file journal hands out no claims")
        #expect(result.storeMs.p50 <= result.storeMs.p95)
        // What the store holds: one intent and one outcome per device, each device once.
        let state = try JournalState.read(path: path)
        #expect(Set(state.outcomes.keys) == Set(ids))
        #expect(state.outcomes.values.allSatisfy { $0.outcome == .succeeded })
        #expect(state.pendingIntents.isEmpty, "every intent was followed by its outcome")
        #expect(state.starts.values.allSatisfy { $0 == 1 } && state.starts.count == 40)
    }
}
