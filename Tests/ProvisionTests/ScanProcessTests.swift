import EngineTestSupport
import Foundation
import Testing

/// `provision scan` as a child process. `make test` runs this suite against the release binary too: the
/// scan used to trap there (SIGILL) while debug builds worked, because the optimizer dropped the store
/// of each adapter's index into its task's result.
@Suite(.serialized) struct ScanProcessTests {
    @Test func scanListsTheSimulatedFleetOnOneAdapterAndOnTwo() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 6)
        let names = Set((1...6).map { String(format: "SNS-%04d", $0) })
        for adapters in [1, 2] {
            let child = try ChildProcess(["scan"] + Array(repeating: ["--adapter", "sim"], count: adapters).flatMap { $0 }
                                         + ["--inventory", paths.inventory, "--timeout", "500ms", "--json"], directory: line.directory)
            var out = ""
            for await l in child.lines { out += l + "\n" }
            let stderr = await child.stderr()
            #expect(await child.wait() == 0, "\(adapters) adapter(s): \(stderr)")
            let list = try #require(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [[String: Any]], "\(out)")
            #expect(list.count == 6 * adapters)
            #expect(Set(list.compactMap { $0["name"] as? String }) == names)
        }
    }

    @Test func theTableNamesEveryDeviceAndTheCount() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 3)
        let child = try ChildProcess(["scan", "--adapter", "sim", "--inventory", paths.inventory, "--timeout", "500ms"],
                                     directory: line.directory)
        var rows: [String] = []
        for await l in child.lines { rows.append(l) }
        #expect(await child.wait() == 0)
        // The simulated fleet is the inventory's, so each device heard is marked with its unit.
        #expect(rows.first?.hasPrefix("UNIT      ADDRESS") == true)
        #expect(rows.filter { $0.contains("SNS-000") }.count == 3)
        #expect(rows.dropLast().last?.hasPrefix("3 device(s) in") == true)
        #expect(rows.last == "inventory: 3 of 3 unit(s) heard")
    }
}
