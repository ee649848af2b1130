// TEMPORARY until the workflow language gains `irreversible` and `busy`, and Session gains `discover`.
import BLE
import Workflow


extension Session {
    func discover(services: [BluetoothUUID], timeout: Duration) async throws {}
}
