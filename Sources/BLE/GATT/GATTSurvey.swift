/// A peripheral's whole GATT database as one link sees it: every primary service, its characteristics
/// and their descriptors, and the value of each readable characteristic (`provision gatt`).
///
/// Discovery uses the GATT procedures of `GATTClient` (Vol 3 Part G 4.4.1, 4.6.1, 4.7.1); values are
/// read with Read and Read Blob (4.8.1, 4.8.3). A characteristic whose read is refused (not permitted,
/// insufficient encryption, …) keeps its error and the survey goes on; a lost link or a protocol error
/// ends it.
public struct GATTSurvey: Sendable, Equatable {
    public struct Characteristic: Sendable, Equatable {
        public var characteristic: GATTCharacteristic
        public var descriptors: [GATTDescriptor]
        /// Nil when not read (not readable, or values were not asked for).
        public var value: Result<[UInt8], BLEError>?

        public init(characteristic: GATTCharacteristic, descriptors: [GATTDescriptor], value: Result<[UInt8], BLEError>?) {
            self.characteristic = characteristic
            self.descriptors = descriptors
            self.value = value
        }
    }

    public struct Service: Sendable, Equatable {
        public var service: GATTService
        public var characteristics: [Characteristic]

        public init(service: GATTService, characteristics: [Characteristic]) {
            self.service = service
            self.characteristics = characteristics
        }
    }

    /// The ATT_MTU the survey ran with.
    public var mtu: Int
    public var services: [Service]

    public init(mtu: Int, services: [Service]) {
        self.mtu = mtu
        self.services = services
    }

    /// Surveys the server at the other end of `link`: exchanges the MTU (`preferredMTU`), discovers
    /// everything and, with `readValues`, reads every characteristic that declares `read`. The link's
    /// bearer is closed when the survey ends (the caller still disconnects the link).
    public static func run(on link: any Link, preferredMTU: Int = 247, readValues: Bool = true,
                           transactionTimeout: Duration = .seconds(30)) async throws -> GATTSurvey {
        let att = ATTClient(bearer: link.bearer, transactionTimeout: transactionTimeout,
                            disconnectReason: { await link.waitForDisconnect() }) { _ in }
        await att.start()
        let mtu = try await att.exchangeMTU(preferred: preferredMTU)
        let client = GATTClient(att: att, discovery: .all)
        var services: [Service] = []
        for s in try await client.discoverAllPrimaryServices() {
            var characteristics: [Characteristic] = []
            for c in try await client.discoverCharacteristics(of: s) {
                let descriptors = try await client.discoverDescriptors(of: c)
                var value: Result<[UInt8], BLEError>?
                if readValues, c.properties.contains(.read) {
                    do {
                        value = .success(try await client.read(handle: c.valueHandle))
                    } catch let e as BLEError {
                        switch e {
                        case .att, .attributeNotFound, .unsupportedProperty: value = .failure(e)
                        default: throw e
                        }
                    }
                }
                characteristics.append(Characteristic(characteristic: c, descriptors: descriptors, value: value))
            }
            services.append(Service(service: s, characteristics: characteristics))
        }
        await att.close(reason: .localHostTerminated)
        return GATTSurvey(mtu: mtu, services: services)
    }
}
