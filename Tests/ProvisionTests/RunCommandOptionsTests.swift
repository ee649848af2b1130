import Engine
import Foundation
import Testing
@testable import ProvisionCLI

/// `provision run`'s command line is parsed once into typed values, and every usage error says what it
/// always said.
@Suite struct RunCommandOptionsTests {
    static func parse(_ words: [String], environment: [String: String] = [:]) throws -> RunCommandOptions {
        let parsed = try ArgumentParser.parse(["w.yaml", "--inventory", "i.yaml"] + words, options: RunCommand().options,
                                              positionals: RunCommand().positionals)
        return try RunCommandOptions.parse(parsed, context: CommandContext(output: OutputBuffer().output, environment: environment))
    }

    static func problem(_ words: [String], environment: [String: String] = [:]) -> RunCommandOptions.Problem? {
        do {
            _ = try parse(words, environment: environment)
            return nil
        } catch let p as RunCommandOptions.Problem {
            return p
        } catch {
            Issue.record("not a run problem: \(error)")
            return nil
        }
    }

    @Test func everyOptionBecomesItsTypedValue() throws {
        let o = try Self.parse(["--adapter", "sim", "--adapter", "hci:tcp:127.0.0.1:9000,slots=4", "--concurrency", "3", "--slots", "2",
                                "--max-failures", "10%", "--stop-grace", "2m", "--seed", "7", "--sim-latency", "0.5", "--events", "-",
                                "--resume", "r.journal", "--retry-failed", "--no-fsync", "--trace", "t.btsnoop", "--limit", "SN-*"])
        #expect(o.workflow == "w.yaml" && o.inventory == "i.yaml")
        #expect(o.adapters.map(\.spec) == ["sim", "hci:tcp:127.0.0.1:9000,slots=4"])
        #expect(o.adapters.first == .simulator)
        if case .hci(_, let configuration)? = o.adapters.last { #expect(configuration.slots == 4) } else { Issue.record("not HCI") }
        #expect(o.concurrency == 3 && o.slots == 2)
        #expect(o.maxFailures == RunCommandOptions.MaxFailures(text: "10%", threshold: .percent(10, minimumSample: 10)))
        #expect(o.stopGrace == .seconds(120) && o.seed == 7 && o.simLatency == 0.5)
        #expect(o.events == .standardOutput && o.resume == "r.journal" && o.retryFailed && !o.fsync)
        #expect(o.trace == "t.btsnoop" && o.limit == "SN-*" && o.line == nil)
        let reported = o.reported(concurrency: 3, lineRun: nil)
        #expect(reported == ["concurrency": "3", "seed": "7", "adapters": "sim,hci:tcp:127.0.0.1:9000,slots=4", "limit": "SN-*",
                             "max_failures": "10%", "slots": "2", "sim_latency": "0.5"])
    }

    @Test func theLineAndItsOptionsAreTyped() throws {
        let o = try Self.parse(["--adapter", "sim", "--run", "r1", "--station", "st", "--lease", "9s", "--claim", "all", "--idle", "0s"],
                               environment: ["PROVISION_LINE": "host=127.0.0.1 dbname=line"])
        let line = try #require(o.line)
        #expect(line.runID == "r1" && o.station == "st" && line.lease == .seconds(9))
        #expect(!line.policy.heardOnly && line.policy.idleLimit == nil)
    }

    @Test func aStationNamesItselfWithOrWithoutALine() throws {
        let o = try Self.parse(["--adapter", "sim", "--station", "bench-2"])
        #expect(o.line == nil && o.station == "bench-2")
        let paths = RunPaths(o, workflowName: "w", inputs: [], currentDirectory: "/tmp")
        #expect(o.engineOptions(paths: paths, concurrency: 1, lineRun: nil).station == "bench-2")
        #expect(try Self.parse(["--adapter", "sim"]).station == nil)
    }

    @Test(arguments: [
        (["--adapter", "sim", "--concurrency", "0"], "`--concurrency` must be a whole number from 1 to 10000, not `0`"),
        (["--adapter", "sim", "--slots", "x"], "`--slots` must be a positive whole number, not `x`"),
        (["--adapter", "sim", "--max-failures", "0"], "`--max-failures` must be a count (5) or a percentage (10%), not `0`"),
        (["--adapter", "sim", "--seed", "-1"], "`--seed` must be a non-negative whole number, not `-1`"),
        (["--adapter", "sim", "--stop-grace", "30"], "`--stop-grace` must be a duration with a unit (30s, 2m), not `30`"),
        (["--adapter", "sim", "--sim-latency", "101"], "`--sim-latency` must be a number from 0 to 100, not `101`"),
        (["--adapter", "sim", "--retry-failed"], "`--retry-failed` needs `--resume JOURNAL` (it runs again the devices a resumed run failed before)"),
        (["--adapter", "sim", "--lease", "5s"], "`--lease` works on a line: give `--line URL` (or set PROVISION_LINE)"),
        (["--adapter", "sim", "--spool", "s"], "`--spool` works on a line: give `--line URL` (or set PROVISION_LINE)"),
        (["--adapter", "hci:bogus"], "`--adapter hci:bogus` is not an adapter spec (sim, hci:tcp:HOST:PORT, hci:serial:DEV[@BAUD], hci:user:N)"),
        (["--adapter", "sim", "--resume", "a.journal", "--journal", "b.journal"],
         "`--resume a.journal` continues that journal; `--journal b.journal` names another (give one of them)"),
        (["--adapter", "sim", "--line", "host=x", "--journal", "j"], "a line station writes no journal"),
        (["--adapter", "sim", "--line", "host=x", "--lease", "0.5s"], "`--lease` must be a duration with a unit of at least 1s (30s, 2m), not `0.5s`"),
        (["--adapter", "sim", "--line", "host=x", "--claim", "some"], "`--claim` is `heard` or `all`, not `some`"),
        (["--adapter", "sim", "--line", "host=x", "--station", "a/b"], "`--station` must be a name of 1 to 100 characters without `/` or control characters"),
        (["--adapter", "sim", "--station", "a/b"], "`--station` must be a name of 1 to 100 characters without `/` or control characters"),
        (["--adapter", "sim", "--station", ""], "`--station` must be a name of 1 to 100 characters without `/` or control characters"),
    ])
    func aBadOptionIsAUsageErrorWithItsMessage(_ words: [String], _ message: String) {
        let p = Self.problem(words)
        #expect(p?.message.hasPrefix(message) == true, "\(words): \(p?.message ?? "accepted")")
        #expect(p?.showsUsage == true)
    }

    @Test func noAdapterIsRefusedWithAHintAndNoUsageLine() {
        let p = Self.problem([])
        #expect(p?.message.hasPrefix("no adapter: give `--adapter sim`") == true)
        #expect(p?.hint == "a run never falls back to the simulator by itself")
        #expect(p?.showsUsage == false)
    }
}
