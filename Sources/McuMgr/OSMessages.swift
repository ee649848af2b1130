import CBOR

// OS management group (0): Zephyr, "Default/OS Management Group".

/// Echo (command 0, write): the device answers with the text it received.
public struct EchoRequest: SMPRequest {
    public typealias Response = EchoResponse
    public static let group = SMPGroup.os
    public static let command: UInt8 = 0
    public static let op = SMPOp.write
    public var text: String
    public init(text: String) { self.text = text }
    public init(body: CBOR) throws(SMPMessageError) { text = try SMPFields(body, "echo request").text(required: "d") }
    public var body: CBOR { .textMap(["d": .text(text)]) }
}

public struct EchoResponse: SMPMessage {
    public var text: String
    public init(text: String) { self.text = text }
    public init(body: CBOR) throws(SMPMessageError) { text = try SMPFields(body, "echo response").text(required: "r") }
    public var body: CBOR { .textMap(["r": .text(text)]) }
}

/// System reset (command 5, write): the device answers, then resets.
public struct ResetRequest: SMPRequest {
    public typealias Response = EmptyResponse
    public static let group = SMPGroup.os
    public static let command: UInt8 = 5
    public static let op = SMPOp.write
    public init() {}
    public init(body: CBOR) throws(SMPMessageError) { _ = try SMPFields(body, "reset request") }
    public var body: CBOR { .map([]) }
}

/// MCUmgr parameters (command 6, read): the size and number of the device's SMP buffers.
public struct ParametersRequest: SMPRequest {
    public typealias Response = ParametersResponse
    public static let group = SMPGroup.os
    public static let command: UInt8 = 6
    public static let op = SMPOp.read
    public init() {}
    public init(body: CBOR) throws(SMPMessageError) { _ = try SMPFields(body, "parameters request") }
    public var body: CBOR { .map([]) }
}

public struct ParametersResponse: SMPMessage {
    /// `buf_size`: the largest SMP frame the device can hold.
    public var bufferSize: Int
    /// `buf_count`: how many such buffers it has (requests and responses share them).
    public var bufferCount: Int
    public init(bufferSize: Int, bufferCount: Int) {
        self.bufferSize = bufferSize
        self.bufferCount = bufferCount
    }
    public init(body: CBOR) throws(SMPMessageError) {
        let f = try SMPFields(body, "parameters response")
        bufferSize = try f.size(required: "buf_size")
        bufferCount = try f.size(required: "buf_count")
    }
    public var body: CBOR { .textMap(["buf_size": .unsigned(UInt64(bufferSize)), "buf_count": .unsigned(UInt64(bufferCount))]) }
}
