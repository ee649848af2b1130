import BLE
import Foundation
import Workflow

/// `provision gatt --adapter SPEC DEVICE [--json]`: one device's GATT database (services,
/// characteristics, descriptors) and the value of every readable characteristic.
public struct GATTCommand: Command {
    public init() {}

    public let name = "gatt"
    public let summary = "list one device's GATT database and the values of its readable characteristics"
    public let discussion = """
        DEVICE is an inventory id (with --inventory), an address (C0:5E:00:00:00:01) or an advertised name.
        The device is found, connected, discovered in full and every characteristic that declares `read`
        is read (a refused read is shown with its error). Values are shown as hex, and as text when they
        are printable UTF-8; known characteristics are decoded (Battery Level as a percentage, PnP ID and
        connection parameters as their fields, strings as text); whatever the device sends is escaped.
        With --json, one JSON document.
        Exit status: 0 done, 1 the device was not found or failed, 2 usage, 3 adapter failure.
        """
    public let positionals = [PositionalSpec("DEVICE", help: "inventory id, address or advertised name")]
    public let options = OneDevice.options + [
        OptionSpec("no-values", kind: .flag, help: "discover only; read nothing"),
    ]

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        let out = context.output
        guard let argument = arguments.positionals.first else { return ExitCode.invalidInput }
        let device: OneDevice
        do {
            device = try await OneDevice.open(arguments, device: argument, context: context)
        } catch {
            return OneDevice.report(error, usage: usage, output: out)
        }
        let survey: GATTSurvey
        do {
            let central = device.central, address = device.found.address, readValues = !arguments.flag("no-values")
            let limit = device.remaining
            survey = try await withDeadline(limit, operation: "surveying the GATT database") {
                let link = try await central.connect(to: address, options: ConnectOptions(timeout: limit))
                do {
                    let survey = try await GATTSurvey.run(on: link, readValues: readValues)
                    await link.disconnect()
                    return survey
                } catch {
                    await link.disconnect()
                    throw error
                }
            }
        } catch {
            await device.close()
            return OneDevice.report(OneDevice.failure(error, doing: "gatt", on: device.shown), usage: usage, output: out)
        }
        await device.close()
        if arguments.flag(SharedOptions.json) {
            out.out(Self.json(survey, device: device.json, secrets: device.secrets))
        } else {
            for line in Self.text(survey, device: device) { out.out(escaping: line) }
        }
        return ExitCode.success
    }

    /// The survey as lines of text (escaped by the caller when printed).
    static func text(_ survey: GATTSurvey, device: OneDevice) -> [String] {
        let f = device.found
        var lines = ["\(device.shown)\(f.name.map { " \"\($0)\"" } ?? ""), RSSI \(f.rssi) dBm, on \(f.adapter), ATT_MTU \(survey.mtu)"]
        for s in survey.services {
            lines.append("service \(Self.named(s.service.uuid))  handles 0x\(hex(s.service.startHandle))-0x\(hex(s.service.endHandle))")
            for c in s.characteristics {
                var line = "  characteristic \(Self.named(c.characteristic.uuid))  handle 0x\(hex(c.characteristic.valueHandle))"
                line += "  " + (c.characteristic.properties.names.isEmpty ? "(no properties)" : c.characteristic.properties.names.joined(separator: ", "))
                switch c.value {
                case .success(let bytes)? where device.secrets.hides(bytes: bytes): line += "  = " + Inventory.redacted
                case .success(let bytes)?: line += "  = " + Self.shown(bytes, of: c.characteristic.uuid)
                case .failure(let e)?: line += "  (read refused: \(e))"
                case nil: break
                }
                lines.append(line)
                for d in c.descriptors {
                    lines.append("    descriptor \(Self.named(d.uuid))  handle 0x\(hex(d.handle))")
                }
            }
        }
        return lines
    }

    /// A known characteristic decoded with its bytes (`57 % (39)`); otherwise `2.4.1` shown as
    /// `"2.4.1" (322e342e31)`, and bytes that are not printable text as hex alone.
    static func shown(_ bytes: [UInt8], of uuid: BluetoothUUID? = nil) -> String {
        if bytes.isEmpty { return "(empty)" }
        if let uuid, let decoded = KnownCharacteristic.decode(uuid, bytes) { return "\(decoded) (\(bytes.hexString))" }
        if let text = text(bytes, of: uuid) { return "\"\(text)\" (\(bytes.hexString))" }
        return bytes.hexString
    }

    /// The value as text: for a known characteristic only when it is a string (Battery Level `39` is
    /// the number 57, not the text "9"); for others when the bytes are printable UTF-8.
    static func text(_ bytes: [UInt8], of uuid: BluetoothUUID?) -> String? {
        if let uuid, KnownCharacteristic.isKnown(uuid) && !KnownCharacteristic.isString(uuid) { return nil }
        return printable(bytes)
    }

    /// The bytes as text when they are UTF-8 without control characters (a trailing NUL, as some
    /// firmware pads strings, is allowed and dropped).
    static func printable(_ bytes: [UInt8]) -> String? {
        var b = bytes[...]
        while b.last == 0 { b = b.dropLast() }
        guard !b.isEmpty, let s = String(validating: b, as: UTF8.self),
              !s.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else { return nil }
        return s
    }

    /// `180A Device Information`, or the UUID alone.
    static func named(_ uuid: BluetoothUUID) -> String {
        uuid.value16.flatMap { knownNames[$0] }.map { "\(uuid) \($0)" } ?? uuid.description
    }

    /// Names of common SIG-assigned UUIDs (Assigned Numbers), for reading a dump.
    static let knownNames: [UInt16: String] = [
        0x1800: "Generic Access", 0x1801: "Generic Attribute", 0x180A: "Device Information", 0x180F: "Battery",
        0x1809: "Health Thermometer", 0x180D: "Heart Rate", 0x1805: "Current Time",
        0x2A00: "Device Name", 0x2A01: "Appearance", 0x2A04: "Peripheral Preferred Connection Parameters",
        0x2A05: "Service Changed", 0x2A19: "Battery Level", 0x2A1C: "Temperature Measurement",
        0x2A23: "System ID", 0x2A24: "Model Number String", 0x2A25: "Serial Number String",
        0x2A26: "Firmware Revision String", 0x2A27: "Hardware Revision String", 0x2A28: "Software Revision String",
        0x2A29: "Manufacturer Name String", 0x2A50: "PnP ID", 0x2B29: "Client Supported Features",
        0x2B2A: "Database Hash", 0x2B3A: "Server Supported Features",
        0x2900: "Characteristic Extended Properties", 0x2901: "Characteristic User Description",
        0x2902: "Client Characteristic Configuration", 0x2904: "Characteristic Presentation Format",
    ]

    private struct JSONDescriptor: Encodable {
        var handle: UInt16
        var uuid: String
        var name: String?
    }

    private struct JSONCharacteristic: Encodable {
        var uuid: String
        var name: String?
        var declarationHandle: UInt16
        var valueHandle: UInt16
        var properties: [String]
        var descriptors: [JSONDescriptor]
        /// Hex, when read.
        var value: String?
        /// The value as text, when it is printable UTF-8 (and, for a known characteristic, a string).
        var text: String?
        /// A known characteristic's value decoded (`57 %`).
        var decoded: String?
        var error: String?
    }

    private struct JSONService: Encodable {
        var uuid: String
        var name: String?
        var startHandle: UInt16
        var endHandle: UInt16
        var characteristics: [JSONCharacteristic]
    }

    private struct JSONSurvey: Encodable {
        var device: [String: JSONScalar]
        var mtu: Int
        var services: [JSONService]
    }

    /// The survey as one JSON document (keys sorted, snake_case).
    static func json(_ survey: GATTSurvey, device: [String: JSONScalar], secrets: SecretScope = SecretScope()) -> String {
        func name(_ u: BluetoothUUID) -> String? { u.value16.flatMap { knownNames[$0] } }
        let doc = JSONSurvey(device: device, mtu: survey.mtu, services: survey.services.map { s in
            JSONService(uuid: s.service.uuid.description, name: name(s.service.uuid), startHandle: s.service.startHandle,
                        endHandle: s.service.endHandle, characteristics: s.characteristics.map { c in
                var value: String?, text: String?, decoded: String?, error: String?
                switch c.value {
                case .success(let b)? where secrets.hides(bytes: b):
                    value = Inventory.redacted
                case .success(let b)?:
                    value = b.hexString
                    text = Self.text(b, of: c.characteristic.uuid)
                    decoded = KnownCharacteristic.decode(c.characteristic.uuid, b)
                case .failure(let e)?: error = "\(e)"
                case nil: break
                }
                return JSONCharacteristic(uuid: c.characteristic.uuid.description, name: name(c.characteristic.uuid),
                                          declarationHandle: c.characteristic.declarationHandle, valueHandle: c.characteristic.valueHandle,
                                          properties: c.characteristic.properties.names,
                                          descriptors: c.descriptors.map { JSONDescriptor(handle: $0.handle, uuid: $0.uuid.description, name: name($0.uuid)) },
                                          value: value, text: text, decoded: decoded, error: error)
            })
        })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.keyEncodingStrategy = .convertToSnakeCase
        return String(decoding: (try? encoder.encode(doc)) ?? Data("{}".utf8), as: UTF8.self)
    }
}

private func hex(_ v: UInt16) -> String {
    let s = String(v, radix: 16)
    return String(repeating: "0", count: max(0, 4 - s.count)) + s
}
