import BLE
import YAML

/// The `store` behaviour: the device keeps what is written to its characteristics. A value written
/// (with or without response) to a stored characteristic is kept in the device's state — so a read
/// returns it, on this connection and every later one, and a state file replays it — notified (or
/// indicated) to a client subscribed to that characteristic, and shown in the dump (`stored`).
///
/// ```yaml
/// behaviour:
///   - { type: command-ack, control: FFE1, ack: FFE2, state: FFE3, commands: [ ... ] }
///   - { type: store, characteristics: [FFE4, FFE5] }
/// ```
public struct StoreBehaviour: Sendable, Equatable {
    /// The stored characteristics, in model order.
    public var characteristics: [CommandBehaviour.Path]

    public init(characteristics: [CommandBehaviour.Path]) {
        self.characteristics = characteristics
    }

    static func parse(_ node: YAMLNode, services: [DeviceModel.Service], _ r: ModelReader) throws(SimulatorError) -> StoreBehaviour {
        var paths: [CommandBehaviour.Path] = []
        var listed = false
        for (key, value) in try r.mapping(node, "a store behaviour", allowed: ["type", "characteristics"]) {
            guard key == "characteristics" else { continue }
            listed = true
            for item in try r.list(value, "characteristics") {
                let u = try r.uuid(item, "a stored characteristic")
                guard let (service, c) = services.lazy.flatMap({ s in s.characteristics.map { (s.uuid, $0) } }).first(where: { $0.1.uuid == u }) else {
                    throw r.fail("stored characteristic \(u) is not in `services:`", item)
                }
                guard !c.properties.isDisjoint(with: [.write, .writeWithoutResponse]) else {
                    throw r.fail("stored characteristic \(u) must declare write or write-without-response", item,
                                 hint: "a client stores a value by writing it")
                }
                let path = CommandBehaviour.Path(service: service, characteristic: u)
                guard !paths.contains(path) else { throw r.fail("characteristic \(u) is listed twice", item) }
                paths.append(path)
            }
        }
        guard listed, !paths.isEmpty else {
            throw r.fail("a store behaviour needs `characteristics`: the characteristics whose written values are kept", node,
                         hint: "for example `characteristics: [FFE4, FFE5]`")
        }
        return StoreBehaviour(characteristics: paths)
    }
}

extension CommandBehaviour.Path {
    /// `SERVICE/CHARACTERISTIC`, as the dump names a stored value (`FFE0/FFE4`).
    public var key: String { "\(service)/\(characteristic)" }
}
