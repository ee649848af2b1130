import CBOR

// File management group (8): Zephyr, "File management".

/// File upload (command 0, write): one chunk of the file `name` at `off`; the first chunk carries the
/// whole length. An upload at offset 0 replaces the file.
public struct FileUploadRequest: SMPRequest {
    public typealias Response = FileUploadResponse
    public static let group = SMPGroup.file
    public static let command: UInt8 = 0
    public static let op = SMPOp.write
    public var offset: Int
    public var data: [UInt8]
    public var name: String
    public var length: Int?
    public init(offset: Int, data: [UInt8], name: String, length: Int? = nil) {
        self.offset = offset
        self.data = data
        self.name = name
        self.length = length
    }
    public init(body: CBOR) throws(SMPMessageError) {
        let f = try SMPFields(body, "file upload request")
        offset = try f.size(required: "off")
        data = try f.bytes(required: "data")
        name = try f.text(required: "name")
        length = try f.size("len")
    }
    public var body: CBOR {
        var b = SMPBody()
        b.add("off", .unsigned(UInt64(offset)))
        b.add("data", .bytes(data))
        b.add("name", .text(name))
        b.add("len", length.map { .unsigned(UInt64($0)) })
        return b.cbor
    }
}

public struct FileUploadResponse: SMPMessage {
    /// The file's length on the device so far (where the next chunk must start).
    public var offset: Int
    public init(offset: Int) { self.offset = offset }
    public init(body: CBOR) throws(SMPMessageError) { offset = try SMPFields(body, "file upload response").size(required: "off") }
    public var body: CBOR { .textMap(["off": .unsigned(UInt64(offset))]) }
}

/// File status (command 1, read): the length of a file.
public struct FileStatusRequest: SMPRequest {
    public typealias Response = FileStatusResponse
    public static let group = SMPGroup.file
    public static let command: UInt8 = 1
    public static let op = SMPOp.read
    public var name: String
    public init(name: String) { self.name = name }
    public init(body: CBOR) throws(SMPMessageError) { name = try SMPFields(body, "file status request").text(required: "name") }
    public var body: CBOR { .textMap(["name": .text(name)]) }
}

public struct FileStatusResponse: SMPMessage {
    public var length: Int
    public init(length: Int) { self.length = length }
    public init(body: CBOR) throws(SMPMessageError) { length = try SMPFields(body, "file status response").size(required: "len") }
    public var body: CBOR { .textMap(["len": .unsigned(UInt64(length))]) }
}

/// File hash/checksum (command 2, read): `sha256` or `crc32` of (part of) a file.
public struct FileHashRequest: SMPRequest {
    public typealias Response = FileHashResponse
    public static let group = SMPGroup.file
    public static let command: UInt8 = 2
    public static let op = SMPOp.read
    public var name: String
    public var type: String?
    public var offset: Int?
    public var length: Int?
    public init(name: String, type: String? = nil, offset: Int? = nil, length: Int? = nil) {
        self.name = name
        self.type = type
        self.offset = offset
        self.length = length
    }
    public init(body: CBOR) throws(SMPMessageError) {
        let f = try SMPFields(body, "file hash request")
        name = try f.text(required: "name")
        type = try f.text("type")
        offset = try f.size("off")
        length = try f.size("len")
    }
    public var body: CBOR {
        var b = SMPBody()
        b.add("name", .text(name))
        b.add("type", type.map { .text($0) })
        b.add("off", offset.map { .unsigned(UInt64($0)) })
        b.add("len", length.map { .unsigned(UInt64($0)) })
        return b.cbor
    }
}

public struct FileHashResponse: SMPMessage {
    public var type: String
    public var offset: Int?
    public var length: Int
    /// A byte string for hashes (`sha256`), an unsigned integer for checksums (`crc32`).
    public var output: CBOR
    public init(type: String, offset: Int? = nil, length: Int, output: CBOR) {
        self.type = type
        self.offset = offset
        self.length = length
        self.output = output
    }
    public init(body: CBOR) throws(SMPMessageError) {
        let f = try SMPFields(body, "file hash response")
        type = try f.text(required: "type")
        offset = try f.size("off")
        length = try f.size(required: "len")
        guard let out = body["output"], out.bytesValue != nil || out.unsignedValue != nil else {
            throw SMPMessageError("file hash response: `output` must be a byte string or an unsigned integer")
        }
        output = out
    }
    public var body: CBOR {
        var b = SMPBody()
        b.add("type", .text(type))
        b.add("off", offset.map { .unsigned(UInt64($0)) })
        b.add("len", .unsigned(UInt64(length)))
        b.add("output", output)
        return b.cbor
    }
}
