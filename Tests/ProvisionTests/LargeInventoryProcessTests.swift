import Foundation
import Testing
import EngineTestSupport
import TestSupport

/// A line of 100,000 devices is the scale-out target (issue 17, case 9): the inventory
/// `dev-inventory --devices 100000` writes (13 MB of YAML) is one `validate` accepts.
@Suite(.serialized) struct LargeInventoryProcessTests {
    @Test func aHundredThousandDeviceInventoryValidates() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let r = try await ChildProcess.shell("""
            "$PROVISION" dev-inventory --devices 100000 --out big --model models/sensor-v2.yaml && \
            cp \(TestLine.packageRoot)/workflows/sensor-v2.yaml big/ && \
            "$PROVISION" validate big/sensor-v2.yaml --inventory big/inventory.yaml
            """, directory: line.directory)
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("wrote big/inventory.yaml (100000 devices, 13200053 bytes)"), "\(r.stdout)")
        let size = try #require(try FileManager.default.attributesOfItem(atPath: line.directory + "/big/inventory.yaml")[.size] as? Int)
        #expect(size > 10 * 1024 * 1024, "larger than a workflow may be")
    }
}
