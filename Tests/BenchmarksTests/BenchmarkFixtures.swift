import BLESimulator
import Foundation

/// What the benchmarks' tests measure with: the reference device model from the repository.
enum BenchmarkFixtures {
    static let modelPath: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path + "/inventory/models/sensor-v2.yaml"
    }()

    static func model() throws -> DeviceModel {
        try DeviceModel.load(path: modelPath)
    }
}
