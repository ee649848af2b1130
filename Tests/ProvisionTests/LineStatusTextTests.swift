import Foundation
@testable import LineDatabase
import PostgresClient
@testable import ProvisionCLI
import Testing

/// What `provision line status` prints for a person: the devices still to do by name, those nobody
/// hears, those under review and why, and the time left.
@Suite struct LineStatusTextTests {
    static let row = LineRuns.RunRow(
        run: LineRun(id: "batch-42", workflow: LineFile(name: "sensor-v2-provisioning", path: "workflows/sensor-v2.yaml", sha256: String(repeating: "a", count: 64)),
                     inventory: LineFile(path: "inventory/batch-42.yaml", sha256: String(repeating: "b", count: 64)), toolVersion: "0.1.0"),
        createdBy: "a/1", started: Date(timeIntervalSince1970: 1_796_000_000), ended: nil, stopReason: nil, stopMessage: nil)

    static func station(stopped: Bool) -> LineRuns.Status.Station {
        LineRuns.Status.Station(id: "a/1", name: "a", host: "bench-1", adapters: ["hci0"], identities: ["C4:5A:00:00:00:01"], started: Date(timeIntervalSince1970: 1_796_000_000),
                                heartbeat: Date(timeIntervalSince1970: 1_796_000_590), stopped: stopped ? Date(timeIntervalSince1970: 1_796_000_595) : nil,
                                stopReason: nil, stopMessage: nil, leases: stopped ? 0 : 4, outcomes: 13, outcomesLastMinute: 3)
    }

    static func status(stopped: Bool = false) -> LineRuns.Status {
        var s = LineRuns.Status(counts: [.succeeded: 12, .failed: 1, .needsReview: 1, .claimed: 4, .pending: 22],
                                stations: [station(stopped: stopped)], outcomesLastMinute: 3, now: Date(timeIntervalSince1970: 1_796_000_600))
        s.pending = (19...38).map { String(format: "SN-%04d", $0) }
        s.unheard = LineRuns.Status.Unheard(devices: ["SN-0039", "SN-0040"], count: 2)
        s.inReview = [LineRuns.Status.Review(device: "SN-0007", reason: "lease_expired_after_intent", step: "commit")]
        s.finishedRecently = 13
        s.window = .seconds(300)
        return s
    }

    @Test func theStatusNamesWhatIsLeftAndSaysHowLong() throws {
        let lines = LineCommand.text(Self.row, Self.status(), line: try ConnectionString("host=db dbname=line user=quality"))
        #expect(lines.contains("devices: 40: 12 succeeded, 1 failed, 1 needs review, 4 claimed, 22 pending"))
        #expect(lines.contains("pending (22): " + (19...38).map { String(format: "SN-%04d", $0) }.joined(separator: ", ") + " and 2 more"))
        #expect(lines.contains("  heard by no station (2): SN-0039, SN-0040"))
        #expect(lines.contains("in review (1): SN-0007 (lease expired after intent, step `commit`)"))
        // 26 left at 13 in 5 minutes: 10 minutes.
        #expect(lines.contains("rate: 13 device(s) finished in the last 5 min (2.6 a minute); about 10 min left at this rate"), "\(lines)")
        let stopped = LineCommand.text(Self.row, Self.status(stopped: true), line: try ConnectionString("host=db dbname=line user=quality"))
        #expect(stopped.contains("rate: 13 device(s) finished in the last 5 min (2.6 a minute); no station is working the line"), "\(stopped)")
    }

    @Test func theJSONCarriesTheSameLists() throws {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(LineCommand.json(Self.row, Self.status()).utf8)) as? [String: Any])
        #expect((object["pending"] as? [String])?.count == 20)
        #expect((object["unheard"] as? [String: Any])?["count"] as? Int == 2)
        #expect((object["in_review"] as? [[String: String]]) == [["device": "SN-0007", "reason": "lease_expired_after_intent", "step": "commit"]])
        #expect(object["estimated_seconds_left"] as? Int == 600)
        #expect(object["finished_recently"] as? Int == 13 && object["window_seconds"] as? Int == 300)
    }

    @Test func durationsReadAsAPersonSaysThem() {
        #expect(LineCommand.minutes(.seconds(40)) == "40 s")
        #expect(LineCommand.minutes(.seconds(61)) == "2 min")
        #expect(LineCommand.minutes(.seconds(7500)) == "2 h 5 min")
    }
}
