import BLE
import Foundation
import Support
import Workflow

/// Positionals every characteristic command takes.
private let characteristicPositionals = [
    PositionalSpec("DEVICE", help: "inventory id, address or advertised name"),
    PositionalSpec("SERVICE", help: "service UUID (180A, or the 128-bit form)"),
    PositionalSpec("CHARACTERISTIC", help: "characteristic UUID (2A26, or the 128-bit form)"),
]

/// `--as FORMAT`: how a value read is shown.
private let asOption = OptionSpec("as", kind: .value("FORMAT"),
                                  help: "decode as: hex (default), utf8, uint8, uint16le, int16be, sfloat, float, version, …")

/// A value decoded with `--as`, as text and as a JSON field set. A value that does not decode
/// (`--as uint8` on two bytes) fails with the bytes in the message.
private func decoded(_ bytes: [UInt8], _ format: ValueFormat) throws(ValueError) -> TypedValue {
    try format.decode(bytes)
}

/// `provision read --adapter SPEC DEVICE SERVICE CHARACTERISTIC [--as FORMAT] [--json]`.
public struct ReadCommand: Command {
    public init() {}

    public let name = "read"
    public let summary = "read one characteristic of one device"
    public let discussion = """
        Prints the value decoded as --as says (default hex), as a `read` step with `as:` would capture it.
        With --json: {"address", "characteristic", "device" (its id, else its address), "hex", "service",
        "type", "value"} on one line.
        Exit status: 0 read, 1 the device was not found, refused the read or the value does not decode as
        --as says, 2 usage, 3 adapter failure.
        """
    public let positionals = characteristicPositionals
    public let options = OneDevice.options + [asOption]

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        let out = context.output
        let args = arguments.positionals
        guard args.count == 3 else { return ExitCode.invalidInput }
        let path: CharacteristicPath, format: ValueFormat
        do {
            (path, format) = try OneDevice.characteristic(arguments)
        } catch {
            return OneDevice.report(error, usage: usage, output: out)
        }
        let device: OneDevice
        do {
            device = try await OneDevice.open(arguments, device: args[0], context: context)
        } catch {
            return OneDevice.report(error, usage: usage, output: out)
        }
        let session = device.session()
        let bytes: [UInt8]
        do {
            try await session.connect()
            bytes = try await session.read(service: path.service, characteristic: path.characteristic, timeout: max(.milliseconds(1), device.remaining))
        } catch {
            await session.disconnect()
            await device.close()
            return OneDevice.report(OneDevice.failure(error, doing: "read \(path)", on: device.shown), usage: usage, output: out)
        }
        await session.disconnect()
        await device.close()
        let value: TypedValue
        do {
            value = try decoded(bytes, format)
        } catch {
            out.err(escaping: "error: \(device.shown): read \(path): \(device.secrets.redact(error.message))")
            return ExitCode.someDevicesFailed
        }
        // A value that shows a secret, in any form, is `***`, as in a run's report.
        let hidden = device.secrets.hides(bytes: bytes) || device.secrets.hides(value.description)
        if arguments.flag(SharedOptions.json) {
            out.out(OneDevice.jsonLine(["device": .string(device.found.id ?? device.found.address.description),
                                        "address": .string(device.found.address.description),
                                        "service": .string(path.service.description), "characteristic": .string(path.characteristic.description),
                                        "hex": .string(hidden ? Inventory.redacted : bytes.hexString), "type": .string(value.type.name),
                                        "value": hidden ? .string(Inventory.redacted) : value.jsonScalar]))
        } else {
            out.out(escaping: hidden ? Inventory.redacted : value.description)
        }
        return ExitCode.success
    }
}

/// `provision write --adapter SPEC DEVICE SERVICE CHARACTERISTIC VALUE [--without-response]`.
public struct WriteCommand: Command {
    public init() {}

    public let name = "write"
    public let summary = "write one value to one characteristic of one device"
    public let discussion = """
        VALUE uses the workflow's value syntax: `hex:0102`, `utf8:hello`, `uint16le:300` (ENCODING:TEXT,
        one part), or YAML flow as in a workflow: '{ hex: "01${config}" }', '[{ hex: "03" }, { uint32le: 1500 }]'.
        With --inventory and an inventory id as DEVICE, `${…}` takes the device's variables; a value
        made from a secret is not echoed. A Write Request (answered by the device) unless
        --without-response. Exit status: 0 written, 1 the device was not found or refused the write,
        2 usage or a bad VALUE, 3 adapter failure.
        """
    public let positionals = characteristicPositionals + [PositionalSpec("VALUE", help: "hex:0102, utf8:TEXT, uint16le:300, or '{ hex: \"…\" }'")]
    public let options = OneDevice.options + [
        OptionSpec("without-response", kind: .flag, help: "send a Write Command (no answer; at most MTU-3 bytes)"),
    ]

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        let out = context.output
        let args = arguments.positionals
        guard args.count == 4 else { return ExitCode.invalidInput }
        let path: CharacteristicPath
        do {
            path = try OneDevice.path(service: args[1], characteristic: args[2])
        } catch {
            return OneDevice.report(error, usage: usage, output: out)
        }
        let parsed = ValueSpec.parse(commandLine: args[3])
        guard let spec = parsed.spec else {
            for d in parsed.diagnostics { out.err(ValidateCommand.render(d, output: out)) }
            return ExitCode.invalidInput
        }
        let device: OneDevice
        do {
            device = try await OneDevice.open(arguments, device: args[0], context: context)
        } catch {
            return OneDevice.report(error, usage: usage, output: out)
        }
        // `${…}` from the inventory device (id, name, address and its variables).
        let listed = device.found.device
        var secrets = device.secrets
        let bytes: [UInt8]
        do {
            bytes = try spec.bytes(variables: { listed?.value(of: $0) }, baseDirectory: context.currentDirectory)
        } catch {
            await device.close()
            out.err(escaping: "error: VALUE: \(secrets.redact(error.message))")
            if listed == nil, !spec.templates.allSatisfy({ $0.referencedNames.isEmpty }) {
                out.err("    hint: `${…}` takes an inventory device's variables: give --inventory FILE and the device's id as DEVICE")
            }
            return ExitCode.invalidInput
        }
        secrets.wrote(bytes, from: spec)
        let secret = secrets.usesSecret(spec) || secrets.hides(bytes: bytes)
        let session = device.session()
        let withResponse = !arguments.flag("without-response")
        do {
            try await session.connect()
            try await session.write(service: path.service, characteristic: path.characteristic, value: bytes, withResponse: withResponse,
                                    timeout: max(.milliseconds(1), device.remaining))
        } catch {
            await session.disconnect()
            await device.close()
            var failure = OneDevice.failure(error, doing: "write \(path)", on: device.shown)
            failure.message = secrets.redact(failure.message)
            return OneDevice.report(failure, usage: usage, output: out)
        }
        await session.disconnect()
        await device.close()
        let shownBytes = secret ? Inventory.redacted : bytes.hexString
        if arguments.flag(SharedOptions.json) {
            out.out(OneDevice.jsonLine(["device": .string(device.found.id ?? device.found.address.description),
                                        "address": .string(device.found.address.description),
                                        "service": .string(path.service.description), "characteristic": .string(path.characteristic.description),
                                        "hex": .string(shownBytes), "bytes": .integer(Int64(bytes.count)),
                                        "with_response": .boolean(withResponse)]))
        } else {
            out.out(escaping: "wrote \(bytes.count) byte(s) \(shownBytes) to \(path) of \(device.shown)\(withResponse ? "" : " (without response)")")
        }
        return ExitCode.success
    }
}

/// `provision subscribe --adapter SPEC DEVICE SERVICE CHARACTERISTIC [--count N] [--for DURATION]`.
public struct SubscribeCommand: Command {
    public init() {}

    public let name = "subscribe"
    public let summary = "print one characteristic's notifications (or indications) as they arrive"
    public let discussion = """
        Subscribes, then prints each value as it arrives, decoded as --as says (default hex); with --json,
        one JSON object a line with its time. --trigger CHAR=VALUE writes VALUE (write's syntax) to CHAR of
        the same service once subscribed, as an `await` step's trigger does: `--trigger FFF1=hex:02`. Ends after --count values, or when --for has passed
        (default 10s; --timeout bounds finding and connecting). Exit status: 0 done (with --count: that
        many arrived), 1 the device was not found, refused, dropped the link, or fewer than --count
        values came, 2 usage, 3 adapter failure.
        """
    public let positionals = characteristicPositionals
    public let options = OneDevice.options + [
        asOption,
        OptionSpec("count", short: "n", kind: .value("N"), help: "stop after N values"),
        OptionSpec("for", kind: .value("DURATION"), help: "listen this long (default 10s)"),
        OptionSpec("indicate", kind: .flag, help: "ask for indications instead of notifications"),
        OptionSpec("trigger", kind: .value("CHAR=VALUE"), help: "once subscribed, write VALUE to CHAR of the same service (as `await: trigger:`)"),
    ]

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        let out = context.output
        let args = arguments.positionals
        guard args.count == 3 else { return ExitCode.invalidInput }
        let path: CharacteristicPath, format: ValueFormat
        do {
            (path, format) = try OneDevice.characteristic(arguments)
        } catch {
            return OneDevice.report(error, usage: usage, output: out)
        }
        var count: Int?
        if let c = arguments.value("count") {
            guard let n = Int(c), n >= 1 else {
                return OneDevice.report(.init(message: "`--count` must be a positive whole number, not `\(c)`", code: ExitCode.invalidInput, isUsage: true),
                                        usage: usage, output: out)
            }
            count = n
        }
        var listen: Duration = .seconds(10)
        if let f = arguments.value("for") {
            guard case .success(let d) = DurationText.parse(f), d > .zero else {
                return OneDevice.report(.init(message: "`--for` must be a duration with a unit (10s, 2m), not `\(f)`", code: ExitCode.invalidInput, isUsage: true),
                                        usage: usage, output: out)
            }
            listen = d
        }
        var trigger: (characteristic: BluetoothUUID, value: ValueSpec)?
        if let t = arguments.value("trigger") {
            guard let eq = t.firstIndex(of: "="), let c = BluetoothUUID(String(t[..<eq])) else {
                return OneDevice.report(.init(message: "`--trigger` is CHAR=VALUE (FFF1=hex:02), not `\(t)`", code: ExitCode.invalidInput, isUsage: true),
                                        usage: usage, output: out)
            }
            let parsed = ValueSpec.parse(commandLine: String(t[t.index(after: eq)...]), path: "--trigger")
            guard let spec = parsed.spec else {
                for d in parsed.diagnostics { out.err(ValidateCommand.render(d, output: out)) }
                return ExitCode.invalidInput
            }
            trigger = (c, spec)
        }
        let device: OneDevice
        do {
            device = try await OneDevice.open(arguments, device: args[0], context: context)
        } catch {
            return OneDevice.report(error, usage: usage, output: out)
        }
        let session = device.session()
        var secrets = device.secrets
        let stream: NotificationStream
        do {
            try await session.connect()
            stream = try await session.notifications(service: path.service, characteristic: path.characteristic,
                                                     indicate: arguments.flag("indicate"), timeout: max(.milliseconds(1), device.remaining))
            if let trigger {
                let listed = device.found.device
                let bytes = try trigger.value.bytes(variables: { listed?.value(of: $0) }, baseDirectory: context.currentDirectory)
                secrets.wrote(bytes, from: trigger.value)
                try await session.write(service: path.service, characteristic: trigger.characteristic, value: bytes, withResponse: true,
                                        timeout: max(.milliseconds(1), device.remaining))
            }
        } catch {
            await session.disconnect()
            await device.close()
            var failure = OneDevice.failure(error, doing: "subscribe \(path)", on: device.shown)
            failure.message = secrets.redact(failure.message)
            return OneDevice.report(failure, usage: usage, output: out)
        }
        let json = arguments.flag(SharedOptions.json)
        let shownSecrets = secrets
        let id = device.found.id ?? device.found.address.description
        let wanted = count
        let received: Result<Int, any Error>
        do {
            let n = try await withDeadline(listen, operation: "listening") { () async throws -> Int in
                var n = 0
                for try await bytes in stream {
                    n += 1
                    let value = try? decoded(bytes, format)
                    // A value that shows a secret, in any form, is `***`, as in a run's report.
                    let hidden = shownSecrets.hides(bytes: bytes) || (value.map { shownSecrets.hides($0.description) } ?? false)
                    if json {
                        var fields: [String: JSONScalar] = ["device": .string(id), "characteristic": .string(path.characteristic.description),
                                                            "time": .string(Self.now()), "hex": .string(hidden ? Inventory.redacted : bytes.hexString)]
                        if let value {
                            fields["value"] = hidden ? .string(Inventory.redacted) : value.jsonScalar
                            fields["type"] = .string(value.type.name)
                        }
                        out.out(OneDevice.jsonLine(fields))
                    } else if hidden {
                        out.out(Inventory.redacted)
                    } else {
                        out.out(escaping: value?.description ?? "\(bytes.hexString) (not \(format.rawValue))")
                    }
                    if let wanted, n >= wanted { return n }
                }
                throw BLEError.disconnected(.remoteUserTerminated)
            }
            received = .success(n)
        } catch BLEError.timeout {
            received = .success(-1)
        } catch {
            received = .failure(error)
        }
        await stream.cancel()
        await session.disconnect()
        await device.close()
        switch received {
        case .success(let n) where n >= 0:
            return ExitCode.success
        case .success:
            if let wanted {
                out.err(escaping: "error: \(device.shown): fewer than \(wanted) value(s) of \(path) arrived within \(DurationText.format(listen))")
                return ExitCode.someDevicesFailed
            }
            return ExitCode.success
        case .failure(let error):
            var failure = OneDevice.failure(error, doing: "subscribe \(path)", on: device.shown)
            failure.message = secrets.redact(failure.message)
            return OneDevice.report(failure, usage: usage, output: out)
        }
    }

    /// Now, ISO 8601 UTC with milliseconds.
    static func now() -> String {
        Date().formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}
