import CBOR

// Settings (config) management group (3): Zephyr, "Settings (Config) Management Group".

/// Read a setting (command 0, read).
public struct SettingsReadRequest: SMPRequest {
    public typealias Response = SettingsReadResponse
    public static let group = SMPGroup.settings
    public static let command: UInt8 = 0
    public static let op = SMPOp.read
    public var name: String
    public var maxSize: Int?
    public init(name: String, maxSize: Int? = nil) {
        self.name = name
        self.maxSize = maxSize
    }
    public init(body: CBOR) throws(SMPMessageError) {
        let f = try SMPFields(body, "settings read request")
        name = try f.text(required: "name")
        maxSize = try f.size("max_size")
    }
    public var body: CBOR {
        var b = SMPBody()
        b.add("name", .text(name))
        b.add("max_size", maxSize.map { .unsigned(UInt64($0)) })
        return b.cbor
    }
}

public struct SettingsReadResponse: SMPMessage {
    public var value: [UInt8]
    public var maxSize: Int?
    public init(value: [UInt8], maxSize: Int? = nil) {
        self.value = value
        self.maxSize = maxSize
    }
    public init(body: CBOR) throws(SMPMessageError) {
        let f = try SMPFields(body, "settings read response")
        value = try f.bytes(required: "val")
        maxSize = try f.size("max_size")
    }
    public var body: CBOR {
        var b = SMPBody()
        b.add("val", .bytes(value))
        b.add("max_size", maxSize.map { .unsigned(UInt64($0)) })
        return b.cbor
    }
}

/// Write a setting (command 0, write).
public struct SettingsWriteRequest: SMPRequest {
    public typealias Response = EmptyResponse
    public static let group = SMPGroup.settings
    public static let command: UInt8 = 0
    public static let op = SMPOp.write
    public var name: String
    public var value: [UInt8]
    public init(name: String, value: [UInt8]) {
        self.name = name
        self.value = value
    }
    public init(body: CBOR) throws(SMPMessageError) {
        let f = try SMPFields(body, "settings write request")
        name = try f.text(required: "name")
        value = try f.bytes(required: "val")
    }
    public var body: CBOR { .textMap(["name": .text(name), "val": .bytes(value)]) }
}

/// Delete a setting (command 1, write).
public struct SettingsDeleteRequest: SMPRequest {
    public typealias Response = EmptyResponse
    public static let group = SMPGroup.settings
    public static let command: UInt8 = 1
    public static let op = SMPOp.write
    public var name: String
    public init(name: String) { self.name = name }
    public init(body: CBOR) throws(SMPMessageError) { name = try SMPFields(body, "settings delete request").text(required: "name") }
    public var body: CBOR { .textMap(["name": .text(name)]) }
}

/// Commit the settings set so far (command 2, write).
public struct SettingsCommitRequest: SMPRequest {
    public typealias Response = EmptyResponse
    public static let group = SMPGroup.settings
    public static let command: UInt8 = 2
    public static let op = SMPOp.write
    public init() {}
    public init(body: CBOR) throws(SMPMessageError) { _ = try SMPFields(body, "settings commit request") }
    public var body: CBOR { .map([]) }
}

/// Load the settings from persistent storage (command 3, read).
public struct SettingsLoadRequest: SMPRequest {
    public typealias Response = EmptyResponse
    public static let group = SMPGroup.settings
    public static let command: UInt8 = 3
    public static let op = SMPOp.read
    public init() {}
    public init(body: CBOR) throws(SMPMessageError) { _ = try SMPFields(body, "settings load request") }
    public var body: CBOR { .map([]) }
}

/// Save the settings to persistent storage (command 3, write): all of them, or the subtree `name`.
public struct SettingsSaveRequest: SMPRequest {
    public typealias Response = EmptyResponse
    public static let group = SMPGroup.settings
    public static let command: UInt8 = 3
    public static let op = SMPOp.write
    public var name: String?
    public init(name: String? = nil) { self.name = name }
    public init(body: CBOR) throws(SMPMessageError) { name = try SMPFields(body, "settings save request").text("name") }
    public var body: CBOR {
        var b = SMPBody()
        b.add("name", name.map { .text($0) })
        return b.cbor
    }
}
