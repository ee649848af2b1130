import Engine
import Foundation
import Testing
import EngineTestSupport
import TestSupport
@testable import ProvisionCLI

/// The command line holds together (issue 20, item 9), each point run as a user runs it, in a child
/// process (`make test` runs this suite against the release binary too).
@Suite(.serialized, .timeLimit(.minutes(3))) struct CommandLineProcessTests {
    static func run(_ args: [String], in dir: String) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await ChildProcess.run(args, in: dir)
    }

    static func lines(_ text: String) -> [String] { text.split(separator: "\n").map(String.init) }

    // MARK: Default concurrency and HCI slots agree

    @Test func theDefaultConcurrencyAsksNoMoreThanTheRadiosHold() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 3)
        let base = ["run", paths.workflow, "--inventory", paths.inventory, "--dry-run"]
        let cases: [([String], String)] = [
            (["--adapter", "sim"], "concurrency 16"),
            (["--adapter", "hci:tcp:127.0.0.1:9"], "concurrency 8"),
            (["--adapter", "hci:tcp:127.0.0.1:9", "--adapter", "hci:tcp:127.0.0.1:10"], "concurrency 16"),
            (["--adapter", "hci:tcp:127.0.0.1:9,slots=4"], "concurrency 4"),
            (["--adapter", "hci:tcp:127.0.0.1:9", "--concurrency", "12"], "concurrency 12"),
        ]
        for (adapters, plan) in cases {
            let r = try await Self.run(base + adapters, in: line.directory)
            #expect(r.status == 0, "\(adapters): \(r.stderr)")
            #expect(r.stdout.contains("plan: 3 device(s), \(plan),"), "\(adapters): \(r.stdout)")
        }
        // The note a run prints at start when the concurrency exceeds the radios: never for the default
        // (AdapterFactoryTests.theDefaultConcurrencyNeedsNoNote).
    }

    // MARK: --json everywhere

    @Test func validateTakesJSONAndKeepsFormatJSON() async throws {
        let root = cliRepositoryRoot
        let json = try await Self.run(["validate", "workflows/sensor-v2.yaml", "--inventory", "inventory/demo-line.yaml", "--json"], in: root)
        let format = try await Self.run(["validate", "workflows/sensor-v2.yaml", "--inventory", "inventory/demo-line.yaml", "--format", "json"], in: root)
        #expect(json.status == 0 && format.status == 0)
        #expect(json.stdout == format.stdout)
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(doc["valid"] as? Bool == true)
    }

    @Test func runJSONPrintsHowItEndedAsOneObject() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 3, faults: [2: "{ firmware: \"1.0.0\" }"])
        let r = try await Self.run(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--sim-latency", "0",
                                    "--report", "r.json", "--json"], in: line.directory)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(Self.lines(r.stdout).count == 1, "only the JSON object on stdout: \(r.stdout)")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        #expect(doc["report"] as? String == "r.json" && doc["journal"] as? String == "r.journal" && doc["retry"] as? String == "r.retry")
        #expect(doc["exit"] as? Int == 1)
        let summary = try #require(doc["summary"] as? [String: Any])
        #expect(summary["total"] as? Int == 3)
        #expect((summary["outcomes"] as? [String: Int])?["failed"] == 1)
        #expect(r.stderr.contains("report: r.json"), "the human lines go to stderr")
        let both = try await Self.run(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--json", "--events", "-"],
                                      in: line.directory)
        #expect(both.status == 2)
        #expect(both.stderr.contains("`--json` and `--events -` both write to standard output"))
    }

    // MARK: Required options, --force

    @Test func helpShowsRequiredOptionsAsRequired() async throws {
        let run = try await Self.run(["run", "--help"], in: cliRepositoryRoot)
        #expect(run.stdout.contains("usage: provision run WORKFLOW --inventory FILE --adapter SPEC [--adapter SPEC]... [--concurrency N]"), "\(run.stdout)")
        #expect(run.stdout.contains("-i, --inventory FILE    (required) inventory"), "\(run.stdout)")
        #expect(run.stdout.contains("-a, --adapter SPEC      (required) adapter"), "\(run.stdout)")
        for command in ["scan", "gatt", "read"] {
            let r = try await Self.run([command, "--help"], in: cliRepositoryRoot)
            #expect(r.stdout.contains(" --adapter SPEC") && r.stdout.contains("(required) adapter"), "\(command): \(r.stdout)")
            #expect(!r.stdout.contains("[--adapter SPEC]\n") && !r.stdout.contains("[--adapter SPEC] "), "\(command)")
        }
    }

    @Test func forceNamesEveryOutputItReplacesAndReplacesThem() async throws {
        let help = try await Self.run(["run", "--help"], in: cliRepositoryRoot)
        let force = try #require(Self.lines(help.stdout).first { $0.hasPrefix("  --force") })
        for (option, kind) in RunCommandOptions.outputKinds where kind == .document || kind == .stream {
            #expect(force.contains("--\(option)"), "--force does not name --\(option): \(force)")
        }
        #expect(force.contains("retry file"))
        // And it does what it says, for every one of them.
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 2)
        let outputs = ["--report", "r.json", "--junit", "r.xml", "--html", "r.html", "--events", "e.jsonl", "--trace", "t.jsonl", "--sim-dump", "d.json"]
        let args = ["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--sim-latency", "0", "--quiet", "--journal"]
        #expect(try await Self.run(args + ["j1.journal"] + outputs, in: line.directory).status == 0)
        let refused = try await Self.run(args + ["j2.journal"] + outputs, in: line.directory)
        #expect(refused.status == 2)
        for name in ["r.xml", "r.html", "e.jsonl", "t.jsonl", "d.json"] {
            #expect(refused.stderr.contains("\(name)` already exists; it is not replaced unless you add `--force`"), "\(name): \(refused.stderr)")
        }
        #expect(try await Self.run(args + ["j3.journal", "--force"] + outputs, in: line.directory).status == 0)
    }

    // MARK: gatt and scan

    @Test func gattDecodesKnownCharacteristics() async throws {
        let line = try TestLine()
        defer { line.remove() }
        _ = try line.write(count: 1, faults: [1: "{ battery: \"57\" }"])  // 57 is 0x39, the character "9"
        let text = try await Self.run(["gatt", "--adapter", "sim", "--inventory", "inventory.yaml", "SN-0001"], in: line.directory)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("characteristic 2A19 Battery Level  handle 0x000c  read, notify  = 57 % (39)"), "\(text.stdout)")
        #expect(text.stdout.contains("characteristic 2A26 Firmware Revision String  handle 0x0009  read  = \"2.4.1\" (322e342e31)"))
        let json = try await Self.run(["gatt", "--adapter", "sim", "--inventory", "inventory.yaml", "SN-0001", "--json"], in: line.directory)
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let characteristics = (doc["services"] as? [[String: Any]] ?? []).flatMap { $0["characteristics"] as? [[String: Any]] ?? [] }
        let battery = try #require(characteristics.first { $0["uuid"] as? String == "2A19" })
        #expect(battery["decoded"] as? String == "57 %")
        #expect(battery["value"] as? String == "39")
        #expect(battery["text"] == nil, "a battery level is a number, not the text \"9\"")
        #expect(characteristics.first { $0["uuid"] as? String == "2A26" }?["text"] as? String == "2.4.1")
    }

    @Test func scanNameTakesAGlob() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 12)
        let r = try await Self.run(["scan", "--adapter", "sim", "--inventory", paths.inventory, "--timeout", "500ms", "--json",
                                    "--name", "SNS-00[01][0-2]"], in: line.directory)
        #expect(r.status == 0, "\(r.stderr)")
        let list = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])
        let heard = Set(list.filter { $0["heard"] as? Bool != false }.compactMap { $0["name"] as? String })
        #expect(heard == ["SNS-0001", "SNS-0002", "SNS-0010", "SNS-0011", "SNS-0012"])
        let exact = try await Self.run(["scan", "--adapter", "sim", "--inventory", paths.inventory, "--timeout", "500ms", "--name", "SNS-0003"],
                                       in: line.directory)
        #expect(Self.lines(exact.stdout).filter { $0.hasPrefix("SN-") }.map { $0.prefix(7) } == ["SN-0003"], "\(exact.stdout)")
    }

    @Test func scanWithAnInventoryMarksTheUnitsHeard() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 4, faults: [3: "{ faults: { no_advertise: true } }"])
        let r = try await Self.run(["scan", "--adapter", "sim", "--inventory", paths.inventory, "--timeout", "500ms"], in: line.directory)
        #expect(r.status == 0, "\(r.stderr)")
        let rows = Self.lines(r.stdout)
        #expect(rows.first?.hasPrefix("UNIT      ADDRESS") == true, "\(r.stdout)")
        for id in ["SN-0001", "SN-0002", "SN-0004"] { #expect(rows.contains { $0.hasPrefix(id) && $0.contains("SNS-\(id.dropFirst(3))") }, "\(id)") }
        #expect(rows.last == "inventory: 3 of 4 unit(s) heard; not heard: SN-0003", "\(r.stdout)")
        let json = try await Self.run(["scan", "--adapter", "sim", "--inventory", paths.inventory, "--timeout", "500ms", "--json"], in: line.directory)
        let list = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(Set(list.filter { $0["heard"] as? Bool == true }.compactMap { $0["id"] as? String }) == ["SN-0001", "SN-0002", "SN-0004"])
        #expect(list.filter { $0["heard"] as? Bool == false }.compactMap { $0["id"] as? String } == ["SN-0003"])
    }

    // MARK: --no-color

    @Test func noColorTurnsColoursOffOnATerminal() async throws {
        let line = try TestLine()
        defer { line.remove() }
        try "name: x\nsteps:\n  - scan: { timeout: 15 }\n".write(toFile: line.directory + "/broken.yaml", atomically: true, encoding: .utf8)
        // `script` gives the command a terminal, where colours are on unless turned off.
        func onTerminal(_ args: String) async throws -> String {
            var env = "unset NO_COLOR; "
            env += "script -qec \"\\\"$PROVISION\\\" \(args)\" /dev/null"
            return try await ChildProcess.shell(env, directory: line.directory).stdout
        }
        let coloured = try await onTerminal("validate broken.yaml")
        #expect(coloured.contains("\u{1B}[1;31merror\u{1B}[0m"), "\(coloured.debugDescription)")
        for args in ["validate broken.yaml --no-color", "--no-color validate broken.yaml"] {
            let plain = try await onTerminal(args)
            #expect(plain.contains("error: duration"), "\(args): \(plain.debugDescription)")
            #expect(!plain.contains("\u{1B}["), "\(args): \(plain.debugDescription)")
        }
    }

    // MARK: Completion

    @Test func bashCompletesCommandsOptionsAndTheirWords() async throws {
        let cases: [(String, String)] = [
            ("provision ru", "run"), ("provision run --inv", "--inventory"), ("provision run --claim ", "heard all"),
            ("provision line ", "status flush init migrate grant"), ("provision run --adapter s", "sim"), ("provision completion ", "bash zsh"),
            ("provision read --as sfl", "sfloat"), ("provision scan --no-", "--no-color"),
        ]
        var script = "source <(\"$PROVISION\" completion bash) || exit 9\n"
        for (typed, _) in cases {
            script += "read -r -a w <<< '\(typed)'; [[ '\(typed)' == *' ' ]] && w+=('')\n"
            script += "COMP_WORDS=(\"${w[@]}\"); COMP_CWORD=$((${#w[@]} - 1)); _provision; echo \"${COMPREPLY[*]}\"\n"
        }
        let r = try await ChildProcess.shell(script, directory: cliRepositoryRoot)
        #expect(r.status == 0, "\(r.stderr)")
        let replies = Self.lines(r.stdout + "\n").map { $0 }
        for (i, (typed, expected)) in cases.enumerated() {
            #expect(i < replies.count && replies[i] == expected, "`\(typed)` completed to `\(i < replies.count ? replies[i] : "nothing")`")
        }
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/zsh"), "needs zsh: run `make test`, or apt-get install zsh"))
    func zshLoadsTheCompletionFromFpathAndFromSource() async throws {
        let dir = NSTemporaryDirectory() + "provision-zsh-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try await ChildProcess.shell("""
            "$PROVISION" completion zsh > _provision && zsh -n _provision || exit 9
            zsh -f -c 'fpath=($PWD $fpath); autoload -U compinit && compinit -u -D; print -r -- ${_comps[provision]}'
            zsh -f -c 'autoload -U compinit && compinit -u -D; source <("$PROVISION" completion zsh); print -r -- ${_comps[provision]}'
            """, directory: dir)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(Self.lines(r.stdout) == ["_provision", "_provision"], "\(r.stdout) \(r.stderr)")
        let script = try String(contentsOfFile: dir + "/_provision", encoding: .utf8)
        for option in RunCommand().options { #expect(script.contains("--\(option.name)"), "--\(option.name)") }
    }

    // MARK: The defaults file

    @Test func aDefaultsFileBesideTheWorkflowGivesTheAdapterConcurrencyAndBondsAndTheCommandLineWins() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 3)
        try "adapter: sim\nconcurrency: 2\nbonds: station.bonds\n".write(toFile: line.directory + "/.provision.yaml", atomically: true, encoding: .utf8)
        let args = ["run", "workflow.yaml", "--inventory", paths.inventory, "--sim-latency", "0", "--quiet"]
        let r = try await Self.run(args + ["--report", "a.json"], in: line.directory)
        #expect(r.status == 0, "\(r.stderr)")
        let a = try RunReport.read(from: line.directory + "/a.json").run.options
        #expect(a["adapters"] == "sim" && a["concurrency"] == "2" && a["bonds"] == line.directory + "/station.bonds", "\(a)")
        #expect(a["defaults"] == line.directory + "/.provision.yaml")
        let wins = try await Self.run(args + ["--report", "b.json", "--concurrency", "3"], in: line.directory)
        #expect(wins.status == 0)
        #expect(try RunReport.read(from: line.directory + "/b.json").run.options["concurrency"] == "3")
        // Named with --config; its problems are reported with their positions, all at once.
        try "adapter: [sim, \"hci:bogus\"]\nconcurency: 3\n".write(toFile: line.directory + "/bad.yaml", atomically: true, encoding: .utf8)
        let bad = try await Self.run(args + ["--config", "bad.yaml"], in: line.directory)
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("bad.yaml:1:16: error: `adapter: hci:bogus` is not an adapter spec"), "\(bad.stderr)")
        #expect(bad.stderr.contains("bad.yaml:2:1: error: unknown key `concurency` in the defaults file\n    hint: did you mean `concurrency`?"), "\(bad.stderr)")
        // It is an input: never written over.
        let over = try await Self.run(args + ["--report", ".provision.yaml"], in: line.directory)
        #expect(over.status == 2)
        #expect(over.stderr.contains("`--report .provision.yaml` is the defaults file"), "\(over.stderr)")
    }
}
