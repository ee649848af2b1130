import Foundation
import Testing
import EngineTestSupport
import TestSupport

/// Issue 17's smaller cases, checked against the binary users run: a bonds file's EDIV out of range
/// and a top level that is not an object are said in words (they were "not valid JSON" and Swift's
/// decoder's text), an adapter option given twice is refused, and a `set` that uses its own value is
/// one error (it also made a spurious type error).
@Suite(.serialized) struct SmallCasesProcessTests {
    static func provision(_ args: String, in dir: String) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await ChildProcess.shell("\"$PROVISION\" \(args)", directory: dir)
    }

    static func bond(ediv: String) -> String {
        #"{"format": "provision-bonds", "version": 1, "stations": [{"station": "00:1A:7D:DA:71:13", "station_type": "public", "bonds": [{"peer": "00:1B:DC:07:31:AE", "peer_type": "public", "ltk": "c0ffee00112233445566778899aabbcc", "ediv": "#
            + ediv + #", "rand": "0000000000000000", "key_size": 16, "authenticated": true, "secure_connections": true}]}]}"#
    }

    @Test func aDamagedBondsFileIsSaidInWords() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let dir = line.directory
        let paths = try line.write(count: 1)
        for (content, words) in [(Self.bond(ediv: "-1"), "stations[0].bonds[0].ediv: -1 is not 0 to 65535"),
                                 (Self.bond(ediv: "70000"), "stations[0].bonds[0].ediv: 70000 is not 0 to 65535"),
                                 ("null", "the file holds null, not a bonds store"), ("[]", "the file holds a list, not a bonds store")] {
            #expect(FileManager.default.createFile(atPath: dir + "/bonds.json", contents: Data(content.utf8), attributes: [.posixPermissions: 0o600]))
            let r = try await Self.provision("run \(paths.workflow) --inventory \(paths.inventory) --adapter sim --bonds bonds.json --report r.json", in: dir)
            #expect(r.status != 0 && r.status < 128, "\(content): exit \(r.status)")
            #expect(r.stderr.contains("bonds file \(dir)/bonds.json is damaged: \(words)"), "\(content): \(r.stderr)")
            #expect(!r.stderr.contains("not valid JSON") && !r.stderr.contains("Expected to decode"), "\(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: dir + "/r.json"), "nothing ran")
        }
    }

    @Test func anAdapterOptionGivenTwiceIsRefused() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 1)
        let r = try await Self.provision("run \(paths.workflow) --inventory \(paths.inventory) --adapter 'hci:tcp:127.0.0.1:9,slots=1,slots=2' --report r.json",
                                         in: line.directory)
        #expect(r.status == 2, "\(r.stderr)")
        #expect(r.stderr.contains("option 'slots' is given twice"), "\(r.stderr)")
    }

    @Test func aSetThatUsesItsOwnValueIsOneError() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let workflow = """
            name: selfref
            steps:
              - scan: { name: "${name}" }
              - connect: {}
              - read: { id: fw, service: 180A, characteristic: 2A26, as: hex }
              - set: { id: x, slice: "${x}", start: 1 }
              - write: { service: FFF0, characteristic: FFF1, value: { hex: "01${x}" } }
            """
        let paths = try line.write(count: 1, workflow: workflow)
        let r = try await Self.provision("validate \(paths.workflow) --inventory \(paths.inventory)", in: line.directory)
        #expect(r.status == 2)
        let all = r.stdout + r.stderr
        #expect(all.contains("workflow.yaml:6:27: error: `${x}` is the value this `set` makes: it has no value yet"), "\(all)")
        #expect(all.contains("1 error;"), "\(all)")
    }
}
