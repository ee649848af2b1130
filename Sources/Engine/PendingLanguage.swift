// TEMPORARY until the workflow language gains `irreversible` and `busy`, and Session gains `discover`.
import BLE
import Workflow

extension Step {
    var irreversible: Bool { false }
}

extension Step.Await {
    var busy: MatcherSpec? { nil }
}

extension Session {
    func discover(services: [BluetoothUUID], timeout: Duration) async throws {}
}
