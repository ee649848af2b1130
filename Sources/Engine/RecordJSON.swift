import Foundation

/// A small JSON writer for the records written per device (journal lines, the report), producing the
/// same bytes as `EngineJSON.encoder` (snake_case keys, sorted, slashes unescaped, optional fields
/// left out when nil) at a fraction of the cost of `JSONEncoder` (which dominated the engine's CPU
/// profile). Keys are written in sorted order by hand; `RecordJSONTests` checks every type against
/// `JSONEncoder`, byte for byte, and by decoding back.
struct RecordJSON {
    private(set) var bytes: [UInt8] = []
    private let pretty: Bool
    /// Per open container: whether it has an element yet.
    private var hasElement: [Bool] = []

    init(pretty: Bool = false, capacity: Int = 1024) {
        self.pretty = pretty
        bytes.reserveCapacity(capacity)
    }

    /// The bytes written so far, removed from the writer (which keeps its nesting state): for writing
    /// a large document in chunks.
    mutating func drain() -> Data {
        defer { bytes.removeAll(keepingCapacity: true) }
        return Data(bytes)
    }

    // MARK: Containers

    mutating func beginObject() { open(UInt8(ascii: "{")) }
    mutating func endObject() { close(UInt8(ascii: "}")) }
    mutating func beginArray() { open(UInt8(ascii: "[")) }
    mutating func endArray() { close(UInt8(ascii: "]")) }

    private mutating func open(_ b: UInt8) {
        bytes.append(b)
        hasElement.append(false)
    }

    private mutating func close(_ b: UInt8) {
        let had = hasElement.popLast() ?? false
        if pretty {
            // JSONEncoder writes an empty container as an empty line between its brackets.
            if !had { bytes.append(0x0A) }
            newline()
        }
        bytes.append(b)
    }

    /// Separator and indentation before an element of the current container.
    private mutating func element() {
        guard let last = hasElement.indices.last else { return }
        if hasElement[last] { bytes.append(UInt8(ascii: ",")) }
        hasElement[last] = true
        if pretty { newline() }
    }

    private mutating func newline() {
        bytes.append(0x0A)
        for _ in 0..<hasElement.count { bytes.append(0x20); bytes.append(0x20) }
    }

    /// The key of the next member of the current object.
    mutating func key(_ k: String) {
        element()
        string(k)
        if pretty {
            bytes.append(contentsOf: [0x20, UInt8(ascii: ":"), 0x20])
        } else {
            bytes.append(UInt8(ascii: ":"))
        }
    }

    /// Starts an element of the current array.
    mutating func item() { element() }

    // MARK: Values

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    mutating func string(_ s: String) {
        bytes.append(UInt8(ascii: "\""))
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "\""): bytes.append(0x5C); bytes.append(b)
            case 0x5C: bytes.append(0x5C); bytes.append(0x5C)
            case 0x0A: bytes.append(0x5C); bytes.append(UInt8(ascii: "n"))
            case 0x0D: bytes.append(0x5C); bytes.append(UInt8(ascii: "r"))
            case 0x09: bytes.append(0x5C); bytes.append(UInt8(ascii: "t"))
            case 0x08: bytes.append(0x5C); bytes.append(UInt8(ascii: "b"))
            case 0x0C: bytes.append(0x5C); bytes.append(UInt8(ascii: "f"))
            case 0..<0x20:
                bytes.append(contentsOf: [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), Self.hex[Int(b >> 4)], Self.hex[Int(b & 0xF)]])
            default: bytes.append(b)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    mutating func int(_ v: Int) { bytes.append(contentsOf: String(v).utf8) }

    mutating func bool(_ v: Bool) { bytes.append(contentsOf: (v ? "true" : "false").utf8) }

    /// As `JSONEncoder` writes a finite Double: its shortest description, without a trailing `.0`.
    /// (Non-finite values cannot occur in these records; they are written as 0 rather than invalid JSON.)
    mutating func double(_ v: Double) {
        guard v.isFinite else {
            bytes.append(UInt8(ascii: "0"))
            return
        }
        var text = v.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        bytes.append(contentsOf: text.utf8)
    }

    mutating func stringArray(_ values: [String]) {
        beginArray()
        for v in values {
            item()
            string(v)
        }
        endArray()
    }

    /// A `[String: String]` with its keys sorted (keys are written as they are, not converted).
    mutating func stringMap(_ map: [String: String]) {
        beginObject()
        for k in map.keys.sorted() {
            key(k)
            string(map[k] ?? "")
        }
        endObject()
    }

    mutating func intMap(_ map: [String: Int]) {
        beginObject()
        for k in map.keys.sorted() {
            key(k)
            int(map[k] ?? 0)
        }
        endObject()
    }

    // MARK: Optional members (left out when nil, as the synthesized encoders do)

    mutating func member(_ k: String, _ v: String?) { if let v { key(k); string(v) } }
    mutating func member(_ k: String, _ v: Int?) { if let v { key(k); int(v) } }
    mutating func member(_ k: String, _ v: Double?) { if let v { key(k); double(v) } }
    mutating func member(_ k: String, _ v: Bool?) { if let v { key(k); bool(v) } }
}

/// A record that writes itself with `RecordJSON`, keys in sorted order.
protocol RecordJSONWritable {
    func write(to json: inout RecordJSON)
}

extension RecordJSONWritable {
    /// One compact line (no newline).
    func compactJSON() -> [UInt8] {
        var json = RecordJSON()
        write(to: &json)
        return json.bytes
    }
}

extension FileRef: RecordJSONWritable {
    func write(to json: inout RecordJSON) {
        json.beginObject()
        json.member("name", name)
        json.key("path"); json.string(path)
        json.key("sha256"); json.string(sha256)
        json.endObject()
    }
}

extension StopInfo: RecordJSONWritable {
    func write(to json: inout RecordJSON) {
        json.beginObject()
        json.key("at"); json.string(at)
        json.key("message"); json.string(message)
        json.key("reason"); json.string(reason)
        json.endObject()
    }
}

extension FailureRecord: RecordJSONWritable {
    func write(to json: inout RecordJSON) {
        json.beginObject()
        json.key("causes"); json.stringArray(causes)
        json.key("kind"); json.string(kind.rawValue)
        json.key("message"); json.string(message)
        json.member("step", step)
        json.endObject()
    }
}

extension StepRecord: RecordJSONWritable {
    func write(to json: inout RecordJSON) {
        json.beginObject()
        json.key("attempts"); json.int(attempts)
        json.key("duration_ms"); json.double(durationMs)
        if let error { json.key("error"); error.write(to: &json) }
        json.key("kind"); json.string(kind)
        json.key("name"); json.string(name)
        json.key("outcome"); json.string(outcome)
        json.key("start_ms"); json.double(startMs)
        json.endObject()
    }
}

extension DeviceRecord: RecordJSONWritable {
    func write(to json: inout RecordJSON) {
        json.beginObject()
        json.member("adapter", adapter)
        json.member("address", address)
        json.member("att_round_trips", attRoundTrips)
        json.key("attempts"); json.int(attempts)
        json.key("captured"); json.stringMap(captured)
        json.member("carried_over", carriedOver)
        json.member("duration_ms", durationMs)
        if let error { json.key("error"); error.write(to: &json) }
        json.key("id"); json.string(id)
        json.member("name", name)
        json.key("outcome"); json.string(outcome.rawValue)
        json.member("resumed", resumed)
        json.member("rssi", rssi)
        json.member("skip_reason", skipReason)
        json.member("started", started)
        json.key("steps")
        json.beginArray()
        for s in steps {
            json.item()
            s.write(to: &json)
        }
        json.endArray()
        json.endObject()
    }
}

extension JournalHeader: RecordJSONWritable {
    func write(to json: inout RecordJSON) {
        json.beginObject()
        json.key("adapters"); json.stringArray(adapters)
        json.key("inventory"); inventory.write(to: &json)
        json.key("options"); json.stringMap(options)
        json.key("resumed"); json.bool(resumed)
        json.key("run_id"); json.string(runId)
        json.key("started"); json.string(started)
        json.key("tool_version"); json.string(toolVersion)
        json.key("workflow"); workflow.write(to: &json)
        json.endObject()
    }
}

extension JournalLine: RecordJSONWritable {
    func write(to json: inout RecordJSON) {
        json.beginObject()
        json.key("at"); json.string(at)
        json.member("attempt", attempt)
        json.member("device", device)
        if let header { json.key("header"); header.write(to: &json) }
        if let record { json.key("record"); record.write(to: &json) }
        json.member("step", step)
        json.member("step_index", stepIndex)
        if let stopped { json.key("stopped"); stopped.write(to: &json) }
        json.key("type"); json.string(type)
        json.endObject()
    }
}

extension AdapterInfo: RecordJSONWritable {
    func write(to json: inout RecordJSON) {
        json.beginObject()
        json.member("failure", failure)
        json.key("id"); json.string(id)
        json.member("peak_links", peakLinks)
        json.key("simulated"); json.bool(simulated)
        json.key("slots"); json.int(slots)
        json.endObject()
    }
}

extension RunInfo: RecordJSONWritable {
    func write(to json: inout RecordJSON) {
        json.beginObject()
        json.key("adapters")
        json.beginArray()
        for a in adapters {
            json.item()
            a.write(to: &json)
        }
        json.endArray()
        json.member("finished", finished)
        json.key("id"); json.string(id)
        json.key("inventory"); inventory.write(to: &json)
        json.member("journal", journal)
        json.key("options"); json.stringMap(options)
        json.member("peak_concurrency", peakConcurrency)
        json.key("resumed"); json.bool(resumed)
        json.key("simulated"); json.bool(simulated)
        json.key("started"); json.string(started)
        json.key("station"); json.string(station)
        if let stopped { json.key("stopped"); stopped.write(to: &json) }
        json.key("tool_version"); json.string(toolVersion)
        json.key("workflow"); workflow.write(to: &json)
        json.endObject()
    }
}

extension Summary: RecordJSONWritable {
    func write(to json: inout RecordJSON) {
        json.beginObject()
        json.member("att_round_trips_per_device", attRoundTripsPerDevice)
        json.key("devices_per_minute"); json.double(devicesPerMinute)
        if let d = durationMs {
            json.key("duration_ms")
            json.beginObject()
            json.key("max"); json.double(d.max)
            json.key("p50"); json.double(d.p50)
            json.key("p95"); json.double(d.p95)
            json.endObject()
        }
        json.key("errors"); json.intMap(errors)
        json.key("outcomes"); json.intMap(outcomes)
        json.key("total"); json.int(total)
        json.key("wall_ms"); json.double(wallMs)
        json.endObject()
    }
}

extension RunReport: RecordJSONWritable {
    func write(to json: inout RecordJSON) {
        write(to: &json, afterEachDevice: { _ in })
    }

    /// `afterEachDevice` may drain what was written so far (streaming the report to a file).
    func write(to json: inout RecordJSON, afterEachDevice: (inout RecordJSON) throws -> Void) rethrows {
        json.beginObject()
        json.key("devices")
        json.beginArray()
        for d in devices {
            json.item()
            d.write(to: &json)
            try afterEachDevice(&json)
        }
        json.endArray()
        json.key("run"); run.write(to: &json)
        json.key("schema"); json.string(schema)
        json.key("summary"); summary.write(to: &json)
        json.endObject()
    }
}
